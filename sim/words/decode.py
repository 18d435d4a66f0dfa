"""The Decode cost page's sentences, each worded from the result its chart or caption shows: naive against cached per
step, which FLOP part grows with N, what the grid computes, the scale curves, and the measured time. Pure functions
of plain results: step records are anything with `.step`, `.part_to_flops`, `.flops` and `.wall_s`
(sim.model.generate.StepRecord), so this module stays numpy-only. Each takes `lang` ("en" or "ko") and words its
sentence from the catalogs (assets/i18n/*/decode_cost.json); numbers are formatted here, the same in both. Moved
here from sim/cost/decode_readouts.py."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from sim import readout
from sim.cost.decode import COMPUTED, READ, human_flops
from sim.words import join, text

PARTS = ("qkv_proj", "attn_scores", "attn_v", "out_proj", "mlp", "lm_head")
PART_LABELS = {p: text("en", f"decode.part.{p}") for p in PARTS}  # the English names (legend order)
BARELY = 1.5  # a cached step's time "barely grows" while its late/early median ratio stays under this


def part_label(part: str, lang: str = "en") -> str:
    """A FLOP part as charts and sentences name it ('attention scores QKᵀ'); an unknown part by its key."""
    return text(lang, f"decode.part.{part}") if part in PART_LABELS else part


def mode_label(mode: str, lang: str = "en") -> str:
    """'naive' / 'cached' as a sentence or a legend names the mode ('순진한 방식' / '캐시 방식' in Korean)."""
    return text(lang, f"decode.mode.{mode}")


def times(ratio: float) -> str:
    """A ratio as these titles write it: 1 decimal below 100×, whole numbers (with separators) above."""
    return readout.times(ratio, whole_from=100)


def counted(lang: str, n: int, word: str) -> str:
    """'3 steps', '1 step'; '스텝 3개' (a counted word: .one and .other in the catalog)."""
    return text(lang, f"decode.s.n.{word}.{'one' if n == 1 else 'other'}", n=f"{n:,}")


def at_step(step: int, lang: str = "en", last_in_budget: bool = False) -> str:
    """'At step 3' ('At step 0 (the prefill)'), with ', naive's last before its budget ran out' when naive
    stopped early and its last step is the one compared."""
    at = text(lang, "decode.s.at.prefill") if step == 0 else text(lang, "decode.s.at.step", step=f"{step:,}")
    return text(lang, "decode.s.at.last", at=at) if last_in_budget else at


def per_step_takeaway(naive: Sequence, cached: Sequence, lang: str = "en") -> str:
    """The FLOPs-per-step chart's title: one naive step against one cached step, at the last step both ran."""
    k = min(len(naive), len(cached))
    n, c = naive[k - 1], cached[k - 1]
    at = at_step(n.step, lang, len(naive) < len(cached))
    if n.flops > c.flops:
        return text(lang, "decode.s.per_step.naive_more", at=at, x=times(n.flops / c.flops),
                    a=human_flops(n.flops), b=human_flops(c.flops))
    if c.flops > n.flops:
        return text(lang, "decode.s.per_step.cached_more", at=at, x=times(c.flops / n.flops),
                    a=human_flops(c.flops), b=human_flops(n.flops))
    return text(lang, "decode.s.per_step.same", at=at, a=human_flops(n.flops))


def formula_agreement(mode_to_counted: dict[str, Sequence[int]], mode_to_formula: dict[str, Sequence[int]],
                      lang: str = "en") -> str:
    """Counted FLOPs against the closed-form formula, step by step (over the steps each mode ran)."""
    off, total, worst = [], 0, 0
    for mode, values in mode_to_counted.items():
        formula = mode_to_formula[mode]
        diffs = [abs(a - b) for a, b in zip(values, formula, strict=False)]
        total += len(diffs)
        wrong = sum(d > 0 for d in diffs)
        worst = max([worst, *diffs])
        if wrong:
            off.append(text(lang, "decode.s.agree.off", wrong=f"{wrong:,}", total=f"{len(diffs):,}",
                            mode=mode_label(mode, lang)))
    if not off:
        return text(lang, "decode.s.agree.all", steps=counted(lang, total, "step"))
    return text(lang, "decode.s.agree.differ", off=join(lang, off), worst=counted(lang, worst, "flop"))


