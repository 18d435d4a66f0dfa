"""The engine tabs' sentences (sim/words/engine_readouts.py), worded from their numbers and checked both ways."""

import math

import pandas as pd

from sim.msg import Msg
from sim.words import engine_readouts as er


def test_chunk_takeaway_says_which_way_each_latency_moved():
    assert er.chunk_takeaway(256, 6.64, 123.4, 2.135, 0.578) == (
        "Chunks of 256 tokens: p99 inter-token latency cut from 123.4 ms to 6.6 ms, median time to first token "
        "raised from 0.58 s to 2.13 s (vs whole prompts)")
    assert er.chunk_takeaway(512, 30.0, 20.0, 0.5, 0.9) == (
        "Chunks of 512 tokens: p99 inter-token latency raised from 20.0 ms to 30.0 ms, median time to first token "
        "cut from 0.90 s to 0.50 s (vs whole prompts)")
    assert er.chunk_takeaway(512, 20.01, 20.04, 0.5, 0.5).endswith(
        "latency unchanged at 20.0 ms, median time to first token unchanged at 0.50 s (vs whole prompts)")
    assert "no request produced a second token" in er.chunk_takeaway(256, math.nan, math.nan, 1.0, 1.0)


def test_chunk_summary_names_the_best_budget_against_whole_prompts():
    assert er.chunk_summary(512, 1636, 1419, 100, 3000) == (
        "On these 100 requests (prompts of 3,000 tokens on average) the budget that served the most was **512 "
        "tokens**: 1,636 output tokens/s, 1.15× the 1,419 of whole-prompt prefills: mixing prompt chunks into decode "
        "passes fills the compute that decode alone leaves idle.")
    assert er.chunk_summary(8192, 1000.2, 1000.4, 10, 50).endswith("1,000 output tokens/s, the same as prefilling "
                                                                  "whole prompts.")
    assert "below the 1,200 of whole-prompt prefills" in er.chunk_summary(256, 1000, 1200, 10, 50)


def test_preemption_takeaway_names_the_mode_that_finished_sooner():
    tail = ("recompute computed 34,843 tokens again (498.7 TFLOP), swap moved 8.07 GB over PCIe 5.0 x16 (0.13 s)")
    args = (34_843, 498.7e12, 8_070_000_000, 0.128, "PCIe 5.0 x16", 50, 53)
    assert er.preemption_takeaway(20.75, 20.51, *args) == (
        f"Swap finishes the p99 request in 20.51 s vs 20.75 s by recompute: {tail}")
    assert er.preemption_takeaway(20.51, 20.75, *args) == (
        f"Recompute finishes the p99 request in 20.51 s vs 20.75 s by swap: {tail}")
    assert er.preemption_takeaway(20.5, 20.501, *args).startswith("Recompute and swap both finish the p99 request "
                                                                  "in 20.50 s")
    assert er.preemption_takeaway(1.0, 1.0, 0, 0.0, 0, 0.0, "PCIe 5.0 x16", 0, 0).startswith("No request was preempted")


def test_step_takeaway_counts_blocks_and_queues():
    assert er.step_takeaway(4, 6, 6, 2, 0, 1, 0) == (
        "After step 4: 6 of 6 blocks held by 2 running requests; 1 swapped to the host")
    assert er.step_takeaway(0, 2, 12, 1, 2, 0, 1) == (
        "After step 0: 2 of 12 blocks held by 1 running request; 2 waiting, 1 finished in this step")
    assert er.step_takeaway(9, 0, 12, 0, 0, 0, 2) == "After step 9: all 12 blocks free, nothing running; 2 finished " \
                                                     "in this step"


def test_trace_sentences():
    assert er.trace_hits_takeaway(0, 500, 0, 3).startswith("None of the trace's 500 prompt tokens came from the cache")
    assert er.trace_hits_takeaway(256, 512, 1, 2) == (
        "50.0% of the trace's prompt tokens came from the cache (1 of 2 requests found a cached prefix)")
    frame = pd.DataFrame({"policy": ["static", "chunked"], "throughput_tok_s": [900.0, 1100.0],
                          "ttft_p50_s": [0.01, 0.4]})
    policies = [Msg("serving.cell.static"), Msg("serving.cell.chunked")]  # each row's scheduler, as a message
    assert er.trace_summary(2, 512, 40, 0.5, frame, policies) == (
        "The trace has **2 requests**: 512 prompt and 40 output tokens. Replayed one at a time through the prefix "
        "cache, **50.0%** of its prompt tokens were already cached. Served, **chunked** had the highest throughput "
        "(1,100 tokens/s) and **static** the lowest median time to first token (0.010 s).")
