"""Static vs continuous batching (sim/serving: step_cost, schedulers, result, comparison).

Hand-worked schedules pin who runs in every forward pass and when each request's first and last
tokens come out; property tests check conservation and the memory budget on random workloads; the
continuous scheduler must reproduce sim.alloc.paged_schedule's paged schedule exactly; the step costs must equal
sim.cost.roofline's.
"""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.alloc.paged_schedule import simulate_paged_stepwise
from sim.alloc.schedule import PoolConfig
from sim.alloc.workload import LengthWorkloadConfig, make_workload, workload_from_lengths
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware, prefill_step
from sim.refusal import Refusal
from sim.serving import comparison as cp
from sim.serving import schedulers as sch
from sim.serving import step_cost as sc
from sim.serving.engine import EngineConfig
from sim.words import comparison as cw
from sim.words import say
from sim.words.catalog import PSEUDO

UNIT = sc.LinearCost(base_s=1.0)  # every forward pass takes one second: times count passes


def sched(**kw) -> EngineConfig:
    base = dict(max_num_seqs=2, capacity_tokens=16, block_size=2, watermark=0.0, max_num_batched_tokens=16, enable_chunked_prefill=False)
    base.update(kw)
    return EngineConfig(**base)


# --- hand-worked schedules ------------------------------------------------------------------------

# Three requests, prompts of 2 tokens, outputs 3, 1 and 2, all queued at t = 0, batch of 2.
THREE = dict(prompt_len=[2, 2, 2], output_len=[3, 1, 2], max_model_len=8)


def test_static_schedule_by_hand():
    # batch 1 = {r0, r1}: pass 0 prefills both (first tokens), passes 1-2 decode r0 (o=3) while r1's row idles;
    # batch 2 = {r2}: pass 3 prefills, pass 4 decodes. Each pass takes 1 s.
    r = sch.simulate_static(workload_from_lengths(**THREE), sched(), UNIT)
    assert r.first_token_s.tolist() == [1, 1, 4]
    assert r.finish_s.tolist() == [3, 1, 5]
    assert r.seg_start_s.tolist() == [0, 0, 3]
    assert r.seg_row_end_s.tolist() == [3, 3, 5]  # r1 holds its row until its batch ends at 3 s
    assert r.it_rows.tolist() == [2, 2, 2, 1, 1]  # rows computed in each pass (padded)
    assert r.it_tokens.tolist() == [2, 1, 1, 1, 1]  # rows that produced a wanted token
    assert r.it_prefills.tolist() == [2, 0, 0, 1, 0]
    assert r.ttft_s.tolist() == [1, 1, 4]
    assert r.tpot_s.tolist() == [1.0, 1.0]  # r0: (3 - 1) / 2, r2: (5 - 4) / 1; r1 has one token, no TPOT
    assert r.makespan_s == 5 and r.tokens_per_s == 6 / 5
    assert r.useful_row_share == 6 / 8


def test_continuous_schedule_by_hand():
    # pass 0: prefill r0, r1 (r1 is done); pass 1: r0 decodes, r2 takes r1's place and is prefilled;
    # pass 2: r0 and r2 decode, both done.
    r = sch.simulate_continuous(workload_from_lengths(**THREE), sched(), UNIT, check=True)
    assert r.first_token_s.tolist() == [1, 1, 2]
    assert r.finish_s.tolist() == [3, 1, 3]
    assert r.seg_start_s.tolist() == [0, 0, 1]
    assert r.it_rows.tolist() == [2, 2, 2] and r.it_tokens.tolist() == [2, 2, 2]
    assert r.it_prefills.tolist() == [2, 1, 0] and r.it_prefill_tokens.tolist() == [4, 2, 0]
    assert r.it_finished.tolist() == [1, 0, 2]
    assert r.makespan_s == 3 and r.tokens_per_s == 2.0
    assert r.tpot_s.tolist() == [1.0, 1.0]


