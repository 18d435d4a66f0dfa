"""What the Prefix caching page says about its simulations, built from their results: the metrics of a run, the layout
comparison, the captions that quote the sizes, and each simulation job's cost estimate and description. Pure
functions; every number comes from the config or result passed in. Each takes `lang` ("en" or "ko") and words its
text from the catalogs (sim/words); numbers are formatted here, the same in both. Moved here from
sim/alloc/prefix_readouts.py."""

from __future__ import annotations

from sim.alloc.byte_tokens import printable, show_byte
from sim.alloc.prefix_cache import CacheConfig, HitTotals, PrefixCacheResult
from sim.alloc.prefix_readouts import JobPlan
from sim.alloc.prefix_sweeps import (
    FATE_KEYS,
    BlockFate,
    LayoutRun,
    TreeView,
    TwoPrompts,
    WorkloadOverview,
    num_sweep_runs,
)
from sim.alloc.workload import (
    PREFIX_WORKLOADS,
    RAG_HEADER_LEN,
    SEGMENT_NAMES,
    PrefixWorkloadConfig,
)
from sim.readout import Metric
from sim.words import say, text

SIM_S_PER_TOKEN = 1e-6  # measured here, per token a trace stores: building the trace and simulating it once
RESIM_S_PER_TOKEN = 1.5e-7  # simulating an already built trace again


def workload_label(workload: str, lang: str = "en") -> str:
    """A prefix workload's name ('Shared system prompt + questions'); PREFIX_WORKLOAD_LABELS is the English."""
    return text(lang, f"prefix.workload.{workload}")


def layout_label(layout: str, lang: str = "en") -> str:
    """'fixed content first' / 'variable content first'; LAYOUT_LABELS is the English."""
    return text(lang, f"prefix.layout.{layout}")


def workloads_job(cfg: PrefixWorkloadConfig, num_tokens: int, lang: str = "en") -> JobPlan:
    """The chosen workload in both layouts, then every workload in both layouts (a trace of num_tokens each)."""
    return JobPlan(SIM_S_PER_TOKEN * num_tokens * 2 * (1 + len(PREFIX_WORKLOADS)),
                   text(lang, "prefix.job.workloads", n=f"{cfg.num_requests:,}"))


def sweeps_job(cache: CacheConfig, num_tokens: int, lang: str = "en") -> JobPlan:
    """Both layouts' capacity and block-size sweeps: one trace built per layout, simulated num_sweep_runs times."""
    num_sims = num_sweep_runs(cache)
    return JobPlan(num_tokens * 2 * (SIM_S_PER_TOKEN + RESIM_S_PER_TOKEN * num_sims),
                   text(lang, "prefix.job.sweeps", n=f"{2 * num_sims}"))


def tree_job(num_tokens: int, lang: str = "en") -> JobPlan:
    """The radix tree of the trace, and the hashed pool over the same trace."""
    return JobPlan(SIM_S_PER_TOKEN * num_tokens * 3, text(lang, "prefix.job.tree"))


def hit_metrics(res: PrefixCacheResult, lang: str = "en") -> list[Metric]:
    """The chosen run's totals: hit rate, prefill tokens computed and saved, speed-up, blocks, evictions."""
    def m(key: str, value: str, **help_fields) -> Metric:
        help_ = text(lang, f"prefix.m.{key}_help", **help_fields) if help_fields or key in HELPED else None
        return Metric(text(lang, f"prefix.m.{key}"), value, help=help_)

    return [
        m("hit_rate", f"{100 * res.hit_rate:.1f}%", hit=f"{res.num_hit_tokens:,}", total=f"{res.num_prompt_tokens:,}"),
        m("computed", f"{res.num_computed_tokens:,}"),
        m("saved", f"{res.num_hit_tokens:,}"),
        m("speedup", f"{res.prefill_speedup:.2f}×"),
        m("reused", f"{res.num_hit_blocks:,}", distinct=f"{res.num_distinct_reused:,}", ref=f"{res.max_ref_cnt}"),
        m("evictions", f"{res.num_evictions:,}"),
    ]


HELPED = {"speedup", "evictions"}  # metrics whose help has no number


def layout_metric(layout: str, run: LayoutRun, lang: str = "en") -> Metric:
    r = run.result
    return Metric(text(lang, "prefix.m.layout", layout=layout_label(layout, lang)), f"{100 * r.hit_rate:.1f}%",
                  help=text(lang, "prefix.m.layout_help", hit=f"{r.num_hit_tokens:,}", total=f"{r.num_prompt_tokens:,}"))


