"""The block pool, the serving simulations and the paged cache on the real model.

Scenario tests name exact block ids and free-queue order after every operation; property tests
drive random operation sequences and random workloads; hand-worked workloads pin the
fragmentation numbers; the paged cache must decode exactly like the contiguous one.
"""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.alloc.block_pool import BlockPool, block_usage, simulate_parallel_sampling
from sim.alloc.paged_schedule import simulate_paged_stepwise
from sim.alloc.policies import block_size_tradeoff, compare_policies, simulate_policy
from sim.alloc.schedule import POLICIES, PoolConfig, paged_slot_steps, token_slot_steps
from sim.alloc.workload import LengthWorkloadConfig, make_workload, workload_from_lengths
from sim.model.generate import SamplingConfig, encode
from sim.model.kvcache import ContiguousKVCache
from sim.model.paged_cache import PagedKVCache, paged_generate
from sim.model.transformer import checkpoint_path, load_model
from sim.msg import Msg
from sim.refusal import Refusal
from tests.conftest import random_model

# --- BlockPool scenarios ------------------------------------------------------------------------


def test_pool_scenario_exact_block_ids_and_free_queue():
    pool = BlockPool(8, 4)
    assert pool.add_request(1, 5) == [0, 1]
    assert pool.block_num_tokens[:2] == [4, 1]
    assert pool.add_request(2, 3) == [2]
    assert list(pool.free_block_queue) == [3, 4, 5, 6, 7]

    assert pool.append(1, 3) == []  # 5 -> 8 tokens: fills block 1, takes nothing
    assert pool.block_table(1) == [0, 1]
    assert pool.append(1, 1) == []  # token 9 opens block 3
    assert pool.block_table(1) == [0, 1, 3]
    assert list(pool.free_block_queue) == [4, 5, 6, 7]

    assert pool.free(2) == [2]
    assert list(pool.free_block_queue) == [4, 5, 6, 7, 2]  # freed blocks go to the tail

    assert pool.fork(1, 3) == [0, 1, 3]
    assert [pool.ref_cnt[b] for b in (0, 1, 3)] == [2, 2, 2]
    assert pool.num_new_blocks(3, 1) == 1  # the shared, partly filled block 3 must be copied
    assert pool.append(3, 1) == [(3, 4)]  # copy-on-write into the head of the free queue
    assert pool.block_table(3) == [0, 1, 4]
    assert pool.ref_cnt[3] == 1 and pool.block_num_tokens[4] == 2 and pool.block_num_tokens[3] == 1
    assert pool.append(1, 1) == []  # block 3 is no longer shared: written in place
    assert pool.block_num_tokens[3] == 2
    assert pool.append(1, 3) == []  # 10 -> 13 tokens: fills block 3, opens block 5
    assert pool.block_table(1) == [0, 1, 3, 5]
    assert list(pool.free_block_queue) == [6, 7, 2]
    pool.check_invariants()

    assert pool.free(1) == [5, 3]  # last block first; 0 and 1 are still held by request 3
    assert list(pool.free_block_queue) == [6, 7, 2, 5, 3]
    assert [pool.ref_cnt[b] for b in (0, 1, 4)] == [1, 1, 1]
    assert pool.free(3) == [4, 1, 0]
    assert list(pool.free_block_queue) == [6, 7, 2, 5, 3, 4, 1, 0]
    assert pool.num_free_blocks == 8 and pool.req_to_block_table == {}
    pool.check_invariants()
    assert pool.add_request(9, 9) == [6, 7, 2]  # reuse starts with the blocks freed longest ago


def test_pool_refuses_without_changing_anything():
    pool = BlockPool(3, 4)
    pool.add_request(0, 8)
    with pytest.raises(ValueError, match="needs 2 blocks for 5 tokens; 1 of 3 are free"):
        pool.add_request(1, 5)
    with pytest.raises(ValueError, match="needs 2 more blocks for 5 tokens; 1 are free"):
        pool.append(0, 5)
    assert pool.block_table(0) == [0, 1] and pool.req_to_num_tokens[0] == 8
    with pytest.raises(ValueError, match="already holds blocks"):
        pool.add_request(0, 1)
    with pytest.raises(ValueError, match="has no blocks"):
        pool.append(7, 1)
    with pytest.raises(ValueError, match="already exists"):
        pool.fork(0, 0)
    with pytest.raises(ValueError, match="block_size must be 1..4096"):
        BlockPool(4, 0)
    pool.check_invariants()