def test_times_by_hand_with_a_per_token_cost():
    # a pass costs 1 s + 0.1 s per fed token (prompt tokens + one per decoding request)
    cost = sc.LinearCost(base_s=1.0, per_token_s=0.1)
    wl = workload_from_lengths(**THREE)
    s = sch.simulate_static(wl, sched(), cost)
    # batch 1: prefill 2 rows × 2 tokens = 1.4 s; decodes of the 2 padded rows 1.2 s each -> ends 1.4, 2.6, 3.8
    # batch 2: prefill 2 tokens 1.2 s -> 5.0; decode 1.1 s -> 6.1
    np.testing.assert_allclose(s.first_token_s, [1.4, 1.4, 5.0])
    np.testing.assert_allclose(s.finish_s, [3.8, 1.4, 6.1])
    np.testing.assert_allclose(s.tpot_s, [1.2, 1.1])
    c = sch.simulate_continuous(wl, sched(), cost)
    # pass 0: 4 prompt tokens, 1.4 s; pass 1: r0's token + r2's 2 prompt tokens, 1.3 s; pass 2: 2 tokens, 1.2 s
    np.testing.assert_allclose(c.first_token_s, [1.4, 1.4, 2.7])
    np.testing.assert_allclose(c.finish_s, [3.9, 1.4, 3.9])
    np.testing.assert_allclose(c.ttft_s, [1.4, 1.4, 2.7])
    np.testing.assert_allclose(c.tpot_s, [1.25, 1.2])
    assert c.tokens_per_s == pytest.approx(6 / 3.9) and s.tokens_per_s == pytest.approx(6 / 6.1)


def test_preemption_by_recompute_by_hand():
    # 4 blocks of 2 slots; two requests with 3-token prompts and 4 outputs (peak 6 tokens = 3 blocks each).
    # pass 0: both admitted, 2 blocks each, pool full. pass 1: each needs 4 slots: fits.
    # pass 2: r0 needs a 3rd block: none free -> r1 (newest) is preempted after producing 2 tokens and queued
    #         again with prompt 3 + 2 = 5, 2 tokens to go; r0 takes a freed block. No admission in that pass.
    # pass 3: r1 needs 3 blocks, 1 is free: waits; r0 produces its 4th token and leaves.
    # pass 4: r1 recomputed (5-token prefill) -> its 3rd token; pass 5: its 4th.
    wl = workload_from_lengths([3, 3], [4, 4], max_model_len=8)
    r = sch.simulate_continuous(wl, sched(capacity_tokens=8), UNIT, check=True)
    assert r.first_token_s.tolist() == [1, 1]
    assert r.finish_s.tolist() == [4, 6]
    assert r.num_preempted.tolist() == [0, 1]
    assert r.seg_req.tolist() == [0, 1, 1]
    assert r.seg_start_s.tolist() == [0, 0, 4] and r.seg_end_s.tolist() == [4, 2, 6]
    assert r.it_kv_claimed.tolist() == [8, 8, 6, 6, 6, 6]  # blocks × 2 slots, after each pass's allocations
    assert r.it_rows.tolist() == [2, 2, 1, 1, 1, 1]
    assert r.it_prefill_tokens.tolist() == [6, 0, 0, 0, 5, 0]
    assert r.it_kv_tokens.tolist() == [6, 8, 5, 6, 5, 6]
    assert int(r.it_tokens.sum()) == 8  # the 2 tokens r1 had produced are kept, not produced again


def test_watermark_keeps_blocks_free_at_admission():
    # 10 blocks of 2; prompts 8, 8, 2 (4, 4, 1 blocks). A 20% watermark keeps 2 blocks free: after r0 and r1
    # 2 blocks are left, so r2 (1 block) would leave 1 < 2 and must wait for r0 to finish.
    wl = workload_from_lengths([8, 8, 2], [1, 2, 1], max_model_len=10)
    cfg = sched(max_num_seqs=3, capacity_tokens=20, max_num_batched_tokens=64)
    assert sch.simulate_continuous(wl, cfg, UNIT).it_prefills.tolist() == [3, 0]
    assert sch.simulate_continuous(wl, replace(cfg, watermark=0.2), UNIT, check=True).it_prefills.tolist() == [2, 1]


def test_prefill_token_budget_spreads_admissions():
    wl = workload_from_lengths([5, 5, 5], [2, 2, 2], max_model_len=10)
    r = sch.simulate_continuous(wl, sched(max_num_seqs=3, capacity_tokens=64, max_num_batched_tokens=10), UNIT)
    assert r.it_prefill_tokens.tolist() == [10, 5, 0]
    assert r.first_token_s.tolist() == [1, 1, 2]


def test_static_batch_is_cut_to_what_its_padded_reservation_fits():
    # rows reserve longest prompt (4) + largest max_tokens (6) = 10 slots; 20 slots hold 2 rows, not 4
    wl = workload_from_lengths([4, 4, 4, 4], [2, 2, 2, 2], max_tokens=6, max_model_len=10)
    r = sch.simulate_static(wl, sched(max_num_seqs=4, capacity_tokens=20), UNIT)
    assert r.it_rows.tolist() == [2, 2, 2, 2]
    assert r.it_kv_claimed.tolist() == [20, 20, 20, 20]
    assert r.finish_s.tolist() == [2, 2, 4, 4]


