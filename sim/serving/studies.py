"""The Serving page's engine studies: chunked prefill against its token budget, recompute against swap when blocks
run out, small step-through scenarios, and every simulator on a user's trace. Each is one pure function of a frozen
setup; the sentences they state are worded in sim.words.engine_readouts from their numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from sim.alloc.prefix_cache import CacheConfig, PrefixCacheResult, block_hashes, simulate_prefix_cache
from sim.alloc.trace import TraceFile, blocks_to_hold
from sim.alloc.workload import LengthWorkloadConfig, Workload, make_workload, workload_from_lengths
from sim.cost.vllm_rules import ADMISSION_WATERMARK
from sim.msg import Msg
from sim.refusal import Refusal
from sim.serving.comparison import ARRIVAL_TICK_S, DeploymentConfig
from sim.serving.config import MAX_CPU_CAPACITY_TOKENS, EngineConfig
from sim.serving.engine import EngineRun, simulate_engine
from sim.serving.links import link as find_link
from sim.serving.result import ServingResult
from sim.serving.schedulers import simulate_static
from sim.serving.step_cost import LinearCost

CHUNK_BUDGETS = (256, 512, 1024, 2048, 4096, 8192)
MAX_STUDY_REQUESTS = 1000


def _percentile(r: ServingResult, values: np.ndarray, q: int) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


@dataclass(frozen=True)
class StudySetup:
    """A deployment, a seeded workload (Poisson arrivals in requests per second) and the scheduler's sizes."""

    deployment: DeploymentConfig = DeploymentConfig()
    workload: LengthWorkloadConfig = LengthWorkloadConfig(
        num_requests=100, prompt_mean=3000, output_mean=100, spread=0.5, max_model_len=8192, max_tokens=1024,
        arrival="poisson", arrival_rate=30.0 * ARRIVAL_TICK_S, seed=0)
    max_num_seqs: int = 64
    block_size: int = 16

    def __post_init__(self) -> None:
        if self.workload.num_requests > MAX_STUDY_REQUESTS:
            raise Refusal("serving.err.study_requests", max=f"{MAX_STUDY_REQUESTS:,}",
                          got=f"{self.workload.num_requests:,}")

    def prepare(self) -> tuple[Workload, object, int, float]:
        """(workload, step cost, KV slots, seconds per arrival tick)."""
        arch = self.deployment.arch
        if self.workload.max_model_len > arch.max_position_embeddings:
            raise Refusal("serving.err.context", n=f"{self.workload.max_model_len:,}", model=arch.name,
                          ctx=f"{arch.max_position_embeddings:,}")
        cost = self.deployment.cost()
        _, _, slots = self.deployment.kv_budget(cost)
        tick = ARRIVAL_TICK_S if self.workload.arrival == "poisson" else 1.0
        return make_workload(self.workload), cost, slots, tick


# --- chunked prefill against its budget ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ChunkSweep:
    setup: StudySetup
    capacity_tokens: int
    budgets: tuple[int, ...]
    chunked: tuple[ServingResult, ...]
    unchunked: ServingResult  # continuous batching, whole prompts, the largest budget (or the longest prompt)
    unchunked_budget: int

    @property
    def cell_msgs(self) -> dict[str, list]:
        """The table's text cells, per column, in row order: a budget as its number, the last row as a message."""
        return {"budget": [f"{b:,}" for b in self.budgets] + [Msg("serving.cell.unchunked")]}

    def to_frame(self):
        import pandas as pd

        rows = []
        for label, budget, r in [(f"{b:,}", b, x) for b, x in zip(self.budgets, self.chunked, strict=True)] + [
                ("unchunked", self.unchunked_budget, self.unchunked)]:
            rows.append({"budget": label, "token_budget": budget, "throughput_tok_s": r.tokens_per_s,
                         "ttft_p50_s": _percentile(r, r.ttft_s, 50), "ttft_p95_s": _percentile(r, r.ttft_s, 95),
                         "itl_p50_ms": 1e3 * _percentile(r, r.itl_s, 50),
                         "itl_p99_ms": 1e3 * _percentile(r, r.itl_s, 99), "forward_passes": r.num_iterations,
                         "preemptions": r.num_preemptions})
        return pd.DataFrame(rows)


def sweep_chunk_budget(setup: StudySetup, budgets: tuple[int, ...] = CHUNK_BUDGETS, progress=None) -> ChunkSweep:
    wl, cost, slots, tick = setup.prepare()
    budgets = tuple(b for b in budgets if b >= setup.max_num_seqs)
    if not budgets:
        raise Refusal("serving.err.budgets_below", batch=f"{setup.max_num_seqs}")
    runs = []
    for i, b in enumerate(budgets):
        if progress:
            progress(i / (len(budgets) + 1), Msg("serving.p.budget", b=f"{b:,}"))
        cfg = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=setup.block_size,
                           watermark=ADMISSION_WATERMARK, max_num_batched_tokens=b, enable_chunked_prefill=True)
        runs.append(simulate_engine(wl, cfg, cost, tick).result)
    whole = max(budgets[-1], wl.max_model_len)
    if progress:
        progress(len(budgets) / (len(budgets) + 1), Msg("serving.p.whole"))
    un = simulate_engine(wl, EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots,
                                          block_size=setup.block_size, watermark=ADMISSION_WATERMARK,
                                          max_num_batched_tokens=whole, enable_chunked_prefill=False), cost,
                         tick).result
    return ChunkSweep(setup, slots, budgets, tuple(runs), un, whole)


