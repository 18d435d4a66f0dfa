"""Static batching as a policy of the one Scheduler (EngineConfig(batching="static")).

The Scheduler's static policy, driven pass by pass (sim.serving.schedulers.simulate_static_stepwise), must give
exactly the result of simulate_static, the lab's one fast counting loop (sim.serving.counting): every integer
(passes, rows, tokens, prefills, claims, KV held, finishes) and, since both add the same pass seconds in the same
order, every time too. A hand-worked batch pins the plan itself: the padded rectangle, padding tokens, who samples.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.alloc.workload import LengthWorkloadConfig, make_workload, workload_from_lengths
from sim.cost.presets import load_presets
from sim.serving import schedulers as sch
from sim.serving import step_cost as sc
from sim.serving.engine import EngineConfig
from sim.serving.scheduler import Request, RequestStatus, RowKind, Scheduler, StaticPass

UNIT = sc.LinearCost(base_s=1.0)
PER_TOKEN = sc.LinearCost(base_s=1.0, per_token_s=1.0)


def assert_same(fast, step) -> None:
    """Every array and scalar of the two ServingResults equal exactly."""
    for f in fast.__dataclass_fields__:
        a, b = getattr(fast, f), getattr(step, f)
        if isinstance(a, np.ndarray):
            assert a.dtype.kind == b.dtype.kind, f
            np.testing.assert_array_equal(a, b, err_msg=f)
        else:
            assert a == b, f


def test_a_static_batch_by_hand():
    # prompts 2, 4, 3; outputs 3, 1, 2; max_tokens 3, 2, 2; batch of 2 in 16 slots: rows 2 x (4 + 3) = 14 fit
    s = Scheduler(EngineConfig(max_num_seqs=2, block_size=2, capacity_tokens=16, batching="static",
                               enable_chunked_prefill=False))
    for i, (p, o, m) in enumerate(((2, 3, 3), (4, 1, 2), (3, 2, 2))):
        s.add_request(Request(i, p, o, max_output_tokens=m))
    plans = []
    while s.has_unfinished_requests():
        out = s.schedule()
        res = s.update_from_output(out)
        s.check()
        plans.append(([(r.request_id, r.num_new_tokens, r.kind) for r in out.rows], out.static,
                      out.num_padding_tokens, res.finished, res.num_kv_tokens))
    assert plans == [
        # pass 0: both rows prefill, padded to 4 (r0's 2 padding tokens); r1's only token comes out
        ([(0, 2, RowKind.PREFILL), (1, 4, RowKind.PREFILL)], StaticPass(2, 4, 0, 14), 2, [1], 6),
        # passes 1-2: r0 decodes, r1's finished row still computes a token (padding) and holds its KV
        ([(0, 1, RowKind.DECODE)], StaticPass(2, 4, 1, 14), 1, [], 7),
        ([(0, 1, RowKind.DECODE)], StaticPass(2, 4, 2, 14), 1, [0], 8),
        # the batch is done; r2 alone: 1 x (3 + 2) reserved
        ([(2, 3, RowKind.PREFILL)], StaticPass(1, 3, 0, 5), 0, [], 3),
        ([(2, 1, RowKind.DECODE)], StaticPass(1, 3, 1, 5), 0, [2], 4),
    ]
    assert all(r.status is RequestStatus.FINISHED for r in s.requests.values())
    assert not s.kv.pool.req_to_block_table  # the rectangle is contiguous, never paged


def test_a_batch_waits_until_every_row_is_done():
    """No admission while any row of the batch runs, even with a free row and a waiting request."""
    s = Scheduler(EngineConfig(max_num_seqs=2, capacity_tokens=64 * 16, batching="static"))
    s.add_request(Request(0, 5, 4))
    out = s.schedule()
    s.update_from_output(out)
    s.add_request(Request(1, 5, 1))
    for _ in range(3):
        out = s.schedule()
        assert [r.request_id for r in out.rows] == [0] and out.static.num_rows == 1
        s.update_from_output(out)
    assert s.schedule().started == [1]


def test_a_batch_is_cut_to_the_rows_whose_rectangle_fits():
    # rows x (longest prompt + largest max_tokens) <= 20: r0..r2 need 3 x 7 = 21, so only r0, r1 (2 x 7 = 14)
    s = Scheduler(EngineConfig(max_num_seqs=4, block_size=4, capacity_tokens=20, batching="static"))
    for i in range(4):
        s.add_request(Request(i, 5, 1, max_output_tokens=2))
    out = s.schedule()
    assert out.started == [0, 1] and out.static == StaticPass(2, 5, 0, 14)


SERVING_CASES = {  # the pinned pages' static cases (tests/test_scheduler_pins.py) and a cut-heavy one
    "static": (4, dict(max_num_seqs=16, capacity_tokens=4096, block_size=16, watermark=0.01, max_num_batched_tokens=8192)),
    "static_cut": (5, dict(max_num_seqs=64, capacity_tokens=1024, block_size=16, watermark=0.01, max_num_batched_tokens=8192)),
    "odd_capacity": (6, dict(max_num_seqs=32, capacity_tokens=777, block_size=16, watermark=0.0, max_num_batched_tokens=8192)),
}


def test_the_scheduler_gives_the_fast_loops_result_at_scale():
    """1,000 requests, batches of up to 128 cut by a tight KV budget, roofline seconds."""
    wl = make_workload(LengthWorkloadConfig(num_requests=1000, prompt_mean=200, output_mean=100, max_model_len=2048,
                                            max_tokens=400, arrival="poisson", arrival_rate=5.0, seed=3))
    cfg = EngineConfig(max_num_seqs=128, capacity_tokens=40_000, block_size=16, watermark=0.0, max_num_batched_tokens=8192,
                       enable_chunked_prefill=False)
    cost = sc.RooflineCost(load_presets()["llama-3.1-8b"], "h100-sxm")
    fast = sch.simulate_static(wl, cfg, cost, tick_s=0.01)
    assert_same(fast, sch.simulate_static_stepwise(wl, cfg, cost, tick_s=0.01))
    assert fast.it_rows.max() < 128 and (fast.it_kv_claimed <= 40_000).all()  # the budget cut batches


@pytest.mark.parametrize("name", sorted(SERVING_CASES))
@pytest.mark.parametrize("cost", [PER_TOKEN, sc.LinearCost(1.0, 0.01, 0.001)], ids=["per_token", "linear"])
def test_the_scheduler_gives_the_fast_loops_result_on_the_pinned_workloads(name, cost):
    seed, kw = SERVING_CASES[name]
    wl = make_workload(LengthWorkloadConfig(num_requests=60, prompt_mean=40, output_mean=30, max_model_len=256,
                                            max_tokens=120, arrival="poisson", arrival_rate=0.3, seed=seed))
    cfg = EngineConfig(**kw, enable_chunked_prefill=False)
    fast = sch.simulate_static(wl, cfg, cost)
    step = sch.simulate_static_stepwise(wl, cfg, cost, check=True)
    assert_same(fast, step)
    assert fast.it_rows.size > 100 and (fast.it_rows > fast.it_tokens).any()  # many passes, some padded rows


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-3-27b"])
def test_the_scheduler_gives_the_fast_loops_result_under_the_roofline(model):
    """Roofline seconds, a sliding window (gemma-3) and arrivals in real seconds."""
    cost = sc.RooflineCost(load_presets()[model], "h100-sxm")
    wl = workload_from_lengths([1000, 1020, 900, 10, 1030, 64, 700], [60, 30, 200, 40, 5, 9, 1],
                               arrival=[0, 0, 3, 5, 9, 40, 41], max_tokens=[80, 30, 250, 40, 20, 9, 4],
                               max_model_len=2048)
    cfg = EngineConfig(max_num_seqs=3, capacity_tokens=4096, block_size=16, watermark=0.0, max_num_batched_tokens=2048,
                       enable_chunked_prefill=False)
    tick = cost.decode_seconds(1, 1000)
    assert_same(sch.simulate_static(wl, cfg, cost, tick_s=tick),
                sch.simulate_static_stepwise(wl, cfg, cost, tick_s=tick, check=True))


@st.composite
def static_cases(draw):
    n = draw(st.integers(1, 10))
    max_len = draw(st.integers(4, 24))
    prompts = draw(st.lists(st.integers(1, max_len - 1), min_size=n, max_size=n))
    caps = [draw(st.integers(1, max_len - p)) for p in prompts]
    outputs = [draw(st.integers(1, m)) for m in caps]
    arrivals = sorted(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    bs = draw(st.sampled_from([1, 2, 4, 16]))
    capacity = max(draw(st.integers(max_len, 6 * max_len)), -(-max_len // bs) * bs)  # every request fits
    wl = workload_from_lengths(prompts, outputs, arrival=arrivals, max_tokens=caps, max_model_len=max_len)
    cost = sc.LinearCost(1.0, draw(st.sampled_from([0.0, 0.01, 1.0])), draw(st.sampled_from([0.0, 0.001])))
    cfg = EngineConfig(max_num_seqs=draw(st.integers(1, 6)), capacity_tokens=capacity, block_size=bs, watermark=0.0,
                       max_num_batched_tokens=1 << 20, enable_chunked_prefill=False)
    return wl, cfg, cost, draw(st.sampled_from([1.0, 0.5, 3.0]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(static_cases())
def test_the_scheduler_gives_the_fast_loops_result_on_random_workloads(case):
    wl, cfg, cost, tick = case
    fast = sch.simulate_static(wl, cfg, cost, tick_s=tick)
    step = sch.simulate_static_stepwise(wl, cfg, cost, tick_s=tick, check=True)
    assert_same(fast, step)
    # the invariants both satisfy: every pass's claim fits (or is one row), rows never fewer than samplers
    assert ((fast.it_kv_claimed <= cfg.capacity_tokens) | (fast.it_rows == 1)).all()
    assert (fast.it_tokens <= fast.it_rows).all() and fast.it_tokens.sum() == wl.output_len.sum()


# --- the one fast loop's two ways of counting blocks: by phase (never named) and named in a real pool ---------


def test_counting_blocks_by_phase_equals_naming_them_at_scale():
    """simulate_paged_fast (blocks counted by phase, never named) and the same loop naming every block in a real
    BlockPool (what the block-grid snapshots need; itself pinned to the Scheduler's block ids) agree on every step's
    used blocks and every running stretch, on 5,000 requests that preempt often."""
    from sim.alloc.paged_schedule import simulate_paged_fast, simulate_paged_stepwise
    from sim.alloc.schedule import PoolConfig

    wl = make_workload(LengthWorkloadConfig(num_requests=5000, seed=7))
    serving = PoolConfig(capacity_tokens=4096, block_size=16, max_num_seqs=128)
    fast = simulate_paged_fast(wl, serving)
    named = simulate_paged_stepwise(wl, serving, [fast.makespan // 2], lazy=True)  # a snapshot: blocks are named
    assert named.snapshots[fast.makespan // 2].num_used_blocks == fast.used_blocks[fast.makespan // 2]
    replay = named.result
    assert fast.num_preemptions == replay.num_preemptions > 100
    np.testing.assert_array_equal(fast.used_blocks, replay.used_blocks)
    for f in ("req", "start", "end", "prompt"):
        np.testing.assert_array_equal(getattr(fast.segments, f), getattr(replay.segments, f), err_msg=f)
