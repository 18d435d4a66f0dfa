"""What the Paged KV blocks page says (sim/words/paging.py, from sim/alloc/pool_views.py and sim.alloc.policies,
sim.model.paged_cache.PagedRun's table): every number worked out by hand from a small pool or run."""

import numpy as np
import pandas as pd
import pytest

from sim.alloc import pool_views as views
from sim.alloc.block_pool import BlockPool, simulate_parallel_sampling
from sim.alloc.policies import Comparison, block_size_tradeoff
from sim.alloc.schedule import POLICIES, SLOT_KINDS, PolicyResult, PoolConfig, Segments
from sim.alloc.workload import workload_from_lengths
from sim.words import paging as say
from sim.words.catalog import PSEUDO

# --- the block grid's time frames ------------------------------------------------------------------


def test_pool_frames_are_evenly_spaced_whole_steps():
    frames = views.pool_frames(101)  # last step 100: frame k shows round(2.5 k), halves to even
    assert frames.steps[:5] == (0, 2, 5, 8, 10) and frames.steps[-1] == 100 and len(frames.steps) == 41
    assert not frames.truncated
    assert say.frames_help(frames, lang=PSEUDO) == 'paged.s.frames(n=41, first=)'
    long = views.pool_frames(30_000)
    assert long.truncated and long.steps[1] == 500 and long.steps[-1] == 20_000
    assert say.frames_help(long, lang=PSEUDO) == 'paged.s.frames(n=41, first=paged.s.frames_first(max=20,000))'
    one = views.pool_frames(1, num_frames=3)
    assert one.steps == (0, 0, 0) and one.distinct_steps == (0,)
    with pytest.raises(ValueError, match="1\\+ steps"):
        views.pool_frames(0)


def test_grid_too_big():
    assert say.grid_too_big(4096) is None
    assert say.grid_too_big(4097, lang=PSEUDO) == 'paged.s.grid_too_big(n=4,097, max=4,096)'


# --- one pool, read off ----------------------------------------------------------------------------


def small_pool():
    """6 blocks of 4: request 0 holds 5 tokens in blocks 0, 1; request 1 holds 3 in block 2; 3, 4, 5 free."""
    pool = BlockPool(6, 4)
    pool.add_request(0, 5)
    pool.add_request(1, 3)
    return pool


def test_request_free_queue_and_title_lines():
    snap = small_pool().snapshot(7)
    assert say.request_line(snap, 0, lang=PSEUDO) == 'paged.s.request_line(req=0, tokens=5, blocks=2, share=62%, slots=8)'
    assert say.request_line(snap, 1, lang=PSEUDO) == 'paged.s.request_line(req=1, tokens=3, blocks=1, share=75%, slots=4)'
    assert say.free_queue_line(snap, lang=PSEUDO) == 'paged.s.free_queue(n=3, head=3, 4, 5)'
    assert say.free_queue_line(snap, shown=2, lang=PSEUDO) == 'paged.s.free_queue(n=3, head=3, 4 …)'
    assert say.pool_title(snap, 1234, lang=PSEUDO) == 'paged.s.pool_title(step=1,234, used=3, total=6, running=2, tokens=8)'
    full = BlockPool(2, 4)
    full.add_request(0, 8)
    assert say.free_queue_line(full.snapshot(0), lang=PSEUDO) == 'paged.s.free_queue(n=0, head=—)'


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
    assert say.heap_title(hv, lang=PSEUDO) == 'paged.s.heap_title(step=4, n=2, free=50)'
    late = views.heap_at(heap_result(), 6)
    assert late.req.tolist() == [1] and late.stored.tolist() == [5] and late.num_free == 70
    assert views.heap_at(heap_result(), 8) is None
    with pytest.raises(ValueError, match="only first_fit"):
        views.heap_at(heap_result("reserve_max_len"), 4)


# --- block size --------------------------------------------------------------------------------------


def test_block_example_caption():
    assert say.block_example_caption(17, 16, lang=PSEUDO) == 'paged.s.block_example(tokens=17, blocks=2, slots=32)'
    assert say.block_example_caption(1234, 1, lang=PSEUDO) == 'paged.s.block_example(tokens=1,234, blocks=1,234, slots=1,234)'


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
    assert say.fork_summary(fork, lang=PSEUDO) == (
        'paged.s.fork.summary(blocks=5, n=5, cow=paged.s.fork.cow(copies=4→5, 4→6, 4→7, 4→8), '
        'shared=4)')
    assert "(copy-on-write: 4→5, 4→6 …)" in say.fork_summary(fork, shown=2)
    assert say.fork_grid_title(fork, lang=PSEUDO) == (
        'paged.s.share.saves(sharing=paged.s.share.lead(lead=paged.s.fork.lead(n=40)), '
        'saved=32%, who=paged.s.share.who(n=5), held=paged.s.share.held(n=34, bs=8, bytes=), '
        'copies=paged.s.share.copies(n=50, bytes=), shared=paged.s.share.still.other(n=4))')


def test_fork_summary_without_copies():
    fork = simulate_parallel_sampling(32, 3, 8, 8)  # 4 full blocks: every branch starts a block of its own
    assert say.fork_summary(fork, lang=PSEUDO) == 'paged.s.fork.summary(blocks=4, n=3, cow=paged.s.fork.no_cow, shared=4)'


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
    return Comparison(wl, PoolConfig(), dict(zip(POLICIES, runs, strict=True)))


def test_comparison_sentences_by_hand():
    cmp = comparison()
    assert say.drawn_caption(cmp, lang=PSEUDO) == (
        'paged.s.drawn(n=3, prompt=20, prompt_max=30, output=71, output_max=200, blocks=1,024, '
        'bs=16)')
    assert say.memory_summary(cmp, lang=PSEUDO) == (
        'paged.s.memory_summary(lo=25.0, hi=35.0, paper_lo=20.4, paper_hi=38.2, paged=96.0, '
        'waste=4.0, paper_waste=4)')
    assert say.concurrency_summary(cmp, lang=PSEUDO) == (
        'paged.s.concurrency_summary(cap=16,384, paged=4.0, max_len=1.0, '
        'finish=paged.s.finish.sooner(x=4.00), preemptions=1,234)')


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
    assert say.live_grid_title(run, lang=PSEUDO) == (
        'paged.s.share.saves(sharing=paged.s.share.lead(lead=paged.live.lead), saved=25%, '
        'who=paged.s.share.who(n=2), held=paged.s.share.held(n=3, bs=4, '
        'bytes=paged.s.share.bytes(n=3,000)), copies=paged.s.share.copies(n=4, '
        'bytes=paged.s.share.bytes(n=4,000)), shared=paged.s.share.still.one(n=1))')
    assert run.used_bytes == 3000 and run.bytes_if_copied == 4000


def test_paged_run_seconds():
    from sim.model.paged_cache import paged_run_seconds
    from sim.work.run_cost import ModelRates

    # cached_work(10, 5) is 5 calls; every branch runs paged (2× a contiguous step) and again alone: 3 × 2 × 5
    assert paged_run_seconds(ModelRates(1.0, 0.0, 0.0), prompt_len=10, max_new_tokens=5, num_branches=2) == 30.0
