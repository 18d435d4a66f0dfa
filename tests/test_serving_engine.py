"""The step-by-step scheduler (sim/serving/engine.py): chunked prefill, recompute vs swap, prefix hits, lookahead slots.

Hand-worked schedules pin every step's queues and the exact physical block ids (as vLLM's scheduler tests do);
chunked prefill with an unbounded budget must be continuous batching exactly, and the engine without chunking
must be sim.serving.schedulers' continuous scheduler exactly; hypothesis checks block conservation under
preemption, swapping and rollback on random workloads.
"""

from dataclasses import fields, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.alloc.prefix_cache import block_hashes
from sim.alloc.workload import LengthWorkloadConfig, make_workload, workload_from_lengths
from sim.msg import Msg
from sim.refusal import Misuse, Refusal
from sim.serving import engine as en
from sim.serving import schedulers as sch
from sim.serving import step_cost as sc
from sim.serving.comparison import DeploymentConfig
from sim.serving.links import LINKS
from sim.serving.scheduler import RowKind
from sim.words import say
from sim.words.catalog import PSEUDO

UNIT = sc.LinearCost(base_s=1.0)  # every pass takes one second: times count passes


def cfg(**kw) -> en.EngineConfig:
    base = dict(max_num_seqs=4, capacity_tokens=64, block_size=4, watermark=0.0, max_num_batched_tokens=8, enable_chunked_prefill=True)
    base.update(kw)
    return en.EngineConfig(**base)


def assert_same_result(a, b) -> None:
    """Every array and number of two ServingResults equal (the policy name and how ITL is kept aside)."""
    for f in fields(a):
        if f.name in ("policy", "token_gaps_s"):
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name
    np.testing.assert_allclose(np.sort(a.itl_s), np.sort(b.itl_s), rtol=1e-12, atol=1e-12)


# --- chunked prefill, by hand -------------------------------------------------------------------------


def test_chunked_prefill_schedule_by_hand():
    # budget 8 tokens per step, blocks of 4, 16 blocks. r0: prompt 10, 3 outputs; r1: 6, 2; r2: 3, 2; all at t = 0.
    # step 0: r0 gets 8 of its 10 prompt tokens (a chunk: no token), blocks [0, 1]; the budget is spent.
    # step 1: r0's last 2 prompt tokens (block 2) -> its first token; r1 admitted with 6 = the budget left,
    #         blocks [3, 4] -> its first token. r2 waits.
    # step 2: r0 and r1 decode (2 tokens, no new block: 11 and 7 tokens fit 3 and 2 blocks); r2 admitted (3
    #         tokens, block 5). r1 is done and frees [4, 3] (last block first).
    # step 3: r0 decodes its 3rd token (12 tokens, 3 blocks), r2 its 2nd (4 tokens, 1 block): both done.
    wl = workload_from_lengths([10, 6, 3], [3, 2, 2], max_model_len=16)
    run = en.simulate_engine(wl, cfg(), UNIT, record=True, check=True)
    r = run.result
    assert r.policy == "chunked"
    assert r.it_prefill_tokens.tolist() == [8, 8, 3, 0]  # prefill and decode tokens mixed in steps 1 and 2
    assert r.it_rows.tolist() == [1, 2, 3, 2] and r.it_tokens.tolist() == [0, 2, 3, 2]
    assert r.first_token_s.tolist() == [2, 2, 3] and r.finish_s.tolist() == [4, 3, 4]
    assert r.itl_s.tolist() == [1, 1, 1, 1] and r.ttft_s.tolist() == [2, 2, 3]
    s0, s1, s2, s3 = run.steps
    assert s0.rows == ((0, RowKind.PREFILL_CHUNK, 8),) and s0.waiting == (1, 2) and s0.running == (0,)
    assert s0.block_tables == {0: (0, 1)} and s0.free_queue == tuple(range(2, 16))
    assert s1.rows == ((0, RowKind.LAST_CHUNK, 2), (1, RowKind.PREFILL, 6)) and s1.waiting == (2,)
    assert s1.block_tables == {0: (0, 1, 2), 1: (3, 4)} and s1.num_tokens == {0: 10, 1: 6}
    assert s2.rows == ((0, RowKind.DECODE, 1), (1, RowKind.DECODE, 1), (2, RowKind.PREFILL, 3)) and s2.finished == (1,)
    assert s2.block_tables == {0: (0, 1, 2), 2: (5,)} and s2.free_queue == tuple(range(6, 16)) + (4, 3)
    assert s3.finished == (0, 2) and s3.block_tables == {}
    assert s3.free_queue == tuple(range(6, 16)) + (4, 3, 2, 1, 0, 5)
    assert s2.events == (Msg('serving.ev.admitted', r=2, blocks=[5]), Msg('serving.ev.finished', r=1, blocks=[4, 3]))