def _growth(first: dict[str, int], last: dict[str, int]) -> tuple[list[str], list[str], list[str]]:
    grows = sorted((p for p in first if last[p] > first[p]),
                   key=lambda p: -(last[p] / first[p]) if first[p] else -float("inf"))
    return grows, [p for p in first if last[p] == first[p]], [p for p in first if last[p] < first[p]]


def _mode_parts(mode: str, first: dict[str, int], last: dict[str, int], lang: str) -> str:
    grows, flat, shrinks = _growth(first, last)

    def names(ps: list[str]) -> str:
        return join(lang, [part_label(p, lang) for p in ps])

    def one(ps: list[str]) -> str:
        return "one" if len(ps) == 1 else "other"

    top = grows[0] if grows else None
    ratio = f"{times(last[top] / first[top])}" if top and first[top] else ""
    fastest = (text(lang, "decode.s.parts.fastest", label=part_label(grows[0], lang), ratio=ratio) if len(grows) > 1
               else text(lang, "decode.s.parts.ratio", ratio=ratio))
    if grows and len(grows) == len(first):
        said = text(lang, "decode.s.parts.all_grow", n=f"{len(grows)}", fastest=fastest)
    elif not grows and not shrinks:
        said = text(lang, "decode.s.parts.all_flat")
    elif grows and not shrinks and len(grows) > len(flat):
        said = text(lang, "decode.s.parts.all_but", flat=names(flat), fastest=fastest)
    else:
        clauses = []
        if grows:
            up = ratio if len(grows) == 1 else text(lang, "decode.s.parts.up_to", ratio=ratio)
            clauses.append(text(lang, f"decode.s.parts.only_grow.{one(grows)}", labels=names(grows), up=up))
        if flat:
            clauses.append(text(lang, "decode.s.parts.other_flat", n=f"{len(flat)}")
                           if grows and not shrinks and len(flat) > 1 else
                           text(lang, f"decode.s.parts.flat.{one(flat)}", labels=names(flat)))
        if shrinks:
            clauses.append(text(lang, f"decode.s.parts.shrink.{one(shrinks)}", labels=names(shrinks)))
        said = text(lang, "decode.s.parts.while").join(clauses) if len(clauses) == 2 else ", ".join(clauses)
    return text(lang, "decode.s.parts.in_mode", mode=mode_label(mode, lang), said=said)


def parts_takeaway(naive: Sequence, cached: Sequence, lang: str = "en") -> str:
    """The FLOPs-by-part chart's title: which parts of a step grow with N, from the first decode step to the last
    step both modes ran, and which stay flat, cached first (the point of the cache), then naive."""
    k = min(len(naive), len(cached))
    if k < 3:
        return text(lang, "decode.s.parts.too_few", steps=counted(lang, k, "step"))
    first, last = 1, k - 1
    c = _mode_parts("cached", cached[first].part_to_flops, cached[last].part_to_flops, lang)
    n = _mode_parts("naive", naive[first].part_to_flops, naive[last].part_to_flops, lang)
    return text(lang, "decode.s.parts.head", first=f"{first:,}", last=f"{last:,}", cached=c, naive=n)


def grid_takeaway(naive: np.ndarray, cached: np.ndarray, lang: str = "en") -> str:
    """The "what gets computed" grids' title: Q/K/V vectors computed by each mode over the rows shown, and what
    the cache reads instead."""
    rows = naive.shape[0]
    n, c = int((naive == COMPUTED).sum()), int((cached == COMPUTED).sum())
    read = int((cached == READ).sum())
    steps = (text(lang, "decode.s.grid.first", steps=counted(lang, rows, "step")) if rows > 1
             else text(lang, "decode.s.grid.one"))
    reads = text(lang, "decode.s.grid.reads", times=counted(lang, read, "time")) if read else ""
    if n > c:
        return text(lang, "decode.s.grid.naive_more", steps=steps, times=counted(lang, n, "time"), c=f"{c:,}",
                    x=times(n / c), reads=reads)
    if c > n:
        return text(lang, "decode.s.grid.cached_more", steps=steps, times=counted(lang, c, "time"), n=f"{n:,}",
                    x=times(c / n), reads=reads)
    return text(lang, "decode.s.grid.same", steps=steps, times=counted(lang, n, "time"), reads=reads)


