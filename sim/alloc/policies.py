"""Paged KV blocks (vLLM's PagedAttention) against contiguous allocation, on the same requests.

`compare_policies` runs one length workload through every allocator: the paged schedule
(sim/alloc/paged_schedule.py) and the contiguous baselines (sim/alloc/contiguous.py), and
`Comparison.to_frame` says where the claimed KV memory went. `block_size_tradeoff` sweeps the
block size with the closed forms of sim/alloc/schedule.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.contiguous import simulate_contiguous
from sim.alloc.paged_schedule import simulate_paged_fast
from sim.alloc.schedule import (
    POLICIES,
    SLOT_KINDS,
    PolicyResult,
    PoolConfig,
    check_fits,
    paged_slot_steps,
    token_slot_steps,
)
from sim.alloc.workload import Workload
from sim.refusal import Misuse

# The vLLM paper (Kwon et al., 2023): earlier systems kept 20.4–38.2% of their KV memory filled with tokens;
# paged blocks waste under 4%.
PAPER_CONTIGUOUS_TOKEN_PCT = (20.4, 38.2)
PAPER_PAGED_WASTE_PCT = 4

def simulate_policy(wl: Workload, serving: PoolConfig, policy: str) -> PolicyResult:
    if policy not in POLICIES:  # callers pass names from POLICIES
        raise Misuse(f"policy must be one of {POLICIES}, got {policy!r}")
    check_fits(wl, serving)
    if policy == "paged":
        return simulate_paged_fast(wl, serving)
    return simulate_contiguous(wl, serving, policy)


@dataclass(frozen=True)
class Comparison:
    workload: Workload
    serving: PoolConfig
    results: dict[str, PolicyResult]

    def to_frame(self):
        """One row per policy: where the claimed KV memory went, and how many requests ran at once."""
        import pandas as pd

        base = self.results["reserve_max_len"]
        rows = []
        for policy, r in self.results.items():
            claimed = r.claimed_slot_steps
            row = {"policy": policy, "allocation": r.label, "real_tokens_pct": 100 * r.token_share}
            for kind in SLOT_KINDS[1:]:
                row[f"{kind}_pct"] = 100 * r.slot_steps[kind] / claimed
            row.update({
                "mean_running": r.mean_running, "peak_running": r.peak_running, "makespan_steps": r.makespan,
                "tokens_per_step": r.tokens_per_step, "speedup_vs_max_len": base.makespan / r.makespan,
                "preemptions": r.num_preemptions, "capacity_used_by_tokens_pct": 100 * r.capacity_share_tokens,
            })
            rows.append(row)
        return pd.DataFrame(rows)

    def results_frame(self):
        """The page's results table and its CSV: `to_frame` without the long labels, rounded to 2 places."""
        return self.to_frame().drop(columns=["allocation"]).round(2)

    def series(self, num_points: int = 400):
        import pandas as pd

        return pd.concat([r.series(num_points) for r in self.results.values()], ignore_index=True)


def compare_policies(wl: Workload, serving: PoolConfig, policies=POLICIES) -> Comparison:
    check_fits(wl, serving)
    return Comparison(wl, serving, {p: simulate_policy(wl, serving, p) for p in policies})


@dataclass(frozen=True)
class BlockSizeTradeoff:
    block_size: np.ndarray
    last_block_waste: np.ndarray  # share of allocated slot-steps left empty in last blocks
    mean_table_len: np.ndarray  # block-table entries per request at its peak
    max_table_len: np.ndarray

    def at(self, block_size: int) -> tuple[float, float]:
        """(last-block waste, mean block-table length) at one of the swept block sizes."""
        hit = np.flatnonzero(self.block_size == block_size)  # block_size_tradeoff sweeps the chosen size too
        if not len(hit):
            raise Misuse(f"block size {block_size} was not swept (swept: {self.block_size.tolist()})")
        return float(self.last_block_waste[hit[0]]), float(self.mean_table_len[hit[0]])

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"block_size": self.block_size, "last_block_waste": self.last_block_waste,
                             "mean_table_len": self.mean_table_len, "max_table_len": self.max_table_len})


TRADEOFF_BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def block_size_tradeoff(wl: Workload, sizes=TRADEOFF_BLOCK_SIZES, chosen: int | None = None) -> BlockSizeTradeoff:
    """Small blocks waste little of the last block but need long block tables; large ones the reverse.
    `chosen` is swept too (the page's block size, whatever it is)."""
    sizes = np.array(sorted(set(int(s) for s in sizes) | ({int(chosen)} if chosen is not None else set())),
                     dtype=np.int64)
    tokens = token_slot_steps(wl)
    waste, mean_len, max_len = [], [], []
    for b in sizes:
        alloc = paged_slot_steps(wl, int(b))
        waste.append(1 - tokens / alloc)
        table = -(-wl.peak_tokens // b)
        mean_len.append(float(table.mean()))
        max_len.append(int(table.max()))
    return BlockSizeTradeoff(sizes, np.array(waste), np.array(mean_len), np.array(max_len, dtype=np.int64))

