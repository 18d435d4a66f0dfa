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
        "prefix loses its partial last block, and a prefix shorter than one block never hits (vLLM uses 16)."
    )


def num_tree_requests(cfg: PrefixWorkloadConfig, asked: int) -> int:
    """Requests the tree draws: as many as asked, at most the trace's."""
    return min(asked, cfg.num_requests)


# ---------------------------------------------------------------------------------------------
# Chart titles as takeaways, worded from the result each chart shows


def _blocks(lo: int, hi: int) -> str:
    """Blocks lo..hi inclusive, in words."""
    return f"block {lo}" if lo == hi else f"blocks {lo}–{hi}"


def change_takeaway(changed_pos: int, before: str, after: str, block_size: int, num_hit_blocks: int,
                    num_blocks: int) -> str:
    """The two-prompts chart's title: which blocks of B stay hits and which must be recomputed after byte
    changed_pos changed (before, after: the byte's labels, already escaped for a chart)."""
    head = f"Byte {changed_pos} changed ({before} → {after}, block {changed_pos // block_size})"
    h, n = num_hit_blocks, num_blocks
    if h == 0:
        return f"{head}: no block of B stays a hit, all {n:,} blocks must be recomputed"
    if h >= n:
        return f"{head}: all {n:,} blocks of B stay hits ({n * block_size:,} tokens)"
    stay = "stays a hit" if h == 1 else "stay hits"
    return (f"{head}: {_blocks(0, h - 1)} of B {stay} ({h * block_size:,} tokens), "
            f"{_blocks(h, n - 1)} must be recomputed")


def per_request_takeaway(workload: str, layout: str, res: PrefixCacheResult) -> str:
    """The per-request chart's title: how many requests hit the cache and the share of prompt tokens served."""
    head = f"{PREFIX_WORKLOAD_LABELS[workload]}, {LAYOUT_LABELS[layout]}"
    n, hit = res.num_requests, res.num_requests_with_hit
    if hit == 0:
        return f"{head}: no request hits the cache, all {res.num_prompt_tokens:,} prompt tokens are computed"
    who = f"all {n:,} requests hit" if hit == n else f"{hit:,} of {n:,} requests hit"
    return (f"{head}: {who} the cache, which serves {100 * res.hit_rate:.1f}% of prompt tokens "
            f"({res.num_hit_tokens:,} of {res.num_prompt_tokens:,})")


def _at(frame, x: str, value: int):
    """The sweep row at x == value, or the nearest swept one."""
    i = (frame[x] - value).abs().to_numpy().argmin()
    return frame.iloc[int(i)]


LAYOUT_SHORT = {"fixed_first": "fixed first", "variable_first": "variable first"}


def _lead(frames: dict, x: str, chosen: int) -> tuple[str, float, str, float] | None:
    """(leading layout, its hit rate, the other layout, its hit rate) at the chosen value; None when no sweep ran."""
    got = {layout: float(_at(df, x, chosen)["hit_rate"]) for layout, df in frames.items() if len(df)}
    if not got:
        return None
    order = sorted(got, key=lambda layout: -got[layout])
    first = order[0]
    second = order[1] if len(order) > 1 else order[0]
    return first, got[first], second, got[second]


def _versus(lead: tuple[str, float, str, float], at: str) -> str:
    first, a, second, b = lead
    if first == second:
        return f"{at} {LAYOUT_SHORT[first]} hits {100 * a:.1f}%"
    if f"{100 * a:.1f}" == f"{100 * b:.1f}":
        return f"{at} both layouts hit {100 * a:.1f}%"
    return f"{at} {LAYOUT_SHORT[first]} hits {100 * a:.1f}%, {LAYOUT_SHORT[second]} {100 * b:.1f}%"


