"""The Serving page's batching tab in words (moved here from sim/serving/comparison.py's result classes): the
Gantt, occupancy, KV and latency titles, the budget caption and the summary of a ServingComparison, and the
max-batch sweep's title."""

from __future__ import annotations

from sim.cost.gpus import load_gpus
from sim.serving.comparison import BatchSweep, ServingComparison
from sim.serving.result import ServingResult
from sim.words import serving_readouts as ro
from sim.words import text


def gantt_takeaway(cmp: ServingComparison, num_shown: int, lang: str = "en") -> str:
    """The Gantt chart's title: which scheduler finished the workload sooner, by how much, and both
    throughputs; the chart itself shows the first num_shown requests."""
    static, cont = cmp.results["static"], cmp.results["continuous"]
    n = static.num_requests
    f = dict(n=f"{n:,}", shown=f"{min(num_shown, n):,}", c=f"{cont.tokens_per_s:,.0f}",
             s=f"{static.tokens_per_s:,.0f}")
    if cont.makespan_s < static.makespan_s:
        return text(lang, "serving.s.gantt.continuous", x=f"{static.makespan_s / cont.makespan_s:.2f}", **f)
    if cont.makespan_s > static.makespan_s:
        return text(lang, "serving.s.gantt.static", x=f"{cont.makespan_s / static.makespan_s:.2f}", **f)
    return text(lang, "serving.s.gantt.same", t=f"{cont.makespan_s:,.1f}", **f)


def budget_caption(cmp: ServingComparison, lang: str = "en") -> str:
    """The deployment in one sentence (Markdown): memory, the KV budget it leaves, the workload drawn."""
    dep, wl = cmp.setup.deployment, cmp.workload
    return text(lang, "serving.s.budget", model=dep.arch.name, gpu=load_gpus()[dep.gpu].name,
                usable=f"{cmp.usable_bytes / 2**30:,.1f}", w=f"{cmp.weight_bytes / 2**30:,.1f}",
                slots=f"{cmp.capacity_tokens:,}", kib=f"{cmp.kv_bytes_per_token / 1024:,.0f}",
                ms=f"{cmp.decode_s_batch1 * 1e3:,.2f}", n=f"{wl.num_requests:,}",
                prompt=f"{wl.prompt_len.mean():.0f}", output=f"{wl.output_len.mean():.0f}",
                longest=f"{wl.output_len.max():,}")


def occupancy_takeaway(cmp: ServingComparison, lang: str = "en") -> str:
    """The occupancy chart's title: useful requests in an average pass, both schedulers."""
    static, cont = cmp.results["static"], cmp.results["continuous"]
    return ro.occupancy_takeaway(static.mean_batch, cont.mean_batch, static.max_num_seqs, lang)


def kv_takeaway(cmp: ServingComparison, lang: str = "en") -> str:
    """The KV memory chart's title: each scheduler's peak and mean claim on the KV budget."""
    static, cont = cmp.results["static"], cmp.results["continuous"]
    return ro.kv_takeaway(cmp.capacity_tokens, static.peak_kv_claimed, cont.peak_kv_claimed,
                          static.mean_kv_claimed, cont.mean_kv_claimed, lang)


def latency_takeaway(cmp: ServingComparison, lang: str = "en") -> str:
    """The latency chart's title: end-to-end p50 and p99, which scheduler is lower and by how much."""
    static, cont = cmp.results["static"], cmp.results["continuous"]

    def p50_p99(r: ServingResult) -> tuple[float, float]:
        p = r.percentiles(r.e2e_s)
        return p[0], p[-1]

    return ro.latency_takeaway(p50_p99(static), p50_p99(cont), lang)


def summary(cmp: ServingComparison, lang: str = "en") -> str:
    """What the two runs show, worded from their numbers (Markdown); each comparison names the side it
    favours."""
    static, cont = cmp.results["static"], cmp.results["continuous"]
    share = static.useful_row_share
    rows = (text(lang, "serving.s.sum.rows", share=ro.whole_pct(share, lang)) if share < 1 else
            text(lang, "serving.s.sum.rows_all"))
    sb, cb = f"{static.mean_batch:,.0f}", f"{cont.mean_batch:,.0f}"
    batch = text(lang, "serving.s.sum.batch_same" if sb == cb else "serving.s.sum.batch_continuous"
                 if cont.mean_batch > static.mean_batch else "serving.s.sum.batch_static", s=sb, c=cb)
    ts, tc = static.percentiles(static.ttft_s)[0], cont.percentiles(cont.ttft_s)[0]
    fs, fc = f"{ts:,.2f} s", f"{tc:,.2f} s"
    first = (text(lang, "serving.s.sum.first_same", c=fc) if fs == fc else
             text(lang, "serving.s.sum.first_sooner", c=fc, s=fs, x=f"{ts / tc:,.1f}") if tc < ts else
             text(lang, "serving.s.sum.first_later", c=fc, s=fs))
    return text(lang, "serving.s.sum", n=f"{cmp.workload.num_requests:,}", out=f"{static.num_output_tokens:,}",
                st=f"{static.makespan_s:,.1f}", ct=f"{cont.makespan_s:,.1f}", x=f"{cmp.speedup:.2f}",
                rows=rows, batch=batch, first=first)


def sweep_takeaway(sweep: BatchSweep, lang: str = "en") -> str:
    """The sweep chart's title: where each scheduler's throughput stops growing, and which one leads."""
    return ro.sweep_takeaway(sweep.batches, sweep.static_tok_s, sweep.continuous_tok_s, lang)