def test_arrivals_and_idle_gaps():
    # r1 arrives at 10 s, long after r0 is done: both schedulers idle until then
    wl = workload_from_lengths([2, 2], [2, 2], arrival=[0, 10], max_model_len=8)
    for policy in sch.POLICIES:
        r = sch.simulate(wl, sched(), UNIT, policy)
        assert r.first_token_s.tolist() == [1, 11] and r.finish_s.tolist() == [2, 12]
        assert r.ttft_s.tolist() == [1, 1]
    r = sch.simulate(wl, sched(), UNIT, "continuous", tick_s=0.5)  # arrival step 10 = 5 s
    assert r.first_token_s.tolist() == [1, 6]
    series = r.series(num_points=24)
    assert series.loc[series["time_s"].between(2.5, 4.5), "useful_rows"].eq(0).all()


# --- the paging simulator's schedule, reproduced -----------------------------------------------


@pytest.mark.parametrize("arrival", ["burst", "poisson"])
def test_continuous_matches_the_paging_simulators_paged_schedule(arrival):
    wcfg = LengthWorkloadConfig(num_requests=150, prompt_mean=60, output_mean=80, max_model_len=512, max_tokens=256,
                             arrival=arrival, arrival_rate=0.4, seed=3)
    wl = make_workload(wcfg)
    paging = PoolConfig(capacity_tokens=2048, block_size=16, max_num_seqs=24)
    ref = simulate_paged_stepwise(wl, paging).result
    assert ref.num_preemptions > 0  # the budget is tight enough to preempt
    cfg = EngineConfig(max_num_seqs=24, capacity_tokens=2048, block_size=16, watermark=0.0, max_num_batched_tokens=1 << 20, enable_chunked_prefill=False)
    r = sch.simulate_continuous(wl, cfg, UNIT)
    assert r.num_preemptions == ref.num_preemptions
    np.testing.assert_array_equal(r.seg_req, ref.segments.req)
    np.testing.assert_array_equal(r.seg_start_s, ref.segments.start)
    np.testing.assert_array_equal(r.seg_end_s, ref.segments.end)
    busy = ref.used_blocks > 0
    np.testing.assert_array_equal(r.it_kv_claimed, ref.used_blocks[busy] * 16)


# --- invariants on random workloads ------------------------------------------------------------


@st.composite
def small_cases(draw):
    n = draw(st.integers(1, 10))
    bs = draw(st.sampled_from([1, 2, 4, 8]))
    max_len = draw(st.integers(4, 24))
    prompts = draw(st.lists(st.integers(1, max_len - 1), min_size=n, max_size=n))
    outputs = [draw(st.integers(1, max_len - p)) for p in prompts]
    arrivals = sorted(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)))
    capacity = draw(st.integers(max_len, 4 * max_len))
    capacity = max(capacity, -(-max_len // bs) * bs)
    cfg = EngineConfig(max_num_seqs=draw(st.integers(1, 6)), capacity_tokens=capacity, block_size=bs,
                       watermark=draw(st.sampled_from([0.0, 0.05, 0.2])), max_num_batched_tokens=max_len + draw(st.integers(0, 30)),
                       enable_chunked_prefill=False)
    cost = sc.LinearCost(1.0, draw(st.sampled_from([0.0, 0.01])), draw(st.sampled_from([0.0, 0.001])))
    return workload_from_lengths(prompts, outputs, arrival=arrivals, max_model_len=max_len), cfg, cost


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cases())
def test_invariants_on_random_workloads(case):
    wl, cfg, cost = case
    for policy in sch.POLICIES:
        r = sch.simulate_continuous(wl, cfg, cost, check=True) if policy == "continuous" else \
            sch.simulate_static(wl, cfg, cost)
        n = wl.num_requests
        # every request finishes exactly once, after its first token, after it arrived
        assert np.isfinite(r.finish_s).all() and np.isfinite(r.first_token_s).all()
        assert (r.first_token_s > r.arrival_s).all() and (r.finish_s >= r.first_token_s).all()
        assert int(r.it_finished.sum()) == n
        # tokens conserved: every pass's useful rows add up to the outputs asked for
        assert int(r.it_tokens.sum()) == int(wl.output_len.sum())
        # memory never over budget, and never less than the real tokens held
        assert (r.it_kv_claimed <= cfg.capacity_tokens).all()
        assert (r.it_kv_tokens <= r.it_kv_claimed).all()
        assert (r.it_rows <= cfg.max_num_seqs).all() and (r.it_tokens <= r.it_rows).all()
        # passes follow each other in time
        assert np.all(np.diff(r.it_start_s) >= r.it_seconds[:-1] - 1e-9)
        # one running stretch per request, plus one per preemption
        assert len(r.seg_req) == n + r.num_preemptions
        assert np.array_equal(np.bincount(r.seg_req, minlength=n), 1 + r.num_preempted)
        if policy == "continuous":
            assert (r.it_prefill_tokens <= cfg.max_num_batched_tokens).all()
            assert np.array_equal(r.it_rows, r.it_tokens)  # no padding


# --- costs from the roofline ---------------------------------------------------------------------


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-3-27b", "gemma-2-9b", "mixtral-8x7b", "deepseek-v2-lite",
                                   "tiny-mha"])
