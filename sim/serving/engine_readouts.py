"""Chart titles and sentences for the Serving page's engine studies (chunked prefill, preemption, a user's trace),
worded from the numbers they state: each names the side that wins and flips when the comparison flips. Numbers
in, one sentence out; checked both ways in tests/test_takeaways_serving_engine.py."""

from __future__ import annotations

import math

from sim.readout import times


def _ms(x: float) -> str:
    return f"{x:,.1f} ms"


def _s(x: float) -> str:
    return f"{x:,.2f} s"


def _lower_higher(new: float, old: float, unit) -> str:
    """'cut from A to B' / 'raised from A to B' / 'unchanged at A'."""
    a, b = unit(old), unit(new)
    if a == b:
        return f"unchanged at {b}"
    return f"{'cut' if new < old else 'raised'} from {a} to {b}"


def chunk_takeaway(budget: int, itl_p99_chunked: float, itl_p99_whole: float, ttft_p50_chunked: float,
                   ttft_p50_whole: float) -> str:
    """The budget chart's title: what the smallest budget does to the p99 gap between tokens and the median TTFT,
    against whole-prompt prefills."""
    if math.isnan(itl_p99_chunked) or math.isnan(itl_p99_whole):
        return f"Chunks of {budget:,} tokens: no request produced a second token, so there is no gap to compare"
    return (f"Chunks of {budget:,} tokens: p99 inter-token latency {_lower_higher(itl_p99_chunked, itl_p99_whole, _ms)}"
            f", median time to first token {_lower_higher(ttft_p50_chunked, ttft_p50_whole, _s)} (vs whole prompts)")


def chunk_summary(best_budget: int, best_tok_s: float, whole_tok_s: float, num_requests: int, prompt_mean: int) -> str:
    """Which budget served the most tokens per second, against whole-prompt prefills (Markdown)."""
    head = (f"On these {num_requests:,} requests (prompts of {prompt_mean:,} tokens on average) the budget that "
            f"served the most was **{best_budget:,} tokens**: {best_tok_s:,.0f} output tokens/s")
    if f"{best_tok_s:,.0f}" == f"{whole_tok_s:,.0f}":
        return head + ", the same as prefilling whole prompts."
    if best_tok_s > whole_tok_s:
        return (head + f", {best_tok_s / whole_tok_s:.2f}× the {whole_tok_s:,.0f} of whole-prompt prefills: "
                "mixing prompt chunks into decode passes fills the compute that decode alone leaves idle.")
    return (head + f", below the {whole_tok_s:,.0f} of whole-prompt prefills: here small chunks cost more passes "
            "(each reads every weight) than they win back.")


def preemption_takeaway(e2e_p99_recompute: float, e2e_p99_swap: float, recomputed_tokens: int,
                        recompute_flops: float, swap_bytes: int, swap_s: float, link_name: str, num_swaps: int,
                        num_preemptions: int) -> str:
    """The preemption chart's title: which mode finished its slowest 1% sooner, and what each paid."""
    if num_preemptions == 0:
        return "No request was preempted: the KV budget held every running request, so both modes ran the same"
    paid = (f"recompute computed {recomputed_tokens:,} tokens again ({recompute_flops / 1e12:,.1f} TFLOP), swap moved "
            f"{swap_bytes / 1e9:,.2f} GB over {link_name} ({swap_s:,.2f} s)")
    a, b = _s(e2e_p99_recompute), _s(e2e_p99_swap)
    if a == b:
        return f"Recompute and swap both finish the p99 request in {a}: {paid}"
    if e2e_p99_swap < e2e_p99_recompute:
        return f"Swap finishes the p99 request in {b} vs {a} by recompute: {paid}"
    return f"Recompute finishes the p99 request in {a} vs {b} by swap: {paid}"


def trace_summary(num_requests: int, prompt_tokens: int, output_tokens: int, hit_rate: float, frame) -> str:
    """What every simulator made of the user's trace (Markdown)."""
    best = frame.loc[frame["throughput_tok_s"].idxmax()]
    fastest_ttft = frame.loc[frame["ttft_p50_s"].idxmin()]
    return (f"The trace has **{num_requests:,} requests**: {prompt_tokens:,} prompt and {output_tokens:,} output tokens. "
            f"Replayed one at a time through the prefix cache, **{hit_rate:.1%}** of its prompt tokens were already "
            f"cached. Served, **{best['policy']}** had the highest throughput ({best['throughput_tok_s']:,.0f} "
            f"tokens/s) and **{fastest_ttft['policy']}** the lowest median time to first token "
            f"({fastest_ttft['ttft_p50_s']:,.3f} s).")


