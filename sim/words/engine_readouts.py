"""Chart titles and sentences for the Serving page's engine studies (chunked prefill, preemption, a user's trace),
worded from the numbers they state: each names the side that wins and flips when the comparison flips. Numbers
in, one sentence out; checked both ways in tests/test_takeaways_serving_engine.py. Each takes `lang` ("en" or
"ko") and words its clauses from the catalogs; numbers are formatted here, the same in both."""

from __future__ import annotations

import math

from sim.readout import times
from sim.words import text
from sim.words.shrink_table import link_name


def _ms(x: float) -> str:
    return f"{x:,.1f} ms"


def _s(x: float) -> str:
    return f"{x:,.2f} s"


def _lower_higher(new: float, old: float, unit, lang: str = "en") -> str:
    """'cut from A to B' / 'raised from A to B' / 'unchanged at A'."""
    a, b = unit(old), unit(new)
    if a == b:
        return text(lang, "serving.s.e.unchanged", b=b)
    return text(lang, "serving.s.e.cut" if new < old else "serving.s.e.raised", a=a, b=b)


def chunk_takeaway(budget: int, itl_p99_chunked: float, itl_p99_whole: float, ttft_p50_chunked: float,
                   ttft_p50_whole: float, lang: str = "en") -> str:
    """The budget chart's title: what the smallest budget does to the p99 gap between tokens and the median TTFT,
    against whole-prompt prefills."""
    if math.isnan(itl_p99_chunked) or math.isnan(itl_p99_whole):
        return text(lang, "serving.s.e.chunk_none", budget=f"{budget:,}")
    return text(lang, "serving.s.e.chunk", budget=f"{budget:,}",
                itl=_lower_higher(itl_p99_chunked, itl_p99_whole, _ms, lang),
                ttft=_lower_higher(ttft_p50_chunked, ttft_p50_whole, _s, lang))


def chunk_summary(best_budget: int, best_tok_s: float, whole_tok_s: float, num_requests: int, prompt_mean: int,
                  lang: str = "en") -> str:
    """Which budget served the most tokens per second, against whole-prompt prefills (Markdown)."""
    head = text(lang, "serving.s.e.chunk_head", n=f"{num_requests:,}", prompt=f"{prompt_mean:,}",
                budget=f"{best_budget:,}", tok=f"{best_tok_s:,.0f}")
    if f"{best_tok_s:,.0f}" == f"{whole_tok_s:,.0f}":
        return head + text(lang, "serving.s.e.chunk_same")
    if best_tok_s > whole_tok_s:
        return head + text(lang, "serving.s.e.chunk_more", x=f"{best_tok_s / whole_tok_s:.2f}",
                           whole=f"{whole_tok_s:,.0f}")
    return head + text(lang, "serving.s.e.chunk_less", whole=f"{whole_tok_s:,.0f}")


def preemption_takeaway(e2e_p99_recompute: float, e2e_p99_swap: float, recomputed_tokens: int,
                        recompute_flops: float, swap_bytes: int, swap_s: float, link_name: str, num_swaps: int,
                        num_preemptions: int, lang: str = "en") -> str:
    """The preemption chart's title: which mode finished its slowest 1% sooner, and what each paid."""
    if num_preemptions == 0:
        return text(lang, "serving.s.e.pre_none")
    paid = text(lang, "serving.s.e.pre_paid", tokens=f"{recomputed_tokens:,}", tflop=f"{recompute_flops / 1e12:,.1f}",
                gb=f"{swap_bytes / 1e9:,.2f}", link=link_name, s=f"{swap_s:,.2f}")
    a, b = _s(e2e_p99_recompute), _s(e2e_p99_swap)
    if a == b:
        return text(lang, "serving.s.e.pre_same", a=a, paid=paid)
    if e2e_p99_swap < e2e_p99_recompute:
        return text(lang, "serving.s.e.pre_swap", a=a, b=b, paid=paid)
    return text(lang, "serving.s.e.pre_recompute", a=a, b=b, paid=paid)


def trace_summary(num_requests: int, prompt_tokens: int, output_tokens: int, hit_rate: float, frame, policies,
                  lang: str = "en") -> str:
    """What every simulator made of the user's trace (Markdown); `policies`: each row's scheduler as a message."""
    from sim.words.serving import cell

    best_i, fast_i = int(frame["throughput_tok_s"].to_numpy().argmax()), int(frame["ttft_p50_s"].to_numpy().argmin())
    best, fastest_ttft = frame.iloc[best_i], frame.iloc[fast_i]
    return text(lang, "serving.s.e.trace", n=f"{num_requests:,}", prompt=f"{prompt_tokens:,}",
                output=f"{output_tokens:,}", hit=f"{hit_rate:.1%}", best=cell(lang, policies[best_i]),
                tok=f"{best['throughput_tok_s']:,.0f}", fast=cell(lang, policies[fast_i]),
                ttft=f"{fastest_ttft['ttft_p50_s']:,.3f}")


