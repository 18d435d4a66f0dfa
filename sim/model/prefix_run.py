"""The real model and a shared prefix: prefill it once and branch continuations from its cache
(BranchRun), and what one changed byte does to every later K/V (KVChange). Each result words its own
metrics and sentences; torch is imported only by the functions that run the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.alloc.byte_tokens import from_bytes, other_byte, show_byte, to_bytes
from sim.alloc.prefix_readouts import JobPlan
from sim.i18n import text
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
    lang: str = "en"  # the language `problem`, `kv_problem` and the job's description are worded in

    @property
    def kv_ids(self) -> tuple[int, ...]:
        """The K/V view's prompt: the prefix's first KV_DEMO_BYTES bytes."""
        return self.prefix_ids[:KV_DEMO_BYTES]

    @property
    def kv_problem(self) -> str | None:
        return text(self.lang, "prefix.run.kv_problem") if len(self.kv_ids) < 2 else None

    def job(self, rates) -> JobPlan:
        """Both ways, every branch, every repetition plus one warm-up, each branch costed as the longest one
        (`rates.seconds(Work)`: the tiny model's fitted cost on this machine)."""
        from sim.work.run_cost import cached_work

        per_branch = max(rates.seconds(cached_work(len(self.prefix_ids) + len(s), self.num_new))
                         for s in self.suffix_ids)
        return JobPlan(2 * len(self.suffix_ids) * (self.repeats + 1) * per_branch,
                       text(self.lang, "prefix.run.job", n=f"{len(self.suffix_ids)}", repeats=f"{self.repeats}"))


def branch_inputs(prefix: str, suffixes: str, num_new: int, repeats: int, lang: str = "en") -> BranchInputs:
    """The page's text boxes as byte tokens; blank lines are dropped. What is wrong is worded in `lang`."""
    prefix_ids = to_bytes(prefix)
    lines = [s for s in suffixes.split("\n") if s.strip()]
    suffix_ids = [to_bytes(s + "\n") for s in lines]
    problem = None
    if not prefix_ids:
        problem = text(lang, "prefix.run.empty")
    elif len(prefix_ids) > MAX_PREFIX_BYTES:
        problem = text(lang, "prefix.run.too_long", n=f"{len(prefix_ids):,}", max=f"{MAX_PREFIX_BYTES}")
    elif not 1 <= len(suffix_ids) <= MAX_BRANCHES:
        problem = text(lang, "prefix.run.branches", max=f"{MAX_BRANCHES}", n=f"{len(suffix_ids)}")
    elif max(len(s) for s in suffix_ids) > MAX_SUFFIX_BYTES:
        problem = text(lang, "prefix.run.suffix_long", n=f"{max(len(s) for s in suffix_ids)}", max=f"{MAX_SUFFIX_BYTES}")
    return BranchInputs(tuple(prefix_ids), tuple(lines), tuple(tuple(s) for s in suffix_ids), num_new, repeats,
                        problem, lang)

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

    def summary(self, same_within: float = 0.02, lang: str = "en") -> str:
        """What the run shows, worded from its own numbers (Markdown): each comparison says which way it went
        and by how much; a gap in shares within `same_within` is 'about the same', and a decode-time gap is
        called timing noise only when it is within the repeats' spread."""
        tok, tim = self.token_saved_share, self.prefill_saved_share
        shares = dict(tok=f"{100 * tok:.0f}", tim=f"{100 * tim:.0f}", gap=f"{100 * abs(tok - tim):.0f}")
        out = [text(lang, "prefix.run.removes", **shares)]
        if tim < tok - same_within:
            out.append(text(lang, "prefix.run.trails", passes=f"{self.num_branches + 1}", n=f"{self.num_branches}",
                            **shares))
        elif tim > tok + same_within:
            out.append(text(lang, "prefix.run.exceeds", **shares))
        else:
            out.append(text(lang, "prefix.run.about_same", within=f"{100 * same_within:.0f}"))
        decode = self.decode_sentence(lang)
        return " ".join(out + ([decode] if decode else []))

    def decode_sentence(self, lang: str = "en") -> str | None:
        """Decode time branched against from scratch, which way and by how much, against the repeats' spread
        (None with no decode step)."""
        steps = self.num_branches * (self.num_new - 1)
        if steps <= 0:
            return None
        a, b = 1e3 * self.branch_decode_s, 1e3 * self.scratch_decode_s
        same = text(lang, "prefix.run.same_steps", n=f"{self.num_branches}", steps=f"{self.num_new - 1}")
        if f"{a:.0f}" == f"{b:.0f}":
            return text(lang, "prefix.run.decode_equal", same=same, a=f"{a:.0f}")
        way = text(lang, "prefix.run.way_branched" if a > b else "prefix.run.way_scratch")
        lead = text(lang, "prefix.run.decode_lead", same=same, a=f"{a:.0f}", b=f"{b:.0f}", diff=f"{abs(a - b):.0f}",
                    share=f"{abs(a - b) / min(a, b):.0%}", way=way)
        spread = self.decode_spread_s
        if spread is None:
            return text(lang, "prefix.run.decode_one", lead=lead)
        s_ms = 1e3 * spread
        if abs(a - b) <= s_ms:
            return text(lang, "prefix.run.decode_noise", lead=lead, spread=f"{s_ms:.0f}")
        return text(lang, "prefix.run.decode_real", lead=lead, spread=f"{s_ms:.0f}")

    @property
    def decode_step_in_prefill_tokens(self) -> float | None:
        """From scratch: one decode step's time over one prefill token's (None with no decode step)."""
        if self.num_new <= 1:
            return None
        per_decode = self.scratch_decode_s / max(1, self.num_branches * (self.num_new - 1))
        return per_decode / (self.scratch_prefill_total_s / self.scratch_prefill_tokens)

    def report(self, lang: str = "en") -> str:
        """summary(), and what one decode step costs in prefill tokens when there was one (Markdown)."""
        ratio = self.decode_step_in_prefill_tokens
        if ratio is None:
            return self.summary(lang=lang)
        return self.summary(lang=lang) + text(lang, "prefix.run.decode_cost", ratio=f"{ratio:.0f}")

    def metrics(self, lang: str = "en") -> list[Metric]:
        def w(key: str, **fields: str) -> str:
            return text(lang, f"prefix.run.m.{key}", **fields)

        return [
            Metric(w("scratch"), f"{1e3 * self.scratch_prefill_total_s:.1f} ms",
                   help=w("passes", tokens=f"{self.scratch_prefill_tokens:,}", n=f"{self.num_branches}")),
            Metric(w("cached"), f"{1e3 * self.branch_prefill_s:.1f} ms",
                   help=w("passes", tokens=f"{self.branch_prefill_tokens:,}", n=f"{self.num_branches + 1}")),
            Metric(w("saved"), f"{100 * self.prefill_saved_share:.0f}%",
                   help=w("saved_help", share=f"{100 * self.token_saved_share:.0f}")),
            Metric(w("identical"), w("yes") if self.tokens_identical else w("no"), help=w("identical_help")),
            Metric(w("logit"), f"{self.max_abs_logit_diff:.1e}", help=w("logit_help")),
        ]

    def mismatch_warning(self, lang: str = "en") -> str | None:
        """Why the tokens can differ, when they did (None when every branch matched)."""
        if self.tokens_identical:
            return None
        return text(lang, "prefix.run.mismatch", dtype=self.dtype)

    def chart_title(self, lang: str = "en") -> str:
        """The prefill chart's title: total prefill time both ways, which is shorter and by how much."""
        a, b = 1e3 * self.branch_prefill_s, 1e3 * self.scratch_prefill_total_s
        where = text(lang, f"prefix.run.where.{'other' if self.num_branches != 1 else 'one'}",
                     n=f"{self.num_branches}", prefix=f"{len(self.prefix_ids):,}", device=self.device,
                     dtype=self.dtype)
        if f"{a:.1f}" == f"{b:.1f}":
            return text(lang, "prefix.run.title.same", a=f"{a:.1f}", where=where)
        if a < b:
            return text(lang, "prefix.run.title.less", a=f"{a:.1f}", b=f"{b:.1f}", share=f"{1 - a / b:.0%}",
                        where=where)
        return text(lang, "prefix.run.title.more", a=f"{a:.1f}", b=f"{b:.1f}", share=f"{a / b - 1:.0%}", where=where)

    def to_frame(self, continuations: Sequence[str], lang: str = "en"):
        """One row per branch: its continuation as typed, both ways' new text, and whether they match."""
        import pandas as pd

        col = {c: text(lang, f"prefix.run.col.{c}") for c in ("branch", "continuation", "branched", "scratch", "same")}
        return pd.DataFrame([{col["branch"]: b + 1, col["continuation"]: continuations[b],
                              col["branched"]: from_bytes(self.branch_tokens[b]),
                              col["scratch"]: from_bytes(self.scratch_tokens[b]),
                              col["same"]: self.branch_tokens[b] == self.scratch_tokens[b]}
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
        prefill(model, x, cache, attn_impl=attn_impl)
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

    def chart_title(self, show=show_byte, lang: str = "en") -> str:
        """The K/V chart's title: what stays exactly unchanged and what changes, layer by layer. show: a byte
        as a label (the page passes one that escapes it for plotly)."""
        k = self.position
        return kv_takeaway(self.changed_counts(), k, len(self.ids), self.num_changed_before(),
                           show(self.ids[k]), show(self.changed_ids[k]), lang)

    def summary(self, lang: str = "en") -> str:
        """What changed where, layer by layer (Markdown)."""
        return kv_change_text(self.changed_counts(), self.position, len(self.ids), self.num_changed_before(),
                              lang)[0]

    def finding(self, lang: str = "en") -> str:
        """The seeds table's words for this view."""
        return kv_change_text(self.changed_counts(), self.position, len(self.ids), self.num_changed_before(),
                              lang)[1]


def _deep_text(counts: Sequence[int], after: int, lang: str = "en") -> str:
    """What layers 1.. change: 'change all 80' / 'change 60–80' ('' with one layer)."""
    deeper = list(counts[1:])
    if not deeper:
        return ""
    last = len(counts) - 1
    layers = text(lang, "prefix.kv.layer1") if last == 1 else text(lang, "prefix.kv.layers", last=f"{last}")
    one = "one" if last == 1 else "other"
    if min(deeper) == max(deeper):
        kind = "all" if min(deeper) == after else "n"
        return text(lang, f"prefix.kv.deep.{kind}.{one}", layers=layers, n=f"{min(deeper)}")
    return text(lang, f"prefix.kv.deep.range.{one}", layers=layers, lo=f"{min(deeper)}", hi=f"{max(deeper)}")


def _before_text(pos: int, num_changed_before: int, num_layers: int, lang: str = "en") -> str:
    if pos == 0:
        return text(lang, "prefix.kv.before.none")
    if num_changed_before == 0:
        who = text(lang, "prefix.kv.before.pos0") if pos == 1 else text(lang, "prefix.kv.before.positions",
                                                                        last=f"{pos - 1}")
        return text(lang, "prefix.kv.before.same", who=who, layers=f"{num_layers}")
    return text(lang, "prefix.kv.before.changed", n=f"{num_changed_before}", pos=f"{pos}")


def kv_takeaway(counts: Sequence[int], pos: int, num_positions: int, num_changed_before: int, before: str,
                after_label: str, lang: str = "en") -> str:
    """The K/V chart's title for `counts[layer]` positions changed after byte `pos` (before → after_label,
    already escaped for a chart) of a `num_positions`-byte prompt changed."""
    after = num_positions - pos
    deep = _deep_text(counts, after, lang)
    return text(lang, "prefix.kv.title", pos=f"{pos}", before=before, after_label=after_label,
                before_text=_before_text(pos, num_changed_before, len(counts), lang), after=f"{after}",
                zero=f"{counts[0]}", deep=text(lang, "prefix.kv.title_deep", deep=deep) if deep else "")


def kv_change_text(counts: Sequence[int], pos: int, num_positions: int,
                   num_changed_before: int = 0, lang: str = "en") -> tuple[str, str]:
    """(paragraph in Markdown, the seeds table's words) for `counts[layer]` positions whose K/V changed after
    byte `pos` of a `num_positions`-byte prompt changed, and `num_changed_before` positions before it changed."""
    after = num_positions - pos
    deeper = list(counts[1:])
    if pos == 0:
        first = text(lang, "prefix.kv.p.first_none")
    elif num_changed_before == 0:
        first = text(lang, "prefix.kv.p.first_same", pos=f"{pos}")
    else:
        first = text(lang, "prefix.kv.p.first_changed", n=f"{num_changed_before}", pos=f"{pos}")
    if counts[0] == 1:
        zero = text(lang, "prefix.kv.p.zero_one")
    else:
        zero = text(lang, "prefix.kv.p.zero", n=f"{counts[0]}")
    every = bool(deeper) and min(deeper) == after
    if deeper:
        layers = ", ".join(text(lang, "prefix.kv.p.layer_n", i=f"{i}", n=f"{n}") for i, n in enumerate(deeper, start=1))
        mixed = text(lang, f"prefix.kv.p.mixed.{'every' if every else 'some'}", layers=layers, after=f"{after}",
                     pos=f"{pos}")
    else:
        mixed = ""
    wrong = sum(1 for n in counts if n > 0)
    if every and counts[0] <= 1:
        end = text(lang, "prefix.kv.p.end_all")
    else:
        end = text(lang, "prefix.kv.p.end_n", wrong=f"{wrong}", layers=f"{len(counts)}")
    paragraph = f"{first} {zero}{mixed}{end}"
    deep_text = _deep_text(counts, after, lang)
    finding = text(lang, "prefix.kv.finding", pos=f"{pos}", zero=f"{counts[0]}",
                   deep=text(lang, "prefix.kv.finding_deep", deep=deep_text) if deep_text else "", after=f"{after}")
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
            model(torch.tensor([seq], dtype=torch.long, device=model.device), attn_impl="eager", capture=cap)
        caps.append(cap)
    k_diff, v_diff, k_scale = [], [], []
    for a, b in zip(caps[0], caps[1], strict=True):
        ka, kb = a["k"][0].float(), b["k"][0].float()  # (Hkv, T, D)
        va, vb = a["v"][0].float(), b["v"][0].float()
        k_diff.append((ka - kb).abs().amax(dim=(0, 2)).cpu().numpy())  # (T,)
        v_diff.append((va - vb).abs().amax(dim=(0, 2)).cpu().numpy())
        k_scale.append(float(ka.abs().mean()))
    return KVChange(list(ids), changed, position, np.stack(k_diff), np.stack(v_diff), np.array(k_scale))