def capacity_takeaway(frames: dict, chosen: int) -> str:
    """The capacity sweep's title ({layout: capacity_sweep frame}): both layouts' hit rate at the chosen
    capacity, and what more slots would give the leading layout."""
    lead = _lead(frames, "capacity_tokens", chosen)
    if lead is None:
        return "No swept capacity holds the longest request"
    df = frames[lead[0]]
    row = _at(df, "capacity_tokens", chosen)
    cap, rate = int(row["capacity_tokens"]), f"{100 * row['hit_rate']:.1f}%"
    head = _versus(lead, f"At {cap:,} slots")
    larger = df[df["capacity_tokens"] > cap]
    if len(larger) and f"{100 * larger['hit_rate'].max():.1f}%" != rate:
        top = larger[larger["hit_rate"] == larger["hit_rate"].max()].iloc[0]
        verb = "raise" if top["hit_rate"] > row["hit_rate"] else "lower"
        return (f"{head}; more slots {verb} {LAYOUT_SHORT[lead[0]]} to {100 * top['hit_rate']:.1f}% "
                f"({int(top['capacity_tokens']):,} slots)")
    reach = df[df["hit_rate"].map(lambda r: f"{100 * r:.1f}%") == rate]
    least = int(reach["capacity_tokens"].min()) if len(reach) else cap
    if least < cap:
        return f"{head}; more slots add nothing ({rate} from {least:,} slots on)"
    return f"{head}; more slots add nothing"


def block_size_takeaway(frames: dict, chosen: int) -> str:
    """The block-size sweep's title ({layout: block_size_sweep frame}): both layouts' hit rate at the chosen
    block size, and the leading layout's range over the swept sizes."""
    lead = _lead(frames, "block_size", chosen)
    if lead is None:
        return "No swept block size fits the cache"
    df = frames[lead[0]]
    bs = int(_at(df, "block_size", chosen)["block_size"])
    head = _versus(lead, f"In blocks of {bs}")
    hi = df[df["hit_rate"] == df["hit_rate"].max()].iloc[0]
    lo = df[df["hit_rate"] == df["hit_rate"].min()].iloc[-1]
    layout = LAYOUT_SHORT[lead[0]]
    if f"{100 * hi['hit_rate']:.1f}" == f"{100 * lo['hit_rate']:.1f}":
        return f"{head}; block size makes no difference to {layout}"
    return (f"{head}; {layout} ranges from {100 * hi['hit_rate']:.1f}% ({int(hi['block_size'])}-token blocks) "
            f"to {100 * lo['hit_rate']:.1f}% ({int(lo['block_size'])}-token)")


def tree_takeaway(cfg: PrefixWorkloadConfig, num_drawn: int, segments) -> str:
    """The radix tree's title: the blocks the drawn requests' paths cover against the blocks the tree stores,
    and how many of those are shared by two or more requests."""
    head = f"The first {num_drawn} requests of '{PREFIX_WORKLOAD_LABELS[cfg.workload]}' ({LAYOUT_LABELS[cfg.layout]})"
    if len(segments) == 0:
        return f"{head}: no request fills a block, so the tree is empty"
    length = segments["end_block"] - segments["start_block"]
    users = segments["requests"].map(len)
    stored, on_paths = int(length.sum()), int((length * users).sum())
    shared = int(length[users > 1].sum())
    if shared == 0:
        return f"{head}: no block is shared, so {num_drawn} separate paths store all {stored:,} blocks"
    return (f"{head}: their paths cover {on_paths:,} blocks but the tree stores {stored:,}, because {shared:,} "
            f"block{'s are' if shared != 1 else ' is'} shared by 2 or more requests")


def tree_branching_sentence(segments, num_drawn: int) -> str:
    """Where the drawn requests part at the root: how many different first blocks they start with (Markdown)."""
    roots = segments[segments["parent"].isna()] if len(segments) else segments
    k = len(roots)
    if k == 0:
        return "Here no request fills a first block, so none is in the tree."
    if k == 1:
        n = len(roots.iloc[0]["requests"])
        who = f"all {n}" if n == num_drawn else f"{n} of the {num_drawn}"
        return f"Here {who} requests drawn share their first block: they part further down, or not at all."
    if k == num_drawn:
        return f"Here every one of the {num_drawn} requests drawn branches at the root: no two share a first block."
    return f"Here the {num_drawn} requests drawn start with {k} different first blocks: they branch at the root."