def step_takeaway(step: int, used_blocks: int, num_blocks: int, num_running: int, num_waiting: int,
                  num_swapped: int, num_finished: int, lang: str = "en") -> str:
    """The block grid's title: the pool and the queues after one step."""
    held = (text(lang, "serving.s.e.held_one" if num_running == 1 else "serving.s.e.held", used=f"{used_blocks:,}",
                 n=f"{num_blocks:,}", running=f"{num_running:,}") if num_running else
            text(lang, "serving.s.e.all_free", n=f"{num_blocks:,}"))
    queues = [text(lang, "serving.s.e.waiting", n=f"{num_waiting:,}")] if num_waiting else []
    if num_swapped:
        queues.append(text(lang, "serving.s.e.swapped", n=f"{num_swapped:,}"))
    if num_finished:
        queues.append(text(lang, "serving.s.e.finished", n=f"{num_finished:,}"))
    head = text(lang, "serving.s.e.after_step", step=f"{step}", held=held)
    return head + (text(lang, "serving.s.e.queues", queues=", ".join(queues)) if queues else "")


def trace_hits_takeaway(hit_tokens: int, prompt_tokens: int, num_with_hit: int, num_requests: int,
                        lang: str = "en") -> str:
    """The trace's prefix-hit chart title."""
    if hit_tokens == 0:
        return text(lang, "serving.s.e.hits_none", n=f"{prompt_tokens:,}")
    return text(lang, "serving.s.e.hits", share=f"{hit_tokens / prompt_tokens:.1%}", m=f"{num_with_hit:,}",
                n=f"{num_requests:,}")


def _pct(x: float) -> str:
    return f"{x:.0f}%"


def offload_takeaway(ttft_p50_s: list[float], gpu_hit_pct: list[float], below_hit_pct: list[float],
                     lang: str = "en") -> str:
    """The offload chart's title: prompt tokens served from some cache, GPU alone vs with every lower tier, and what
    that did to the median time to first token. Lists in the study's order: GPU only, + host, + host + disk."""
    alone, full = gpu_hit_pct[0] + below_hit_pct[0], gpu_hit_pct[2] + below_hit_pct[2]
    hits = (text(lang, "serving.s.e.off_same", b=_pct(full)) if _pct(alone) == _pct(full) else
            text(lang, "serving.s.e.off_up" if full > alone else "serving.s.e.off_down", a=_pct(alone), b=_pct(full)))
    return text(lang, "serving.s.e.offload", hits=hits, ttft=_lower_higher(ttft_p50_s[2], ttft_p50_s[0], _s, lang))


def tier_verdict(tier: str, link_name: str, hit_tokens: int, load_s: float, recompute_s: float,
                 breakeven: int | None, load_us_block: float, recompute_us_block0: float, block_size: int,
                 model: str, lang: str = "en") -> str:
    """Whether loading from one tier beat prefilling again, in this run and per block by position (Markdown).
    `tier`: 'host' or 'disk'."""
    name = text(lang, f"serving.tier.{tier}")
    f = dict(tier=name, tokens=f"{hit_tokens:,}", link=link_name, load=f"{load_s:,.3f}", rec=f"{recompute_s:,.3f}")
    if hit_tokens == 0:
        run = text(lang, "serving.s.e.tier_none", tier=name)
    elif load_s < recompute_s:
        run = text(lang, "serving.s.e.tier_won", more=times(recompute_s / load_s), **f)
    else:
        run = text(lang, "serving.s.e.tier_lost", **f)
    g = dict(bs=f"{block_size}", us=f"{load_us_block:,.1f}", link=link_name, us0=f"{recompute_us_block0:,.1f}",
             model=model)
    if breakeven == 0:
        per = text(lang, "serving.s.e.per_always", **g)
    elif breakeven is None:
        per = text(lang, "serving.s.e.per_never", **g)
    else:
        per = text(lang, "serving.s.e.per_from", at=f"{breakeven:,}", **g)
    return f"{run} {per}"


def disagg_takeaway(num_prefill: int, num_decode: int, itl_p99_coloc: float, itl_p99_dis: float,
                    ttft_p50_coloc: float, ttft_p50_dis: float, lang: str = "en") -> str:
    """The disaggregation chart's title: both latencies, disaggregated against colocated on the same GPUs."""
    return text(lang, "serving.s.e.disagg", p=f"{num_prefill}", d=f"{num_decode}", n=f"{num_prefill + num_decode}",
                itl=_lower_higher(itl_p99_dis, itl_p99_coloc, _ms, lang),
                ttft=_lower_higher(ttft_p50_dis, ttft_p50_coloc, _s, lang))