@pytest.mark.parametrize("kv_dtype", ["fp16", "int4"])
def test_step_costs_equal_the_roofline(model, kv_dtype):
    arch = load_presets()[model]
    hw = hardware(load_gpus()["h100-sxm"])
    cost = sc.RooflineCost(arch, "h100-sxm", "bf16", kv_dtype)
    for batch, ctx in ((1, 1), (1, 700), (8, 1024), (64, 1500), (256, 5000), (3, 9000)):
        ctx = min(ctx, arch.max_position_embeddings)
        rc = RooflineConfig(arch, batch, ctx, "bf16", kv_dtype)
        assert cost.decode_seconds(batch, ctx) == pytest.approx(decode_step(rc).time(hw), rel=1e-12)
        assert cost.prefill_seconds(batch, ctx) == pytest.approx(prefill_step(rc).time(hw), rel=1e-12)
        d = sc.extend_work(1, ctx - 1, cost.window)
        w = sc.PassWork(batch, 0, d.keys_g * batch, d.keys_l * batch, d.kv_g * batch, d.kv_l * batch)
        assert float(cost.flops(w)) == pytest.approx(decode_step(rc).flops, rel=1e-12)
        assert float(cost.bytes(w)) == pytest.approx(decode_step(rc).bytes, rel=1e-12)


def test_sliding_window_sums_match_a_recount_of_every_pass():
    """The continuous loop keeps Σ min(context, window) incrementally; recount it pass by pass."""
    arch = load_presets()["gemma-3-27b"]  # 1,024-token window on 5 of every 6 layers
    cost = sc.RooflineCost(arch, "h100-sxm")
    wl = workload_from_lengths([1000, 1020, 900, 10, 1030], [60, 30, 200, 40, 5], arrival=[0, 0, 3, 5, 9],
                                  max_model_len=2048)
    cfg = EngineConfig(max_num_seqs=3, capacity_tokens=4096, block_size=16, watermark=0.0, max_num_batched_tokens=2048, enable_chunked_prefill=False)
    r = sch.simulate_continuous(wl, cfg, cost, tick_s=cost.decode_seconds(1, 1000))
    start_it = np.searchsorted(r.it_start_s, r.seg_start_s)
    end_it = start_it.copy()
    for i, e in enumerate(r.seg_end_s):
        end_it[i] = np.searchsorted(r.it_start_s + r.it_seconds, e - 1e-12) + 1
    prompt_of_seg = r.prompt_len[r.seg_req]  # no preemption here: one stretch per request
    assert r.num_preemptions == 0
    W = arch.sliding_window
    for t in range(r.num_iterations):
        dec = (start_it < t) & (end_it > t)
        pre = start_it == t
        ctx = prompt_of_seg[dec] + (t - start_it[dec])
        p = prompt_of_seg[pre]
        w = sc.PassWork(int(dec.sum() + p.sum()), float((p - 1).sum()), float(ctx.sum() + (p * (p + 1) / 2).sum()),
                    float(np.minimum(ctx, W).sum() + sum(float(sc.keys_upto(x, W)) for x in p)),
                    float(ctx.sum() + p.sum()), float(np.minimum(ctx, W).sum() + np.minimum(p, W).sum()))
        assert r.it_seconds[t] == pytest.approx(cost.seconds(w), rel=1e-12), t


def test_kv_budget_from_gpu_memory():
    dep = cp.DeploymentConfig("llama-3.1-8b", "h100-sxm")
    usable, w, slots = dep.kv_budget()
    assert usable == math.floor(80 * 2**30 * 0.9)
    assert slots == (usable - w) // (2 * 32 * 8 * 128 * 2)  # 128 KiB per token in fp16
    assert cp.DeploymentConfig("llama-3.1-8b", "h100-sxm", kv_limit_tokens=5000).kv_budget()[2] == 5000
    with pytest.raises(ValueError, match="GiB"):
        cp.DeploymentConfig("llama-3.1-70b", "l4").kv_budget()


# --- the default workload --------------------------------------------------------------------------