def test_parallel_sampling_scenario():
    r = simulate_parallel_sampling(prompt_len=5, num_branches=3, num_generated=4, block_size=4)
    assert r.after_prefill.req_to_block_table == {0: (0, 1)}
    assert r.after_fork.ref_cnt[:2].tolist() == [3, 3]
    # the first write of branches 0 and 1 copies the partly filled block 1; branch 2 then owns it alone
    assert r.cow_copies == ((1, 2), (1, 3))
    assert r.final.req_to_block_table == {0: (0, 2, 4), 1: (0, 3, 5), 2: (0, 1, 6)}
    assert r.num_used_blocks == 7 and r.num_blocks_if_copied == 9 and r.num_shared_blocks == 1
    assert r.saved_share == pytest.approx(2 / 9)


def test_snapshot_table_frame():
    pool = BlockPool(6, 4)
    pool.add_request(0, 2)
    pool.add_request(1, 6)
    snap = pool.snapshot(3)
    assert snap.owner.tolist() == [0, 1, 1, -1, -1, -1]
    assert snap.logical_index.tolist() == [0, 0, 1, -1, -1, -1]
    frame = snap.table_frame(1)
    assert frame["physical block"].tolist() == [1, 2]
    assert frame["tokens"].tolist() == ["0..3", "4..5"]
    assert frame["slots used"].tolist() == ["4/4", "2/4"]
    with pytest.raises(ValueError, match="request 5 holds no blocks at step 3"):
        snap.table_frame(5)


def test_block_usage_seed_example():
    assert block_usage(17, 16) == (2, 32, 17 / 32)  # 53% of the slots
    assert block_usage(16, 16) == (1, 16, 1.0)
    with pytest.raises(ValueError):
        block_usage(0, 16)


# --- BlockPool properties ---------------------------------------------------------------------

OPS = st.lists(st.tuples(st.sampled_from(["add", "append", "fork", "free"]), st.integers(0, 7), st.integers(1, 12)),
               min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(num_blocks=st.integers(1, 24), block_size=st.integers(1, 6), ops=OPS)
def test_pool_invariants_under_random_operations(num_blocks, block_size, ops):
    pool = BlockPool(num_blocks, block_size)
    tokens: dict[int, int] = {}  # the model: tokens each live request holds
    next_id = 100
    for op, pick, n in ops:
        live = sorted(tokens)
        before = (list(pool.free_block_queue), {r: list(t) for r, t in pool.req_to_block_table.items()})
        try:
            if op == "add":
                pool.add_request(next_id, n)
                tokens[next_id] = n
                next_id += 1
            elif not live:
                continue
            elif op == "append":
                req = live[pick % len(live)]
                pool.append(req, n)
                tokens[req] += n
            elif op == "fork":
                req = live[pick % len(live)]
                pool.fork(req, next_id)
                tokens[next_id] = tokens[req]
                next_id += 1
            else:
                req = live[pick % len(live)]
                pool.free(req)
                del tokens[req]
        except ValueError:  # refused for lack of blocks: nothing may have changed
            assert (list(pool.free_block_queue), {r: list(t) for r, t in pool.req_to_block_table.items()}) == before
        pool.check_invariants()
        assert pool.req_to_num_tokens == tokens
        assert pool.num_free_blocks + pool.num_used_blocks == num_blocks
        # no block is owned twice by one request, and a shared block's owners agree on everything before it
        owners: dict[int, set] = {}
        for req, table in pool.req_to_block_table.items():
            for b in table:
                owners.setdefault(b, set()).add(req)
        assert all(pool.ref_cnt[b] == len(o) for b, o in owners.items())
        assert set(owners).isdisjoint(pool.free_block_queue)
    for req in sorted(tokens):
        pool.free(req)
    assert sorted(pool.free_block_queue) == list(range(num_blocks))


# --- Workloads ----------------------------------------------------------------------------------


def test_workload_is_seeded_and_bounded():
    cfg = LengthWorkloadConfig()
    a, b = make_workload(cfg), make_workload(cfg)
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("arrival", "prompt_len", "output_len"))
    c = make_workload(LengthWorkloadConfig(seed=1))
    assert not np.array_equal(a.prompt_len, c.prompt_len)
    assert a.num_requests == 1000 and a.prompt_len.min() >= 1 and a.output_len.min() >= 1
    assert np.all(a.output_len <= a.max_tokens) and np.all(a.prompt_len + a.max_tokens <= 2048)
    assert np.all(a.max_tokens <= 1024)
    assert 120 < a.prompt_len.mean() < 200 and 250 < a.output_len.mean() < 360  # long tail clipped at the caps
    fixed = make_workload(LengthWorkloadConfig(num_requests=5, length_dist="fixed", prompt_mean=17, output_mean=9))
    assert fixed.prompt_len.tolist() == [17] * 5 and fixed.output_len.tolist() == [9] * 5
    uni = make_workload(LengthWorkloadConfig(num_requests=20_000, length_dist="uniform", prompt_mean=50, output_mean=20))
    assert uni.prompt_len.min() >= 1 and uni.prompt_len.max() <= 99 and abs(uni.prompt_len.mean() - 50) < 1
    poisson = make_workload(LengthWorkloadConfig(num_requests=2000, arrival="poisson", arrival_rate=0.5))
    assert np.all(np.diff(poisson.arrival) >= 0) and 3600 < poisson.arrival[-1] < 4400


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_requests=0), "num_requests must be 1..100,000, got 0"),
    (dict(num_requests=100_001), "num_requests must be 1..100,000, got 100,001"),
    (dict(length_dist="zipf"), "length_dist must be one of"),
])
def test_workload_config_errors_name_the_numbers(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LengthWorkloadConfig(**kwargs)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(prompt_mean=2048), Msg("alloc.err.prompt_mean", hi=2047, got=2048)),
    (dict(output_mean=2000), Msg("alloc.err.output_mean", max_tokens=1024, got=2000)),
    (dict(max_tokens=4096), Msg("alloc.err.max_tokens", hi=2047, max_len=2048, got=4096)),
])
def test_workload_lengths_a_user_sets_are_refused_with_their_numbers(kwargs, msg):
    with pytest.raises(Refusal) as got:
        LengthWorkloadConfig(**kwargs)
    assert got.value.msg == msg