SAME_THROUGHPUT = 0.02  # throughputs closer than this read as the same (arrivals, not GPUs, set them then)


def disagg_verdict(tok_s_coloc: float, tok_s_dis: float, itl_p99_coloc: float, itl_p99_dis: float,
                   slo_pct_coloc: float, slo_pct_dis: float, goodput_coloc: float, goodput_dis: float,
                   ttft_slo_s: float, tpot_slo_ms: float, lang: str = "en") -> str:
    """What this run showed (Markdown): throughput, the gap between tokens, and whether the SLOs bind."""
    ratio = tok_s_dis / tok_s_coloc
    same_tput = abs(ratio - 1) < SAME_THROUGHPUT
    tput = (text(lang, "serving.s.e.dv_tput_same", within=f"{SAME_THROUGHPUT:.0%}", dis=f"{tok_s_dis:,.0f}",
                 coloc=f"{tok_s_coloc:,.0f}") if same_tput else
            text(lang, "serving.s.e.dv_tput", r=f"{ratio:.2f}", dis=f"{tok_s_dis:,.0f}", coloc=f"{tok_s_coloc:,.0f}"))
    a, b = _ms(itl_p99_coloc), _ms(itl_p99_dis)
    itl = text(lang, "serving.s.e.dv_itl_same") if a == b else text(lang, "serving.s.e.dv_itl", a=a, b=b)
    slo = text(lang, "serving.s.e.dv_slo", ttft=f"{ttft_slo_s:g}", tpot=f"{tpot_slo_ms:g}", dis=f"{slo_pct_dis:.0f}",
               coloc=f"{slo_pct_coloc:.0f}")
    head = text(lang, "serving.s.e.dv_head", tput=tput, itl=itl, slo=slo)
    lower_itl, more_tput = itl_p99_dis < itl_p99_coloc and a != b, tok_s_dis > tok_s_coloc and not same_tput
    more_good = f"{goodput_dis:.2f}" != f"{goodput_coloc:.2f}" and goodput_dis > goodput_coloc
    if more_tput:
        reading = text(lang, "serving.s.e.dv_more_tput")
    elif not same_tput and not lower_itl:
        reading = text(lang, "serving.s.e.dv_lost")
    elif lower_itl and more_good and goodput_coloc == 0:  # no ratio to a colocated goodput of none
        reading = text(lang, "serving.s.e.dv_goodput_only", dis=f"{goodput_dis:.2f}")
    elif lower_itl and more_good:
        reading = text(lang, "serving.s.e.dv_goodput", x=times(goodput_dis / goodput_coloc), dis=f"{goodput_dis:.2f}",
                       coloc=f"{goodput_coloc:.2f}")
    elif lower_itl:
        reading = text(lang, "serving.s.e.dv_steadier")
    else:
        reading = text(lang, "serving.s.e.dv_no_gap")
    return f"{head} {reading}"


def routing_takeaway(num_replicas: int, hit_pct_aware: float, hit_pct_rr: float, tok_s_aware: float,
                     tok_s_rr: float, ttft_p50_aware: float, ttft_p50_rr: float, lang: str = "en") -> str:
    """The routing chart's title: prefix hits, throughput and median TTFT, prefix-aware against round-robin."""
    a, b = _pct(hit_pct_aware), _pct(hit_pct_rr)
    hits = text(lang, "serving.s.e.rt_hits", a=a, b=b) if a != b else text(lang, "serving.s.e.rt_hits_same", a=a)
    ratio = tok_s_aware / tok_s_rr
    tput = (text(lang, "serving.s.e.rt_tput", x=times(ratio)) if f"{ratio:.2f}" != "1.00" else
            text(lang, "serving.s.e.rt_tput_same"))
    return text(lang, "serving.s.e.routing", n=f"{num_replicas}", hits=hits, tput=tput,
                ttft=_lower_higher(ttft_p50_aware, ttft_p50_rr, _s, lang))


# --- the studies' sentences (moved here from their result classes in sim/serving) ----------------------------------

def chunk_sweep_takeaway(sweep, lang: str = "en") -> str:
    """sim.serving.studies.ChunkSweep's chart title: the smallest budget against prefill unchunked."""
    f = sweep.to_frame()
    small, un = f.iloc[0], f.iloc[-1]
    return chunk_takeaway(int(small["token_budget"]), small["itl_p99_ms"], un["itl_p99_ms"],
                          small["ttft_p50_s"], un["ttft_p50_s"], lang)


