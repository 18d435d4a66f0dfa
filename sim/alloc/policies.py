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
    ServingConfig,
    check_fits,
    paged_slot_steps,
    token_slot_steps,
)
from sim.alloc.workload import Workload
from sim.i18n import text

# The vLLM paper (Kwon et al., 2023): earlier systems kept 20.4–38.2% of their KV memory filled with tokens;
# paged blocks waste under 4%.
PAPER_CONTIGUOUS_TOKEN_PCT = (20.4, 38.2)
PAPER_PAGED_WASTE_PCT = 4

def simulate_policy(wl: Workload, serving: ServingConfig, policy: str) -> PolicyResult:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    check_fits(wl, serving)
    if policy == "paged":
        return simulate_paged_fast(wl, serving)
    return simulate_contiguous(wl, serving, policy)


@dataclass(frozen=True)
class Comparison:
    workload: Workload
    serving: ServingConfig
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

    def drawn_caption(self, lang: str = "en") -> str:
        """The requests drawn and the pool they go into, in one sentence."""
        wl, serving = self.workload, self.serving
        return text(lang, "paged.s.drawn", n=f"{wl.num_requests:,}", prompt=f"{wl.prompt_len.mean():.0f}",
                    prompt_max=f"{wl.prompt_len.max():,}", output=f"{wl.output_len.mean():.0f}",
                    output_max=f"{wl.output_len.max():,}", blocks=f"{serving.num_blocks:,}",
                    bs=f"{serving.block_size}")

    def memory_summary(self, lang: str = "en") -> str:
        """Where the claimed memory went, contiguous against paged, next to the vLLM paper's figures (Markdown)."""
        paged = self.results["paged"]
        contiguous = [r.token_share for p, r in self.results.items() if p != "paged"]
        lo, hi = PAPER_CONTIGUOUS_TOKEN_PCT
        return text(lang, "paged.s.memory_summary", lo=f"{100 * min(contiguous):.1f}", hi=f"{100 * max(contiguous):.1f}",
                    paper_lo=f"{lo}", paper_hi=f"{hi}", paged=f"{100 * paged.token_share:.1f}",
                    waste=f"{100 * (1 - paged.token_share):.1f}", paper_waste=f"{PAPER_PAGED_WASTE_PCT}")

    def memory_takeaway(self, lang: str = "en") -> str:
        """The breakdown chart's title: paged's share of claimed memory holding real tokens against the
        contiguous policies' range, worded by where paged falls."""
        paged = 100 * self.results["paged"].token_share
        shares = sorted(100 * r.token_share for p, r in self.results.items() if p != "paged")
        lo, hi = shares[0], shares[-1]
        span = f"{lo:.1f}%" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}%"
        policies = text(lang, "paged.s.mem.policy" if len(shares) == 1 else "paged.s.mem.policies")
        fields = dict(span=span, paged=f"{paged:.1f}%", policies=policies)
        if span == f"{paged:.1f}%":
            return text(lang, "paged.s.mem.same", **fields)
        if paged > hi:
            return text(lang, "paged.s.mem.more", **fields)
        if paged < lo:
            return text(lang, "paged.s.mem.less", **fields)
        return text(lang, "paged.s.mem.within", **fields)

    def concurrency_takeaway(self, lang: str = "en") -> str:
        """The running-requests chart's title: paged against reserve-max-length, requests at once on average."""
        paged, max_len = self.results["paged"].mean_running, self.results["reserve_max_len"].mean_running
        p, m = f"{paged:.1f}", f"{max_len:.1f}"
        if p == m:
            return text(lang, "paged.s.conc.same", p=p)
        if paged > max_len:
            return text(lang, "paged.s.conc.more", p=p, m=m, x=f"{paged / max_len:,.1f}")
        return text(lang, "paged.s.conc.less", p=p, m=m)

    def concurrency_summary(self, lang: str = "en") -> str:
        """How many requests ran at once, paged against reserving the maximum length, and the preemptions (Markdown)."""
        paged, max_len = self.results["paged"], self.results["reserve_max_len"]
        if paged.makespan < max_len.makespan:
            finish = text(lang, "paged.s.finish.sooner", x=f"{max_len.makespan / paged.makespan:.2f}")
        elif paged.makespan > max_len.makespan:
            finish = text(lang, "paged.s.finish.later", x=f"{paged.makespan / max_len.makespan:.2f}")
        else:
            finish = text(lang, "paged.s.finish.same")
        return text(lang, "paged.s.concurrency_summary", cap=f"{self.serving.capacity_tokens:,}",
                    paged=f"{paged.mean_running:.1f}", max_len=f"{max_len.mean_running:.1f}", finish=finish,
                    preemptions=f"{paged.num_preemptions:,}")


def compare_policies(wl: Workload, serving: ServingConfig, policies=POLICIES) -> Comparison:
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
        hit = np.flatnonzero(self.block_size == block_size)
        if not len(hit):
            raise ValueError(f"block size {block_size} was not swept (swept: {self.block_size.tolist()})")
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

