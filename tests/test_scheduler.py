"""The one Scheduler (sim/serving/scheduler.py) driven directly, as vLLM's scheduler tests do: schedule() plans a
pass, update_from_output() applies it; exact rows, physical block ids, statuses and token counts, worked by hand.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.msg import Msg
from sim.serving.config import EngineConfig
from sim.serving.scheduler import (
    Request,
    RequestStatus,
    RowKind,
    Scheduler,
    prefill_kind,
)


def step(s: Scheduler, accepted=None):
    """One pass: (rows as (request, tokens, kind), preempted ids, block tables after the plan, finished ids)."""
    out = s.schedule()
    tables = {r: s.kv.get_block_ids(r) for r in s.running}
    res = s.update_from_output(out, accepted or {})
    return ([(r.request_id, r.num_new_tokens, r.kind) for r in out.rows], [p.request_id for p in out.preempted],
            tables, res.finished)


def test_recompute_preemption_by_hand_with_exact_block_ids():
    # 4 blocks of 2 slots; two requests, prompt 3, 4 outputs each (6 KV tokens = 3 blocks at the end)
    s = Scheduler(EngineConfig(max_num_seqs=2, max_num_batched_tokens=16, block_size=2, capacity_tokens=8,
                               enable_chunked_prefill=False))
    r0, r1 = Request(0, 3, 4), Request(1, 3, 4)
    s.add_request(r0)
    s.add_request(r1)
    assert r0.status is RequestStatus.WAITING and r0.num_tokens == 3
    # step 0: both prefill whole prompts, 2 blocks each; every block is in use
    assert step(s) == ([(0, 3, RowKind.PREFILL), (1, 3, RowKind.PREFILL)], [], {0: [0, 1], 1: [2, 3]}, [])
    assert (r0.num_computed_tokens, r0.num_tokens, r0.status) == (3, 4, RequestStatus.RUNNING)  # 1 sampled
    # step 1: the 4th token of each fits its last block
    assert step(s) == ([(0, 1, RowKind.DECODE), (1, 1, RowKind.DECODE)], [], {0: [0, 1], 1: [2, 3]}, [])
    # step 2: r0's 5th token needs a block and none is free: the newest, r1, is preempted; its blocks go back to
    # the free queue's tail last block first ([3, 2]) and r0 takes block 3
    assert step(s) == ([(0, 1, RowKind.DECODE)], [1], {0: [0, 1, 3]}, [])
    assert (r1.status, r1.num_computed_tokens, r1.num_prefill_tokens, r1.num_preemptions) == (
        RequestStatus.PREEMPTED, 0, 5, 1)  # it will prefill its prompt and both tokens it had made
    assert list(s.kv.pool.free_block_queue) == [2]
    # step 3: r0 makes its 4th and last token and frees [3, 1, 0] (last block first)
    assert step(s) == ([(0, 1, RowKind.DECODE)], [], {0: [0, 1, 3]}, [0])
    assert r0.status is RequestStatus.FINISHED and list(s.kv.pool.free_block_queue) == [2, 3, 1, 0]
    # step 4: r1 recomputes 5 tokens into blocks 2, 3, 1; step 5 it finishes
    assert step(s) == ([(1, 5, RowKind.PREFILL)], [], {1: [2, 3, 1]}, [])
    assert step(s) == ([(1, 1, RowKind.DECODE)], [], {1: [2, 3, 1]}, [1])
    assert not s.has_unfinished_requests() and r1.num_output_tokens == 4


def test_the_plan_names_the_blocks_each_request_took():
    """SchedulerOutput.new_block_ids: a request starting a stretch lists its whole table, a running one the blocks
    it took this step (none while its tokens fit its last block)."""
    s = Scheduler(EngineConfig(max_num_seqs=2, max_num_batched_tokens=16, block_size=2, capacity_tokens=8,
                               enable_chunked_prefill=False))
    s.add_request(Request(0, 3, 4))
    s.add_request(Request(1, 3, 4))
    plans = []
    while s.has_unfinished_requests():
        out = s.schedule()
        plans.append(out.new_block_ids)
        s.update_from_output(out)
    # admitted; both fit their last block; r0 takes block 3 (r1 preempted); fits; r1 recomputes into 2, 3, 1; fits
    assert plans == [{0: (0, 1), 1: (2, 3)}, {}, {0: (3,)}, {}, {1: (2, 3, 1)}, {}]


def test_chunked_prefill_splits_a_prompt_under_the_budget():
    # budget 8: r0's prompt of 10 takes 8 then 2; r1 (6) fits beside r0's last chunk; running requests go first
    s = Scheduler(EngineConfig(max_num_seqs=4, max_num_batched_tokens=8, block_size=4, capacity_tokens=64))
    s.add_request(Request(0, 10, 3))
    s.add_request(Request(1, 6, 2))
    assert step(s) == ([(0, 8, RowKind.PREFILL_CHUNK)], [], {0: [0, 1]}, [])
    assert step(s) == ([(0, 2, RowKind.LAST_CHUNK), (1, 6, RowKind.PREFILL)], [], {0: [0, 1, 2], 1: [3, 4]}, [])
    assert step(s)[0] == [(0, 1, RowKind.DECODE), (1, 1, RowKind.DECODE)]


def test_the_scheduler_names_the_vllm_release_it_follows():
    """By the one name the lab keeps it under (no file but vllm_rules.py spells a release: test_vllm_rules)."""
    from sim.serving import scheduler

    assert "the release sim.cost.vllm_rules.VLLM_VERSION names" in " ".join(scheduler.__doc__.split())


def test_prefill_kinds():
    assert prefill_kind(0, 10, 10) is RowKind.PREFILL
    assert prefill_kind(0, 8, 10) is RowKind.PREFILL_CHUNK and prefill_kind(8, 2, 10) is RowKind.LAST_CHUNK
    assert prefill_kind(8, 2, 10, num_cached=8) == Msg("serving.did.after", n=8)


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 10))
    bs = draw(st.sampled_from([1, 2, 4]))
    max_len = draw(st.integers(4, 24))
    prompts = draw(st.lists(st.integers(1, max_len - 1), min_size=n, max_size=n))
    outputs = [draw(st.integers(1, max_len - p)) for p in prompts]
    blocks = draw(st.integers(-(-max_len // bs), 3 * -(-max_len // bs)))
    chunked = draw(st.booleans())
    seqs = draw(st.integers(1, 5))
    budget = draw(st.integers(seqs, 24)) if chunked else max_len + draw(st.integers(0, 8))
    return prompts, outputs, EngineConfig(max_num_seqs=seqs, max_num_batched_tokens=budget, block_size=bs,
                                          capacity_tokens=blocks * bs, enable_chunked_prefill=chunked)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_every_request_finishes_with_its_tokens_and_the_books_balance(case):
    prompts, outputs, cfg = case
    s = Scheduler(cfg)
    reqs = [Request(i, p, o) for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]
    for r in reqs:
        s.add_request(r)
    preempted = [0] * len(reqs)
    for _ in range(10_000):
        if not s.has_unfinished_requests():
            break
        out = s.schedule()
        assert out.total_num_scheduled_tokens <= cfg.max_num_batched_tokens
        assert len(s.running) <= cfg.max_num_seqs
        for p in out.preempted:
            preempted[p.request_id] += 1
        s.update_from_output(out)
        s.check()  # pool invariants; running tables hold num_computed_tokens; waiting ones hold nothing
        for r in reqs:
            assert 0 <= r.num_computed_tokens <= r.num_tokens
    assert not s.has_unfinished_requests()
    assert s.kv.pool.num_free_blocks == cfg.num_gpu_blocks
    for r, o, n_pre in zip(reqs, outputs, preempted, strict=True):
        assert r.status is RequestStatus.FINISHED and r.num_output_tokens == o and r.num_preemptions == n_pre


def test_try_append_takes_blocks_only_past_the_last_one_and_refuses_without_change():
    from sim.alloc.block_pool import BlockPool

    pool = BlockPool(3, 4)
    pool.add_request(0, 3)  # block 0 holds 3 of 4 slots
    assert pool.try_append(0, 1) == () and pool.block_table(0) == [0] and pool.req_to_num_tokens[0] == 4
    assert pool.try_append(0, 5) == (1, 2) and pool.num_free_blocks == 0  # 9 tokens: blocks 0, 1, 2
    before = (pool.block_table(0), pool.req_to_num_tokens[0], list(pool.block_num_tokens))
    assert pool.try_append(0, 4) is None  # needs a 4th block: nothing changes
    assert (pool.block_table(0), pool.req_to_num_tokens[0], list(pool.block_num_tokens)) == before
    # a shared, partly filled last block is copied first (copy-on-write), never written in place
    fork = BlockPool(4, 4)
    fork.add_request(0, 3)
    fork.fork(0, 1)
    assert fork.try_append(1, 1) == () and fork.block_table(1) == [1] and fork.num_cow_copies == 1
    assert fork.block_num_tokens[0] == 3 and fork.block_num_tokens[1] == 4
