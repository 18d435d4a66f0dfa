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
from sim.serving import readouts as ro
from sim.serving.result import ServingResult
from sim.serving.schedulers import MAX_REQUESTS, POLICIES, SchedulerConfig, simulate
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
            raise ValueError(f"unknown model {self.model!r}")
        if self.gpu not in load_gpus():
            raise ValueError(f"unknown GPU {self.gpu!r}")
        if not 0.05 <= self.utilization <= 1.0:
            raise ValueError(f"utilization must be 0.05..1.0, got {self.utilization}")
        if not 0 <= self.kv_limit_tokens <= MAX_CAPACITY_TOKENS:
            raise ValueError(f"kv_limit_tokens must be 0..{MAX_CAPACITY_TOKENS:,}, got {self.kv_limit_tokens:,}")

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
            raise ValueError(f"{self.arch.name} weights in {self.weight_dtype} take {w / 2**30:,.1f} GiB, more than the "
                             f"{usable / 2**30:,.1f} GiB usable on one {gpu.name} at {self.utilization:.0%}: pick a "
                             "smaller model, a lower-precision weight dtype or a bigger GPU")
        slots = (usable - w) // cost.kv_bytes_per_token
        slots = min(slots, MAX_CAPACITY_TOKENS)  # the block pool's bound
        if self.kv_limit_tokens:
            slots = min(slots, self.kv_limit_tokens)
        return usable, w, int(slots)


@dataclass(frozen=True)
class ServingSetup:
    workload: LengthWorkloadConfig = LengthWorkloadConfig(num_requests=1000)
    deployment: DeploymentConfig = DeploymentConfig()
    max_batch: int = 256
    block_size: int = 16
    watermark: float = 0.01
    max_batched_tokens: int = 8192


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

    def takeaway(self, num_shown: int) -> str:
        """The Gantt chart's title: which scheduler finished the workload sooner, by how much, and both
        throughputs; the chart itself shows the first num_shown requests."""
        static, cont = self.results["static"], self.results["continuous"]
        n = static.num_requests
        shown = f"(first {min(num_shown, n):,} shown)"
        rates = f"{cont.tokens_per_s:,.0f} tokens/s continuous vs {static.tokens_per_s:,.0f} static"
        if cont.makespan_s < static.makespan_s:
            return (f"Continuous batching finished all {n:,} requests {static.makespan_s / cont.makespan_s:.2f}× "
                    f"sooner: {rates} {shown}")
        if cont.makespan_s > static.makespan_s:
            return (f"Static batching finished all {n:,} requests {cont.makespan_s / static.makespan_s:.2f}× "
                    f"sooner: {rates} {shown}")
        return f"Both schedulers finished all {n:,} requests in {cont.makespan_s:,.1f} s: {rates} {shown}"

    def to_frame(self):
        """One row of metrics per policy (the page's table and its CSV)."""
        import pandas as pd

        return pd.DataFrame([r.metrics() for r in self.results.values()])

    def series(self):
        """Both policies' passes sampled over time, one frame (occupancy and KV charts)."""
        import pandas as pd

        return pd.concat([r.series() for r in self.results.values()], ignore_index=True)

    def budget_caption(self) -> str:
        """The deployment in one sentence (Markdown): memory, the KV budget it leaves, the workload drawn."""
        dep, wl = self.setup.deployment, self.workload
        return (
            f"{dep.arch.name} on one {load_gpus()[dep.gpu].name}: {self.usable_bytes / 2**30:,.1f} GiB usable, "
            f"weights {self.weight_bytes / 2**30:,.1f} GiB, so the KV budget holds **{self.capacity_tokens:,} tokens** "
            f"({self.kv_bytes_per_token / 1024:,.0f} KiB each). One request alone decodes a token in "
            f"{self.decode_s_batch1 * 1e3:,.2f} ms. Drawn: {wl.num_requests:,} requests, prompts "
            f"{wl.prompt_len.mean():.0f} tokens on average, outputs {wl.output_len.mean():.0f} (longest "
            f"{wl.output_len.max():,}).")

    def occupancy_takeaway(self) -> str:
        """The occupancy chart's title: useful requests in an average pass, both schedulers."""
        static, cont = self.results["static"], self.results["continuous"]
        return ro.occupancy_takeaway(static.mean_batch, cont.mean_batch, static.max_batch)

    def kv_takeaway(self) -> str:
        """The KV memory chart's title: each scheduler's peak and mean claim on the KV budget."""
        static, cont = self.results["static"], self.results["continuous"]
        return ro.kv_takeaway(self.capacity_tokens, static.peak_kv_claimed, cont.peak_kv_claimed,
                              static.mean_kv_claimed, cont.mean_kv_claimed)

    def latency_takeaway(self) -> str:
        """The latency chart's title: end-to-end p50 and p99, which scheduler is lower and by how much."""
        static, cont = self.results["static"], self.results["continuous"]

        def p50_p99(r: ServingResult) -> tuple[float, float]:
            p = r.percentiles(r.e2e_s)
            return p[0], p[-1]

        return ro.latency_takeaway(p50_p99(static), p50_p99(cont))

    def summary(self) -> str:
        """What the two runs show, worded from their numbers (Markdown); each comparison names the side it
        favours."""
        static, cont = self.results["static"], self.results["continuous"]
        share = static.useful_row_share
        rows = (f"In the static batches only **{ro.whole_pct(share)}** of the rows computed produced a token anyone "
                "asked for — the rest were padding and requests already finished, waiting for their batch's longest "
                "answer." if share < 1 else
                "In the static batches every row computed produced a token anyone asked for: no padding, and no "
                "finished request waiting for its batch's longest answer.")
        sb, cb = f"{static.mean_batch:,.0f}", f"{cont.mean_batch:,.0f}"
        batch = (f"Both kept **{cb}** requests in an average pass" if sb == cb else
                 f"Continuous batching kept **{cb}** requests in an average pass against **{sb}**"
                 if cont.mean_batch > static.mean_batch else
                 f"Static batching kept **{sb}** requests in an average pass against **{cb}**")
        ts, tc = static.percentiles(static.ttft_s)[0], cont.percentiles(cont.ttft_s)[0]
        fs, fc = f"{ts:,.2f} s", f"{tc:,.2f} s"
        first = (f"the median request got its first token after **{fc}** with either" if fs == fc else
                 f"the median request got its first token after **{fc}** with continuous batching, "
                 + (f"{ts / tc:,.1f}× sooner than the **{fs}** of static" if tc < ts else
                    f"later than the **{fs}** of static"))
        return (
            f"Both ran the same {self.workload.num_requests:,} requests ({static.num_output_tokens:,} output tokens). "
            f"Static batching needed **{static.makespan_s:,.1f} s**, continuous batching **{cont.makespan_s:,.1f} s**: "
            f"**{self.speedup:.2f}×** the throughput. {rows} {batch}, and {first}.")