def step_takeaway(step: int, used_blocks: int, num_blocks: int, num_running: int, num_waiting: int,
                  num_swapped: int, num_finished: int) -> str:
    """The block grid's title: the pool and the queues after one step."""
    held = (f"{used_blocks:,} of {num_blocks:,} blocks held by {num_running:,} running request"
            f"{'' if num_running == 1 else 's'}" if num_running else f"all {num_blocks:,} blocks free, nothing running")
    queues = [f"{num_waiting:,} waiting"] if num_waiting else []
    if num_swapped:
        queues.append(f"{num_swapped:,} swapped to the host")
    if num_finished:
        queues.append(f"{num_finished:,} finished in this step")
    return f"After step {step}: {held}" + (f"; {', '.join(queues)}" if queues else "")


def trace_hits_takeaway(hit_tokens: int, prompt_tokens: int, num_with_hit: int, num_requests: int) -> str:
    """The trace's prefix-hit chart title."""
    if hit_tokens == 0:
        return (f"None of the trace's {prompt_tokens:,} prompt tokens came from the cache: no request repeats a full "
                "first block of an earlier one")
    return (f"{hit_tokens / prompt_tokens:.1%} of the trace's prompt tokens came from the cache ({num_with_hit:,} of "
            f"{num_requests:,} requests found a cached prefix)")


def _pct(x: float) -> str:
    return f"{x:.0f}%"


def offload_takeaway(ttft_p50_s: list[float], gpu_hit_pct: list[float], below_hit_pct: list[float]) -> str:
    """The offload chart's title: prompt tokens served from some cache, GPU alone vs with every lower tier, and what
    that did to the median time to first token. Lists in the study's order: GPU only, + host, + host + disk."""
    alone, full = gpu_hit_pct[0] + below_hit_pct[0], gpu_hit_pct[2] + below_hit_pct[2]
    hits = ("cached prompt tokens unchanged at " + _pct(full) if _pct(alone) == _pct(full) else
            f"cached prompt tokens {'up' if full > alone else 'down'} from {_pct(alone)} to {_pct(full)}")
    return (f"Host + disk tiers under the GPU: {hits}, median time to first token "
            f"{_lower_higher(ttft_p50_s[2], ttft_p50_s[0], _s)}")


def tier_verdict(tier: str, link_name: str, hit_tokens: int, load_s: float, recompute_s: float,
                 breakeven: int | None, load_us_block: float, recompute_us_block0: float, block_size: int,
                 model: str) -> str:
    """Whether loading from one tier beat prefilling again, in this run and per block by position (Markdown)."""
    if hit_tokens == 0:
        run = f"No prompt block came back from the **{tier}** in this run."
    elif load_s < recompute_s:
        run = (f"The **{tier}** tier won here: loading its {hit_tokens:,} tokens over {link_name} added "
               f"{load_s:,.3f} s to passes, where prefilling them again would have cost {recompute_s:,.3f} s "
               f"({times(recompute_s / load_s)} more).")
    else:
        run = (f"The **{tier}** tier lost here: loading its {hit_tokens:,} tokens over {link_name} added "
               f"{load_s:,.3f} s to passes, more than the {recompute_s:,.3f} s prefilling them again would have cost.")
    per = f"One block of {block_size} tokens loads in {load_us_block:,.1f} µs over {link_name}"
    if breakeven == 0:
        per += (f", less than the {recompute_us_block0:,.1f} µs {model} needs to recompute even a prompt's first "
                "block: loading wins at every position.")
    elif breakeven is None:
        per += (f", slower than recomputing any block of these prompts with {model} (the first costs "
                f"{recompute_us_block0:,.1f} µs): here offload to this tier always loses to recomputing.")
    else:
        per += (f": slower than recomputing a block early in a prompt ({recompute_us_block0:,.1f} µs for the first "
                f"with {model}), faster from token {breakeven:,} on, where attention over the earlier tokens makes "
                "recomputing dearer.")
    return f"{run} {per}"