def test_capacity_must_hold_one_longest_request():
    wl = make_workload(LengthWorkloadConfig(num_requests=10))
    with pytest.raises(ValueError, match="capacity of 1,024 token slots cannot hold one request of the maximum "
                                         "length 2,048"):
        compare_policies(wl, PoolConfig(capacity_tokens=1024))
    with pytest.raises(ValueError, match=r"10 blocks of 200 slots \(2,000\)"):
        compare_policies(wl, PoolConfig(capacity_tokens=2100, block_size=200))


# --- Hand-worked fragmentation -------------------------------------------------------------------


def test_two_requests_by_hand():
    # r0: prompt 5, output 4 -> holds 5, 6, 7, 8 tokens on its 4 steps; r1: prompt 3, output 2 -> 3, 4
    wl = workload_from_lengths([5, 3], [4, 2], max_tokens=[6, 5], max_model_len=16)
    assert token_slot_steps(wl) == 26 + 7
    assert paged_slot_steps(wl, 4) == (2 + 2 + 2 + 2 + 1 + 1) * 4
    cmp = compare_policies(wl, PoolConfig(capacity_tokens=32, block_size=4))
    paged, max_len, max_tok = (cmp.results[p] for p in ("paged", "reserve_max_len", "reserve_max_tokens"))
    assert paged.slot_steps == {"tokens": 33, "last_block": 7, "future": 0, "never_used": 0, "external": 0}
    assert paged.token_share == 33 / 40
    assert paged.used_blocks.tolist() == [3, 3, 2, 2] and paged.makespan == 4
    # reserve 16 each: 4*16 + 2*16 = 96 = 33 tokens + 7 still to come + 56 never used
    assert max_len.slot_steps == {"tokens": 33, "last_block": 0, "future": 7, "never_used": 56, "external": 0}
    assert max_len.token_share == 33 / 96
    # reserve prompt + max_tokens = 11 and 8: 44 + 16 = 60 = 33 + 7 + 20
    assert max_tok.slot_steps["never_used"] == 20 and max_tok.token_share == 33 / 60
    # with room for one maximum-length request only, the reservations run one after the other
    tight = compare_policies(wl, PoolConfig(capacity_tokens=16, block_size=4))
    assert tight.results["reserve_max_len"].segments.start.tolist() == [0, 4]
    assert tight.results["reserve_max_len"].makespan == 6
    assert tight.results["paged"].makespan == 4 and tight.results["paged"].peak_running == 2


