"""The prefix cache: exact hashes, block ids and hits on hand-worked traces, LRU eviction order,
invariants on random traces, radix tree == hashed blocks, and the real model branching from a cached
prefix exactly like a from-scratch run."""

import hashlib
import struct
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.alloc.block_pool import cdiv
from sim.alloc.byte_tokens import other_byte
from sim.alloc.prefix_cache import CacheConfig, block_hashes, hash_block_tokens, simulate_prefix_cache, work_ratio
from sim.alloc.prefix_sweeps import BlockFate, block_size_sweep, capacity_sweep, compare_two_prompts, compare_workloads
from sim.alloc.radix_tree import radix_hit_tokens, radix_view
from sim.alloc.workload import LAYOUTS, PREFIX_WORKLOADS, PrefixWorkloadConfig, make_trace, trace_from_lists
from sim.model import prefix_run as pr
from sim.words import prefix_run as prw
from sim.words.catalog import PSEUDO


def blake(parent: bytes, tokens, extra: bytes = b"") -> int:
    data = parent + struct.pack(f"<{len(tokens)}i", *tokens) + extra
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def h8(h: int) -> bytes:
    return h.to_bytes(8, "little")


# --- hashes ---------------------------------------------------------------------------------------


def test_block_hash_covers_parent_hash_tokens_and_extra_keys():
    h0 = blake(bytes(8), [1, 2, 3, 4])
    h1 = blake(h8(h0), [5, 6, 7, 8])
    assert h0 == 658132497017838498 and h1 == 7641984106258271874  # pinned: a change of scheme shows here
    assert block_hashes(list(range(1, 11)), 4) == [h0, h1]  # tokens 9, 10 fill no block: no hash
    assert hash_block_tokens(None, [1, 2, 3, 4]) == h0
    assert hash_block_tokens(h0, [5, 6, 7, 8]) == h1
    salted = block_hashes(list(range(1, 9)), 4, ("lora-a",))
    e = repr(("lora-a",)).encode()
    assert salted == [blake(bytes(8), [1, 2, 3, 4], e), blake(h8(blake(bytes(8), [1, 2, 3, 4], e)), [5, 6, 7, 8], e)]
    assert salted[0] != h0 and salted[1] != h1
    assert block_hashes([1, 2, 3], 4) == []


def test_one_changed_token_changes_its_block_and_every_later_one():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 50, 64).tolist()
    base = block_hashes(ids, 8)
    for k in range(64):
        changed = list(ids)
        changed[k] += 1
        new = block_hashes(changed, 8)
        b = k // 8
        assert new[:b] == base[:b]
        assert all(x != y for x, y in zip(new[b:], base[b:], strict=True))


# --- hand-worked traces ---------------------------------------------------------------------------

A = list(range(1, 11))  # 10 tokens: blocks [1-4] [5-8] and the partial [9 10]


def test_hand_worked_trace_exact_blocks_hits_and_evictions():
    prompts = [
        A,                                    # 0: pops 0 1 2; caches [1-4]->0, [5-8]->1
        [1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22],  # 1: hits 0 1 (8 tokens); the tail takes 3
        list(range(1, 9)),                    # 2: both blocks cached, but its last token must be computed:
                                              #    hits 0 only; [5-8] is computed again into 4 and cached
                                              #    there too, a duplicate (vLLM does not de-duplicate)
        [1, 2, 3],                            # 3: shorter than a block: no hit, 1 partial block (5)
        [1, 2, 3, 99, 5, 6, 7, 8, 9, 10],     # 4: token 3 changed: both hashes new, block [5-8] too
        [1, 2, 3, 4, 5, 6, 7, 99, 9, 10],     # 5: hits [1-4]; popping for its tail evicts block 1 ([5-8])
        A,                                    # 6: [5-8]'s first copy was evicted, its duplicate in 4 hits: 8
    ]
    res = simulate_prefix_cache(trace_from_lists(prompts), CacheConfig(block_size=4, capacity_tokens=32, max_running=1),
                      check=True)
    assert res.hit_tokens.tolist() == [0, 8, 4, 0, 0, 4, 8]
    # free queue, step by step (one request runs at a time; a finished request's blocks go to the tail,
    # last block first): 0..7 | 3..7 2 1 0 -> hits 0 1 | 4..7 2 3 1 0 -> hit 0 | 5 6 7 2 3 1 4 0 |
    # 6 7 2 3 1 4 0 5 | 3 1 4 0 5 2 7 6 (0 hit) -> pops 3, then 1, which evicts [5-8]'s first copy |
    # 4 5 2 7 6 1 3 0 (0 and 4 hit) -> pops 5
    assert res.block_tables == ((0, 1, 2), (0, 1, 3), (0, 4), (5,), (6, 7, 2), (0, 3, 1), (0, 4, 5))
    assert res.evictions == ((5, 1, hash_block_tokens(hash_block_tokens(None, A[:4]), A[4:8])),)
    assert res.new_cached_blocks.tolist() == [2, 0, 1, 0, 2, 1, 0]
    assert res.num_cached_blocks == sum(res.new_cached_blocks) - res.num_evictions == 5
    assert res.num_prompt_tokens == 10 + 11 + 8 + 3 + 10 + 10 + 10
    assert res.num_hit_tokens == 24 and res.num_computed_tokens == 38
    assert res.num_distinct_reused == 2  # [1-4] and [5-8]