def disagg_takeaway(num_prefill: int, num_decode: int, itl_p99_coloc: float, itl_p99_dis: float,
                    ttft_p50_coloc: float, ttft_p50_dis: float) -> str:
    """The disaggregation chart's title: both latencies, disaggregated against colocated on the same GPUs."""
    n = num_prefill + num_decode
    return (f"{num_prefill} prefill + {num_decode} decode GPUs vs {n} colocated: p99 inter-token latency "
            f"{_lower_higher(itl_p99_dis, itl_p99_coloc, _ms)}, median time to first token "
            f"{_lower_higher(ttft_p50_dis, ttft_p50_coloc, _s)}")


SAME_THROUGHPUT = 0.02  # throughputs closer than this read as the same (arrivals, not GPUs, set them then)


def disagg_verdict(tok_s_coloc: float, tok_s_dis: float, itl_p99_coloc: float, itl_p99_dis: float,
                   slo_pct_coloc: float, slo_pct_dis: float, goodput_coloc: float, goodput_dis: float,
                   ttft_slo_s: float, tpot_slo_ms: float) -> str:
    """What this run showed (Markdown): throughput, the gap between tokens, and whether the SLOs bind."""
    ratio = tok_s_dis / tok_s_coloc
    same_tput = abs(ratio - 1) < SAME_THROUGHPUT
    tput = (f"throughput within {SAME_THROUGHPUT:.0%} of colocated's ({tok_s_dis:,.0f} vs {tok_s_coloc:,.0f} "
            "tokens/s)" if same_tput else
            f"throughput {ratio:.2f}× colocated's ({tok_s_dis:,.0f} vs {tok_s_coloc:,.0f} tokens/s)")
    a, b = _ms(itl_p99_coloc), _ms(itl_p99_dis)
    itl = "the p99 gap between tokens unchanged" if a == b else f"the p99 gap between tokens {b} vs {a}"
    slo = (f"with the SLOs (first token within {ttft_slo_s:g} s, then at most {tpot_slo_ms:g} ms per token), "
           f"{slo_pct_dis:.0f}% of requests met both vs {slo_pct_coloc:.0f}% colocated")
    head = f"Disaggregated: {tput}, {itl}; {slo}."
    lower_itl, more_tput = itl_p99_dis < itl_p99_coloc and a != b, tok_s_dis > tok_s_coloc and not same_tput
    more_good = f"{goodput_dis:.2f}" != f"{goodput_coloc:.2f}" and goodput_dis > goodput_coloc
    if more_tput:
        reading = "Here splitting the pools also served more tokens per second."
    elif not same_tput and not lower_itl:
        reading = "Here it lost throughput and did not even shorten the gap between tokens."
    elif lower_itl and more_good:
        reading = (f"It bought steadier decoding, not throughput — and because the SLOs bind here, that is "
                   f"{times(goodput_dis / goodput_coloc)} the requests served within them "
                   f"({goodput_dis:.2f} vs {goodput_coloc:.2f} per second).")
    elif lower_itl:
        reading = ("It bought steadier decoding, not throughput, and the SLOs do not turn that into more requests "
                   "served within them here.")
    else:
        reading = "Here it did not even shorten the gap between tokens: the split costs more than it isolates."
    return f"{head} {reading}"


def routing_takeaway(num_replicas: int, hit_pct_aware: float, hit_pct_rr: float, tok_s_aware: float,
                     tok_s_rr: float, ttft_p50_aware: float, ttft_p50_rr: float) -> str:
    """The routing chart's title: prefix hits, throughput and median TTFT, prefix-aware against round-robin."""
    a, b = _pct(hit_pct_aware), _pct(hit_pct_rr)
    hits = f"prompt tokens from the cache {a} vs {b} round-robin" if a != b else f"the same {a} of prompt tokens hit"
    ratio = tok_s_aware / tok_s_rr
    tput = (f"throughput {times(ratio)}" if f"{ratio:.2f}" != "1.00" else "the same throughput")
    return (f"Prefix-aware routing over {num_replicas} replicas: {hits}, {tput}, median time to first token "
            f"{_lower_higher(ttft_p50_aware, ttft_p50_rr, _s)}")