def test_without_chunking_a_long_prompt_waits_for_a_whole_budget():
    # the same requests unchunked with a 10-token prompt budget: r0 (10) alone in step 0, r1 (6) and r2 (3) in step 1
    wl = workload_from_lengths([10, 6, 3], [3, 2, 2], max_model_len=16)
    r = en.simulate_engine(wl, cfg(enable_chunked_prefill=False, max_num_batched_tokens=16), UNIT, check=True).result
    assert r.policy == "continuous"
    assert r.it_prefill_tokens.tolist() == [16, 3, 0]  # 10 + 6 fit 16; r2's 3 more would not
    assert r.first_token_s.tolist() == [1, 1, 2]


def test_chunked_budget_must_cover_every_running_decode():
    with pytest.raises(Refusal) as e:
        cfg(max_num_batched_tokens=7, num_speculative_tokens=1)
    assert (e.value.key, e.value.fields) == ("serving.err.budget_decode", {"budget": 7, "seqs": 4, "per": 2, "need": 8})
    # the golden sentences of this refusal, in both languages, are in tests/test_golden_sentences_c.py
    assert say(PSEUDO, e.value.msg) == "serving.err.budget_decode(budget=7, seqs=4, per=2, need=8)"
    cfg(max_num_batched_tokens=8, num_speculative_tokens=1)  # the least budget that does


# --- parity: chunked with no budget limit == continuous == the engine unchunked --------------------------


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-3-27b"])
@pytest.mark.parametrize("arrival", ["burst", "poisson"])
def test_unlimited_chunked_prefill_is_continuous_batching_exactly(model, arrival):
    wl = make_workload(LengthWorkloadConfig(num_requests=200, prompt_mean=60, output_mean=80, max_model_len=512,
                                            max_tokens=256, arrival=arrival, arrival_rate=0.4, seed=3))
    cost = DeploymentConfig(model).cost()  # gemma-3: sliding-window layers
    ref = sch.simulate_continuous(wl, en.EngineConfig(max_num_seqs=24, capacity_tokens=2048, block_size=16, watermark=0.01, max_num_batched_tokens=1 << 20, enable_chunked_prefill=False), cost)
    if arrival == "burst":
        assert ref.num_preemptions > 50  # the budget is tight: preemption by recompute is exercised
    run = en.simulate_engine(wl, en.EngineConfig(max_num_seqs=24, capacity_tokens=2048, block_size=16, watermark=0.01, max_num_batched_tokens=1 << 30, enable_chunked_prefill=True), cost, tick_s=0.01)
    ref = sch.simulate_continuous(wl, en.EngineConfig(max_num_seqs=24, capacity_tokens=2048, block_size=16, watermark=0.01, max_num_batched_tokens=1 << 20, enable_chunked_prefill=False), cost, tick_s=0.01)
    assert_same_result(ref, run.result)
    unchunked = en.simulate_engine(wl, en.EngineConfig(max_num_seqs=24, capacity_tokens=2048, block_size=16, watermark=0.01, max_num_batched_tokens=600, enable_chunked_prefill=False), cost, tick_s=0.01)
    assert_same_result(sch.simulate_continuous(wl, en.EngineConfig(max_num_seqs=24, capacity_tokens=2048, block_size=16, watermark=0.01, max_num_batched_tokens=600, enable_chunked_prefill=False), cost, tick_s=0.01),
                       unchunked.result)