def test_last_prompt_token_is_always_recomputed():
    bs = 16
    for n, want in ((32, 16), (33, 32), (17, 16), (16, 0), (48, 32)):
        ids = list(range(n))
        res = simulate_prefix_cache(trace_from_lists([ids, ids]), CacheConfig(bs, 1024, 2))
        assert res.hit_tokens.tolist() == [0, want], n
        assert want <= n - 1


def test_a_shared_prefix_shorter_than_one_block_never_hits():
    shared = list(range(100, 115))  # 15 tokens
    prompts = [shared + [i] * 20 for i in range(1, 5)]
    assert simulate_prefix_cache(trace_from_lists(prompts), CacheConfig(16, 4096, 4)).num_hit_tokens == 0
    longer = [list(range(100, 116)) + [i] * 20 for i in range(1, 5)]  # 16 shared: one block each after the first
    assert simulate_prefix_cache(trace_from_lists(longer), CacheConfig(16, 4096, 4)).hit_tokens.tolist() == [0, 16, 16, 16]
    assert simulate_prefix_cache(trace_from_lists(prompts), CacheConfig(4, 4096, 4)).hit_tokens.tolist() == [0, 12, 12, 12]
    # RAG with the question first: only the 12-token header is shared, below one 16-token block
    cfg = PrefixWorkloadConfig(workload="rag", layout="variable_first", num_requests=60)
    assert simulate_prefix_cache(make_trace(cfg), CacheConfig(16)).num_hit_tokens == 0
    hits = simulate_prefix_cache(make_trace(cfg), CacheConfig(4)).hit_tokens
    assert hits[0] == 0 and set(hits[1:].tolist()) == {12}
    # a system prompt shorter than the block size never hits, whatever the capacity
    tiny = make_trace(PrefixWorkloadConfig(shared_len=10, num_requests=50))
    sweep = block_size_sweep(tiny, CacheConfig(capacity_tokens=65_536), (4, 8, 16, 32))
    assert sweep.set_index("block_size").loc[[16, 32], "hit_tokens"].tolist() == [0, 0]
    assert sweep.set_index("block_size").loc[8, "hit_tokens"] > 0


def test_lru_eviction_order_is_exact_and_a_hit_refreshes_a_block():
    trace = trace_from_lists([[1, 2, 3], [5, 6, 7], [1, 2, 9], [10, 11, 12], [5, 6, 1], [1, 2, 3]])
    res = simulate_prefix_cache(trace, CacheConfig(block_size=2, capacity_tokens=8, max_running=1), check=True)
    h12, h56, h1011 = (hash_block_tokens(None, p) for p in ([1, 2], [5, 6], [10, 11]))
    # queue 0 1 2 3 -> r0 takes 0 1 | r1 takes 2 3 | r2 hits 0 ([1 2]) and takes 1 | r3: queue 3 2 1 0,
    # takes 3 and 2: [5 6] (freed before [1 2] was last used) goes first, not [1 2] (cached earlier)
    assert res.block_tables == ((0, 1), (2, 3), (0, 1), (3, 2), (1, 0), (2, 3))
    assert res.evictions == ((3, 2, h56), (4, 0, h12), (5, 3, h1011))
    assert res.hit_tokens.tolist() == [0, 0, 2, 0, 0, 0]


