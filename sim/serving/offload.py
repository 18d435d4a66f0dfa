"""The Serving page's offload study: one shared-prefix workload through the prefix-caching engine three times —
GPU blocks only, then with a host tier, then with host and disk tiers below it (sim.serving.tiers) — and what
each tier's hits saved against what loading them cost.

Prefill on the GPU is the alternative a load competes with, so the study also prices both per block: loading a
block over a link costs the same wherever it sits in the prompt, recomputing it costs more the later it sits;
`breakeven` is the position from which each link wins. The run's own verdict per tier compares the seconds its
loads added to passes with the seconds prefilling the same tokens would have cost."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from sim.cost.vllm_rules import ADMISSION_WATERMARK
from sim.msg import Msg
from sim.refusal import Misuse, Refusal
from sim.serving.comparison import DeploymentConfig
from sim.serving.config import EngineConfig
from sim.serving.engine import EngineRun, simulate_engine
from sim.serving.links import link as find_link
from sim.serving.shared_prefix import SharedPrefixConfig, make_shared_prefix
from sim.serving.tiers import OffloadConfig, breakeven_position, recompute_seconds

VARIANTS = ("GPU only", "GPU + host", "GPU + host + disk")  # the table's text (what the CSV keeps)
VARIANT_WORDS = (Msg("serving.cell.gpu_only"), Msg("serving.cell.gpu_plus_host"), Msg("serving.cell.gpu_plus_host_plus_disk"))


@dataclass(frozen=True)
class OffloadSetup:
    deployment: DeploymentConfig = DeploymentConfig(kv_limit_tokens=60_000)
    workload: SharedPrefixConfig = SharedPrefixConfig()
    offload: OffloadConfig = OffloadConfig(cpu_tokens=50_000, cpu_link="pcie5", disk_tokens=1_000_000,
                                           disk_link="nvme")
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 8192
    block_size: int = 16

    def __post_init__(self) -> None:
        if not 1 <= self.max_num_seqs <= 1024:  # the tab keeps the default
            raise Misuse(f"max_num_seqs must be 1..1,024, got {self.max_num_seqs}")


@dataclass(frozen=True, eq=False)
class OffloadStudy:
    setup: OffloadSetup
    capacity_tokens: int
    kv_bytes_per_token: int
    runs: tuple[EngineRun, EngineRun, EngineRun]  # VARIANTS, in order
    breakeven: tuple[int | None, int | None]  # host link, disk link (first winning token position)
    load_us_per_block: tuple[float, float]
    recompute_us_first_block: float  # prefilling block 0 (the cheapest to recompute)

    @property
    def prompt_tokens(self) -> int:
        return int(self.runs[0].result.prompt_len.sum())

    @property
    def cell_msgs(self) -> dict[str, list[Msg]]:
        """The table's text cells as messages, per column, in row order (to word them in either language)."""
        return {"tiers": list(VARIANT_WORDS)}

    def to_frame(self):
        import pandas as pd

        rows = []
        p = self.prompt_tokens
        for name, run in zip(VARIANTS, self.runs, strict=True):
            r = run.result
            g, h, d = run.tier_hit_tokens
            rows.append({"tiers": name, "gpu_hit_pct": 100 * g / p, "host_hit_pct": 100 * h / p,
                         "disk_hit_pct": 100 * d / p, "computed_pct": 100 * (p - g - h - d) / p,
                         "ttft_p50_s": float(np.percentile(r.ttft_s, 50)),
                         "ttft_p95_s": float(np.percentile(r.ttft_s, 95)), "throughput_tok_s": r.tokens_per_s,
                         "host_load_s": run.load_seconds[0], "disk_load_s": run.load_seconds[1],
                         "host_recompute_s": run.load_recompute_seconds[0],
                         "disk_recompute_s": run.load_recompute_seconds[1],
                         "loaded_gb": sum(run.load_bytes) / 1e9, "written_down_gb": sum(run.offload_written_bytes) / 1e9})
        return pd.DataFrame(rows)


def run_offload(setup: OffloadSetup, progress=None) -> OffloadStudy:
    dep = setup.deployment
    cost = dep.cost()
    _, _, slots = dep.kv_budget(cost)
    sp = make_shared_prefix(setup.workload)
    wl = sp.workload
    if wl.max_model_len > dep.arch.max_position_embeddings:
        raise Refusal("serving.err.prompts_past_context", prompt=setup.workload.prompt_len,
                      output=setup.workload.output_len, model=dep.arch.name, ctx=dep.arch.max_position_embeddings)
    hashes = sp.hashes(setup.block_size)
    cfg = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=setup.block_size,
                       watermark=ADMISSION_WATERMARK,
                       max_num_batched_tokens=max(setup.max_num_batched_tokens, setup.max_num_seqs),
                       enable_prefix_caching=True)
    o = setup.offload
    variants = (None, replace(o, disk_tokens=0), o)
    runs = []
    for i, off in enumerate(variants):
        if progress:
            progress(i / 3, f"prefix caching, {VARIANTS[i]}")
        if off is not None and off.cpu_tokens == 0 and (i == 1 or off.disk_tokens == 0):
            off = None  # a tier of no blocks is the GPU alone
        runs.append(simulate_engine(wl, cfg, cost, 1.0, prompt_hashes=hashes, offload=off))
    kvb = cost.kv_bytes_per_token
    bs = setup.block_size
    be = tuple(breakeven_position(cost, kvb, key, bs, wl.max_model_len) for key in o.links)
    load_us = tuple(1e6 * bs * kvb / find_link(key).bytes_per_s for key in o.links)
    return OffloadStudy(setup, slots, kvb, tuple(runs), be, load_us, 1e6 * recompute_seconds(cost, bs, 0))

