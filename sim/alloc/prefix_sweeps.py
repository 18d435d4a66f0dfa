"""The prefix cache run over many settings: two prompts block by block, every workload in both layouts,
capacity and block-size sweeps, and the radix tree of a workload next to the hashed pool's hits.

One function per section of the Prefix caching page; each returns a result the page draws as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from sim.alloc.block_pool import MAX_CAPACITY_TOKENS, cdiv
from sim.alloc.byte_tokens import other_byte
from sim.alloc.prefix_cache import CacheConfig, HitTotals, PrefixCacheResult, simulate_prefix_cache, trace_block_hashes
from sim.alloc.radix_tree import radix_hit_tokens, radix_view
from sim.alloc.workload import (
    LAYOUTS,
    PREFIX_WORKLOADS,
    PrefixWorkloadConfig,
    Trace,
    make_trace,
    trace_from_lists,
)
from sim.msg import Msg
from sim.refusal import Misuse

DEFAULT_CAPACITIES = tuple(2**k for k in range(10, 19))  # 1,024 .. 262,144 tokens
DEFAULT_BLOCK_SIZES = (8, 16, 32, 64, 128, 256)  # the chosen size is always added


# ---------------------------------------------------------------------------------------------
# Two prompts, block by block (the page's first view)


class BlockFate(StrEnum):
    """What the cache did with one block of a prompt."""

    HIT = "hit"
    CACHED = "computed, cached"
    RECOMPUTED = "computed again: holds the last prompt token"
    PARTIAL = "computed, partial block: not cached"


FATE_KEYS = {BlockFate.HIT: "hit", BlockFate.CACHED: "cached", BlockFate.RECOMPUTED: "recomputed",
             BlockFate.PARTIAL: "partial"}


@dataclass(frozen=True, eq=False)
class TwoPrompts:
    """Prompt A then prompt B (A with one byte changed) through one cache."""

    frame: object  # pandas DataFrame: one row per block of each prompt with its hash and fate
    result: PrefixCacheResult
    len_a: int
    len_b: int
    changed_pos: int
    block_size: int
    ids_a: tuple[int, ...] = ()
    ids_b: tuple[int, ...] = ()

    @property
    def num_hit_tokens_b(self) -> int:
        return int(self.result.hit_tokens[1])

    @property
    def num_hit_blocks_b(self) -> int:
        return self.num_hit_tokens_b // self.block_size

    @property
    def num_blocks_b(self) -> int:
        return cdiv(self.len_b, self.block_size)

    @property
    def num_computed_b(self) -> int:
        return self.len_b - self.num_hit_tokens_b


def compare_two_prompts(ids_a: Sequence[int], ids_b: Sequence[int], block_size: int, changed_pos: int = 0) -> TwoPrompts:
    """Request A, then request B, through the cache; one row per block of each with its hash and fate."""
    import pandas as pd

    trace = trace_from_lists([list(ids_a), list(ids_b)])
    cache = CacheConfig(block_size, max(cdiv(len(ids_a), block_size) + cdiv(len(ids_b), block_size), 1) * block_size,
                        max_running=2)
    hashes = trace_block_hashes(trace, block_size)
    res = simulate_prefix_cache(trace, cache, hashes)
    rows = []
    seen: set[int] = set()
    for r, (name, ids) in enumerate((("A", ids_a), ("B", ids_b))):
        hit_blocks = int(res.hit_tokens[r]) // block_size
        for i in range(cdiv(len(ids), block_size)):
            lo, hi = i * block_size, min(len(ids), (i + 1) * block_size)
            full = i < len(hashes[r])
            h = hashes[r][i] if full else None
            if i < hit_blocks:
                fate = BlockFate.HIT
            elif not full:
                fate = BlockFate.PARTIAL
            elif h in seen:  # cached, but it holds the last prompt token, which is always recomputed
                fate = BlockFate.RECOMPUTED
            else:
                fate = BlockFate.CACHED
            parent = None if i == 0 or not full else hashes[r][i - 1]
            rows.append({"request": name, "block": i, "tokens": f"{lo}..{hi - 1}", "first_token": lo,
                         "num_tokens": hi - lo, "hash": f"{h:016x}" if h is not None else "—",
                         "parent hash": f"{parent:016x}" if parent is not None else ("root" if full else "—"),
                         "fate": fate, "ids": list(ids[lo:hi])})
        seen.update(hashes[r])
    return TwoPrompts(pd.DataFrame(rows), res, len(ids_a), len(ids_b), changed_pos, block_size, tuple(ids_a),
                      tuple(ids_b))


def demo_prompt_problem(ids: Sequence[int], max_bytes: int) -> Msg | None:
    """Why a prompt cannot be the first view's prompt A, as a message value (None: it can)."""
    if 2 <= len(ids) <= max_bytes:
        return None
    return Msg("prefix.s.demo.problem", n=len(ids), max=max_bytes)


