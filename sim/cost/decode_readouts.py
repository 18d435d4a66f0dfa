"""The Decode cost page's sentences, each worded from the result its chart or caption shows: naive against
cached per step, which FLOP part grows with N, what the grid computes, the scale curves, and the measured
time. Pure functions of plain results: step records are anything with `.step`, `.part_to_flops`, `.flops`
and `.wall_s` (sim.model.generate.StepRecord), so this module stays numpy-only."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from sim import readout
from sim.cost.decode import COMPUTED, READ, human_flops

PART_LABELS = {
    "qkv_proj": "Q/K/V projections",
    "attn_scores": "attention scores QKᵀ",
    "attn_v": "attention · V",
    "out_proj": "output projection",
    "mlp": "MLP",
    "lm_head": "LM head",
}
BARELY = 1.5  # a cached step's time "barely grows" while its late/early median ratio stays under this


def times(ratio: float) -> str:
    """A ratio as these titles write it: 1 decimal below 100×, whole numbers (with separators) above."""
    return readout.times(ratio, whole_from=100)


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _s(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _at_step(step: int) -> str:
    return "At step 0 (the prefill)" if step == 0 else f"At step {step:,}"


def per_step_takeaway(naive: Sequence, cached: Sequence) -> str:
    """The FLOPs-per-step chart's title: one naive step against one cached step, at the last step both ran."""
    k = min(len(naive), len(cached))
    n, c = naive[k - 1], cached[k - 1]
    at = _at_step(n.step) + ("" if len(naive) >= len(cached) else ", naive's last before its budget ran out")
    if n.flops > c.flops:
        return (f"{at}, a naive step did {times(n.flops / c.flops)} the FLOPs of a cached one: "
                f"{human_flops(n.flops)} vs {human_flops(c.flops)}")
    if c.flops > n.flops:
        return (f"{at}, a cached step did {times(c.flops / n.flops)} the FLOPs of a naive one: "
                f"{human_flops(c.flops)} vs {human_flops(n.flops)}")
    return f"{at}, a naive and a cached step did the same FLOPs: {human_flops(n.flops)} each"


def formula_agreement(mode_to_counted: dict[str, Sequence[int]], mode_to_formula: dict[str, Sequence[int]]) -> str:
    """Counted FLOPs against the closed-form formula, step by step (over the steps each mode ran)."""
    off, total, worst = [], 0, 0
    for mode, counted in mode_to_counted.items():
        formula = mode_to_formula[mode]
        diffs = [abs(a - b) for a, b in zip(counted, formula, strict=False)]
        total += len(diffs)
        wrong = sum(d > 0 for d in diffs)
        worst = max([worst, *diffs])
        if wrong:
            off.append(f"{wrong:,} of {len(diffs):,} {mode} steps")
    if not off:
        return f"They agree exactly at all {_s(total, 'step')} of both runs."
    return f"They differ at {_join(off)}, by up to {_s(worst, 'FLOP')}."


def _growth(first: dict[str, int], last: dict[str, int]) -> tuple[list[str], list[str], list[str]]:
    grows = sorted((p for p in first if last[p] > first[p]),
                   key=lambda p: -(last[p] / first[p]) if first[p] else -float("inf"))
    return grows, [p for p in first if last[p] == first[p]], [p for p in first if last[p] < first[p]]


def _mode_parts(mode: str, first: dict[str, int], last: dict[str, int]) -> str:
    grows, flat, shrinks = _growth(first, last)
    label = [PART_LABELS.get(p, p) for p in grows], [PART_LABELS.get(p, p) for p in flat], \
        [PART_LABELS.get(p, p) for p in shrinks]
    top = grows[0] if grows else None
    ratio = f"{times(last[top] / first[top])}" if top and first[top] else ""
    fastest = f", {label[0][0]} fastest ({ratio})" if len(grows) > 1 else f" ({ratio})"
    if grows and len(grows) == len(first):
        said = f"all {len(grows)} parts grow{fastest}"
    elif not grows and not shrinks:
        said = "every part stays flat"
    elif grows and not shrinks and len(grows) > len(flat):
        said = f"every part but {_join(label[1])} grows{fastest}"
    else:
        clauses = []
        if grows:
            up = ratio if len(grows) == 1 else f"up to {ratio}"
            clauses.append(f"only {_join(label[0])} grow{'s' if len(grows) == 1 else ''} ({up})")
        if flat:
            clauses.append(f"the other {len(flat)} parts stay flat" if grows and not shrinks and len(flat) > 1 else
                           f"{_join(label[1])} stay{'s' if len(flat) == 1 else ''} flat")
        if shrinks:
            clauses.append(f"{_join(label[2])} shrink{'s' if len(shrinks) == 1 else ''}")
        said = " while ".join(clauses) if len(clauses) == 2 else ", ".join(clauses)
    return f"in {mode} decoding {said}"


def parts_takeaway(naive: Sequence, cached: Sequence) -> str:
    """The FLOPs-by-part chart's title: which parts of a step grow with N, from the first decode step to the last
    step both modes ran, and which stay flat, cached first (the point of the cache), then naive."""
    k = min(len(naive), len(cached))
    if k < 3:
        return (f"With {_s(k, 'step')} there are not two decode steps to compare: generate at least 3 tokens to see "
                "which part of a step grows with N")
    first, last = 1, k - 1
    c = _mode_parts("cached", cached[first].part_to_flops, cached[last].part_to_flops)
    n = _mode_parts("naive", naive[first].part_to_flops, naive[last].part_to_flops)
    return f"From step {first:,} to step {last:,}, {c}; {n}"