def test_running_requests_share_blocks_and_pin_them():
    ids = list(range(40))
    res = simulate_prefix_cache(trace_from_lists([ids + [100 + i] for i in range(5)]), CacheConfig(8, 1024, 5), check=True)
    assert res.hit_tokens.tolist() == [0, 40, 40, 40, 40]
    assert res.max_ref_cnt == 5  # all five hold the five shared blocks at once
    assert res.num_hit_blocks == 20 and res.num_distinct_reused == 5
    assert [t[:5] for t in res.block_tables] == [(0, 1, 2, 3, 4)] * 5


def test_a_request_that_does_not_fit_finishes_the_oldest_running_ones():
    trace = trace_from_lists([list(range(i * 100, i * 100 + 16)) for i in range(4)])
    res = simulate_prefix_cache(trace, CacheConfig(4, 32, max_running=4), check=True)  # 8 blocks, 4 per request
    assert res.num_early_finishes == 2 and res.hit_tokens.sum() == 0


def test_extra_keys_keep_identical_prompts_apart():
    ids = list(range(33))
    res = simulate_prefix_cache(trace_from_lists([ids, ids, ids], extra_keys=["tenant-a", "tenant-b", "tenant-a"]),
                      CacheConfig(16, 1024, 3))
    assert res.hit_tokens.tolist() == [0, 0, 32]


def test_caching_off_computes_everything():
    trace = make_trace(PrefixWorkloadConfig(num_requests=50))
    res = simulate_prefix_cache(trace, CacheConfig(enable_caching=False), check=True)
    assert res.num_hit_tokens == 0 and res.num_evictions == 0 and res.num_cached_blocks == 0


# --- workloads ------------------------------------------------------------------------------------


def test_workloads_are_seeded_and_layouts_hold_the_same_content():
    for wl in PREFIX_WORKLOADS:
        cfg = PrefixWorkloadConfig(workload=wl, num_requests=40, shared_len=100, variable_len=20, output_len=20)
        a, b = make_trace(cfg), make_trace(cfg)
        assert all(np.array_equal(x.prompt, y.prompt) and np.array_equal(x.output, y.output)
                   for x, y in zip(a.requests, b.requests, strict=True))
        other = make_trace(replace(cfg, seed=1))
        assert not np.array_equal(a.requests[0].prompt, other.requests[0].prompt)
        var = make_trace(replace(cfg, layout="variable_first"))
        for x, y in zip(a.requests, var.requests, strict=True):  # same tokens, other order
            assert np.array_equal(np.sort(x.prompt), np.sort(y.prompt)) and np.array_equal(x.output, y.output)
            assert sorted(x.segments) == sorted(y.segments)


def test_system_prompt_hits_are_exact_with_room_for_everything():
    cfg = PrefixWorkloadConfig(num_requests=120, shared_len=500, num_groups=3)
    trace = make_trace(cfg)
    res = simulate_prefix_cache(trace, CacheConfig(16, 1 << 20, 8))
    assert res.num_evictions == 0
    seen = set()
    for i, label in enumerate(res.labels):
        group = label.fields["a"]  # Msg("prefix.label.system", a=group, b=request)
        assert res.hit_tokens[i] == (0 if group not in seen else 496)  # 31 full blocks of the 500 shared tokens
        seen.add(group)
    assert simulate_prefix_cache(make_trace(replace(cfg, layout="variable_first")), CacheConfig(16, 1 << 20)).hit_rate == 0


def test_chat_turns_hit_everything_the_previous_turn_stored():
    cfg = PrefixWorkloadConfig(workload="chat", num_requests=30, shared_len=100, variable_len=30, output_len=30,
                            num_groups=1)
    trace = make_trace(cfg)
    res = simulate_prefix_cache(trace, CacheConfig(16, 1 << 20))
    for prev, cur, hit in zip(trace.requests, trace.requests[1:], res.hit_tokens[1:], strict=False):
        assert hit == prev.num_stored // 16 * 16  # its own prompt and all but the last output token
        assert np.array_equal(cur.prompt[:prev.prompt_len], prev.prompt[: prev.prompt_len]) or \
            cur.label.fields["b"] == 0  # turn 0 of a new conversation