# --- recompute against swap -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreemptionSetup:
    study: StudySetup = StudySetup(workload=LengthWorkloadConfig(num_requests=300, prompt_mean=600, output_mean=400,
                                                                 max_model_len=8192, max_tokens=2048, seed=0),
                                   max_num_seqs=128)
    kv_limit_tokens: int = 40_000  # a tight GPU KV budget, so blocks run out
    cpu_tokens: int = 400_000  # host slots for swapped blocks
    link: str = "pcie5"
    chunked: bool = True
    max_num_batched_tokens: int = 8192

    def __post_init__(self) -> None:
        find_link(self.link)
        if not 0 <= self.cpu_tokens <= MAX_CPU_CAPACITY_TOKENS:
            raise Refusal("serving.err.host_slots", max=f"{MAX_CPU_CAPACITY_TOKENS:,}", got=f"{self.cpu_tokens:,}")


@dataclass(frozen=True, eq=False)
class PreemptionComparison:
    setup: PreemptionSetup
    capacity_tokens: int
    kv_bytes_per_token: int
    recompute: EngineRun
    swap: EngineRun

    @property
    def cell_msgs(self) -> dict[str, list[Msg]]:
        """The table's text cells as messages, per column, in row order (to word them in either language)."""
        return {"preemption": [Msg("serving.cell.recompute"), Msg("serving.cell.swap")]}

    def to_frame(self):
        import pandas as pd

        rows = []
        for mode, run in (("recompute", self.recompute), ("swap", self.swap)):
            r = run.result
            rows.append({"preemption": mode, "throughput_tok_s": r.tokens_per_s,
                         "ttft_p95_s": _percentile(r, r.ttft_s, 95), "itl_p99_ms": 1e3 * _percentile(r, r.itl_s, 99),
                         "e2e_p50_s": _percentile(r, r.e2e_s, 50), "e2e_p99_s": _percentile(r, r.e2e_s, 99),
                         "preemptions": r.num_preemptions, "swapped": run.num_swaps,
                         "recomputed_tokens": run.recomputed_tokens, "recompute_tflop": run.recompute_flops / 1e12,
                         "moved_gb": run.swap_bytes / 1e9, "transfer_s": run.swap_seconds,
                         "makespan_s": r.makespan_s})
        return pd.DataFrame(rows)


def compare_preemption(setup: PreemptionSetup, progress=None) -> PreemptionComparison:
    study = setup.study
    dep = replace(study.deployment, kv_limit_tokens=setup.kv_limit_tokens)
    wl, cost, slots, tick = replace(study, deployment=dep).prepare()
    runs = {}
    for i, mode in enumerate(("recompute", "swap")):
        if progress:
            progress(i / 2, Msg(f"serving.sc.{mode}.label"))
        budget = setup.max_num_batched_tokens
        cfg = EngineConfig(max_num_seqs=study.max_num_seqs, capacity_tokens=slots, block_size=study.block_size,
                           watermark=ADMISSION_WATERMARK,
                           max_num_batched_tokens=budget if setup.chunked else max(budget, wl.max_model_len),
                           enable_chunked_prefill=setup.chunked, preemption_mode=mode,
                           cpu_capacity_tokens=setup.cpu_tokens, link=setup.link)
        runs[mode] = simulate_engine(wl, cfg, cost, tick)
    return PreemptionComparison(setup, slots, cost.kv_bytes_per_token, runs["recompute"], runs["swap"])


# --- step through: small scenarios, one pass = one second ----------------------------------------------------

STEP_COST = LinearCost(base_s=1.0, name="serving.p.one_second")  # its words' catalog key (never shown)


@dataclass(frozen=True)
class StepScenario:
    """A small scenario to step through; its label and description are worded by
    sim.words.engine_readouts.scenario_words."""

    prompts: tuple[int, ...]
    outputs: tuple[int, ...]
    arrivals: tuple[int, ...]
    config: EngineConfig
    shared: tuple[int, ...] = ()  # prefix caching: leading tokens each request shares with request 0


