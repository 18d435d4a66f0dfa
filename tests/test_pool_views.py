"""What the Paged KV blocks page says (sim/words/paging.py, from sim/alloc/pool_views.py and sim.alloc.policies,
sim.model.paged_cache.PagedRun's table): every number worked out by hand from a small pool or run."""

import numpy as np
import pandas as pd
import pytest

from sim.alloc import pool_views as views
from sim.alloc.block_pool import BlockPool, simulate_parallel_sampling
from sim.alloc.policies import Comparison, block_size_tradeoff
from sim.alloc.schedule import POLICIES, SLOT_KINDS, PolicyResult, Segments, ServingConfig
from sim.alloc.workload import workload_from_lengths
from sim.words import paging as say

# --- the block grid's time frames ------------------------------------------------------------------


def test_pool_frames_are_evenly_spaced_whole_steps():
    frames = views.pool_frames(101)  # last step 100: frame k shows round(2.5 k), halves to even
    assert frames.steps[:5] == (0, 2, 5, 8, 10) and frames.steps[-1] == 100 and len(frames.steps) == 41
    assert not frames.truncated
    assert say.frames_help(frames) == "41 evenly spaced decode steps of the paged run."
    long = views.pool_frames(30_000)
    assert long.truncated and long.steps[1] == 500 and long.steps[-1] == 20_000
    assert say.frames_help(long) == "41 evenly spaced decode steps of the paged run (its first 20,000 steps)."
    one = views.pool_frames(1, num_frames=3)
    assert one.steps == (0, 0, 0) and one.distinct_steps == (0,)
    with pytest.raises(ValueError, match="1\\+ steps"):
        views.pool_frames(0)


def test_grid_too_big():
    assert say.grid_too_big(4096) is None
    assert say.grid_too_big(4097) == ("The pool has 4,097 blocks; the grid draws at most 4,096. Lower the capacity "
                                        "or raise the block size to see it block by block.")


# --- one pool, read off ----------------------------------------------------------------------------


def small_pool():
    """6 blocks of 4: request 0 holds 5 tokens in blocks 0, 1; request 1 holds 3 in block 2; 3, 4, 5 free."""
    pool = BlockPool(6, 4)
    pool.add_request(0, 5)
    pool.add_request(1, 3)
    return pool


def test_request_free_queue_and_title_lines():
    snap = small_pool().snapshot(7)
    assert say.request_line(snap, 0) == "Request **0** holds **5** tokens in **2** blocks (62% of their 8 slots)."
    assert say.request_line(snap, 1) == "Request **1** holds **3** tokens in **1** blocks (75% of their 4 slots)."
    assert say.free_queue_line(snap) == "**Free queue** (3 blocks), next handed out: 3, 4, 5"
    assert say.free_queue_line(snap, shown=2) == "**Free queue** (3 blocks), next handed out: 3, 4 …"
    assert say.pool_title(snap, 1234) == "Step 1,234: 3 of 6 blocks in use by 2 requests, 8 tokens stored"
    full = BlockPool(2, 4)
    full.add_request(0, 8)
    assert say.free_queue_line(full.snapshot(0)) == "**Free queue** (0 blocks), next handed out: —"


def test_marked_block_table_stars_shared_blocks():
    pool = BlockPool(6, 4)
    pool.add_request(0, 5)  # blocks 0 (full) and 1 (one token)
    pool.fork(0, 1)
    assert pool.append(1, 1) == [(1, 2)]  # request 1 writes into the shared partial block: copy-on-write to 2
    snap = pool.snapshot(1)
    assert views.marked_block_table(snap, 0) == "0* 1"
    assert views.marked_block_table(snap, 1) == "0* 2"


# --- the first-fit heap at a step ------------------------------------------------------------------


def heap_result(policy="first_fit") -> PolicyResult:
    """Request 0 runs steps 0..4 from a 4-token prompt at slots 0..19, request 1 steps 3..7 from 2 at 20..49."""
    seg = Segments(req=np.array([0, 1]), start=np.array([0, 3]), end=np.array([5, 8]), prompt=np.array([4, 2]))
    return PolicyResult(policy, 100, 16, makespan=8, num_requests=2, num_output_tokens=10, num_preemptions=0,
                        segments=seg, first_start=np.array([0, 3]), slot_steps={"tokens": 1}, peak_running=2,
                        offset=np.array([0, 20]) if policy == "first_fit" else None, reserve=np.array([20, 30]))


