"""What the Prefix caching page says about its simulations, built from their results: the metrics of a
run, the layout comparison, the captions that quote the sizes, and each simulation job's cost estimate
and description. Pure functions; every number comes from the config or result passed in."""

from __future__ import annotations

from dataclasses import dataclass

from sim.alloc.prefix_cache import CacheConfig, HitTotals, PrefixCacheResult
from sim.alloc.prefix_sweeps import LayoutRun, num_sweep_runs
from sim.alloc.workload import (
    LAYOUT_LABELS,
    PREFIX_WORKLOAD_LABELS,
    PREFIX_WORKLOADS,
    RAG_HEADER_LEN,
    PrefixWorkloadConfig,
)
from sim.readout import Metric

SIM_S_PER_TOKEN = 1e-6  # measured here, per token a trace stores: building the trace and simulating it once
RESIM_S_PER_TOKEN = 1.5e-7  # simulating an already built trace again


@dataclass(frozen=True)
class JobPlan:
    """A simulation the page gates: its estimated seconds and what it does, in words."""

    estimate_s: float
    what: str


def workloads_job(cfg: PrefixWorkloadConfig, num_tokens: int) -> JobPlan:
    """The chosen workload in both layouts, then every workload in both layouts (a trace of num_tokens each)."""
    return JobPlan(SIM_S_PER_TOKEN * num_tokens * 2 * (1 + len(PREFIX_WORKLOADS)),
                   f"Simulating {cfg.num_requests:,} requests in both layouts, and every workload")


def sweeps_job(cache: CacheConfig, num_tokens: int) -> JobPlan:
    """Both layouts' capacity and block-size sweeps: one trace built per layout, simulated num_sweep_runs times."""
    num_sims = num_sweep_runs(cache)
    return JobPlan(num_tokens * 2 * (SIM_S_PER_TOKEN + RESIM_S_PER_TOKEN * num_sims),
                   f"Sweeping capacity and block size: {2 * num_sims} simulations")


def tree_job(num_tokens: int) -> JobPlan:
    """The radix tree of the trace, and the hashed pool over the same trace."""
    return JobPlan(SIM_S_PER_TOKEN * num_tokens * 3, "Building the radix tree of every request")


def hit_metrics(res: PrefixCacheResult) -> list[Metric]:
    """The chosen run's totals: hit rate, prefill tokens computed and saved, speed-up, blocks, evictions."""
    return [
        Metric("Token hit rate", f"{100 * res.hit_rate:.1f}%",
               help=f"{res.num_hit_tokens:,} of {res.num_prompt_tokens:,} prompt tokens came from the cache."),
        Metric("Prefill tokens computed", f"{res.num_computed_tokens:,}"),
        Metric("Prefill tokens saved", f"{res.num_hit_tokens:,}"),
        Metric("Prefill speed-up", f"{res.prefill_speedup:.2f}×", help="Prompt tokens / prompt tokens computed."),
        Metric("Blocks reused", f"{res.num_hit_blocks:,}",
               help=f"Cache hits in blocks; {res.num_distinct_reused:,} distinct blocks were hit, and up to "
                    f"{res.max_ref_cnt} requests held one block at once."),
        Metric("Evictions", f"{res.num_evictions:,}",
               help="Free cached blocks handed out again (least recently freed first); their hash is dropped."),
    ]


def layout_metric(layout: str, run: LayoutRun) -> Metric:
    r = run.result
    return Metric(f"Hit rate · {LAYOUT_LABELS[layout]}", f"{100 * r.hit_rate:.1f}%",
                  help=f"{r.num_hit_tokens:,} of {r.num_prompt_tokens:,} prompt tokens.")


def layout_sentence(workload: str, both: dict[str, LayoutRun]) -> str:
    """The chosen workload's hit rate with the repeated content first and last (Markdown)."""
    fixed, var = both["fixed_first"].result.hit_rate, both["variable_first"].result.hit_rate
    if var < fixed:
        change = f"drops it to **{100 * var:.1f}%**"
    elif var > fixed:
        change = f"raises it to **{100 * var:.1f}%**"
    else:
        change = f"leaves it at **{100 * var:.1f}%**"
    return (f"**{PREFIX_WORKLOAD_LABELS[workload]}**: with the repeated content first, **{100 * fixed:.1f}%** of "
            f"prompt tokens are served from the cache; moving what changes to the top {change} — every block after "
            "the first difference has a new hash.")


def workloads_caption(cfg: PrefixWorkloadConfig, cache: CacheConfig) -> str:
    """The overview chart's caption: the sizes every workload ran with, and what RAG's header (first in both
    layouts) gives the question-first layout at this block size."""
    h, bs = RAG_HEADER_LEN, cache.block_size
    if h < bs:
        header = (f"RAG's {h}-token instruction header is shared in both layouts but shorter than a block of {bs}, "
                  "so the question-first layout gets nothing from it.")
    else:
        n = h // bs
        header = (f"RAG's {h}-token instruction header is shared in both layouts and fills {n} full "
                  f"block{'s' if n > 1 else ''} of {bs}, so even the question-first layout can reuse {n * bs} "
                  "tokens of it.")
    return (f"Every workload with the sizes above ({cfg.num_requests:,} requests, {cfg.shared_len:,} shared "
            f"tokens, ~{cfg.variable_len:,} new and ~{cfg.output_len:,} output tokens, {cfg.num_groups} groups) "
            f"and the same cache. {header}")


def throughput_metrics(res: PrefixCacheResult, agent: HitTotals, decode_weight: float) -> list[Metric]:
    """What the hit rate buys with a decode step costing decode_weight prefill tokens: this run, the agent loop."""
    w = decode_weight
    return [
        Metric("Throughput gain, this workload", f"{res.throughput_gain(w):.2f}×",
               help=f"(P + w·D) / (P − hits + w·D) with P = {res.num_prompt_tokens:,} prompt tokens, "
                    f"D = {res.num_decode_steps:,} decode steps, w = {w:g}."),
        Metric("Agent loop: hit rate", f"{100 * agent.hit_rate:.1f}%"),
        Metric("Agent loop: prefill speed-up", f"{agent.prefill_speedup:.2f}×"),
        Metric("Agent loop: throughput gain", f"{agent.throughput_gain(w):.2f}×"),
    ]


def sweep_caption(cache: CacheConfig) -> str:
    return (
        f"Left: block size {cache.block_size}, {cache.max_running} running. Too small a cache evicts shared blocks "
        "before they are needed again; capacities that cannot hold the longest request are left out. Right: the "
        f"same {cache.capacity_tokens:,} slots in blocks of each size. Only full blocks are cached, so every shared "
        "prefix loses its partial last block, and a prefix shorter than one block never hits; large blocks lose "
        "more (vLLM uses 16)."
    )


def num_tree_requests(cfg: PrefixWorkloadConfig, asked: int) -> int:
    """Requests the tree draws: as many as asked, at most the trace's."""
    return min(asked, cfg.num_requests)


def tree_title(cfg: PrefixWorkloadConfig, num_drawn: int) -> str:
    return (f"The first {num_drawn} requests of '{PREFIX_WORKLOAD_LABELS[cfg.workload]}' "
            f"({LAYOUT_LABELS[cfg.layout]}) as paths of blocks")