def layout_sentence(workload: str, both: dict[str, LayoutRun], lang: str = "en") -> str:
    """The chosen workload's hit rate with the repeated content first and last (Markdown)."""
    fixed, var = both["fixed_first"].result.hit_rate, both["variable_first"].result.hit_rate
    way = "drops" if var < fixed else "raises" if var > fixed else "leaves"
    change = text(lang, f"prefix.s.layout.{way}", var=f"{100 * var:.1f}")
    return text(lang, "prefix.s.layout.sentence", name=workload_label(workload, lang), fixed=f"{100 * fixed:.1f}",
                change=change)


def workloads_caption(cfg: PrefixWorkloadConfig, cache: CacheConfig, lang: str = "en") -> str:
    """The overview chart's caption: the sizes every workload ran with, and what RAG's header (first in both
    layouts) gives the question-first layout at this block size."""
    h, bs = RAG_HEADER_LEN, cache.block_size
    if h < bs:
        header = text(lang, "prefix.s.rag.short", h=f"{h}", bs=f"{bs}")
    else:
        n = h // bs
        header = text(lang, f"prefix.s.rag.fills.{'other' if n > 1 else 'one'}", h=f"{h}", n=f"{n}", bs=f"{bs}",
                      tokens=f"{n * bs}")
    return text(lang, "prefix.s.workloads_caption", n=f"{cfg.num_requests:,}", shared=f"{cfg.shared_len:,}",
                new=f"{cfg.variable_len:,}", out=f"{cfg.output_len:,}", groups=f"{cfg.num_groups}", header=header)


def throughput_metrics(res: PrefixCacheResult, agent: HitTotals, decode_weight: float,
                       lang: str = "en") -> list[Metric]:
    """What the hit rate buys with a decode step costing decode_weight prefill tokens: this run, the agent loop."""
    w = decode_weight
    return [
        Metric(text(lang, "prefix.m.gain"), f"{res.throughput_gain(w):.2f}×",
               help=text(lang, "prefix.m.gain_help", p=f"{res.num_prompt_tokens:,}", d=f"{res.num_decode_steps:,}",
                         w=f"{w:g}")),
        Metric(text(lang, "prefix.m.agent_hit"), f"{100 * agent.hit_rate:.1f}%"),
        Metric(text(lang, "prefix.m.agent_speedup"), f"{agent.prefill_speedup:.2f}×"),
        Metric(text(lang, "prefix.m.agent_gain"), f"{agent.throughput_gain(w):.2f}×"),
    ]


def sweep_caption(cache: CacheConfig, lang: str = "en") -> str:
    return text(lang, "prefix.s.sweep_caption", bs=f"{cache.block_size}", running=f"{cache.max_running}",
                cap=f"{cache.capacity_tokens:,}")


def num_tree_requests(cfg: PrefixWorkloadConfig, asked: int) -> int:
    """Requests the tree draws: as many as asked, at most the trace's."""
    return min(asked, cfg.num_requests)


# ---------------------------------------------------------------------------------------------
# Chart titles as takeaways, worded from the result each chart shows


def _blocks(lo: int, hi: int, lang: str = "en") -> str:
    """Blocks lo..hi inclusive, in words."""
    return text(lang, "prefix.s.block", b=f"{lo}") if lo == hi else text(lang, "prefix.s.blocks", lo=f"{lo}", hi=f"{hi}")


def change_takeaway(changed_pos: int, before: str, after: str, block_size: int, num_hit_blocks: int,
                    num_blocks: int, lang: str = "en") -> str:
    """The two-prompts chart's title: which blocks of B stay hits and which must be recomputed after byte
    changed_pos changed (before, after: the byte's labels, already escaped for a chart)."""
    head = text(lang, "prefix.s.change.head", pos=f"{changed_pos}", before=before, after=after,
                block=f"{changed_pos // block_size}")
    h, n = num_hit_blocks, num_blocks
    if h == 0:
        return text(lang, "prefix.s.change.none", head=head, n=f"{n:,}")
    if h >= n:
        return text(lang, "prefix.s.change.all", head=head, n=f"{n:,}", tokens=f"{n * block_size:,}")
    return text(lang, f"prefix.s.change.some.{'one' if h == 1 else 'other'}", head=head,
                hit=_blocks(0, h - 1, lang), tokens=f"{h * block_size:,}", rest=_blocks(h, n - 1, lang))