def test_heap_at_a_step():
    hv = views.heap_at(heap_result(), 4)  # both run: 4 + 4 and 2 + 1 tokens stored
    assert hv.req.tolist() == [0, 1] and hv.offset.tolist() == [0, 20] and hv.reserve.tolist() == [20, 30]
    assert hv.stored.tolist() == [8, 3] and hv.num_free == 50
    assert say.heap_title(hv) == "The first-fit heap at step 4: 2 requests in contiguous extents, 50 slots free in holes"
    late = views.heap_at(heap_result(), 6)
    assert late.req.tolist() == [1] and late.stored.tolist() == [5] and late.num_free == 70
    assert views.heap_at(heap_result(), 8) is None
    with pytest.raises(ValueError, match="only first_fit"):
        views.heap_at(heap_result("reserve_max_len"), 4)


# --- block size --------------------------------------------------------------------------------------


def test_block_example_caption():
    assert say.block_example_caption(17, 16) == (
        "17 tokens take 2 blocks = 32 slots. Only the last block can be partly empty, so the waste per request is "
        "below one block — whatever the length.")
    assert say.block_example_caption(1234, 1).startswith("1,234 tokens take 1,234 blocks = 1,234 slots.")


def test_block_size_tradeoff_sweeps_the_chosen_size_too():
    # one request, prompt 5, output 4: it holds 5, 6, 7, 8 tokens (26 slot-steps) and peaks at 8
    wl = workload_from_lengths([5], [4], max_model_len=16)
    trade = block_size_tradeoff(wl, sizes=(4, 16), chosen=8)
    assert trade.block_size.tolist() == [4, 8, 16]
    assert trade.at(4) == (1 - 26 / 32, 2.0)  # 2 blocks of 4 at every step
    assert trade.at(8) == (1 - 26 / 32, 1.0)  # 1 block of 8
    assert trade.at(16) == (1 - 26 / 64, 1.0)
    with pytest.raises(ValueError, match="block size 32 was not swept"):
        trade.at(32)
    assert block_size_tradeoff(wl, sizes=(4, 16), chosen=16).block_size.tolist() == [4, 16]


# --- parallel sampling -------------------------------------------------------------------------------


def test_fork_summary_with_copy_on_write():
    # 33 tokens in blocks of 8: 4 full blocks and block 4 with one token, which each of the first 4 branches copies
    fork = simulate_parallel_sampling(33, 5, 40, 8)
    assert say.fork_summary(fork) == (
        "The prompt is prefilled once into 5 blocks; forking gives every branch the same table and raises each "
        "block's **ref_cnt** to 5. The prompt's last block is only partly full, so the first write of each branch "
        "into it copies it (copy-on-write: 4→5, 4→6, 4→7, 4→8); the last branch finds ref_cnt 1 and writes in place. "
        "4 blocks stay shared (labelled ×n).")
    assert "(copy-on-write: 4→5, 4→6 …)" in say.fork_summary(fork, shown=2)
    assert say.fork_grid_title(fork) == ("After 40 tokens per branch, sharing saves 32%: 5 branches hold 34 blocks "
                                           "of 8 tokens instead of 50 as unshared copies, 4 blocks still shared")


def test_fork_summary_without_copies():
    fork = simulate_parallel_sampling(32, 3, 8, 8)  # 4 full blocks: every branch starts a block of its own
    assert say.fork_summary(fork) == (
        "The prompt is prefilled once into 4 blocks; forking gives every branch the same table and raises each "
        "block's **ref_cnt** to 3. No shared block is ever written into, so nothing is copied. "
        "4 blocks stay shared (labelled ×n).")


# --- the comparison's sentences ----------------------------------------------------------------------


def result(policy: str, tokens: int, other: int, running_steps: int, makespan: int, preemptions: int = 0):
    """A run whose claimed slot-steps are `tokens` real ones and `other` reserved, with one segment of
    `running_steps` steps (so `running_steps / makespan` requests run on average)."""
    kind = "last_block" if policy == "paged" else "never_used"
    seg = Segments(req=np.array([0]), start=np.array([0]), end=np.array([running_steps]), prompt=np.array([1]))
    slots = dict.fromkeys(SLOT_KINDS, 0) | {"tokens": tokens, kind: other}
    return PolicyResult(policy, 16_384, 16, makespan, 3, 10, preemptions, seg, np.array([0, 0, 0]), slots, 1)