def run_serving(setup: ServingSetup) -> ServingComparison:
    wcfg, dep = setup.workload, setup.deployment
    if wcfg.num_requests > MAX_REQUESTS:
        raise ValueError(f"at most {MAX_REQUESTS:,} requests, got {wcfg.num_requests:,}")
    arch = dep.arch
    if wcfg.max_model_len > arch.max_position_embeddings:
        raise ValueError(f"max model length {wcfg.max_model_len:,} is past {arch.name}'s trained context of "
                         f"{arch.max_position_embeddings:,} tokens")
    cost = dep.cost()
    usable, wbytes, slots = dep.kv_budget(cost)
    if slots < wcfg.max_model_len:
        raise ValueError(f"the KV budget holds {slots:,} tokens ({(usable - wbytes) / 2**30:,.2f} GiB at "
                         f"{cost.kv_bytes_per_token:,} bytes per token), less than one request of the maximum length "
                         f"{wcfg.max_model_len:,}")
    sched = SchedulerConfig(setup.max_batch, slots, setup.block_size, setup.watermark, setup.max_batched_tokens)
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

    def takeaway(self) -> str:
        """The sweep chart's title: where each scheduler's throughput stops growing, and which one leads."""
        return ro.sweep_takeaway(self.batches, self.static_tok_s, self.continuous_tok_s)


def sweep_max_batch(setup: ServingSetup, batches: tuple[int, ...] = SWEEP_BATCHES,
                    progress: Callable[[float, str], None] | None = None) -> BatchSweep:
    """`run_serving` at each max batch; progress(fraction, text) is called before each run."""
    static, cont = [], []
    for i, b in enumerate(batches):
        if progress:
            progress(i / len(batches), f"max batch {b}")
        cmp = run_serving(replace(setup, max_batch=b))
        static.append(cmp.results["static"].tokens_per_s)
        cont.append(cmp.results["continuous"].tokens_per_s)
    return BatchSweep(tuple(batches), tuple(static), tuple(cont))