def per_request_takeaway(workload: str, layout: str, res: PrefixCacheResult, lang: str = "en") -> str:
    """The per-request chart's title: how many requests hit the cache and the share of prompt tokens served."""
    head = text(lang, "prefix.s.per_request.head", name=workload_label(workload, lang),
                layout=layout_label(layout, lang))
    n, hit = res.num_requests, res.num_requests_with_hit
    if hit == 0:
        return text(lang, "prefix.s.per_request.none", head=head, total=f"{res.num_prompt_tokens:,}")
    who = (text(lang, "prefix.s.per_request.all", n=f"{n:,}") if hit == n
           else text(lang, "prefix.s.per_request.some", hit=f"{hit:,}", n=f"{n:,}"))
    return text(lang, "prefix.s.per_request.hit", head=head, who=who, rate=f"{100 * res.hit_rate:.1f}",
                hits=f"{res.num_hit_tokens:,}", total=f"{res.num_prompt_tokens:,}")


def _at(frame, x: str, value: int):
    """The sweep row at x == value, or the nearest swept one."""
    i = (frame[x] - value).abs().to_numpy().argmin()
    return frame.iloc[int(i)]


LAYOUT_SHORT = {k: text("en", f"prefix.layout_short.{k}") for k in ("fixed_first", "variable_first")}


def _short(layout: str, lang: str) -> str:
    return text(lang, f"prefix.layout_short.{layout}")


def _lead(frames: dict, x: str, chosen: int) -> tuple[str, float, str, float] | None:
    """(leading layout, its hit rate, the other layout, its hit rate) at the chosen value; None when no sweep ran."""
    got = {layout: float(_at(df, x, chosen)["hit_rate"]) for layout, df in frames.items() if len(df)}
    if not got:
        return None
    order = sorted(got, key=lambda layout: -got[layout])
    first = order[0]
    second = order[1] if len(order) > 1 else order[0]
    return first, got[first], second, got[second]


def _versus(lead: tuple[str, float, str, float], at: str, lang: str = "en") -> str:
    first, a, second, b = lead
    if first == second:
        return text(lang, "prefix.s.vs.one", at=at, first=_short(first, lang), a=f"{100 * a:.1f}")
    if f"{100 * a:.1f}" == f"{100 * b:.1f}":
        return text(lang, "prefix.s.vs.both", at=at, a=f"{100 * a:.1f}")
    return text(lang, "prefix.s.vs.two", at=at, first=_short(first, lang), a=f"{100 * a:.1f}",
                second=_short(second, lang), b=f"{100 * b:.1f}")


def capacity_takeaway(frames: dict, chosen: int, lang: str = "en") -> str:
    """The capacity sweep's title ({layout: capacity_sweep frame}): both layouts' hit rate at the chosen
    capacity, and what more slots would give the leading layout."""
    lead = _lead(frames, "capacity_tokens", chosen)
    if lead is None:
        return text(lang, "prefix.s.cap.none")
    df = frames[lead[0]]
    row = _at(df, "capacity_tokens", chosen)
    cap, rate = int(row["capacity_tokens"]), f"{100 * row['hit_rate']:.1f}%"
    head = _versus(lead, text(lang, "prefix.s.cap.at", cap=f"{cap:,}"), lang)
    larger = df[df["capacity_tokens"] > cap]
    if len(larger) and f"{100 * larger['hit_rate'].max():.1f}%" != rate:
        top = larger[larger["hit_rate"] == larger["hit_rate"].max()].iloc[0]
        verb = "raise" if top["hit_rate"] > row["hit_rate"] else "lower"
        return text(lang, f"prefix.s.cap.{verb}", head=head, layout=_short(lead[0], lang),
                    rate=f"{100 * top['hit_rate']:.1f}", cap=f"{int(top['capacity_tokens']):,}")
    reach = df[df["hit_rate"].map(lambda r: f"{100 * r:.1f}%") == rate]
    least = int(reach["capacity_tokens"].min()) if len(reach) else cap
    if least < cap:
        return text(lang, "prefix.s.cap.nothing_from", head=head, rate=rate, least=f"{least:,}")
    return text(lang, "prefix.s.cap.nothing", head=head)