def test_every_sharing_workload_hits_with_fixed_content_first_and_loses_it_otherwise():
    table = compare_workloads(PrefixWorkloadConfig(num_requests=80), CacheConfig()).to_frame()
    rate = table.set_index(["workload", "layout"])["hit_rate"]
    for wl in PREFIX_WORKLOADS:
        assert rate[wl, "variable_first"] == 0.0
        if wl == "random":
            assert rate[wl, "fixed_first"] == 0.0
        else:
            assert rate[wl, "fixed_first"] > 0.6


def test_sweeps_are_plain_simulations():
    trace = make_trace(PrefixWorkloadConfig(num_requests=60))
    cache = CacheConfig(16, 8192, 4)
    cap = capacity_sweep(trace, cache, (512, 1024, 4096, 65_536))
    assert cap["capacity_tokens"].tolist() == [1024, 4096, 8192, 65_536]  # 512 cannot hold one request
    for row in cap.itertuples():
        assert row.hit_rate == simulate_prefix_cache(trace, replace(cache, capacity_tokens=row.capacity_tokens)).hit_rate
    bsz = block_size_sweep(trace, cache, (8, 64))
    for row in bsz.itertuples():
        assert row.hit_tokens == simulate_prefix_cache(trace, replace(cache, block_size=row.block_size)).num_hit_tokens


def test_throughput_arithmetic():
    assert work_ratio(1000, 200, 100, 0) == 5.0  # prefill alone: 1 / (1 - 0.8)
    assert work_ratio(1000, 200, 100, 10) == pytest.approx(2000 / 1200)
    res = simulate_prefix_cache(trace_from_lists([list(range(33))] * 2, outputs=[[1, 2, 3]] * 2), CacheConfig(16, 1024, 2))
    assert res.num_decode_steps == 4 and res.prefill_speedup == 66 / 34
    assert res.throughput_gain(2) == pytest.approx((66 + 8) / (34 + 8))
    with pytest.raises(ValueError, match="decode_weight must be >= 0"):
        work_ratio(10, 5, 1, -1)


@pytest.mark.parametrize("kwargs, message", [
    (dict(workload="zipf"), "workload must be one of"),
    (dict(num_requests=0), "num_requests must be 1..2,000, got 0"),
    (dict(shared_len=5000), "shared_len must be 1..4,096, got 5,000"),
])
def test_bad_workload_settings_name_the_numbers(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrefixWorkloadConfig(**kwargs)


def test_impossible_runs_name_the_numbers():
    with pytest.raises(ValueError, match="capacity_tokens must be 16..4,194,304"):
        CacheConfig(16, 8)
    trace = make_trace(PrefixWorkloadConfig(shared_len=2000, num_requests=5))
    with pytest.raises(ValueError, match=r"stores [\d,]+ tokens = \d+ blocks of 16, but the cache holds 64 blocks"):
        simulate_prefix_cache(trace, CacheConfig(16, 1024))
    with pytest.raises(ValueError, match="past the simulator's limit of 4,000,000"):
        make_trace(PrefixWorkloadConfig(num_requests=2000, shared_len=4096))


# --- two prompts, block by block ----------------------------------------------------------------


def test_compare_two_prompts_fates():
    a = list(b"abcdefghij")
    b = list(a)
    b[5] = ord("F")
    demo = compare_two_prompts(a, b, 4)
    frame, res = demo.frame, demo.result
    fates = frame.groupby("request")["fate"].apply(list).to_dict()
    assert fates["A"] == [BlockFate.CACHED, BlockFate.CACHED, BlockFate.PARTIAL]
    assert fates["B"] == [BlockFate.HIT, BlockFate.CACHED, BlockFate.PARTIAL]
    assert res.hit_tokens.tolist() == [0, 4]
    demo = compare_two_prompts(list(b"abcdefgh"), list(b"abcdefgh"), 4)  # identical: last token recomputed
    frame, res = demo.frame, demo.result
    assert frame[frame["request"] == "B"]["fate"].tolist() == [BlockFate.HIT, BlockFate.RECOMPUTED]
    assert frame["parent hash"].tolist()[:2] == ["root", frame["hash"].iloc[0]]


# --- invariants on random traces ------------------------------------------------------------------

token_lists = st.lists(st.integers(0, 2), min_size=1, max_size=14)


@st.composite
def traces(draw):
    n = draw(st.integers(1, 10))
    prompts = [draw(token_lists) for _ in range(n)]
    outputs = [draw(st.lists(st.integers(0, 2), min_size=1, max_size=4)) for _ in range(n)]
    keys = [draw(st.sampled_from([None, None, "x"])) for _ in range(n)]
    return trace_from_lists(prompts, outputs, keys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), bs=st.integers(1, 4), extra_blocks=st.integers(0, 12), running=st.integers(1, 4))