def change_one_byte(ids_a: Sequence[int], pos: int, block_size: int) -> TwoPrompts:
    """Prompt A, then A with byte `pos` replaced by a visibly different one, through one cache."""
    if not 0 <= pos < len(ids_a):  # the page's slider is narrowed (and its value clamped) to the prompt
        raise Misuse(f"the changed byte must be 0..{len(ids_a) - 1}, got {pos}")
    ids_b = list(ids_a)
    ids_b[pos] = other_byte(ids_a[pos])
    return compare_two_prompts(ids_a, ids_b, block_size, pos)


# ---------------------------------------------------------------------------------------------
# Every workload in both layouts


@dataclass(frozen=True)
class WorkloadOverview:
    """Every workload in both layouts with the same sizes and cache: each run's totals."""

    totals: dict[tuple[str, str], HitTotals]  # (workload, layout) -> totals

    def get(self, workload: str, layout: str) -> HitTotals:
        return self.totals[(workload, layout)]


    def to_frame(self):
        """One row per workload and layout (the overview chart and its CSV)."""
        import pandas as pd

        return pd.DataFrame([{"workload": wl, "layout": layout, "prompt_tokens": t.num_prompt_tokens,
                              "hit_tokens": t.num_hit_tokens, "computed_tokens": t.num_computed_tokens,
                              "hit_rate": t.hit_rate, "prefill_speedup": t.prefill_speedup,
                              "evictions": t.num_evictions, "requests_with_hit": t.num_requests_with_hit,
                              "decode_steps": t.num_decode_steps} for (wl, layout), t in self.totals.items()])

    def to_csv_frame(self):
        """The overview as its download has it: hit rate in percent (2 decimals), speed-up to 3."""
        table = self.to_frame()
        return table.assign(hit_rate=(100 * table["hit_rate"]).round(2),
                            prefill_speedup=table["prefill_speedup"].round(3))


def sizes_only(cfg: PrefixWorkloadConfig) -> PrefixWorkloadConfig:
    """cfg with its workload and layout reset: what compare_workloads depends on (one cache entry for all)."""
    return replace(cfg, workload="system_prompt", layout="fixed_first")


def compare_workloads(cfg: PrefixWorkloadConfig, cache: CacheConfig, workloads=PREFIX_WORKLOADS) -> WorkloadOverview:
    """Every workload in both layouts, the sizes of cfg (its workload and layout are ignored)."""
    totals = {}
    for wl in workloads:
        for layout in LAYOUTS:
            totals[(wl, layout)] = simulate_prefix_cache(make_trace(replace(cfg, workload=wl, layout=layout)),
                                                         cache).totals()
    return WorkloadOverview(totals)


@dataclass(frozen=True, eq=False)
class LayoutRun:
    """The chosen workload in one layout: the full result, and its last request's layout."""

    result: PrefixCacheResult
    last_label: object  # the request's label: a message value or a name
    last_segments: tuple[tuple[str, int], ...] = ()  # the last request's (what, tokens) spans


def run_both_layouts(cfg: PrefixWorkloadConfig, cache: CacheConfig) -> dict[str, LayoutRun]:
    out = {}
    for layout in LAYOUTS:
        trace = make_trace(replace(cfg, layout=layout))
        last = trace.requests[-1]
        out[layout] = LayoutRun(simulate_prefix_cache(trace, cache), last.label, last.segments)
    return out