def block_size_takeaway(frames: dict, chosen: int, lang: str = "en") -> str:
    """The block-size sweep's title ({layout: block_size_sweep frame}): both layouts' hit rate at the chosen
    block size, and the leading layout's range over the swept sizes."""
    lead = _lead(frames, "block_size", chosen)
    if lead is None:
        return text(lang, "prefix.s.bs.none")
    df = frames[lead[0]]
    bs = int(_at(df, "block_size", chosen)["block_size"])
    head = _versus(lead, text(lang, "prefix.s.bs.at", bs=f"{bs}"), lang)
    hi = df[df["hit_rate"] == df["hit_rate"].max()].iloc[0]
    lo = df[df["hit_rate"] == df["hit_rate"].min()].iloc[-1]
    layout = _short(lead[0], lang)
    if f"{100 * hi['hit_rate']:.1f}" == f"{100 * lo['hit_rate']:.1f}":
        return text(lang, "prefix.s.bs.same", head=head, layout=layout)
    return text(lang, "prefix.s.bs.range", head=head, layout=layout, hi=f"{100 * hi['hit_rate']:.1f}",
                hi_bs=f"{int(hi['block_size'])}", lo=f"{100 * lo['hit_rate']:.1f}", lo_bs=f"{int(lo['block_size'])}")


def tree_takeaway(cfg: PrefixWorkloadConfig, num_drawn: int, segments, lang: str = "en") -> str:
    """The radix tree's title: the blocks the drawn requests' paths cover against the blocks the tree stores,
    and how many of those are shared by two or more requests."""
    head = text(lang, "prefix.s.tree.head", n=f"{num_drawn}", name=workload_label(cfg.workload, lang),
                layout=layout_label(cfg.layout, lang))
    if len(segments) == 0:
        return text(lang, "prefix.s.tree.empty", head=head)
    length = segments["end_block"] - segments["start_block"]
    users = segments["requests"].map(len)
    stored, on_paths = int(length.sum()), int((length * users).sum())
    shared = int(length[users > 1].sum())
    if shared == 0:
        return text(lang, "prefix.s.tree.none", head=head, n=f"{num_drawn}", stored=f"{stored:,}")
    return text(lang, f"prefix.s.tree.shared.{'other' if shared != 1 else 'one'}", head=head,
                paths=f"{on_paths:,}", stored=f"{stored:,}", shared=f"{shared:,}")


def tree_branching_sentence(segments, num_drawn: int, lang: str = "en") -> str:
    """Where the drawn requests part at the root: how many different first blocks they start with (Markdown)."""
    roots = segments[segments["parent"].isna()] if len(segments) else segments
    k = len(roots)
    if k == 0:
        return text(lang, "prefix.s.roots.none")
    if k == 1:
        n = len(roots.iloc[0]["requests"])
        who = (text(lang, "prefix.s.roots.all", n=f"{n}") if n == num_drawn
               else text(lang, "prefix.s.roots.some", n=f"{n}", drawn=f"{num_drawn}"))
        return text(lang, "prefix.s.roots.one", who=who)
    if k == num_drawn:
        return text(lang, "prefix.s.roots.every", n=f"{num_drawn}")
    return text(lang, "prefix.s.roots.k", n=f"{num_drawn}", k=f"{k}")


# --- the two prompts, the workloads in both layouts, the tree (moved from sim/alloc/prefix_sweeps.py) -----


def segment_name(name: str, lang: str = "en") -> str:
    """A prompt part's name ('tool descriptions') in `lang`."""
    return text(lang, f"prefix.seg.{name.replace(' ', '_')}") if name in SEGMENT_NAMES else name


def layout_text_in(segments: tuple[tuple[str, int], ...], lang: str = "en") -> str:
    """A prompt's parts in order, '[system prompt 500] [question 64]', with the names in `lang`."""
    return " ".join(f"[{segment_name(name, lang)} {n:,}]" for name, n in segments)


def fate_label(fate: str, lang: str = "en") -> str:
    """A block's fate as the table says it ('computed, cached'); the English is the BlockFate value."""
    return text(lang, f"prefix.fate.{FATE_KEYS[BlockFate(fate)]}")