def test_invariants_on_random_traces(trace, bs, extra_blocks, running):
    cap = (cdiv(trace.max_stored, bs) + extra_blocks) * bs
    res = simulate_prefix_cache(trace, CacheConfig(bs, cap, running), check=True)  # pool invariants after every request
    best = radix_hit_tokens(trace, bs)
    for i, req in enumerate(trace.requests):
        hit = int(res.hit_tokens[i])
        assert hit % bs == 0 and 0 <= hit <= req.prompt_len - 1
        assert hit <= best[i]  # evictions only ever take hits away
        if hit:  # an earlier request with the same extra key stored these exact tokens
            assert any(o.extra_key == req.extra_key and o.num_stored >= hit
                       and np.array_equal(o.stored()[:hit], req.prompt[:hit]) for o in trace.requests[:i])
    assert res.num_cached_blocks == res.new_cached_blocks.sum() - res.num_evictions
    assert len({b for _, b, _ in res.evictions}) <= cap // bs
    # with room for every block ever written nothing is evicted, and the hashed cache finds exactly
    # what the radix tree finds
    room = sum(cdiv(r.num_stored, bs) for r in trace.requests) * bs
    big = simulate_prefix_cache(trace, CacheConfig(bs, room, running), check=True)
    assert big.num_evictions == 0
    assert big.hit_tokens.tolist() == best.tolist()


def test_radix_equals_hashed_on_every_workload():
    for wl in PREFIX_WORKLOADS:
        for layout in LAYOUTS:
            trace = make_trace(PrefixWorkloadConfig(wl, layout, num_requests=60, shared_len=120, variable_len=24,
                                                    output_len=24, num_groups=3))
            room = sum(cdiv(r.num_stored, 16) for r in trace.requests) * 16
            res = simulate_prefix_cache(trace, CacheConfig(16, room))
            assert res.num_evictions == 0
            assert res.hit_tokens.tolist() == radix_hit_tokens(trace, 16).tolist(), (wl, layout)


def test_radix_view_segments():
    shared = list(range(100, 132))  # two blocks of 16
    trace = trace_from_lists([shared + [1] * 20, shared + [2] * 20, [7] * 40])
    frame, hits = radix_view(trace, 16, 3)
    assert hits.tolist() == [0, 32, 0]
    rows = frame.to_dict("records")
    assert [(r["start_block"], r["end_block"], r["requests"], r["lane"]) for r in rows] == [
        (0, 2, (0, 1), 0), (2, 3, (0,), 0), (2, 3, (1,), 1), (0, 2, (2,), 2)]
    assert rows[1]["parent"] == 0 and rows[2]["parent"] == 0


# --- the real model -------------------------------------------------------------------------------