@st.composite
def small_cases(draw):
    n = draw(st.integers(1, 8))
    bs = draw(st.sampled_from([1, 2, 4]))
    max_len = draw(st.integers(4, 20))
    prompts = draw(st.lists(st.integers(1, max_len - 1), min_size=n, max_size=n))
    outputs = [draw(st.integers(1, max_len - p)) for p in prompts]
    arrivals = sorted(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)))
    capacity = max(draw(st.integers(max_len, 3 * max_len)), -(-max_len // bs) * bs)
    wl = workload_from_lengths(prompts, outputs, arrival=arrivals, max_model_len=max_len)
    cost = sc.LinearCost(1.0, draw(st.sampled_from([0.0, 0.01])), draw(st.sampled_from([0.0, 0.001])))
    return wl, dict(max_num_seqs=draw(st.integers(1, 5)), capacity_tokens=capacity, block_size=bs,
                    watermark=draw(st.sampled_from([0.0, 0.1]))), cost, max_len


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cases(), st.integers(0, 10))
def test_engine_reproduces_continuous_batching_on_random_workloads(case, extra_budget):
    wl, kw, cost, max_len = case
    budget = max_len + extra_budget
    ref = sch.simulate_continuous(wl, en.EngineConfig(**kw, max_num_batched_tokens=budget, enable_chunked_prefill=False), cost, check=True)
    got = en.simulate_engine(wl, en.EngineConfig(**kw, max_num_batched_tokens=budget, enable_chunked_prefill=False), cost, check=True)
    assert_same_result(ref, got.result)
    ref = sch.simulate_continuous(wl, en.EngineConfig(**kw, max_num_batched_tokens=1 << 20, enable_chunked_prefill=False), cost)
    got = en.simulate_engine(wl, en.EngineConfig(**kw, max_num_batched_tokens=1 << 30, enable_chunked_prefill=True), cost, check=True)
    assert_same_result(ref, got.result)


# --- preemption: recompute vs swap, by hand ---------------------------------------------------------

# 4 blocks of 2 slots; two requests, 3-token prompts, 4 outputs each (6 tokens = 3 blocks at the end)
PAIR = dict(prompt_len=[3, 3], output_len=[4, 4], max_model_len=8)
KVB = 7_875_000_000  # bytes per token: 4 slots = 31.5 GB, half a second over PCIe 5.0 x16 (63 GB/s)


def pair_cfg(**kw) -> en.EngineConfig:
    return en.EngineConfig(max_num_seqs=2, capacity_tokens=8, block_size=2, watermark=0.0, max_num_batched_tokens=16,
                           enable_chunked_prefill=False, **kw)


def test_preemption_by_recompute_by_hand():
    # step 0: r0 blocks [0, 1], r1 [2, 3]: the pool is full. step 1: both decode into their second block.
    # step 2: r0 needs a 3rd block: r1 (newest) is preempted and frees [3, 2]; r0 takes 3. No admission.
    # step 3: r0's last token; r1 (prompt 3 + 2 produced = 5 tokens, 3 blocks) waits, 1 free. r0 frees [3, 1, 0].
    # step 4: r1 recomputed: 5-token prefill into [2, 3, 1] -> its 3rd token. step 5: its 4th.
    run = en.simulate_engine(workload_from_lengths(**PAIR), pair_cfg(), UNIT, record=True, check=True,
                             kv_bytes_per_token=KVB)
    r = run.result
    assert r.finish_s.tolist() == [4, 6] and r.num_preempted.tolist() == [0, 1]
    assert sorted(r.itl_s.tolist()) == [1, 1, 1, 1, 1, 3]  # r1 waits 2 → 5 for its 3rd token
    assert (run.num_recomputes, run.num_swaps, run.recomputed_tokens, run.swap_bytes) == (1, 0, 4, 0)
    steps = run.steps
    assert steps[2].waiting == (1,) and steps[2].running == (0,) and steps[2].block_tables == {0: (0, 1, 3)}
    assert steps[2].free_queue == (2,)
    assert steps[2].events[0] == Msg("serving.ev.recompute", r=1, blocks=[2, 3])
    assert steps[3].free_queue == (2, 3, 1, 0) and steps[3].waiting == (1,)
    assert steps[4].rows == ((1, RowKind.PREFILL, 5),) and steps[4].block_tables == {1: (2, 3, 1)}
    assert steps[5].free_queue == (0, 1, 3, 2)


def test_preemption_by_swapping_by_hand():
    # same pair, swapping to 4 host blocks. step 2: r1's 4 tokens (host blocks [0, 1]) copied out: 31.5 GB, 0.5 s
    # added to the pass (ends 3.5). step 3: r1 would need 3 blocks back, 1 is free: stays swapped; r0 done (4.5).
    # step 4: r1 copied back into [2, 3] + a block for its next token (1): another 0.5 s -> 6.0; step 5 -> 7.0.
    run = en.simulate_engine(workload_from_lengths(**PAIR), pair_cfg(preemption_mode="swap", cpu_capacity_tokens=8),
                             UNIT, record=True, check=True, kv_bytes_per_token=KVB)
    r = run.result
    assert LINKS["pcie5"].bytes_per_s == 63e9
    assert r.it_seconds.tolist() == [1, 1, 1.5, 1, 1.5, 1]
    assert r.finish_s.tolist() == [4.5, 7.0]
    assert sorted(r.itl_s.tolist()) == [1, 1, 1, 1, 1.5, 4.0]  # r1: 2 s → 6 s
    assert (run.num_recomputes, run.num_swaps, run.recomputed_tokens) == (0, 1, 0)
    assert run.swap_out_bytes == run.swap_in_bytes == 4 * KVB and run.swap_seconds == 1.0
    s2, s3, s4 = run.steps[2:5]
    assert s2.swapped == (1,) and s2.cpu_block_tables == {1: (0, 1)} and s2.block_tables == {0: (0, 1, 3)}
    assert s2.events == (Msg('serving.ev.swap_out', r=1, gpu=[2, 3], host=[0, 1]), Msg('serving.ev.took', r=0, blocks=[3]))
    assert s3.swapped == (1,) and s3.free_queue == (2, 3, 1, 0)
    assert s4.swapped == () and s4.running == (1,) and s4.block_tables == {1: (2, 3, 1)} and s4.cpu_block_tables == {}
    assert s4.rows == ((1, RowKind.DECODE, 1),)
    assert s4.events == (Msg('serving.ev.swap_in', r=1, host=[0, 1], gpu=[2, 3, 1]),)


def test_swap_falls_back_to_recompute_without_host_room():
    run = en.simulate_engine(workload_from_lengths(**PAIR), pair_cfg(preemption_mode="swap", cpu_capacity_tokens=2), UNIT,
                             kv_bytes_per_token=KVB)
    assert (run.num_swaps, run.num_recomputes) == (0, 1)  # 4 tokens need 2 host blocks, 1 is there
    assert run.result.finish_s.tolist() == [4, 6]


def test_recompute_cost_in_flops_is_the_roofline_prefill():
    cost = DeploymentConfig().cost()
    wl = workload_from_lengths(**PAIR)
    run = en.simulate_engine(wl, pair_cfg(), cost)
    # 4 tokens thrown away and computed again: a 4-token prefill's FLOPs (logits for the last one only)
    assert run.recomputed_tokens == 4
    assert run.recompute_flops == pytest.approx(float(cost.flops(sc.extend_work(4, 0, cost.window, logits_rows=1))))


# --- prefix hits and lookahead slots, by hand ---------------------------------------------------------------


def test_prefix_hit_shares_the_cached_blocks():
    # blocks of 4. r0 = tokens 1..8 (2 full blocks, cached), 2 outputs: blocks [0, 1], then [2] for its decode; it
    # frees [2, 1, 0]. r1 (arrives at 5 s) = 1..8 + 9, 10: (10 - 1) // 4 = 2 blocks may hit -> 0 and 1 leave the free
    # queue wherever they are; its last 2 tokens take a fresh block from the head: 3.
    prompts = [list(range(1, 9)), list(range(1, 11))]
    wl = workload_from_lengths([8, 10], [2, 1], arrival=[0, 5], max_model_len=16)
    hashes = [block_hashes(p, 4) for p in prompts]
    run = en.simulate_engine(wl, cfg(capacity_tokens=32, max_num_batched_tokens=16, enable_prefix_caching=True), UNIT,
                             prompt_hashes=hashes, record=True, check=True)
    assert run.prefix_hit_tokens == 8
    last = run.steps[-1]
    assert run.steps[1].free_queue == (3, 4, 5, 6, 7, 2, 1, 0)
    assert run.steps[2].rows == ((1, Msg("serving.did.after", n=8), 2),)
    assert run.steps[2].events == (Msg('serving.ev.admitted_hit', r=1, n=2, cached=[0, 1], blocks=[3]), Msg('serving.ev.finished', r=1, blocks=[3, 1, 0]))
    assert last.finished == (1,) and last.free_queue == (4, 5, 6, 7, 2, 3, 1, 0)
    assert set(last.cached_blocks) == {0, 1}  # still cached (hashes kept) while free
    assert run.result.it_prefill_tokens.tolist() == [8, 0, 2]


@pytest.mark.parametrize(("alpha", "passes", "rolled"), [(0.0, 6, 9), (1.0, 3, 0)])
def test_lookahead_slots_are_reserved_and_rolled_back(alpha, passes, rolled):
    # one request: prompt 4, 6 outputs, blocks of 4, 3 draft tokens per decode (fewer near the end: at most the
    # outputs left - 1: 3, 3, 2, 1, 0 drafts in steps 1-5). α = 0: each step keeps 1 slot and rolls the drafts back;
    # step 1 fills to 8 slots (block 1 taken) and keeps 5; step 2 fills to 9 (block 2 taken) and keeps 6, so block 2
    # goes back to the free queue at once. α = 1: step 1 keeps all 4 and yields 3 drafts + 1 = 4 tokens (5 in all);
    # step 2 decodes the 6th.
    wl = workload_from_lengths([4], [6], max_model_len=16)
    run = en.simulate_engine(wl, cfg(num_speculative_tokens=3, draft_acceptance_rate=alpha, max_num_batched_tokens=16), UNIT, record=True, check=True)
    assert run.result.num_iterations == passes and run.spec_rolled_back_slots == rolled
    if alpha == 0.0:
        assert run.spec_reserved_slots == 3 + 3 + 2 + 1 == run.spec_rolled_back_slots
        assert run.steps[1].block_tables == {0: (0, 1)} and run.steps[1].num_tokens == {0: 5}
        assert run.steps[2].block_tables == {0: (0, 1)} and run.steps[2].num_tokens == {0: 6}
        assert run.steps[2].events == (Msg('serving.ev.took', r=0, blocks=[2]), Msg('serving.ev.rolled_freed', r=0, a=0, k=3, back=3, freed=[2]))
        assert run.steps[2].free_queue[-1] == 2
    else:
        assert run.result.it_tokens.tolist() == [1, 4, 1]
        assert sorted(run.result.itl_s.tolist()) == [0, 0, 0, 1, 1]  # tokens of one step arrive together


# --- conservation on random workloads, with everything on --------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_cases(), st.data())
def test_blocks_and_tokens_are_conserved_under_preemption_swapping_and_rollback(case, data):
    wl, kw, cost, max_len = case
    k = data.draw(st.integers(0, 2))
    chunked = data.draw(st.booleans())
    budget = data.draw(st.integers(kw["max_num_seqs"] * (1 + k), 24)) if chunked else max_len + 4
    cpu = data.draw(st.sampled_from([0, kw["block_size"], 4 * max_len]))
    prefix = data.draw(st.booleans())
    ecfg = en.EngineConfig(**kw, max_num_batched_tokens=budget, enable_chunked_prefill=chunked,
                           preemption_mode=data.draw(st.sampled_from(en.PREEMPTION_MODES)), cpu_capacity_tokens=cpu,
                           num_speculative_tokens=k, draft_acceptance_rate=data.draw(st.sampled_from([0.0, 0.5, 1.0])), enable_prefix_caching=prefix)
    hashes = None
    if prefix:  # prompts from a 2-token alphabet share prefixes often
        rng = np.random.default_rng(data.draw(st.integers(0, 99)))
        hashes = [block_hashes(rng.integers(0, 2, size=p), kw["block_size"]) for p in wl.prompt_len]
    # check=True asserts after every step: free + used == total on GPU and host, ref counts match the tables,
    # a running request's tokens are on the GPU only, a swapped one's on the host only, a waiting one's nowhere
    run = en.simulate_engine(wl, ecfg, cost, prompt_hashes=hashes, check=True, kv_bytes_per_token=2)
    r = run.result
    assert np.isfinite(r.finish_s).all() and (r.first_token_s > r.arrival_s).all()
    assert int(r.it_tokens.sum()) == int(wl.output_len.sum())  # every token produced once
    assert int(r.it_finished.sum()) == wl.num_requests
    assert (r.it_kv_claimed <= kw["capacity_tokens"]).all() and (r.it_kv_tokens <= r.it_kv_claimed).all()
    assert len(r.seg_req) == wl.num_requests + r.num_preemptions
    assert run.num_swaps + run.num_recomputes == r.num_preemptions
    assert run.swap_in_bytes == run.swap_out_bytes  # every swapped request came back
    assert len(r.itl_s) == int(wl.output_len.sum()) - wl.num_requests
    if not chunked:
        assert (r.it_prefill_tokens <= budget).all()
    else:
        assert (r.it_prefill_tokens + (r.it_rows - r.it_prefills) <= budget + k * r.it_rows).all()
    assert run.spec_rolled_back_slots <= run.spec_reserved_slots
    if cpu == 0:
        assert run.num_swaps == 0


def test_engine_refuses_what_it_cannot_run():
    wl = workload_from_lengths([10], [10], max_model_len=20)
    with pytest.raises(Refusal) as e:
        en.simulate_engine(wl, cfg(enable_chunked_prefill=False), UNIT)
    assert (e.value.key, e.value.fields) == ("serving.err.budget_unchunked", {"budget": 8, "n": 20})
    with pytest.raises(ValueError, match="prefix caching needs each request's prompt block hashes"):
        en.simulate_engine(wl, cfg(enable_prefix_caching=True), UNIT)
    with pytest.raises(Misuse, match="preemption_mode must be one of"):
        cfg(preemption_mode="drop")
    with pytest.raises(Misuse, match="unknown link 'usb'"):
        cfg(link="usb")
    assert replace(cfg(), enable_chunked_prefill=False).policy == "continuous"


def test_without_chunking_running_decodes_spend_the_budget_first():
    """vLLM v1 (sim/cost/vllm_rules.py): running requests are scheduled first, a decode taking one token of
    max_num_batched_tokens; without chunked prefill a prompt that does not fit in what is left waits. Budget 100:
    r0 and r1 (prompt 1, 11 outputs) decode at passes 1..10, taking 2 tokens each pass; r2's 99-token prompt
    arrives at pass 1 and 2 + 99 > 100, so it waits passes 1..10 and is prefilled at pass 11 (first token at
    12 s: TTFT 11 s = 10 passes waiting + its own). Counting prompt tokens only would admit it at pass 1."""
    wl = workload_from_lengths([1, 1, 99], [11, 11, 1], arrival=[0, 0, 1], max_model_len=100)
    c = cfg(capacity_tokens=256, max_num_batched_tokens=100, enable_chunked_prefill=False)
    r = en.simulate_engine(wl, c, UNIT, check=True).result
    assert r.first_token_s.tolist() == [1.0, 1.0, 12.0]
    assert r.ttft_s.tolist() == [1.0, 1.0, 11.0]
    # the continuous scheduler follows the same rule, and the engine reproduces it exactly
    sched = en.EngineConfig(max_num_seqs=4, capacity_tokens=256, block_size=4, watermark=0.0, max_num_batched_tokens=100, enable_chunked_prefill=False)
    assert_same_result(en.simulate_engine(wl, c, UNIT).result, sch.simulate_continuous(wl, sched, UNIT))
    # a 98-token prompt fits beside the two decodes: admitted at once
    wl98 = workload_from_lengths([1, 1, 98], [11, 11, 1], arrival=[0, 0, 1], max_model_len=100)
    assert en.simulate_engine(wl98, c, UNIT).result.ttft_s.tolist() == [1.0, 1.0, 1.0]


def test_a_run_past_the_pass_limit_is_refused_with_its_numbers(monkeypatch):
    """A workload that keeps the scheduler busy past MAX_ITERATIONS passes is the user's to shrink: a Refusal with
    the limit and the requests still waiting, in either language (the limit is lowered here so the test is quick;
    check_engine's lower bound on the passes cannot see preemptions, so only the run itself can tell)."""
    wl = workload_from_lengths([2, 2, 2], [5, 5, 5], max_model_len=8)
    c = cfg(max_num_seqs=3, capacity_tokens=8)  # two blocks of 4: one request at a time, 5 passes each
    whole = en.simulate_engine(wl, c, UNIT, record=True)
    assert whole.result.num_iterations > 5 >= -(-15 // 3)  # past the limit, yet under check_engine's lower bound
    monkeypatch.setattr(en, "MAX_ITERATIONS", 5)
    with pytest.raises(Refusal) as e:
        en.simulate_engine(wl, c, UNIT)
    waiting = len(whole.steps[4].waiting)  # after the fifth pass
    assert waiting >= 1
    assert (e.value.key, dict(e.value.fields)) == ("serving.err.stuck", {"max": 5, "waiting": waiting})
    assert say(PSEUDO, e.value.msg) == f"serving.err.stuck(max=5, waiting={waiting})"


def test_every_caller_bounds_the_requests_below_the_engines_limit():
    """check_engine's request limit is a Misuse (a bug) only while every way in holds fewer requests."""
    from sim.alloc.trace import MAX_TRACE_REQUESTS
    from sim.serving.shared_prefix import MAX_SHARED_REQUESTS
    from sim.serving.studies import MAX_STUDY_REQUESTS

    assert max(MAX_TRACE_REQUESTS, MAX_SHARED_REQUESTS, MAX_STUDY_REQUESTS) <= sch.MAX_REQUESTS
    with pytest.raises(Misuse, match="at most 5,000 requests"):
        en.check_engine(workload_from_lengths([1] * (sch.MAX_REQUESTS + 1), [1] * (sch.MAX_REQUESTS + 1),
                                              max_model_len=2), cfg())
