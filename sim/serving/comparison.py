"""The Serving page's batching run: a model on a GPU (the KV budget is what the weights leave), one seeded workload,
both schedulers, and what the page says about them; and the same comparison swept over the max batch."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.workload import LengthWorkloadConfig, Workload, make_workload
from sim.cost.arch import ArchPreset
from sim.cost.gpus import load_gpus
from sim.cost.memory import weight_bytes
from sim.cost.presets import load_presets
from sim.msg import Msg
from sim.refusal import Refusal
from sim.serving.config import EngineConfig
from sim.serving.result import ServingResult
from sim.serving.schedulers import MAX_REQUESTS, POLICIES, simulate
from sim.serving.step_cost import RooflineCost

ARRIVAL_TICK_S = 0.01  # a paging workload's arrival step, in seconds (Poisson arrivals in 10 ms ticks)
SWEEP_BATCHES = (16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class DeploymentConfig:
    """A model preset on a GPU preset; the KV budget is what the weights leave of the usable memory."""

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    weight_dtype: str = "bf16"
    kv_dtype: str = "fp16"
    utilization: float = 0.9  # vLLM's --gpu-memory-utilization
    kv_limit_tokens: int = 0  # > 0: use at most this many KV slots (to watch memory run out)

    def __post_init__(self) -> None:
        if self.model not in load_presets():
            raise Refusal("serving.err.unknown_model", name=repr(self.model))
        if self.gpu not in load_gpus():
            raise Refusal("serving.err.unknown_gpu", name=repr(self.gpu))
        if not 0.05 <= self.utilization <= 1.0:
            raise Refusal("serving.err.utilization", got=f"{self.utilization}")
        if not 0 <= self.kv_limit_tokens <= MAX_CAPACITY_TOKENS:
            raise Refusal("serving.err.kv_limit", max=f"{MAX_CAPACITY_TOKENS:,}", got=f"{self.kv_limit_tokens:,}")

    @property
    def arch(self) -> ArchPreset:
        return load_presets()[self.model]

    def cost(self) -> RooflineCost:
        return RooflineCost(self.arch, self.gpu, self.weight_dtype, self.kv_dtype)

    def kv_budget(self, cost: RooflineCost | None = None) -> tuple[int, int, int]:
        """(usable bytes, weight bytes, KV token slots), raising ValueError when the weights do not fit."""
        cost = cost or self.cost()
        gpu = load_gpus()[self.gpu]
        usable = math.floor(gpu.memory_bytes * self.utilization)
        w = weight_bytes(self.arch, self.weight_dtype)
        if w >= usable:
            raise Refusal("serving.err.weights", model=self.arch.name, dtype=self.weight_dtype,
                          w=f"{w / 2**30:,.1f}", usable=f"{usable / 2**30:,.1f}", gpu=gpu.name,
                          util=f"{self.utilization:.0%}")
        slots = (usable - w) // cost.kv_bytes_per_token
        slots = min(slots, MAX_CAPACITY_TOKENS)  # the block pool's bound
        if self.kv_limit_tokens:
            slots = min(slots, self.kv_limit_tokens)
        return usable, w, int(slots)


@dataclass(frozen=True)
class ServingSetup:
    workload: LengthWorkloadConfig = LengthWorkloadConfig(num_requests=1000)
    deployment: DeploymentConfig = DeploymentConfig()
    max_num_seqs: int = 256
    block_size: int = 16
    watermark: float = 0.01
    max_num_batched_tokens: int = 8192  # vLLM's name: tokens one pass may compute


@dataclass(frozen=True)
class ServingComparison:
    setup: ServingSetup
    workload: Workload
    usable_bytes: int
    weight_bytes: int
    kv_bytes_per_token: int
    capacity_tokens: int
    decode_s_batch1: float  # one request alone, at the mean prompt length
    results: dict[str, ServingResult]

    @property
    def speedup(self) -> float:
        """Continuous over static throughput."""
        return self.results["continuous"].tokens_per_s / self.results["static"].tokens_per_s

    @property
    def cell_msgs(self) -> dict[str, list[Msg]]:
        """The table's text cells as messages, per column, in row order (to word them in either language)."""
        return {"policy": [Msg(f"serving.cell.{p}") for p in self.results]}

    def to_frame(self):
        """One row of metrics per policy (the page's table and its CSV)."""
        import pandas as pd

        return pd.DataFrame([r.metrics() for r in self.results.values()])

    def series(self):
        """Both policies' passes sampled over time, one frame (occupancy and KV charts)."""
        import pandas as pd

        return pd.concat([r.series() for r in self.results.values()], ignore_index=True)


def run_serving(setup: ServingSetup) -> ServingComparison:
    wcfg, dep = setup.workload, setup.deployment
    if wcfg.num_requests > MAX_REQUESTS:
        raise Refusal("serving.err.requests", max=f"{MAX_REQUESTS:,}", got=f"{wcfg.num_requests:,}")
    arch = dep.arch
    if wcfg.max_model_len > arch.max_position_embeddings:
        raise Refusal("serving.err.context", n=f"{wcfg.max_model_len:,}", model=arch.name,
                      ctx=f"{arch.max_position_embeddings:,}")
    cost = dep.cost()
    usable, wbytes, slots = dep.kv_budget(cost)
    if slots < wcfg.max_model_len:
        raise Refusal("serving.err.budget_small", slots=f"{slots:,}", gib=f"{(usable - wbytes) / 2**30:,.2f}",
                      bpt=f"{cost.kv_bytes_per_token:,}", n=f"{wcfg.max_model_len:,}")
    sched = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=setup.block_size,
                         watermark=setup.watermark, max_num_batched_tokens=setup.max_num_batched_tokens,
                         enable_chunked_prefill=False)
    wl = make_workload(wcfg)
    tick = ARRIVAL_TICK_S if wcfg.arrival == "poisson" else 1.0
    results = {p: simulate(wl, sched, cost, p, tick) for p in POLICIES}
    return ServingComparison(setup, wl, usable, wbytes, cost.kv_bytes_per_token, slots,
                             cost.decode_seconds(1, wcfg.prompt_mean), results)


@dataclass(frozen=True)
class BatchSweep:
    """Both schedulers' throughput at several max batch sizes, everything else the same."""

    batches: tuple[int, ...]
    static_tok_s: tuple[float, ...]
    continuous_tok_s: tuple[float, ...]

    @property
    def ratios(self) -> tuple[float, ...]:
        """Continuous over static throughput at each batch size."""
        return tuple(c / s for s, c in zip(self.static_tok_s, self.continuous_tok_s, strict=True))

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"max_batch": self.batches, "static_tok_s": self.static_tok_s,
                             "continuous_tok_s": self.continuous_tok_s, "ratio": self.ratios})


def sweep_max_batch(setup: ServingSetup, batches: tuple[int, ...] = SWEEP_BATCHES,
                    progress: Callable[[float, Msg], None] | None = None) -> BatchSweep:
    """`run_serving` at each max batch; progress(fraction, message) is called before each run."""
    static, cont = [], []
    for i, b in enumerate(batches):
        if progress:
            progress(i / len(batches), Msg("serving.f.max_batch", n=b))
        cmp = run_serving(replace(setup, max_num_seqs=b))
        static.append(cmp.results["static"].tokens_per_s)
        cont.append(cmp.results["continuous"].tokens_per_s)
    return BatchSweep(tuple(batches), tuple(static), tuple(cont))