@pytest.fixture
def one_thread():
    """A page test loaded earlier may have raised torch's thread count; on a shared machine that only adds
    contention, so these run on one thread and put the count back afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_other_byte():
    assert [chr(other_byte(ord(c))) for c in "aZ79 X\n"] == ["A", "z", "8", "0", "X", "x", "X"]
    assert other_byte(0xC3) == ord("X")


def test_branching_from_a_cached_prefix_matches_from_scratch_random_model(one_thread):
    from sim.model.generate import generate
    from tests.conftest import random_model

    model = random_model()
    rng = np.random.default_rng(0)
    prefix = rng.integers(0, 256, 50).tolist()
    suffixes = [rng.integers(0, 256, n).tolist() for n in (1, 5, 9)]
    run = pr.branch_from_prefix(model, prefix, suffixes, num_new=6, repeats=1)
    assert run.tokens_identical and run.max_abs_logit_diff < 1e-4
    for s, toks in zip(suffixes, run.branch_tokens, strict=True):
        assert toks == generate(model, prefix + s, 6, mode="cached", attn_impl="sdpa").new_ids
    assert run.scratch_prefill_tokens == 3 * 50 + 15 and run.branch_prefill_tokens == 50 + 15
    assert run.token_saved_share == pytest.approx(1 - 65 / 165)
    assert len(run.suffix_prefill_s) == len(run.scratch_prefill_s) == 3


def test_branching_on_the_shipped_model_gives_the_from_scratch_tokens(one_thread):
    from sim.model.generate import encode, generate
    from sim.model.transformer import checkpoint_path, load_model

    if not checkpoint_path("mha").is_file():
        pytest.skip("no shipped checkpoint")
    model = load_model("mha")
    prefix = encode("Queen.\nI shall obey you:--\nAnd for your part, Ophelia, I do wish\n\n")
    suffixes = [encode("King.\n"), encode("Oph.\n")]
    run = pr.branch_from_prefix(model, prefix, suffixes, num_new=12, repeats=1)
    assert run.tokens_identical
    for s, toks in zip(suffixes, run.branch_tokens, strict=True):
        assert toks == generate(model, prefix + s, 12, mode="cached", attn_impl="sdpa").new_ids


def test_branch_inputs_are_checked(one_thread):
    from tests.conftest import random_model

    model = random_model()
    with pytest.raises(ValueError, match="continuation 2 is empty"):
        pr.branch_from_prefix(model, [1, 2], [[3], []])
    with pytest.raises(ValueError, match="needs 1030 positions; the model was trained on 1024"):
        pr.branch_from_prefix(model, [1] * 1000, [[2] * 15], num_new=16)


def test_one_changed_byte_changes_kv_of_every_later_position_from_layer_1_on(one_thread):
    from tests.conftest import random_model

    model = random_model()
    ids = list(range(30, 90))
    kc = pr.kv_change(model, ids, position=17)
    assert kc.changed_ids[17] == other_byte(ids[17]) and kc.changed_ids[:17] == ids[:17]
    assert (kc.k_diff[:, :17] == 0).all() and (kc.v_diff[:, :17] == 0).all()  # causal: nothing before changes
    assert np.flatnonzero(kc.k_diff[0]).tolist() == [17] == np.flatnonzero(kc.v_diff[0]).tolist()
    for layer in range(1, kc.num_layers):
        assert (kc.k_diff[layer, 17:] > 0).all() and (kc.v_diff[layer, 17:] > 0).all()
        assert kc.num_changed_positions(layer) == 60 - 17
    with pytest.raises(ValueError, match="position must be 0..59, got 60"):
        pr.kv_change(model, ids, position=60)


def _branch_run(shared_s: float, branch_decode_s: float = 0.10, scratch_decode_s: float = 0.10, **kw):
    # 2 branches of 10 tokens on a 100-token prefix: 120 of 220 prefill tokens, 45.5 % saved
    return pr.BranchRun(prefix_ids=[0] * 100, suffix_ids=[[1] * 10, [2] * 10], num_new=5, branch_tokens=[[], []],
                        scratch_tokens=[[], []], max_abs_logit_diff=0.0, shared_prefill_s=shared_s,
                        suffix_prefill_s=[0.1, 0.1], scratch_prefill_s=[1.0, 1.0], branch_decode_s=branch_decode_s,
                        scratch_decode_s=scratch_decode_s, repeats=1, device="cpu", dtype="float32", **kw)


def test_branch_summary_says_which_way_each_comparison_went():
    trails = prw.branch_summary(_branch_run(1.0), lang=PSEUDO)  # time saved 40 % < tokens 45 %
    assert "prefix.run.removes(tok=45, tim=40)" in trails
    assert "prefix.run.trails(tim=40, tok=45, gap=5, passes=3, n=2)" in trails
    exceeds = prw.branch_summary(_branch_run(0.6), lang=PSEUDO)  # 60 % > 45 %
    assert "prefix.run.exceeds(tim=60, tok=45, gap=15)" in exceeds and "trails" not in exceeds
    assert "prefix.run.about_same(within=2)" in prw.branch_summary(_branch_run(0.9), lang=PSEUDO)  # 45 % vs 45.5 %
    assert "prefix.run.decode_equal(same=prefix.run.same_steps(n=2, steps=4), a=100)" in trails
    one = prw.branch_summary(_branch_run(1.0, branch_decode_s=0.147, scratch_decode_s=0.236),
                             lang=PSEUDO)  # one repeat: no spread
    lead = ("prefix.run.decode_lead(same=prefix.run.same_steps(n=2, steps=4), a={a}, b={b}, diff=89, share=61%, "
            "way=prefix.run.way_{way})")
    assert f"prefix.run.decode_one(lead={lead.format(a=147, b=236, way='scratch')})" in one
    runs = dict(branch_decode_runs_s=(0.10, 0.147, 0.25), scratch_decode_runs_s=(0.2, 0.236, 0.24))
    noisy = prw.branch_summary(_branch_run(1.0, branch_decode_s=0.147, scratch_decode_s=0.236, **runs),
                               lang=PSEUDO)  # spread 150 ms
    assert noisy.endswith(f"prefix.run.decode_noise(lead={lead.format(a=147, b=236, way='scratch')}, spread=150)")
    tight = dict(branch_decode_runs_s=(0.14, 0.15), scratch_decode_runs_s=(0.23, 0.24))  # spread 10 ms
    real = prw.branch_summary(_branch_run(1.0, branch_decode_s=0.236, scratch_decode_s=0.147, **tight), lang=PSEUDO)
    assert real.endswith(f"prefix.run.decode_real(lead={lead.format(a=236, b=147, way='branched')}, spread=10)")
    assert "noise" not in prw.branch_summary(_branch_run(1.0, branch_decode_s=0.236, scratch_decode_s=0.147, **tight)
                                             ).replace("timing noise from", "")


def test_a_hit_may_share_a_block_behind_equal_tokens_in_other_blocks():
    # found by the property test above: request 8 computes [0] again in a private block (the cached one holds
    # its last prompt token) and caches [0, 0] behind it; request 9 hits the first [0] block and that [0, 0] one
    prompts, outputs = [[0]] * 9 + [[0, 0, 0]], [[0]] * 8 + [[0, 0], [0]]
    res = simulate_prefix_cache(trace_from_lists(prompts, outputs), CacheConfig(1, 13, 2), check=True)
    assert res.block_tables[8][1] == res.block_tables[9][1] and res.block_tables[8][0] != res.block_tables[9][0]
    assert res.hit_tokens.tolist() == [0] * 9 + [2]


def test_duplicate_blocks_stay_cached_and_hit_once_the_first_copy_is_evicted():
    """vLLM v1 caches a recomputed block even when another block holds its hash (vllm/v1/core/block_pool.py,
    BlockPool.cache_full_blocks: "we currently don't de-duplicate the blocks in the cache"). Four blocks of 16;
    P is 49 tokens whose first 48 are then sent again."""
    P = list(range(1, 50))
    outputs = [[0] * n for n in (4, 10, 14, 9)]
    trace = trace_from_lists([P, P[:32], list(range(400, 408)), P[:48]], outputs)
    res = simulate_prefix_cache(trace, CacheConfig(16, 64, max_running=1), check=True)
    # 0: 52 stored tokens take 0 1 2 3, caches h0 -> 0, h1 -> 1, h2 -> 2; freed last first: queue 3 2 1 0
    # 1: 32-token prompt hits h0 (the last token is recomputed); pops 3, then 2 (evicts h2); block 3 holds
    #    P[16:32] again: cached as a second copy of h1; 41 tokens fill no third block; queue 1 2 3 0
    # 2: 8-token prompt, 21 stored tokens: pops 1 (evicts h1's first copy) and 2; queue 3 0 2 1
    # 3: the 48-token prompt may hit two blocks: h0 in 0 and h1's copy in 3: 32 tokens (16 without copies)
    assert res.hit_tokens.tolist() == [0, 16, 0, 32]
    assert res.block_tables == ((0, 1, 2, 3), (0, 3, 2), (1, 2), (0, 3, 2, 1))