STEP_SCENARIOS: dict[str, StepScenario] = {
    "chunked": StepScenario(
        (14, 5, 3), (3, 4, 3), (0, 0, 1),
        EngineConfig(max_num_seqs=4, capacity_tokens=48, block_size=4, watermark=0.0, max_num_batched_tokens=10)),
    "recompute": StepScenario(
        (6, 6, 4), (8, 8, 4), (0, 0, 0),
        EngineConfig(max_num_seqs=3, capacity_tokens=24, block_size=4, watermark=0.0, max_num_batched_tokens=32,
                     enable_chunked_prefill=False)),
    "swap": StepScenario(
        (6, 6, 4), (8, 8, 4), (0, 0, 0),
        EngineConfig(max_num_seqs=3, capacity_tokens=24, block_size=4, watermark=0.0, max_num_batched_tokens=32,
                     enable_chunked_prefill=False, preemption_mode="swap", cpu_capacity_tokens=32)),
    "prefix": StepScenario(
        (10, 12, 9), (4, 3, 2), (0, 1, 2),
        EngineConfig(max_num_seqs=4, capacity_tokens=48, block_size=4, watermark=0.0, max_num_batched_tokens=32,
                     enable_prefix_caching=True), shared=(10, 8, 8)),
    "speculative": StepScenario(
        (5, 3), (8, 6), (0, 0),
        EngineConfig(max_num_seqs=2, capacity_tokens=32, block_size=4, watermark=0.0, max_num_batched_tokens=16,
                     num_speculative_tokens=3, draft_acceptance_rate=0.6, seed=1)),
}


def scenario_hashes(sc: StepScenario) -> list[list[int]] | None:
    if not sc.config.enable_prefix_caching:
        return None
    base = np.arange(1, 1 + max(sc.prompts), dtype=np.int32)
    out = []
    for i, (p, s) in enumerate(zip(sc.prompts, sc.shared, strict=True)):
        ids = np.concatenate([base[:s], 1000 * (i + 1) + np.arange(p - s, dtype=np.int32)])
        out.append(block_hashes(ids, sc.config.block_size))
    return out


def run_scenario(name: str, config: EngineConfig | None = None) -> EngineRun:
    """A scenario (optionally with its config changed) stepped with every step recorded."""
    if name not in STEP_SCENARIOS:
        raise Refusal("serving.err.scenario", name=repr(name), names=", ".join(STEP_SCENARIOS))
    sc = STEP_SCENARIOS[name]
    cfg = config or sc.config
    wl = workload_from_lengths(sc.prompts, sc.outputs, arrival=sc.arrivals,
                               max_model_len=max(p + o for p, o in zip(sc.prompts, sc.outputs, strict=True)))
    return simulate_engine(wl, cfg, STEP_COST, prompt_hashes=scenario_hashes(replace(sc, config=cfg)), record=True,
                           check=True)


# --- every simulator on a user's trace -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TraceRun:
    trace: TraceFile
    deployment: DeploymentConfig
    capacity_tokens: int
    prefix: PrefixCacheResult
    results: dict[str, ServingResult]
    cached: EngineRun  # chunked prefill with prefix caching

    @property
    def cell_msgs(self) -> dict[str, list[Msg]]:
        """The table's text cells as messages, per column, in row order (to word them in either language)."""
        return {"policy": [Msg(f"serving.cell.{name}") for name in self.results] +
                [Msg("serving.cell.chunked_plus_prefix_cache")]}

    def to_frame(self):
        import pandas as pd

        rows = []
        for name, r in list(self.results.items()) + [("chunked + prefix cache", self.cached.result)]:
            rows.append({"policy": name, "throughput_tok_s": r.tokens_per_s,
                         "ttft_p50_s": _percentile(r, r.ttft_s, 50), "ttft_p95_s": _percentile(r, r.ttft_s, 95),
                         "itl_p50_ms": 1e3 * _percentile(r, r.itl_s, 50),
                         "itl_p99_ms": 1e3 * _percentile(r, r.itl_s, 99), "e2e_p99_s": _percentile(r, r.e2e_s, 99),
                         "preemptions": r.num_preemptions})
        return pd.DataFrame(rows)


def run_trace(tf: TraceFile, deployment: DeploymentConfig, max_num_seqs: int = 256, block_size: int = 16,
              max_num_batched_tokens: int = 8192) -> TraceRun:
    cost = deployment.cost()
    _, _, slots = deployment.kv_budget(cost)
    wl = tf.to_workload()
    nb = min(blocks_to_hold(tf, block_size), slots // block_size)
    prefix = simulate_prefix_cache(tf.to_prefix_trace(), CacheConfig(block_size, max(nb, 1) * block_size,
                                                                      max_running=1))
    base = EngineConfig(max_num_seqs=max_num_seqs, capacity_tokens=slots, block_size=block_size,
                        watermark=ADMISSION_WATERMARK, max_num_batched_tokens=max(max_num_batched_tokens, max_num_seqs))
    static = simulate_static(wl, replace(base, watermark=0.01, max_num_batched_tokens=1 << 20,
                                         enable_chunked_prefill=False), cost)
    whole = max(max_num_batched_tokens, wl.max_model_len)
    cont = simulate_engine(wl, replace(base, max_num_batched_tokens=whole, enable_chunked_prefill=False), cost).result
    chunked = simulate_engine(wl, base, cost).result
    cached = simulate_engine(wl, replace(base, enable_prefix_caching=True), cost,
                             prompt_hashes=tf.prompt_hashes(block_size))
    return TraceRun(tf, deployment, slots, prefix, {"static": static, "continuous": cont, "chunked": chunked}, cached)
