"""The engine tabs' sentences (sim/words/engine_readouts.py), worded from their numbers and checked both ways."""

import math

import pandas as pd

from sim.msg import Msg
from sim.words import engine_readouts as er
from sim.words.catalog import PSEUDO


def test_chunk_takeaway_says_which_way_each_latency_moved():
    assert er.chunk_takeaway(256, 6.64, 123.4, 2.135, 0.578, lang=PSEUDO) == (
        "serving.s.e.chunk(budget=256, itl=serving.s.e.cut(a=123.4 ms, b=6.6 ms), ttft=serving.s.e.raised(a=0.58 s, "
        "b=2.13 s))")
    assert er.chunk_takeaway(512, 30.0, 20.0, 0.5, 0.9, lang=PSEUDO) == (
        "serving.s.e.chunk(budget=512, itl=serving.s.e.raised(a=20.0 ms, b=30.0 ms), ttft=serving.s.e.cut(a=0.90 s, "
        "b=0.50 s))")
    assert er.chunk_takeaway(512, 20.01, 20.04, 0.5, 0.5, lang=PSEUDO) == (
        "serving.s.e.chunk(budget=512, itl=serving.s.e.unchanged(b=20.0 ms), ttft=serving.s.e.unchanged(b=0.50 s))")
    assert er.chunk_takeaway(256, math.nan, math.nan, 1.0, 1.0, lang=PSEUDO) == "serving.s.e.chunk_none(budget=256)"


def test_chunk_summary_names_the_best_budget_against_whole_prompts():
    assert er.chunk_summary(512, 1636, 1419, 100, 3000, lang=PSEUDO) == (
        "serving.s.e.chunk_head(n=100, prompt=3,000, budget=512, tok=1,636)serving.s.e.chunk_more(x=1.15, "
        "whole=1,419)")
    assert er.chunk_summary(8192, 1000.2, 1000.4, 10, 50, lang=PSEUDO) == (
        "serving.s.e.chunk_head(n=10, prompt=50, budget=8,192, tok=1,000)serving.s.e.chunk_same")
    assert er.chunk_summary(256, 1000, 1200, 10, 50, lang=PSEUDO) == (
        "serving.s.e.chunk_head(n=10, prompt=50, budget=256, tok=1,000)serving.s.e.chunk_less(whole=1,200)")


def test_preemption_takeaway_names_the_mode_that_finished_sooner():
    paid = "serving.s.e.pre_paid(tokens=34,843, tflop=498.7, gb=8.07, link=PCIe 5.0 x16, s=0.13)"
    args = (34_843, 498.7e12, 8_070_000_000, 0.128, "PCIe 5.0 x16", 50, 53)
    assert er.preemption_takeaway(20.75, 20.51, *args, lang=PSEUDO) == (
        f"serving.s.e.pre_swap(b=20.51 s, a=20.75 s, paid={paid})")
    assert er.preemption_takeaway(20.51, 20.75, *args, lang=PSEUDO) == (
        f"serving.s.e.pre_recompute(a=20.51 s, b=20.75 s, paid={paid})")
    assert er.preemption_takeaway(20.5, 20.501, *args, lang=PSEUDO) == f"serving.s.e.pre_same(a=20.50 s, paid={paid})"
    assert er.preemption_takeaway(1.0, 1.0, 0, 0.0, 0, 0.0, "PCIe 5.0 x16", 0, 0, lang=PSEUDO) == "serving.s.e.pre_none"


def test_step_takeaway_counts_blocks_and_queues():
    assert er.step_takeaway(4, 6, 6, 2, 0, 1, 0, lang=PSEUDO) == (
        "serving.s.e.after_step(step=4, held=serving.s.e.held(used=6, n=6, "
        "running=2))serving.s.e.queues(queues=serving.s.e.swapped(n=1))")
    assert er.step_takeaway(0, 2, 12, 1, 2, 0, 1, lang=PSEUDO) == (
        "serving.s.e.after_step(step=0, held=serving.s.e.held_one(used=2, n=12, "
        "running=1))serving.s.e.queues(queues=serving.s.e.waiting(n=2), serving.s.e.finished(n=1))")
    assert er.step_takeaway(9, 0, 12, 0, 0, 0, 2, lang=PSEUDO) == (
        "serving.s.e.after_step(step=9, "
        "held=serving.s.e.all_free(n=12))serving.s.e.queues(queues=serving.s.e.finished(n=2))")


def test_trace_sentences():
    assert er.trace_hits_takeaway(0, 500, 0, 3, lang=PSEUDO) == "serving.s.e.hits_none(n=500)"
    assert er.trace_hits_takeaway(256, 512, 1, 2, lang=PSEUDO) == "serving.s.e.hits(share=50.0%, m=1, n=2)"
    frame = pd.DataFrame({"policy": ["static", "chunked"], "throughput_tok_s": [900.0, 1100.0],
                          "ttft_p50_s": [0.01, 0.4]})
    policies = [Msg("serving.cell.static"), Msg("serving.cell.chunked")]  # each row's scheduler, as a message
    assert er.trace_summary(2, 512, 40, 0.5, frame, policies, lang=PSEUDO) == (
        "serving.s.e.trace(n=2, prompt=512, output=40, hit=50.0%, best=serving.cell.chunked, tok=1,100, "
        "fast=serving.cell.static, ttft=0.010)")