def grid_takeaway(naive: np.ndarray, cached: np.ndarray) -> str:
    """The "what gets computed" grids' title: Q/K/V vectors computed by each mode over the rows shown, and what
    the cache reads instead."""
    rows = naive.shape[0]
    n, c = int((naive == COMPUTED).sum()), int((cached == COMPUTED).sum())
    read = int((cached == READ).sum())
    steps = f"In the first {_s(rows, 'step')}" if rows > 1 else "In the one step shown (the prefill)"
    reads = f", reading K, V from its cache {_s(read, 'time')} instead" if read else ""
    if n > c:
        return (f"{steps}, naive decoding computes Q, K, V {_s(n, 'time')}, cached {c:,} "
                f"({times(n / c)} fewer){reads}")
    if c > n:
        return f"{steps}, cached decoding computes Q, K, V {_s(c, 'time')}, {times(c / n)} naive's {n:,}{reads}"
    return f"{steps}, naive and cached decoding both compute Q, K, V {_s(n, 'time')}{reads}"


def scale_takeaway(points: Sequence, length: int, total: bool, model_name: str) -> str:
    """An at-scale chart's title: naive against cached at the chosen length (per step, or for the whole answer),
    and whether their ratio grows with N across the chart."""
    at = next(p for p in points if p.length == length)

    def pair(p):
        return (p.naive_total, p.cached_total) if total else (p.naive_step, p.cached_step)

    naive, cached = pair(at)
    what = f"{model_name}, {_s(length, 'token')}: naive generation" if total else \
        f"{model_name} at N = {length:,}: a naive step"
    other = "cached" if total else "a cached one"
    if naive > cached:
        head = f"{what} does {times(naive / cached)} the FLOPs of {other}"
    elif cached > naive:
        head = f"{what} does {times(cached / naive)} fewer FLOPs than {other}"
    else:
        head = f"{what} does the same FLOPs as {other} ({human_flops(naive)})"
    (n0, c0), (n1, c1) = pair(points[0]), pair(points[-1])
    r0, r1 = n0 / c0, n1 / c1
    span = f"{times(r0)} at N = {points[0].length:,}, {times(r1)} at N = {points[-1].length:,}"
    if times(r1) == times(r0):
        return f"{head}; the naive/cached ratio stays flat across N ({times(r0)})"
    return f"{head}; the naive/cached ratio {'grows with N' if r1 > r0 else 'shrinks as N grows'} ({span})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _cached_step_s(cached: Sequence, k: int) -> float:
    """The median wall time of the cached decode steps among the first k (the prefill when it is the only one)."""
    steps = cached[1:k] or cached[:1]
    return statistics.median(r.wall_s for r in steps)


def speedup_caption(naive: Sequence, cached: Sequence) -> str:
    """Measured speedup against the FLOP ratio over the steps both modes ran, worded by which is larger: their
    quotient is how much longer one mode spent per FLOP."""
    k = min(len(naive), len(cached))
    t_n, t_c = sum(r.wall_s for r in naive[:k]), sum(r.wall_s for r in cached[:k])
    f_n, f_c = sum(r.flops for r in naive[:k]), sum(r.flops for r in cached[:k])
    speedup, ratio = t_n / t_c, f_n / f_c
    s, f = f"{speedup:,.1f}×", f"{ratio:,.1f}×"
    step = f"a cached step took {_ms(_cached_step_s(cached, k))} (median)"
    if s == f:
        return f"The measured speedup matches the FLOP ratio ({s}): both modes spent the same time per FLOP."
    if speedup < ratio:
        tip = " Try 512 tokens." if k < 512 else ""
        return (f"Why is the measured speedup ({s}) smaller than the FLOP ratio ({f})? Per FLOP, cached decoding "
                f"spent {times(ratio / speedup)} as long as naive. A model this small does little arithmetic per "
                f"token: {step}, mostly a fixed cost per operation; the naive step's extra FLOPs dominate only as N "
                f"grows.{tip}")
    return (f"The measured speedup ({s}) is larger than the FLOP ratio ({f}): per FLOP, naive decoding spent "
            f"{times(speedup / ratio)} as long as cached; {step}.")


def wall_time_caption(cached: Sequence) -> str:
    """How a cached step's measured time moves from early in the run to late (medians of the first and the last
    quarter of the decode steps), worded by whether it barely grows, grows or shrinks."""
    decode = list(cached[1:])
    where = "Measured on this machine, this run"
    if len(decode) < 4:
        return f"{where}: with {_s(len(decode), 'decode step')} there are too few to tell how a cached step's time " \
               "moves with N."
    q = len(decode) // 4
    early, late = decode[:q], decode[-q:]
    e, lt = statistics.median(r.wall_s for r in early), statistics.median(r.wall_s for r in late)

    def span(rs):
        return f"step {rs[0].step:,}" if len(rs) == 1 else f"steps {rs[0].step:,}–{rs[-1].step:,}"

    said = (f"{where}: a cached step took {_ms(e)} early ({span(early)}{', median' if q > 1 else ''}) and "
            f"{_ms(lt)} late ({span(late)})")
    if lt >= e * BARELY:
        return (f"{said}: it grows {times(lt / e)} with N, as attention over the longer cache starts to outweigh the "
                "fixed per-operation overhead.")
    if e >= lt * BARELY:
        return (f"{said}: it got {times(e / lt)} faster although its FLOPs grew, so at this size a step's time "
                "follows the machine's load and warm-up more than N.")
    return (f"{said}: it {'barely grows' if lt > e else 'does not grow'} with N, because fixed per-operation "
            "overhead dominates a step of a model this small.")