def test_first_fit_external_fragmentation_by_hand():
    # Four 4-slot extents fill a 16-slot heap; A and C finish after step 0, leaving two 4-slot holes.
    # E needs 8 contiguous slots: 8 are free from step 1, but not in one piece until B and D finish at step 3.
    wl = workload_from_lengths(prompt_len=[2, 1, 2, 1, 4], output_len=[1, 3, 1, 3, 1], max_tokens=[2, 3, 2, 3, 4],
                                  max_model_len=16)
    serving = PoolConfig(capacity_tokens=16, block_size=4)
    heap = simulate_policy(wl, serving, "first_fit")
    assert heap.offset.tolist() == [0, 4, 8, 12, 0]
    assert heap.segments.start.tolist() == [0, 0, 0, 0, 3]
    assert [x.tolist() for x in heap.external] == [[1], [3], [8]]
    assert heap.slot_steps == {"tokens": 20, "last_block": 0, "future": 6, "never_used": 14, "external": 16}
    assert heap.token_share == 20 / 56
    summed = simulate_policy(wl, serving, "reserve_max_tokens")  # same reservations, no address space
    assert summed.segments.start.tolist() == [0, 0, 0, 0, 1] and summed.slot_steps["external"] == 0
    frame = heap.series()
    assert frame.set_index("step").loc[[1, 2, 3], "external"].tolist() == [8, 8, 0]