def scale_takeaway(points: Sequence, length: int, total: bool, model_name: str, lang: str = "en") -> str:
    """An at-scale chart's title: naive against cached at the chosen length (per step, or for the whole answer),
    and whether their ratio grows with N across the chart."""
    at = next(p for p in points if p.length == length)

    def pair(p):
        return (p.naive_total, p.cached_total) if total else (p.naive_step, p.cached_step)

    naive, cached = pair(at)
    kind = "total" if total else "step"
    what = dict(model=model_name, tokens=counted(lang, length, "token")) if total else \
        dict(model=model_name, n=f"{length:,}")
    if naive > cached:
        head = text(lang, f"decode.s.scale.{kind}.more", x=times(naive / cached), **what)
    elif cached > naive:
        head = text(lang, f"decode.s.scale.{kind}.fewer", x=times(cached / naive), **what)
    else:
        head = text(lang, f"decode.s.scale.{kind}.same", flops=human_flops(naive), **what)
    (n0, c0), (n1, c1) = pair(points[0]), pair(points[-1])
    r0, r1 = n0 / c0, n1 / c1
    span = text(lang, "decode.s.scale.span", r0=times(r0), n0=f"{points[0].length:,}", r1=times(r1),
                n1=f"{points[-1].length:,}")
    if times(r1) == times(r0):
        return text(lang, "decode.s.scale.flat", head=head, r=times(r0))
    return text(lang, "decode.s.scale.grows" if r1 > r0 else "decode.s.scale.shrinks", head=head, span=span)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def _cached_step_s(cached: Sequence, k: int) -> float:
    """The median wall time of the cached decode steps among the first k (the prefill when it is the only one)."""
    steps = cached[1:k] or cached[:1]
    return statistics.median(r.wall_s for r in steps)


def speedup_caption(naive: Sequence, cached: Sequence, lang: str = "en") -> str:
    """Measured speedup against the FLOP ratio over the steps both modes ran, worded by which is larger: their
    quotient is how much longer one mode spent per FLOP."""
    k = min(len(naive), len(cached))
    t_n, t_c = sum(r.wall_s for r in naive[:k]), sum(r.wall_s for r in cached[:k])
    f_n, f_c = sum(r.flops for r in naive[:k]), sum(r.flops for r in cached[:k])
    speedup, ratio = t_n / t_c, f_n / f_c
    s, f = f"{speedup:,.1f}×", f"{ratio:,.1f}×"
    step = text(lang, "decode.s.speedup.step", ms=_ms(_cached_step_s(cached, k)))
    if s == f:
        return text(lang, "decode.s.speedup.same", s=s)
    if speedup < ratio:
        tip = text(lang, "decode.s.speedup.tip", n="512") if k < 512 else ""
        return text(lang, "decode.s.speedup.smaller", s=s, f=f, x=times(ratio / speedup), step=step, tip=tip)
    return text(lang, "decode.s.speedup.larger", s=s, f=f, x=times(speedup / ratio), step=step)