def chunk_sweep_summary(sweep, lang: str = "en") -> str:
    f = sweep.to_frame()
    best = f.iloc[:-1]["throughput_tok_s"].idxmax()
    return chunk_summary(int(f.loc[best, "token_budget"]), f.loc[best, "throughput_tok_s"],
                         f.iloc[-1]["throughput_tok_s"], sweep.setup.workload.num_requests,
                         sweep.setup.workload.prompt_mean, lang)


def preemption_comparison_takeaway(cmp, lang: str = "en") -> str:
    """sim.serving.studies.PreemptionComparison's chart title."""
    from sim.serving.links import link as find_link
    from sim.serving.studies import _percentile

    a, b = cmp.recompute, cmp.swap
    return preemption_takeaway(_percentile(a.result, a.result.e2e_s, 99), _percentile(b.result, b.result.e2e_s, 99),
                               a.recomputed_tokens, a.recompute_flops, b.swap_bytes, b.swap_seconds,
                               link_name(find_link(cmp.setup.link), lang), b.num_swaps, a.result.num_preemptions,
                               lang)


def scenario_words(name: str, lang: str = "en") -> tuple[str, str]:
    """The step-through scenario `name` as the page names and describes it: (label, about)."""
    return text(lang, f"serving.sc.{name}.label"), text(lang, f"serving.sc.{name}.about")


def trace_run_hits_takeaway(run, lang: str = "en") -> str:
    """sim.serving.studies.TraceRun's prefix-hit chart title."""
    p = run.prefix
    return trace_hits_takeaway(p.num_hit_tokens, p.num_prompt_tokens, p.num_requests_with_hit, p.num_requests, lang)


def trace_run_summary(run, lang: str = "en") -> str:
    return trace_summary(run.trace.num_requests, int(run.trace.prompt_len.sum()), int(run.trace.output_len.sum()),
                         run.prefix.hit_rate, run.to_frame(), run.cell_msgs["policy"], lang)


def offload_study_takeaway(study, lang: str = "en") -> str:
    """sim.serving.offload.OffloadStudy's chart title."""
    f = study.to_frame()
    return offload_takeaway(f["ttft_p50_s"].tolist(), f["gpu_hit_pct"].tolist(),
                            (f["host_hit_pct"] + f["disk_hit_pct"]).tolist(), lang)


def offload_verdicts(study, lang: str = "en") -> list[str]:
    """One sentence per lower tier: did its loads beat recomputing in this run, and from which position on
    its link wins at all."""
    from sim.serving.links import link as find_link

    full = study.runs[2]
    o = study.setup.offload
    out = []
    for i, (tier, key) in enumerate((("host", o.cpu_link), ("disk", o.disk_link))):
        out.append(tier_verdict(tier, link_name(find_link(key), lang), full.tier_hit_tokens[i + 1], full.load_seconds[i],
                                full.load_recompute_seconds[i], study.breakeven[i], study.load_us_per_block[i],
                                study.recompute_us_first_block, study.setup.block_size,
                                study.setup.deployment.arch.name, lang))
    return out


def disagg_study_takeaway(study, lang: str = "en") -> str:
    """sim.serving.disagg.DisaggStudy's chart title."""
    c, d = study.to_frame().to_dict("records")
    return disagg_takeaway(study.setup.pools.num_prefill, study.setup.pools.num_decode, c["itl_p99_ms"],
                           d["itl_p99_ms"], c["ttft_p50_s"], d["ttft_p50_s"], lang)


def disagg_study_verdict(study, lang: str = "en") -> str:
    c, d = study.to_frame().to_dict("records")
    s = study.setup
    return disagg_verdict(c["throughput_tok_s"], d["throughput_tok_s"], c["itl_p99_ms"], d["itl_p99_ms"],
                          c["slo_met_pct"], d["slo_met_pct"], c["goodput_req_s"], d["goodput_req_s"],
                          s.ttft_slo_s, s.tpot_slo_ms, lang)


def routing_study_takeaway(study, lang: str = "en") -> str:
    """sim.serving.routing.RoutingStudy's chart title."""
    import numpy as np

    rr, pa = study.results
    return routing_takeaway(study.setup.num_replicas, 100 * pa.hit_rate, 100 * rr.hit_rate,
                            pa.tokens_per_s, rr.tokens_per_s, float(np.median(pa.ttft_s)),
                            float(np.median(rr.ttft_s)), lang)


def study_takeaway(study, lang: str = "en") -> str:
    """Any engine study's chart title (the serving page's engine tabs draw them alike)."""
    name = type(study).__name__
    return {"ChunkSweep": chunk_sweep_takeaway, "PreemptionComparison": preemption_comparison_takeaway,
            "OffloadStudy": offload_study_takeaway, "DisaggStudy": disagg_study_takeaway,
            "RoutingStudy": routing_study_takeaway}[name](study, lang)