def test_block_size_tradeoff():
    wl = make_workload(LengthWorkloadConfig(num_requests=300))
    t = block_size_tradeoff(wl)
    assert t.block_size.tolist() == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert t.last_block_waste[0] == 0 and np.all(np.diff(t.last_block_waste) > 0)
    assert np.all(np.diff(t.mean_table_len) < 0)
    assert t.mean_table_len[0] == wl.peak_tokens.mean()
    assert t.max_table_len[4] == -(-wl.peak_tokens.max() // 16)


# --- The serving loop: three implementations agree ----------------------------------------------


@st.composite
def small_cases(draw):
    n = draw(st.integers(1, 25))
    L = draw(st.integers(4, 64))
    prompt = [draw(st.integers(1, L - 1)) for _ in range(n)]
    max_tok = [draw(st.integers(1, L - p)) for p in prompt]
    output = [draw(st.integers(1, m)) for m in max_tok]
    arrival = sorted(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    bs = draw(st.integers(1, 8))
    cap = draw(st.integers(L, 3 * L))
    cap = max(cap, -(-L // bs) * bs)
    wl = workload_from_lengths(prompt, output, arrival, max_tok, L)
    return wl, PoolConfig(cap, bs, draw(st.integers(1, 8)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=small_cases())
def test_fast_paged_loop_equals_block_pool_step_by_step(case):
    wl, serving = case
    fast = simulate_policy(wl, serving, "paged")
    steps = range(0, fast.makespan, 3)
    token = simulate_paged_stepwise(wl, serving, steps, check=True)
    lazy = simulate_paged_stepwise(wl, serving, steps, lazy=True, check=True)
    for trace in (token, lazy):
        r = trace.result
        assert r.used_blocks.tolist() == fast.used_blocks.tolist()
        assert r.num_preemptions == fast.num_preemptions
        for f in ("req", "start", "end", "prompt"):
            assert getattr(r.segments, f).tolist() == getattr(fast.segments, f).tolist()
    for s in steps:  # lazy bookkeeping hands out the very same block ids
        a, b = token.snapshots[s], lazy.snapshots[s]
        assert a.owner.tolist() == b.owner.tolist() and a.free_block_queue == b.free_block_queue
        assert a.fill.tolist() == b.fill.tolist() and a.num_used_blocks == fast.used_blocks[s]
    # conservation, totals and limits
    assert fast.used_blocks.max() <= serving.num_blocks
    assert fast.slot_steps["tokens"] == token_slot_steps(wl)
    assert fast.slot_steps["tokens"] + fast.slot_steps["last_block"] == paged_slot_steps(wl, serving.block_size)
    seg = fast.segments
    assert np.all(seg.end > seg.start)
    done = np.zeros(wl.num_requests, dtype=np.int64)
    np.add.at(done, seg.req, seg.end - seg.start)
    assert done.tolist() == wl.output_len.tolist()  # every token produced once, preempted or not
    running, _ = seg.tokens_at(np.arange(fast.makespan))
    assert running.max() <= serving.max_num_seqs
    for policy in ("reserve_max_len", "reserve_max_tokens", "first_fit"):
        r = simulate_policy(wl, serving, policy)
        assert np.all(r.segments.start >= wl.arrival) and np.all(np.diff(r.segments.start) >= 0)  # FCFS
        live = r.segments.amount_at(np.arange(r.makespan), r.reserve)
        assert live.max() <= serving.capacity_tokens
        if policy == "first_fit":  # live extents never overlap
            for t in range(r.makespan):
                ids = np.flatnonzero((r.segments.start <= t) & (r.segments.end > t))
                spans = sorted(zip(r.offset[ids], r.offset[ids] + r.reserve[ids], strict=True))
                assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_preemption_scenario():
    # 2 blocks of 4 slots; both 4-token prompts start at once, then each needs a second block.
    wl = workload_from_lengths([4, 4], [3, 3], max_tokens=[4, 4], max_model_len=8)
    serving = PoolConfig(capacity_tokens=8, block_size=4)
    trace = simulate_paged_stepwise(wl, serving, snapshot_steps=[0, 1, 3], check=True)
    r = trace.result
    assert r.num_preemptions == 1
    # step 1: request 0 needs a second block, none is free: request 1 (the newest) is preempted and request 0
    # takes its block. Request 1 comes back at step 3, after request 0 finished, recomputing prompt 4 + the 1
    # token it had made, and takes the freed blocks in free-queue order: 1 (freed last-block-first), then 0.
    assert r.segments.req.tolist() == [0, 1, 1] and r.segments.start.tolist() == [0, 0, 3]
    assert r.segments.end.tolist() == [3, 1, 5] and r.segments.prompt.tolist() == [4, 4, 5]
    assert r.used_blocks.tolist() == [2, 2, 2, 2, 2]
    assert trace.snapshots[0].req_to_block_table == {0: (0,), 1: (1,)}
    assert trace.snapshots[1].req_to_block_table == {0: (0, 1)}
    assert trace.snapshots[3].req_to_block_table == {1: (1, 0)}
    assert simulate_policy(wl, serving, "paged").used_blocks.tolist() == r.used_blocks.tolist()


def test_default_workload_headline_numbers():
    """The seed-002 exercise on the default 1,000 chat completions (the numbers the page shows)."""
    cmp = compare_policies(make_workload(LengthWorkloadConfig()), PoolConfig())
    share = {p: r.token_share for p, r in cmp.results.items()}
    assert share["paged"] > 0.96  # the paper: under 4% wasted
    assert 0.20 <= share["reserve_max_len"] < share["first_fit"] < share["reserve_max_tokens"] <= 0.40
    assert cmp.results["paged"].mean_running > 4 * cmp.results["reserve_max_len"].mean_running
    frame = cmp.to_frame()
    assert frame["policy"].tolist() == list(POLICIES)
    pct = frame[[c for c in frame if c.endswith("_pct") and c != "capacity_used_by_tokens_pct"]].sum(axis=1)
    assert np.allclose(pct, 100)
    series = cmp.series(200)
    assert set(series["policy"]) == set(POLICIES)
    paged = series[series["policy"] == "paged"]
    assert (paged["tokens"] + paged["last_block"] <= 16_384).all()


@pytest.mark.slow
def test_hundred_thousand_requests_conserve_memory():
    wl = make_workload(LengthWorkloadConfig(num_requests=100_000))
    cmp = compare_policies(wl, PoolConfig())
    paged = cmp.results["paged"]
    assert paged.slot_steps["tokens"] + paged.slot_steps["last_block"] == paged_slot_steps(wl, 16)
    assert paged.used_blocks.max() <= 1024
    assert all(r.slot_steps["tokens"] == token_slot_steps(wl) for r in cmp.results.values())


def test_runaway_runs_are_refused():
    wl = make_workload(LengthWorkloadConfig(num_requests=5000, length_dist="fixed", prompt_mean=10, output_mean=10,
                                            arrival="poisson", arrival_rate=0.001))
    with pytest.raises(ValueError, match="past the simulator's limit of 4,000,000 steps"):
        simulate_policy(wl, PoolConfig(), "paged")
    # refused up front: each request holds 1023..2046 tokens over its 1024 steps, sum of ceil(n/16) =
    # S(2046) - S(1022) = 131,840 - 33,152 = 98,688 block-steps; 100,000 of them in 128 blocks need 77.1M steps
    big = make_workload(LengthWorkloadConfig(num_requests=100_000, length_dist="fixed", prompt_mean=1023,
                                             output_mean=1024, max_model_len=2048, max_tokens=1024))
    with pytest.raises(ValueError, match="needs at least 77,100,000 decode steps in 128 blocks"):
        simulate_policy(big, PoolConfig(capacity_tokens=2048), "paged")


# --- The paged cache on the real model ----------------------------------------------------------

PROMPT = encode("HAMLET.\nTo be, or not to be")


@pytest.mark.parametrize("n_kv_heads, block_size", [(4, 16), (2, 5), (1, 1)])
def test_paged_cache_decodes_exactly_like_contiguous(n_kv_heads, block_size):
    model = random_model(n_kv_heads)
    run = paged_generate(model, PROMPT, 40, num_branches=1, block_size=block_size)
    assert run.tokens_identical and run.max_abs_logit_diff == 0.0
    assert run.final.req_to_num_tokens == {0: len(PROMPT) + 39}
    assert len(run.final.req_to_block_table[0]) == -(-(len(PROMPT) + 39) // block_size)


def test_parallel_branches_share_prompt_blocks_on_the_model():
    model = random_model(2)
    run = paged_generate(model, PROMPT, 30, num_branches=3, block_size=8, sampling=SamplingConfig(0.9, 0, 11))
    assert run.tokens_identical and run.max_abs_logit_diff == 0.0
    assert len({tuple(b) for b in run.branch_ids}) == 3  # the branches really differ
    # 27-token prompt = 3 full blocks + 3 tokens in block 3; branches 0 and 1 copy block 3, branch 2 keeps it
    assert run.after_prefill.req_to_block_table == {0: (0, 1, 2, 3)}
    assert run.num_copied_blocks == 2
    tables = run.final.req_to_block_table
    assert all(t[:3] == (0, 1, 2) for t in tables.values()) and tables[0][3] == 4 and tables[1][3] == 5
    assert tables[2][3] == 3
    assert run.final.ref_cnt[:3].tolist() == [3, 3, 3]
    assert run.final.num_used_blocks == 3 + 3 * (-(-(27 + 29) // 8) - 3)
    assert run.num_blocks_if_copied == 3 * 7


def test_batched_rows_through_separate_block_tables():
    model = random_model(4)
    ids = torch.tensor([PROMPT, PROMPT[::-1]])  # (2, T)
    paged = PagedKVCache(model.cfg, num_blocks=16, block_size=4)
    paged.set_batch([7, 3])
    contiguous = ContiguousKVCache(model.cfg, batch_size=2, max_seq_len=64)
    with torch.inference_mode():
        a = model(ids, cache=paged)
        b = model(ids, cache=contiguous)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
        nxt = a[:, -1].argmax(-1, keepdim=True)  # (2, 1)
        for pos in range(len(PROMPT), len(PROMPT) + 5):  # 27 -> 32 tokens: 7 -> 8 blocks per row
            a = model(nxt, start_pos=pos, cache=paged)
            b = model(nxt, start_pos=pos, cache=contiguous)
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
            nxt = a[:, -1].argmax(-1, keepdim=True)
    assert paged.pool.block_table(7) == [0, 1, 2, 3, 4, 5, 6, 14]
    assert paged.pool.block_table(3) == [7, 8, 9, 10, 11, 12, 13, 15]
    paged.pool.check_invariants()
    assert paged.used_bytes() == 16 * paged.bytes_per_block


def test_paged_cache_refuses_gaps_and_wrong_batches():
    model = random_model(1)
    cache = PagedKVCache(model.cfg, num_blocks=8, block_size=4)
    with torch.inference_mode():
        model(torch.tensor([PROMPT[:6]]), cache=cache)
        with pytest.raises(ValueError, match="holds 6 tokens, but the model writes at position 9"):
            model(torch.tensor([[1]]), start_pos=9, cache=cache)
        with pytest.raises(ValueError, match="the batch has 2 rows but set_batch named 1"):
            model(torch.tensor([[1], [2]]), start_pos=6, cache=cache)
        with pytest.raises(ValueError, match="needs 7 more blocks for 27 tokens; 6 are free"):
            model(torch.tensor([PROMPT]), start_pos=6, cache=cache)


@pytest.mark.skipif(not checkpoint_path("mha").is_file(), reason="the shipped mha checkpoint is not built yet")
def test_shipped_model_paged_equals_contiguous():
    model = load_model("mha")
    run = paged_generate(model, PROMPT, 64, num_branches=2, block_size=16, sampling=SamplingConfig(0.8, 0, 0))
    assert run.tokens_identical and run.max_abs_logit_diff == 0.0
