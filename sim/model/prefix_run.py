"""The real model and a shared prefix: prefill it once and branch continuations from its cache
(BranchRun), and what one changed byte does to every later K/V (KVChange). Each result words its own
metrics and sentences; torch is imported only by the functions that run the model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.byte_tokens import other_byte, show_byte, to_bytes
from sim.msg import Msg
from sim.refusal import Misuse
from sim.work.run_cost import JobPlan

MAX_BRANCHES = 8  # real model: continuations branched from one prefix
MAX_BRANCH_NEW = 128
MAX_REPEATS = 10
MAX_PREFIX_BYTES = 700  # the page's shared prefix
MAX_SUFFIX_BYTES = 80  # one continuation, its newline included
KV_DEMO_BYTES = 120  # the K/V view's prompt: the prefix's first bytes


@dataclass(frozen=True, kw_only=True)
class BranchInputs:
    """A shared prefix and continuations as typed (one per line, a newline added to each), as byte tokens,
    with what is wrong with them (None: they can run)."""

    prefix_ids: tuple[int, ...]
    continuations: tuple[str, ...]
    suffix_ids: tuple[tuple[int, ...], ...]
    num_new: int
    repeats: int
    problem: Msg | None

    @property
    def kv_ids(self) -> tuple[int, ...]:
        """The K/V view's prompt: the prefix's first KV_DEMO_BYTES bytes."""
        return self.prefix_ids[:KV_DEMO_BYTES]

    @property
    def kv_problem(self) -> Msg | None:
        return Msg("prefix.run.kv_problem") if len(self.kv_ids) < 2 else None

    def job(self, rates) -> JobPlan:
        """Both ways, every branch, every repetition plus one warm-up, each branch costed as the longest one
        (`rates.seconds(Work)`: the tiny model's fitted cost on this machine)."""
        from sim.work.run_cost import cached_work

        per_branch = max(rates.seconds(cached_work(len(self.prefix_ids) + len(s), self.num_new))
                         for s in self.suffix_ids)
        return JobPlan(2 * len(self.suffix_ids) * (self.repeats + 1) * per_branch,
                       Msg("prefix.run.job", n=len(self.suffix_ids), repeats=self.repeats))


def branch_inputs(prefix: str, suffixes: str, *, num_new: int, repeats: int) -> BranchInputs:
    """The page's text boxes as byte tokens; blank lines are dropped. What is wrong is a message value."""
    prefix_ids = to_bytes(prefix)
    lines = [s for s in suffixes.split("\n") if s.strip()]
    suffix_ids = [to_bytes(s + "\n") for s in lines]
    problem = None
    if not prefix_ids:
        problem = Msg("prefix.run.empty")
    elif len(prefix_ids) > MAX_PREFIX_BYTES:
        problem = Msg("prefix.run.too_long", n=len(prefix_ids), max=MAX_PREFIX_BYTES)
    elif not 1 <= len(suffix_ids) <= MAX_BRANCHES:
        problem = Msg("prefix.run.branches", max=MAX_BRANCHES, n=len(suffix_ids))
    elif max(len(s) for s in suffix_ids) > MAX_SUFFIX_BYTES:
        problem = Msg("prefix.run.suffix_long", n=max(len(s) for s in suffix_ids), max=MAX_SUFFIX_BYTES)
    return BranchInputs(prefix_ids=tuple(prefix_ids), continuations=tuple(lines), suffix_ids=tuple(tuple(s) for s in suffix_ids), num_new=num_new, repeats=repeats,
                        problem=problem)

# ---------------------------------------------------------------------------------------------
# The real model: prefill a shared prefix once, branch several continuations from it


@dataclass(frozen=True, kw_only=True)
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

    @property
    def decode_step_in_prefill_tokens(self) -> float | None:
        """From scratch: one decode step's time over one prefill token's (None with no decode step)."""
        if self.num_new <= 1:
            return None
        per_decode = self.scratch_decode_s / max(1, self.num_branches * (self.num_new - 1))
        return per_decode / (self.scratch_prefill_total_s / self.scratch_prefill_tokens)

def _continue(model, cache, ids: list[int], start: int, num_new: int, attn_impl: str):
    """Feed ids at positions start.. through the cache, then decode greedily. (tokens, logits, prefill s, decode s)"""
    from sim.model.generate import decode_loop

    steps = list(decode_loop(model, ids, num_new, cache=cache, start_pos=start, attn_impl=attn_impl, keep_logits=True))
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


def branch_from_prefix(model, prefix_ids: list[int], suffix_ids: list[list[int]], *, num_new: int = 16,
                       repeats: int = 3, attn_impl: str = "sdpa") -> BranchRun:
    """Prefill the prefix once into a ContiguousKVCache; for each suffix, truncate the cache back to the
    prefix, prefill the suffix on top and decode num_new tokens greedily. Against: the same cache
    truncated to 0 and prefix + suffix prefilled whole for every branch (no prefix cache). The two ways
    alternate their order from one repetition to the next; the first repetition only warms up."""
    import statistics

    from sim.model.kvcache import ContiguousKVCache

    if not prefix_ids:
        raise Misuse("the shared prefix is empty: give at least one token")
    if not 1 <= len(suffix_ids) <= MAX_BRANCHES:
        raise Misuse(f"give 1..{MAX_BRANCHES} continuations, got {len(suffix_ids)}")
    for i, s in enumerate(suffix_ids):
        if not s:
            raise Misuse(f"continuation {i + 1} is empty: each needs at least one token (its last token is "
                         "computed to get the first output's logits)")
    if not 1 <= num_new <= MAX_BRANCH_NEW:
        raise Misuse(f"num_new must be 1..{MAX_BRANCH_NEW}, got {num_new}")
    if not 1 <= repeats <= MAX_REPEATS:
        raise Misuse(f"repeats must be 1..{MAX_REPEATS}, got {repeats}")
    cfg = model.cfg
    p = len(prefix_ids)
    longest = p + max(len(s) for s in suffix_ids) + num_new - 1
    if longest > cfg.max_seq_len:
        raise Misuse(f"prefix ({p}) + longest continuation ({max(len(s) for s in suffix_ids)}) + {num_new} new "
                     f"tokens - 1 needs {longest} positions; the model was trained on {cfg.max_seq_len}")
    device, dtype = model.device, model.dtype
    cache = ContiguousKVCache(cfg, batch_size=1, max_seq_len=longest, device=device, dtype=dtype)
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


@dataclass(frozen=True, kw_only=True)
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

def kv_change(model, ids: list[int], *, position: int, new_token: int | None = None) -> KVChange:
    """Run the prompt and its one-token variant (no cache, eager attention) and compare K and V."""
    import torch

    if not ids:
        raise Misuse("the prompt is empty")
    if not 0 <= position < len(ids):
        raise Misuse(f"position must be 0..{len(ids) - 1}, got {position}")
    if len(ids) > model.cfg.max_seq_len:
        raise Misuse(f"the prompt has {len(ids)} tokens; the model was trained on {model.cfg.max_seq_len}")
    new = other_byte(ids[position]) if new_token is None else new_token
    if new == ids[position]:
        raise Misuse(f"token {new} at position {position} is not a change")
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
    return KVChange(ids=list(ids), changed_ids=changed, position=position, k_diff=np.stack(k_diff), v_diff=np.stack(v_diff), k_scale=np.array(k_scale))