def test_default_setup_continuous_beats_static():
    cmp = cp.run_serving(cp.ServingSetup())
    static, cont = cmp.results["static"], cmp.results["continuous"]
    assert static.num_output_tokens == cont.num_output_tokens == int(cmp.workload.output_len.sum())
    assert static.tokens_per_s <= cont.tokens_per_s and cmp.speedup > 3
    assert cont.percentiles(cont.e2e_s)[1] < static.percentiles(static.e2e_s)[1]
    assert static.useful_row_share < 0.5 and cont.useful_row_share == 1.0
    table = cmp.to_frame()
    assert list(table["policy"]) == ["static", "continuous"]
    assert table.loc[1, "throughput_tok_s"] == cont.tokens_per_s
    assert table.loc[0, "e2e_p99_s"] == pytest.approx(np.percentile(static.e2e_s, 99))


def test_bounds_are_enforced():
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineConfig(max_num_seqs=0)
    with pytest.raises(ValueError, match="watermark"):
        EngineConfig(watermark=0.9, enable_chunked_prefill=False)
    with pytest.raises(Refusal) as got:
        sch.simulate_continuous(workload_from_lengths([5], [5], max_model_len=64),
                               sched(capacity_tokens=64, max_num_batched_tokens=32), UNIT)
    assert got.value.key == "loops.err.budget"  # more in tests/test_loops_refusals.py
    with pytest.raises(Refusal) as got:
        sch.simulate_continuous(workload_from_lengths([1] * 400, [1000] * 400, max_model_len=1024),
                               sched(max_num_seqs=1, capacity_tokens=1024, max_num_batched_tokens=1024), UNIT)
    assert got.value.key == "loops.err.least_passes"
    with pytest.raises(ValueError, match="trained context"):
        cp.run_serving(cp.ServingSetup(deployment=cp.DeploymentConfig("gpt2", "h100-sxm")))
    with pytest.raises(ValueError, match="less than one request"):
        cp.run_serving(cp.ServingSetup(deployment=cp.DeploymentConfig(kv_limit_tokens=1000)))
    with pytest.raises(ValueError, match="at most"):
        cp.run_serving(cp.ServingSetup(workload=LengthWorkloadConfig(num_requests=sch.MAX_REQUESTS + 1)))


# --- the page's comparison: sentences and the batch sweep ------------------------------------------

SMALL = cp.ServingSetup(workload=LengthWorkloadConfig(num_requests=60), max_num_seqs=16)


def test_summary_and_budget_caption_are_worded_from_the_run():
    cmp = cp.run_serving(SMALL)
    static, cont = cmp.results["static"], cmp.results["continuous"]
    caption = cw.budget_caption(cmp)
    assert cw.budget_caption(cmp, PSEUDO).startswith(
        "serving.s.budget(model=Llama 3.1 8B, gpu=NVIDIA H100 SXM 80GB, usable=72.0, ")
    assert f"the KV budget holds **{cmp.capacity_tokens:,} tokens** (128 KiB each)" in caption
    assert f"Drawn: 60 requests, prompts {cmp.workload.prompt_len.mean():.0f} tokens on average" in caption
    summary = cw.summary(cmp)
    assert cw.summary(cmp, PSEUDO).startswith(f"serving.s.sum(n=60, out={static.num_output_tokens:,}, ")
    assert f"Static batching needed **{static.makespan_s:,.1f} s**, continuous batching **{cont.makespan_s:,.1f} s**: " \
           f"**{cmp.speedup:.2f}×** the throughput." in summary
    assert f"only **{100 * static.useful_row_share:.0f}%** of the rows" in summary
    series = cmp.series()
    assert list(series["policy"].unique()) == ["static", "continuous"] and len(series) == 2 * 600


def test_sweep_max_batch_runs_the_comparison_at_each_batch():
    calls = []
    sweep = cp.sweep_max_batch(SMALL, (8, 32), progress=lambda f, text: calls.append((f, text)))
    assert [(f, say("en", m)) for f, m in calls] == [(0.0, "max batch 8"), (0.5, "max batch 32")]
    for b, s, c, ratio in zip(sweep.batches, sweep.static_tok_s, sweep.continuous_tok_s, sweep.ratios, strict=True):
        cmp = cp.run_serving(replace(SMALL, max_num_seqs=b))
        assert s == cmp.results["static"].tokens_per_s and c == cmp.results["continuous"].tokens_per_s
        assert ratio == cmp.speedup
    frame = sweep.to_frame()
    assert list(frame.columns) == ["max_batch", "static_tok_s", "continuous_tok_s", "ratio"]
    assert list(frame["max_batch"]) == [8, 32]