# ---------------------------------------------------------------------------------------------
# Capacity and block size


def capacity_sweep(trace: Trace, cache: CacheConfig, capacities: Sequence[int] = DEFAULT_CAPACITIES):
    """Hit rate as the cache grows (block size and concurrency fixed). Capacities too small for the
    largest request are left out."""
    import pandas as pd

    hashes = trace_block_hashes(trace, cache.block_size)
    rows = []
    for cap in sorted(set(capacities) | {cache.capacity_tokens}):
        if cap // cache.block_size * cache.block_size < trace.max_stored:
            continue
        r = simulate_prefix_cache(trace, replace(cache, capacity_tokens=cap), hashes)
        rows.append({"capacity_tokens": cap, "hit_rate": r.hit_rate, "evictions": r.num_evictions,
                     "hit_tokens": r.num_hit_tokens})
    return pd.DataFrame(rows, columns=["capacity_tokens", "hit_rate", "evictions", "hit_tokens"])


def block_size_sweep(trace: Trace, cache: CacheConfig, block_sizes: Sequence[int] = DEFAULT_BLOCK_SIZES):
    """Hit rate by block size at the same capacity in tokens: larger blocks lose the partial tail of
    every shared prefix (and a prefix shorter than one block never hits)."""
    import pandas as pd

    rows = []
    for bs in sorted(set(block_sizes) | {cache.block_size}):
        cap = cache.capacity_tokens // bs * bs
        if bs > cache.capacity_tokens or cap < cdiv(trace.max_stored, bs) * bs:
            continue
        r = simulate_prefix_cache(trace, replace(cache, block_size=bs, capacity_tokens=cap))
        rows.append({"block_size": bs, "hit_rate": r.hit_rate, "evictions": r.num_evictions,
                     "hit_tokens": r.num_hit_tokens})
    return pd.DataFrame(rows, columns=["block_size", "hit_rate", "evictions", "hit_tokens"])


def num_sweep_runs(cache: CacheConfig) -> int:
    """Simulations one layout's two sweeps run (the chosen capacity and block size are always added)."""
    return len(set(DEFAULT_CAPACITIES) | {cache.capacity_tokens}) + len(set(DEFAULT_BLOCK_SIZES) | {cache.block_size})


def sweep_both_layouts(cfg: PrefixWorkloadConfig, cache: CacheConfig) -> tuple[dict, dict]:
    """({layout: capacity sweep}, {layout: block-size sweep}) for the chosen workload."""
    cap, bsz = {}, {}
    for layout in LAYOUTS:
        trace = make_trace(replace(cfg, layout=layout))
        cap[layout] = capacity_sweep(trace, cache)
        bsz[layout] = block_size_sweep(trace, cache)
    return cap, bsz


# ---------------------------------------------------------------------------------------------
# The radix tree next to the hashed pool


@dataclass(frozen=True, eq=False)
class TreeView:
    segments: object  # pandas DataFrame of the first num_requests requests' tree (radix_view)
    hit_tokens: np.ndarray  # (num_requests,) the tree's hits for those requests
    labels: tuple[str, ...]
    num_requests: int  # in the whole trace
    radix_total: int  # hit tokens the tree finds over the whole trace
    hashed_total: int | None  # the hashed pool's, with room for every block (None: too big to simulate)


def tree_view(cfg: PrefixWorkloadConfig, block_size: int, num_drawn: int) -> TreeView:
    """The first num_drawn requests as a tree, and both caches' hits over the whole trace."""
    trace = make_trace(cfg)
    frame, hits = radix_view(trace, block_size, num_drawn)
    radix_total = int(radix_hit_tokens(trace, block_size).sum())
    room = sum(cdiv(r.num_stored, block_size) for r in trace.requests) * block_size
    hashed_total = None
    if room <= MAX_CAPACITY_TOKENS:
        hashed_total = simulate_prefix_cache(trace, CacheConfig(block_size, max(room, block_size), 1)).num_hit_tokens
    return TreeView(frame, hits, tuple(r.label for r in trace.requests[:num_drawn]), trace.num_requests,
                    radix_total, hashed_total)
