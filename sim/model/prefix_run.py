"""The real model and a shared prefix: prefill it once and branch continuations from its cache
(BranchRun), and what one changed byte does to every later K/V (KVChange). Each result words its own
metrics and sentences; torch is imported only by the functions that run the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.alloc.byte_tokens import from_bytes, other_byte, show_byte, to_bytes
from sim.alloc.prefix_readouts import JobPlan
from sim.readout import Metric

MAX_BRANCHES = 8  # real model: continuations branched from one prefix
MAX_BRANCH_NEW = 128
MAX_REPEATS = 10
MAX_PREFIX_BYTES = 700  # the page's shared prefix
MAX_SUFFIX_BYTES = 80  # one continuation, its newline included
KV_DEMO_BYTES = 120  # the K/V view's prompt: the prefix's first bytes


@dataclass(frozen=True)
class BranchInputs:
    """A shared prefix and continuations as typed (one per line, a newline added to each), as byte tokens,
    with what is wrong with them (None: they can run)."""

    prefix_ids: tuple[int, ...]
    continuations: tuple[str, ...]
    suffix_ids: tuple[tuple[int, ...], ...]
    num_new: int
    repeats: int
    problem: str | None

    @property
    def kv_ids(self) -> tuple[int, ...]:
        """The K/V view's prompt: the prefix's first KV_DEMO_BYTES bytes."""
        return self.prefix_ids[:KV_DEMO_BYTES]

    @property
    def kv_problem(self) -> str | None:
        return "The prefix needs at least 2 bytes for this view." if len(self.kv_ids) < 2 else None

    def job(self, rates) -> JobPlan:
        """Both ways, every branch, every repetition plus one warm-up, each branch costed as the longest one
        (`rates.seconds(Work)`: the tiny model's fitted cost on this machine)."""
        from sim.work.run_cost import cached_work

        per_branch = max(rates.seconds(cached_work(len(self.prefix_ids) + len(s), self.num_new))
                         for s in self.suffix_ids)
        return JobPlan(2 * len(self.suffix_ids) * (self.repeats + 1) * per_branch,
                       f"Prefilling once and branching {len(self.suffix_ids)} continuations, {self.repeats} timed "
                       "repetitions")


def branch_inputs(prefix: str, suffixes: str, num_new: int, repeats: int) -> BranchInputs:
    """The page's text boxes as byte tokens; blank lines are dropped."""
    prefix_ids = to_bytes(prefix)
    lines = [s for s in suffixes.split("\n") if s.strip()]
    suffix_ids = [to_bytes(s + "\n") for s in lines]
    problem = None
    if not prefix_ids:
        problem = "The shared prefix is empty: type at least one character."
    elif len(prefix_ids) > MAX_PREFIX_BYTES:
        problem = f"The shared prefix is {len(prefix_ids):,} bytes; the limit is {MAX_PREFIX_BYTES}."
    elif not 1 <= len(suffix_ids) <= MAX_BRANCHES:
        problem = f"Give 1..{MAX_BRANCHES} continuations (one per line); there are {len(suffix_ids)}."
    elif max(len(s) for s in suffix_ids) > MAX_SUFFIX_BYTES:
        problem = f"A continuation is {max(len(s) for s in suffix_ids)} bytes; the limit is {MAX_SUFFIX_BYTES}."
    return BranchInputs(tuple(prefix_ids), tuple(lines), tuple(tuple(s) for s in suffix_ids), num_new, repeats,
                        problem)

# ---------------------------------------------------------------------------------------------
# The real model: prefill a shared prefix once, branch several continuations from it


@dataclass(frozen=True)
class BranchRun:
    """Continuations of prefix + suffix_i, computed two ways: from scratch (the whole prompt prefilled
    for every branch) and branched (the prefix prefilled once into a cache that every branch reuses).
    Times are medians over `repeats` runs (after one warm-up); greedy decoding."""

    prefix_ids: list[int]
    suffix_ids: list[list[int]]
    num_new: int
    branch_tokens: list[list[int]]
    scratch_tokens: list[list[int]]
    max_abs_logit_diff: float  # over every branch and step
    shared_prefill_s: float  # the prefix, once
    suffix_prefill_s: list[float]  # each branch's suffix on top of the cached prefix
    scratch_prefill_s: list[float]  # each branch's whole prompt
    branch_decode_s: float  # all branches' decode steps
    scratch_decode_s: float
    repeats: int
    device: str
    dtype: str
    branch_decode_runs_s: tuple[float, ...] = ()  # every timed repeat's decode time, branched
    scratch_decode_runs_s: tuple[float, ...] = ()  # and from scratch

    @property
    def decode_spread_s(self) -> float | None:
        """The larger of the two ways' ranges (max − min) over the timed repeats; None with fewer than 2."""
        runs = [r for r in (self.branch_decode_runs_s, self.scratch_decode_runs_s) if len(r) >= 2]
        if len(runs) < 2:
            return None
        return max(max(r) - min(r) for r in runs)

    @property
    def tokens_identical(self) -> bool:
        return self.branch_tokens == self.scratch_tokens

    @property
    def num_branches(self) -> int:
        return len(self.suffix_ids)

    @property
    def scratch_prefill_tokens(self) -> int:
        return sum(len(self.prefix_ids) + len(s) for s in self.suffix_ids)

    @property
    def branch_prefill_tokens(self) -> int:
        return len(self.prefix_ids) + sum(len(s) for s in self.suffix_ids)

    @property
    def branch_prefill_s(self) -> float:
        return self.shared_prefill_s + sum(self.suffix_prefill_s)

    @property
    def scratch_prefill_total_s(self) -> float:
        return sum(self.scratch_prefill_s)

    @property
    def prefill_saved_share(self) -> float:
        return 1 - self.branch_prefill_s / self.scratch_prefill_total_s

    @property
    def token_saved_share(self) -> float:
        return 1 - self.branch_prefill_tokens / self.scratch_prefill_tokens

    def summary(self, same_within: float = 0.02) -> str:
        """What the run shows, worded from its own numbers (Markdown): each comparison says which way it went
        and by how much; a gap in shares within `same_within` is 'about the same', and a decode-time gap is
        called timing noise only when it is within the repeats' spread."""
        tok, tim = self.token_saved_share, self.prefill_saved_share
        out = [f"The cache removes **{100 * tok:.0f}%** of the prefill tokens and **{100 * tim:.0f}%** of the "
               "prefill time."]
        gap = f"{100 * abs(tok - tim):.0f} points"
        if tim < tok - same_within:
            out.append(f"Time saved ({100 * tim:.0f}%) trails tokens saved ({100 * tok:.0f}%) by {gap}: every "
                       "forward pass carries a fixed cost (dozens of small kernels for a model this small), and "
                       f"branching makes {self.num_branches + 1} passes instead of {self.num_branches}.")
        elif tim > tok + same_within:
            out.append(f"Time saved ({100 * tim:.0f}%) exceeds tokens saved ({100 * tok:.0f}%) by {gap}: the "
                       "tokens it skips are the prefix's, and re-encoding them from scratch also pays attention "
                       "over the whole prefix for each of them.")
        else:
            out.append(f"Time and tokens saved are about the same share (within {100 * same_within:.0f} points).")
        decode = self.decode_sentence()
        return " ".join(out + ([decode] if decode else []))

    def decode_sentence(self) -> str | None:
        """Decode time branched against from scratch, which way and by how much, against the repeats' spread
        (None with no decode step)."""
        steps = self.num_branches * (self.num_new - 1)
        if steps <= 0:
            return None
        a, b = 1e3 * self.branch_decode_s, 1e3 * self.scratch_decode_s
        same = f"the same {self.num_branches} × {self.num_new - 1} steps"
        if f"{a:.0f}" == f"{b:.0f}":
            return f"Decoding {same} took {a:.0f} ms both ways: the steps are the same work."
        way = "branched" if a > b else "from scratch"
        lead = (f"Decoding {same} took {a:.0f} ms branched vs {b:.0f} ms from scratch, "
                f"{abs(a - b):.0f} ms ({abs(a - b) / min(a, b):.0%}) more {way}")
        spread = self.decode_spread_s
        if spread is None:
            return f"{lead}; one timed repeat gives no spread to tell timing noise from a real gap."
        s_ms = 1e3 * spread
        if abs(a - b) <= s_ms:
            return (f"{lead}, within the {s_ms:.0f} ms the repeats spread over: timing noise, since the steps are "
                    "the same work over caches of the same length.")
        return (f"{lead}, more than the {s_ms:.0f} ms the repeats spread over, although the steps are the same "
                "work over caches of the same length.")

    @property
    def decode_step_in_prefill_tokens(self) -> float | None:
        """From scratch: one decode step's time over one prefill token's (None with no decode step)."""
        if self.num_new <= 1:
            return None
        per_decode = self.scratch_decode_s / max(1, self.num_branches * (self.num_new - 1))
        return per_decode / (self.scratch_prefill_total_s / self.scratch_prefill_tokens)

    def report(self) -> str:
        """summary(), and what one decode step costs in prefill tokens when there was one (Markdown)."""
        ratio = self.decode_step_in_prefill_tokens
        if ratio is None:
            return self.summary()
        return (self.summary() + f" One decode step here (batch 1) costs as much as **{ratio:.0f}** prefill "
                "tokens.")

    def metrics(self) -> list[Metric]:
        return [
            Metric("Prefill from scratch", f"{1e3 * self.scratch_prefill_total_s:.1f} ms",
                   help=f"{self.scratch_prefill_tokens:,} tokens in {self.num_branches} passes."),
            Metric("Prefill, prefix cached", f"{1e3 * self.branch_prefill_s:.1f} ms",
                   help=f"{self.branch_prefill_tokens:,} tokens in {self.num_branches + 1} passes."),
            Metric("Prefill time saved", f"{100 * self.prefill_saved_share:.0f}%",
                   help=f"Prefill tokens saved: {100 * self.token_saved_share:.0f}%."),
            Metric("Tokens identical", "yes" if self.tokens_identical else "NO",
                   help="Greedy decoding; every branch compared token by token with its from-scratch run."),
            Metric("Largest logit diff", f"{self.max_abs_logit_diff:.1e}",
                   help="Over every branch and every step: the cached prefix's K/V enter attention in a different "
                        "summation order than one long prefill, so the last bits can differ."),
        ]

    def mismatch_warning(self) -> str | None:
        """Why the tokens can differ, when they did (None when every branch matched)."""
        if self.tokens_identical:
            return None
        return (f"Some branch produced different tokens from its from-scratch run. In {self.dtype} the two ways "
                "round differently (the cached prefix's K/V meet the continuation's queries in another summation "
                "order), and a near tie between two bytes can flip. In float32 on a CPU they agree (the tests "
                "check it).")

    def chart_title(self) -> str:
        """The prefill chart's title: total prefill time both ways, which is shorter and by how much."""
        a, b = 1e3 * self.branch_prefill_s, 1e3 * self.scratch_prefill_total_s
        where = (f"{self.num_branches} branch{'es' if self.num_branches != 1 else ''} from a "
                 f"{len(self.prefix_ids):,}-token prefix on {self.device} ({self.dtype})")
        if f"{a:.1f}" == f"{b:.1f}":
            return f"Prefilling the prefix once takes as long as from scratch ({a:.1f} ms) for {where}"
        if a < b:
            return (f"Prefilling the prefix once cuts prefill from {b:.1f} ms to {a:.1f} ms "
                    f"({1 - a / b:.0%} less) for {where}")
        return (f"Prefilling the prefix once makes prefill slower, {a:.1f} ms vs {b:.1f} ms from scratch "
                f"({a / b - 1:.0%} more), for {where}")

    def to_frame(self, continuations: Sequence[str]):
        """One row per branch: its continuation as typed, both ways' new text, and whether they match."""
        import pandas as pd

        return pd.DataFrame([{"branch": b + 1, "continuation": continuations[b],
                              "branched": from_bytes(self.branch_tokens[b]),
                              "from scratch": from_bytes(self.scratch_tokens[b]),
                              "same": self.branch_tokens[b] == self.scratch_tokens[b]}
                             for b in range(self.num_branches)])


def _continue(model, cache, ids: list[int], start: int, num_new: int, attn_impl: str):
    """Feed ids at positions start.. through the cache, then decode greedily. (tokens, logits, prefill s, decode s)"""
    from sim.model.generate import decode_loop

    steps = list(decode_loop(model, ids, num_new, cache, start_pos=start, attn_impl=attn_impl, keep_logits=True))
    return [s.token for s in steps], [s.logits for s in steps], steps[0].wall_s, sum(s.wall_s for s in steps[1:])


def _prefill_only(model, cache, ids: list[int], attn_impl: str) -> float:
    """Feed ids from position 0 into the cache (nothing sampled); seconds taken."""
    import torch

    from sim.model.device import Stopwatch
    from sim.model.generate import prefill

    x = torch.tensor([ids], dtype=torch.long, device=model.device)  # (1, P)
    with Stopwatch(model.device) as clock:
        prefill(model, x, cache, attn_impl)
    return clock.seconds


def branch_from_prefix(model, prefix_ids: list[int], suffix_ids: list[list[int]], num_new: int = 16,
                       repeats: int = 3, attn_impl: str = "sdpa") -> BranchRun:
    """Prefill the prefix once into a ContiguousKVCache; for each suffix, truncate the cache back to the
    prefix, prefill the suffix on top and decode num_new tokens greedily. Against: the same cache
    truncated to 0 and prefix + suffix prefilled whole for every branch (no prefix cache). The two ways
    alternate their order from one repetition to the next; the first repetition only warms up."""
    import statistics

    from sim.model.kvcache import ContiguousKVCache

    if not prefix_ids:
        raise ValueError("the shared prefix is empty: give at least one token")
    if not 1 <= len(suffix_ids) <= MAX_BRANCHES:
        raise ValueError(f"give 1..{MAX_BRANCHES} continuations, got {len(suffix_ids)}")
    for i, s in enumerate(suffix_ids):
        if not s:
            raise ValueError(f"continuation {i + 1} is empty: each needs at least one token (its last token is "
                             "computed to get the first output's logits)")
    if not 1 <= num_new <= MAX_BRANCH_NEW:
        raise ValueError(f"num_new must be 1..{MAX_BRANCH_NEW}, got {num_new}")
    if not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeats must be 1..{MAX_REPEATS}, got {repeats}")
    cfg = model.cfg
    p = len(prefix_ids)
    longest = p + max(len(s) for s in suffix_ids) + num_new - 1
    if longest > cfg.max_seq_len:
        raise ValueError(f"prefix ({p}) + longest continuation ({max(len(s) for s in suffix_ids)}) + {num_new} new "
                         f"tokens - 1 needs {longest} positions; the model was trained on {cfg.max_seq_len}")
    device, dtype = model.device, model.dtype
    cache = ContiguousKVCache(cfg, 1, longest, device, dtype)
    n_b = len(suffix_ids)
    shared_t: list[float] = []
    suffix_t: list[list[float]] = [[] for _ in range(n_b)]
    scratch_t: list[list[float]] = [[] for _ in range(n_b)]
    dec_b: list[float] = []
    dec_s: list[float] = []
    got: dict[str, tuple[list, list]] = {}
    diff = 0.0
    for rep in range(repeats + 1):
        for way in (("scratch", "branch") if rep % 2 else ("branch", "scratch")):
            branched = way == "branch"
            toks, logits, decode_s = [], [], 0.0
            cache.truncate(0)
            if branched:
                t_shared = _prefill_only(model, cache, prefix_ids, attn_impl)
            start = p if branched else 0  # branched: every continuation starts on the cached prefix
            for b, s in enumerate(suffix_ids):
                cache.truncate(start)  # forget the previous continuation (and, from scratch, everything)
                ids = list(s) if branched else list(prefix_ids) + list(s)
                tk, lg, tp, td = _continue(model, cache, ids, start, num_new, attn_impl)
                toks.append(tk)
                logits.append(lg)
                decode_s += td
                if rep:
                    (suffix_t if branched else scratch_t)[b].append(tp)
            if rep:
                (dec_b if branched else dec_s).append(decode_s)
                if branched:
                    shared_t.append(t_shared)
            got[way] = (toks, logits)
        for lb, ls in zip(got["branch"][1], got["scratch"][1], strict=True):
            for x, y in zip(lb, ls, strict=True):
                diff = max(diff, float((x - y).abs().max()))
    med = statistics.median
    return BranchRun(
        prefix_ids=list(prefix_ids), suffix_ids=[list(s) for s in suffix_ids], num_new=num_new,
        branch_tokens=got["branch"][0], scratch_tokens=got["scratch"][0], max_abs_logit_diff=diff,
        shared_prefill_s=med(shared_t), suffix_prefill_s=[med(t) for t in suffix_t],
        scratch_prefill_s=[med(t) for t in scratch_t], branch_decode_s=med(dec_b), scratch_decode_s=med(dec_s),
        repeats=repeats, device=str(device), dtype=str(dtype).replace("torch.", ""),
        branch_decode_runs_s=tuple(dec_b), scratch_decode_runs_s=tuple(dec_s),
    )


@dataclass(frozen=True)
class KVChange:
    """K and V of every layer and position for a prompt and for the same prompt with one token changed."""

    ids: list[int]
    changed_ids: list[int]
    position: int
    k_diff: np.ndarray  # (L, T) max |ΔK| over heads and channels
    v_diff: np.ndarray  # (L, T)
    k_scale: np.ndarray  # (L,) mean |K| of the original prompt, for scale

    @property
    def num_layers(self) -> int:
        return self.k_diff.shape[0]

    def num_changed_positions(self, layer: int) -> int:
        return int(((self.k_diff[layer] > 0) | (self.v_diff[layer] > 0)).sum())

    def changed_counts(self) -> list[int]:
        """Positions whose K or V changed, per layer."""
        return [self.num_changed_positions(layer) for layer in range(self.num_layers)]

    def position_labels(self) -> list[str]:
        return [show_byte(b) for b in self.ids]

    def num_changed_before(self) -> int:
        """Positions before the changed one whose K or V changed in some layer (causal attention: none)."""
        k = self.position
        return int(((self.k_diff[:, :k] > 0) | (self.v_diff[:, :k] > 0)).any(axis=0).sum())

    def chart_title(self, show=show_byte) -> str:
        """The K/V chart's title: what stays exactly unchanged and what changes, layer by layer. show: a byte
        as a label (the page passes one that escapes it for plotly)."""
        k = self.position
        return kv_takeaway(self.changed_counts(), k, len(self.ids), self.num_changed_before(),
                           show(self.ids[k]), show(self.changed_ids[k]))

    def summary(self) -> str:
        """What changed where, layer by layer (Markdown)."""
        return kv_change_text(self.changed_counts(), self.position, len(self.ids), self.num_changed_before())[0]

    def finding(self) -> str:
        """The seeds table's words for this view."""
        return kv_change_text(self.changed_counts(), self.position, len(self.ids), self.num_changed_before())[1]


def _deep_text(counts: Sequence[int], after: int) -> str:
    """What layers 1.. change: 'change all 80' / 'change 60–80' ('' with one layer)."""
    deeper = list(counts[1:])
    if not deeper:
        return ""
    last = len(counts) - 1
    layers = "layer 1" if last == 1 else f"layers 1–{last}"
    verb = "changes" if last == 1 else "change"
    if min(deeper) == max(deeper):
        return f"{layers} {verb} {'all ' if min(deeper) == after else ''}{min(deeper)}"
    return f"{layers} {verb} {min(deeper)}–{max(deeper)}"


def _before_text(pos: int, num_changed_before: int, num_layers: int) -> str:
    if pos == 0:
        return "no position comes before it"
    if num_changed_before == 0:
        who = "position 0 stays" if pos == 1 else f"positions 0–{pos - 1} stay"
        return f"{who} exactly unchanged in all {num_layers} layers"
    return f"{num_changed_before} of the {pos} positions before it change too"


def kv_takeaway(counts: Sequence[int], pos: int, num_positions: int, num_changed_before: int, before: str,
                after_label: str) -> str:
    """The K/V chart's title for `counts[layer]` positions changed after byte `pos` (before → after_label,
    already escaped for a chart) of a `num_positions`-byte prompt changed."""
    after = num_positions - pos
    deep = _deep_text(counts, after)
    return (f"Changing byte {pos} ({before} → {after_label}): {_before_text(pos, num_changed_before, len(counts))}; "
            f"of the {after} positions from {pos} on, layer 0 changes {counts[0]}"
            + (f" and {deep}" if deep else ""))


def kv_change_text(counts: Sequence[int], pos: int, num_positions: int,
                   num_changed_before: int = 0) -> tuple[str, str]:
    """(paragraph in Markdown, the seeds table's words) for `counts[layer]` positions whose K/V changed after
    byte `pos` of a `num_positions`-byte prompt changed, and `num_changed_before` positions before it changed."""
    after = num_positions - pos
    deeper = list(counts[1:])
    if pos == 0:
        first = "No position comes before byte 0."
    elif num_changed_before == 0:
        first = (f"Positions before {pos} are **exactly** unchanged in every layer (causal attention never looks "
                 "ahead).")
    else:
        first = (f"**{num_changed_before}** of the {pos} positions before {pos} changed too, although causal "
                 "attention never looks ahead.")
    if counts[0] == 1:
        zero = "In layer 0 only **1** position changed — there a token's K and V depend on that token alone."
    else:
        zero = f"In layer 0 **{counts[0]}** positions changed."
    every = bool(deeper) and min(deeper) == after
    if deeper:
        mixed = (f" From layer 1 on, attention has mixed the changed byte into {'every' if every else 'some'} later "
                 "token: " + ", ".join(f"layer {i}: **{n}**" for i, n in enumerate(deeper, start=1))
                 + f" of the {after} positions from {pos} on differ.")
    else:
        mixed = ""
    wrong = sum(1 for n in counts if n > 0)
    if every and counts[0] <= 1:
        end = (" So a cached block after the change would hold wrong K/V in every layer but the first — seed 000's "
               "point, measured.")
    else:
        end = f" So a cached block after the change would hold wrong K/V in {wrong} of the {len(counts)} layers."
    paragraph = f"{first} {zero}{mixed}{end}"
    deep_text = _deep_text(counts, after)
    finding = (f"changing byte {pos}: layer 0 changes {counts[0]} position"
               + (f", {deep_text}" if deep_text else "")
               + f" of the {after} positions from {pos} on (section 5)")
    return paragraph, finding


def kv_change(model, ids: list[int], position: int, new_token: int | None = None) -> KVChange:
    """Run the prompt and its one-token variant (no cache, eager attention) and compare K and V."""
    import torch

    if not ids:
        raise ValueError("the prompt is empty")
    if not 0 <= position < len(ids):
        raise ValueError(f"position must be 0..{len(ids) - 1}, got {position}")
    if len(ids) > model.cfg.max_seq_len:
        raise ValueError(f"the prompt has {len(ids)} tokens; the model was trained on {model.cfg.max_seq_len}")
    new = other_byte(ids[position]) if new_token is None else new_token
    if new == ids[position]:
        raise ValueError(f"token {new} at position {position} is not a change")
    changed = list(ids)
    changed[position] = new
    caps = []
    for seq in (ids, changed):
        cap: list = []
        with torch.inference_mode():
            model(torch.tensor([seq], dtype=torch.long, device=model.device), 0, None, "eager", capture=cap)
        caps.append(cap)
    k_diff, v_diff, k_scale = [], [], []
    for a, b in zip(caps[0], caps[1], strict=True):
        ka, kb = a["k"][0].float(), b["k"][0].float()  # (Hkv, T, D)
        va, vb = a["v"][0].float(), b["v"][0].float()
        k_diff.append((ka - kb).abs().amax(dim=(0, 2)).cpu().numpy())  # (T,)
        v_diff.append((va - vb).abs().amax(dim=(0, 2)).cpu().numpy())
        k_scale.append(float(ka.abs().mean()))
    return KVChange(list(ids), changed, position, np.stack(k_diff), np.stack(v_diff), np.array(k_scale))