def wall_time_caption(cached: Sequence, lang: str = "en") -> str:
    """How a cached step's measured time moves from early in the run to late (medians of the first and the last
    quarter of the decode steps), worded by whether it barely grows, grows or shrinks."""
    decode = list(cached[1:])
    where = text(lang, "decode.s.wall.where")
    if len(decode) < 4:
        return text(lang, "decode.s.wall.too_few", where=where, steps=counted(lang, len(decode), "decode_step"))
    q = len(decode) // 4
    early, late = decode[:q], decode[-q:]
    e, lt = statistics.median(r.wall_s for r in early), statistics.median(r.wall_s for r in late)

    def span(rs):
        return (text(lang, "decode.s.wall.one_step", a=f"{rs[0].step:,}") if len(rs) == 1 else
                text(lang, "decode.s.wall.steps", a=f"{rs[0].step:,}", b=f"{rs[-1].step:,}"))

    said = text(lang, "decode.s.wall.said", where=where, e=_ms(e), early=span(early), l=_ms(lt), late=span(late),
                median=text(lang, "decode.s.wall.median") if q > 1 else "")
    if lt >= e * BARELY:
        return text(lang, "decode.s.wall.grows", said=said, x=times(lt / e))
    if e >= lt * BARELY:
        return text(lang, "decode.s.wall.faster", said=said, x=times(e / lt))
    return text(lang, "decode.s.wall.barely" if lt > e else "decode.s.wall.flat", said=said)


def measured_caption(conditions, now: float, lang: str = "en") -> str:
    """When and under what load the page's times were taken (a `sim.work.conditions.Conditions`), how long ago
    when the result is an earlier run's, and whether the machine was too busy for the times to describe the
    model: a measured time is a fact about this machine at that moment."""
    import time as _time

    at = _time.strftime("%H:%M:%S", _time.gmtime(conditions.started_at))
    age = now - conditions.started_at
    ago = text(lang, "decode.s.measured.ago", m=f"{age / 60:,.0f}") if age >= 90 else ""
    fields = {"at": at, "ago": ago, "before": f"{conditions.load_before:.1f}", "after": f"{conditions.load_after:.1f}",
              "cpus": f"{conditions.num_cpus}"}
    key = "decode.s.measured.busy" if conditions.busy else "decode.s.measured.quiet"
    return text(lang, key, **fields)


def flops_takeaway(res, lang: str = "en") -> str:
    """The cumulative-FLOPs chart's title (res: sim.model.generate.DecodeComparison): naive against cached FLOPs
    over the tokens both produced."""
    k = res.compared
    naive, cached = res.flops("naive", k), res.flops("cached", k)
    tokens = counted(lang, k, "token")
    over = text(lang, "decode.s.flops.over_all" if res.naive_complete else "decode.s.flops.over_first",
                tokens=tokens)
    both = dict(a=human_flops(naive), b=human_flops(cached), over=over)
    if naive > cached:
        return text(lang, "decode.s.flops.naive_more", x=f"{naive / cached:,.1f}×", **both)
    if naive < cached:
        return text(lang, "decode.s.flops.cached_more", x=f"{cached / naive:,.1f}×", **both)
    return text(lang, "decode.s.flops.same", over=over, a=human_flops(naive))

def wall_time_takeaway(res, lang: str = "en") -> str:
    """The wall-time chart's title (res: a DecodeComparison): one cached step against one naive step, at the last step both ran."""
    k = res.compared
    naive, cached = res.naive[k - 1], res.cached[k - 1]
    at = text(lang, "decode.s.at.step", step=f"{naive.step:,}")
    at = at if res.naive_complete else text(lang, "decode.s.at.last", at=at)
    n_ms, c_ms = f"{naive.wall_s * 1e3:,.2f} ms", f"{cached.wall_s * 1e3:,.2f} ms"
    if n_ms == c_ms:
        return text(lang, "decode.s.wall_at.same", at=at, c=c_ms)
    if naive.wall_s > cached.wall_s:
        return text(lang, "decode.s.wall_at.cached_faster", at=at, c=c_ms, n=n_ms,
                    x=f"{naive.wall_s / cached.wall_s:,.1f}×")
    return text(lang, "decode.s.wall_at.naive_faster", at=at, c=c_ms, n=n_ms, x=f"{cached.wall_s / naive.wall_s:,.1f}×")


def step_caption(step: str, num_slots: int, lang: str = "en") -> str:
    """What the Decode cost page says under its numbers about how the cached steps ran ("" when eager; moved here
    from sim/model/graph_step.py)."""
    if step == "eager":
        return ""
    slots = text(lang, "decode.graph.slots", n=f"{num_slots:,}")
    return text(lang, "decode.graph.static" if step == "static" else "decode.graph.graph", slots=slots)