def comparison() -> Comparison:
    wl = workload_from_lengths([10, 20, 30], [5, 7, 200], max_tokens=256)
    runs = [result("paged", 960, 40, 40, 10, preemptions=1234), result("reserve_max_len", 250, 750, 40, 40),
            result("reserve_max_tokens", 300, 700, 40, 20), result("first_fit", 350, 650, 40, 20)]
    return Comparison(wl, ServingConfig(), dict(zip(POLICIES, runs, strict=True)))


def test_comparison_sentences_by_hand():
    cmp = comparison()
    assert say.drawn_caption(cmp) == ("Drawn: 3 requests, prompts 20 tokens on average (longest 30), outputs 71 "
                                   "(longest 200); 1,024 blocks of 16 slots.")
    assert say.memory_summary(cmp) == (
        "Contiguous allocation keeps **25.0–35.0%** of the memory it claims filled with real tokens; the vLLM paper "
        "measured **20.4–38.2%** for earlier systems. The rest is *reservation*: slots set aside for tokens that come "
        "later or never, and — in the first-fit heap — free holes too small for the next request. Paged blocks keep "
        "**96.0%** (waste 4.0%, only the unused tail of each request's last block; the paper: under 4%).")
    assert say.concurrency_summary(cmp) == (
        "With the same 16,384 slots, paged allocation runs **4.0** requests at once against **1.0** when every request "
        "reserves the maximum length, so it finishes the workload **4.00×** sooner (seed 002: up to about 4× the "
        "throughput of contiguous allocation). Paged admission only needs the prompt's blocks, so when memory runs "
        "out mid-generation the newest request is preempted and recomputed later — **1,234** times here, as vLLM "
        "does (this step count does not charge the recomputation).")


def test_results_frame_is_the_table_without_labels_rounded():
    cmp = comparison()
    frame = cmp.results_frame()
    assert "allocation" not in frame and frame["policy"].tolist() == list(POLICIES)
    assert frame["real_tokens_pct"].tolist() == [96.0, 25.0, 30.0, 35.0]
    assert frame["speedup_vs_max_len"].tolist() == [4.0, 1.0, 2.0, 2.0]
    pd.testing.assert_frame_equal(frame, cmp.to_frame().drop(columns=["allocation"]).round(2))


# --- the real model's run ----------------------------------------------------------------------------


def test_paged_run_table_and_title():
    from sim.model.paged_cache import PagedRun

    pool = BlockPool(6, 4)
    pool.add_request(0, 5)
    pool.fork(0, 1)
    pool.append(1, 1)
    run = PagedRun(prompt_ids=[1, 2, 3, 4, 5], branch_ids=[list(b"Hi"), list(b"hi!")], reference_ids=[[], []],
                   max_abs_logit_diff=0.0, block_size=4, after_prefill=pool.snapshot(0), final=pool.snapshot(1),
                   num_copied_blocks=1, bytes_per_block=1000, num_blocks_if_copied=4)
    pd.testing.assert_frame_equal(say.live_branch_frame(run), pd.DataFrame(
        {"branch": [0, 1], "text it wrote": ["Hi", "hi!"], "block table (* = shared)": ["0* 1", "0* 2"]}))
    assert say.live_grid_title(run) == ("On the real model, sharing saves 25%: 2 branches hold 3 blocks of 4 tokens (3,000 "
                              "bytes) instead of 4 (4,000 bytes) as unshared copies, 1 block still shared")
    assert run.used_bytes == 3000 and run.bytes_if_copied == 4000


def test_paged_run_seconds():
    from sim.model.paged_cache import paged_run_seconds
    from sim.work.run_cost import ModelRates

    # cached_work(10, 5) is 5 calls; every branch runs paged (2× a contiguous step) and again alone: 3 × 2 × 5
    assert paged_run_seconds(ModelRates(1.0, 0.0, 0.0), prompt_len=10, max_new_tokens=5, num_branches=2) == 30.0