def demo_summary(demo: TwoPrompts, lang: str = "en") -> str:
    """What B reuses, in one paragraph (Markdown)."""
    bs, k = demo.block_size, demo.changed_pos
    note = ""
    if k // bs >= demo.len_a // bs or demo.num_hit_blocks_b < k // bs:
        note = text(lang, "prefix.s.demo.note", n=f"{(demo.len_b - 1) // bs}")
    return text(lang, "prefix.s.demo.summary", blocks=f"{demo.num_hit_blocks_b}", hit=f"{demo.num_hit_tokens_b:,}",
                computed=f"{demo.num_computed_b:,}", len=f"{demo.len_b:,}", bs=f"{bs}", note=note)


def demo_metrics(demo: TwoPrompts, lang: str = "en") -> list[Metric]:
    return [Metric(text(lang, "prefix.m.demo_reused"),
                   text(lang, "prefix.m.demo_of", n=f"{demo.num_hit_blocks_b}", total=f"{demo.num_blocks_b}")),
            Metric(text(lang, "prefix.m.demo_read"), f"{demo.num_hit_tokens_b:,}"),
            Metric(text(lang, "prefix.m.demo_computed"), f"{demo.num_computed_b:,}")]


def demo_chart_title(demo: TwoPrompts, show=show_byte, lang: str = "en") -> str:
    """The changed byte, before and after, its block, and which blocks of B stay hits and which are
    recomputed. show: a byte as a label (the page passes one that escapes it for plotly)."""
    k = demo.changed_pos
    return change_takeaway(k, show(demo.ids_a[k]), show(demo.ids_b[k]), demo.block_size, demo.num_hit_blocks_b,
                           demo.num_blocks_b, lang)


def demo_block_table(demo: TwoPrompts, lang: str = "en"):
    """Every block of both prompts with its text, hash and parent's hash (the page's table); in Korean the
    headers, the fates and the root are worded in Korean too."""
    table = (demo.frame.assign(text=[printable(x) for x in demo.frame["ids"]])
             [["request", "block", "tokens", "text", "hash", "parent hash", "fate"]])
    if lang == "en":
        return table
    table = table.assign(fate=[fate_label(f, lang) for f in table["fate"]],
                         **{"parent hash": [text(lang, "prefix.table.root") if h == "root" else h
                                            for h in table["parent hash"]]})
    return table.rename(columns={c: text(lang, f"prefix.table.{c.replace(' ', '_')}") for c in table.columns})


def demo_finding(demo: TwoPrompts, lang: str = "en") -> str:
    """The seeds table's words for this view."""
    return text(lang, "prefix.s.demo.finding", pos=f"{demo.changed_pos}", len=f"{demo.len_a}",
                hit=f"{demo.num_hit_blocks_b}", total=f"{demo.num_blocks_b}")


def layout_takeaway(overview: WorkloadOverview, workload: str, lang: str = "en") -> str:
    """The overview chart's title: the chosen workload's token hit rate in both layouts, worded by which
    layout serves more prompt tokens from the cache."""
    fixed, var = (100 * overview.get(workload, layout).hit_rate for layout in ("fixed_first", "variable_first"))
    name = text(lang, f"prefix.workload.{workload}")
    if f"{fixed:.1f}" == f"{var:.1f}":
        return text(lang, "prefix.s.overview.same", name=name, fixed=f"{fixed:.1f}")
    if fixed > var:
        return text(lang, "prefix.s.overview.fixed", name=name, fixed=f"{fixed:.1f}", var=f"{var:.1f}")
    return text(lang, "prefix.s.overview.variable", name=name, fixed=f"{fixed:.1f}", var=f"{var:.1f}")


def last_request_caption(run: LayoutRun, lang: str = "en") -> str:
    """Under each layout's metric: the last request's label and its prompt's parts in order, worded in `lang`."""
    return text(lang, "prefix.s.last_request", label=say(lang, run.last_label),
                layout=layout_text_in(run.last_segments, lang))


def tree_agreement(view: TreeView, capacity_tokens: int, cache_hit_tokens: int, lang: str = "en") -> str | None:
    """The caption comparing the tree with the hashed pool (None when the pool was too big to run)."""
    if view.hashed_total is None:
        return None
    same = text(lang, "prefix.s.agree.equal" if view.radix_total == view.hashed_total else "prefix.s.agree.differ")
    return text(lang, "prefix.s.agree", n=f"{view.num_requests:,}", radix=f"{view.radix_total:,}",
                hashed=f"{view.hashed_total:,}", same=same, cap=f"{capacity_tokens:,}",
                hits=f"{cache_hit_tokens:,}")
