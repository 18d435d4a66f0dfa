"""The paged schedule: continuous batching over a block pool, preempting by recompute.

The loop admits waiting requests first-come first-served while they fit. A paged request needs only
its prompt's blocks to start; when a running request needs a block and none is free, the newest
running request is preempted: its blocks are freed and it goes back to the head of the queue to be
recomputed later (prompt + what it had generated).

Two runs of it agree exactly (tests check it, on random workloads and on pinned ones): the one Scheduler
(sim.serving.scheduler) stepping a real BlockPool one token per request per step (the reference), and the lab's
one fast counting loop (sim.serving.counting), which counts blocks by phase without naming them (fast enough for
100,000 requests) and names them, with the Scheduler's block ids, only for the block-grid snapshots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim.alloc.block_pool import PoolSnapshot
from sim.alloc.schedule import (
    MAX_STEPS,
    PolicyResult,
    PoolConfig,
    Segments,
    check_fits,
    paged_slot_steps,
    token_slot_steps,
)
from sim.alloc.workload import Workload
from sim.refusal import Refusal

if TYPE_CHECKING:
    from sim.serving.counting import Counted


def _paged_result(wl: Workload, serving: PoolConfig, used: np.ndarray, segs: tuple[list, list, list, list],
                  num_preemptions: int) -> PolicyResult:
    seg = Segments(*(np.array(x, dtype=np.int64) for x in segs))
    tokens = token_slot_steps(wl)
    allocated = int(used.sum()) * serving.block_size
    slot_steps = {"tokens": tokens, "last_block": allocated - tokens, "future": 0, "never_used": 0, "external": 0}
    return PolicyResult(
        policy="paged", capacity_tokens=serving.capacity_tokens, block_size=serving.block_size, makespan=len(used),
        num_requests=wl.num_requests, num_output_tokens=int(wl.output_len.sum()), num_preemptions=num_preemptions,
        segments=seg, first_start=seg.first_start(wl.num_requests), slot_steps=slot_steps,
        peak_running=seg.peak_running(), used_blocks=used,
    )


def simulate_paged_fast(wl: Workload, serving: PoolConfig) -> PolicyResult:
    """The paged schedule counted by the lab's one fast loop (sim.serving.counting) in decode steps: blocks counted
    by phase, never named, O(1) per step and per event. Same schedule as simulate_paged_stepwise (tested)."""
    bs, nb = serving.block_size, serving.num_blocks
    min_steps = paged_slot_steps(wl, bs) // bs // nb  # block-steps needed / blocks available per step
    if min_steps > MAX_STEPS:
        raise Refusal("paged.err.min_steps", steps=f"{min_steps:,}", blocks=f"{nb:,}", max=f"{MAX_STEPS:,}")
    c = _count(wl, serving)
    return _paged_result(wl, serving, np.array(c.used_blocks, dtype=np.int64),
                         (c.seg_req, c.seg_start, c.seg_end, c.seg_prompt), sum(c.num_preempted))


def _count(wl: Workload, serving: PoolConfig, **kw) -> Counted:
    """The counting loop in bare decode steps under this page's scheduler, its limits worded as this page's."""
    from sim.serving.counting import count  # the allocators do not import the serving engine until they run it

    c = count(wl, serving.engine_config, max_passes=MAX_STEPS, **kw)
    if c.limit is not None and c.limit[0] == "arrival":
        raise Refusal("paged.err.arrival", req=f"{c.limit[1]}", step=f"{c.limit[2]:,}", max=f"{MAX_STEPS:,}")
    if c.limit is not None:
        raise Refusal("paged.err.too_long", max=f"{MAX_STEPS:,}", waiting=f"{c.limit[1]:,}")
    return c


@dataclass
class PagedTrace:
    """What simulate_paged_stepwise saw: the schedule plus pool snapshots at the asked steps."""

    result: PolicyResult | None  # None when stopped early (until=)
    snapshots: dict[int, PoolSnapshot] = field(default_factory=dict)


def simulate_paged_stepwise(wl: Workload, serving: PoolConfig, snapshot_steps=(), lazy: bool = False,
                            check: bool = False, until: int | None = None) -> PagedTrace:
    """The paged schedule with a real BlockPool, step by step, with pool snapshots at the asked steps.

    lazy=False runs the one Scheduler (sim.serving.scheduler: every running request appends its token each step,
    the reference); lazy=True is the fast counting loop naming blocks, touching a request only on the steps it
    needs a new block (identical block ids, much faster, for the block-grid snapshots of long runs). check=True asserts the pool's
    invariants after every step. until=t stops after step t (then the trace has snapshots but no result).
    """
    check_fits(wl, serving)
    if not lazy:
        return _scheduler_trace(wl, serving, snapshot_steps, check, until)
    return _lazy_trace(wl, serving, snapshot_steps, check, until)


def _scheduler_trace(wl: Workload, serving: PoolConfig, snapshot_steps, check: bool,
                     until: int | None) -> PagedTrace:
    """Decode steps of the Scheduler with no token budget: each step, running requests (oldest first) get room
    for their next token, preempting the newest while the pool is empty; then, unless something was preempted,
    waiting requests are admitted FCFS while their prompt's blocks are free; requests on their last step leave."""
    from sim.serving.scheduler import Request, Scheduler

    sched = Scheduler(serving.engine_config)
    pool = sched.kv.pool
    n = wl.num_requests
    arrival, prompt, output = wl.arrival.tolist(), wl.prompt_len.tolist(), wl.output_len.tolist()
    wanted = set(int(s) for s in snapshot_steps)
    snapshots: dict[int, PoolSnapshot] = {}
    used_series: list[int] = []
    segs: tuple[list, list, list, list] = ([], [], [], [])
    req_to_seg: dict[int, int] = {}
    preemptions = 0
    nxt = 0
    t = 0
    stop = math.inf if until is None else until
    while (nxt < n or sched.has_unfinished_requests()) and t <= stop:
        while nxt < n and arrival[nxt] <= t:
            sched.add_request(Request(nxt, prompt[nxt], output[nxt]))
            nxt += 1
        if not sched.has_unfinished_requests():
            if arrival[nxt] > MAX_STEPS:
                raise Refusal("paged.err.arrival", req=f"{nxt}", step=f"{arrival[nxt]:,}", max=f"{MAX_STEPS:,}")
            for step in range(t, int(min(arrival[nxt], stop + 1))):
                used_series.append(0)
                if step in wanted:
                    snapshots[step] = pool.snapshot(step)
            t = arrival[nxt]
            continue
        out = sched.schedule()
        for pre in out.preempted:
            segs[2][req_to_seg[pre.request_id]] = t
            preemptions += 1
        for rid in out.started:  # a stretch runs until its remaining outputs are made (unless preempted)
            req = sched.requests[rid]
            req_to_seg[rid] = len(segs[0])
            for lst, v in zip(segs, (rid, t, t + req.max_tokens - req.num_output_tokens, req.num_prefill_tokens),
                              strict=True):
                lst.append(v)
        used_series.append(pool.num_used_blocks)
        if t in wanted:
            snapshots[t] = pool.snapshot(t)
        sched.update_from_output(out)
        if check:
            sched.check()
        t += 1
    for step in wanted:
        if step >= t:
            snapshots[step] = pool.snapshot(step)
    if nxt < n or sched.has_unfinished_requests():
        return PagedTrace(None, snapshots)
    return PagedTrace(_paged_result(wl, serving, np.array(used_series, dtype=np.int64), segs, preemptions), snapshots)


def _lazy_trace(wl: Workload, serving: PoolConfig, snapshot_steps, check: bool, until: int | None) -> PagedTrace:
    """The same schedule counted by the lab's one fast loop, naming blocks: a request is touched only on the
    steps it is admitted, takes a new block, finishes or is preempted."""
    c = _count(wl, serving, snapshot_steps=snapshot_steps, until=until, check=check)
    if not c.complete:
        return PagedTrace(None, c.snapshots)
    segs = (c.seg_req, c.seg_start, c.seg_end, c.seg_prompt)
    return PagedTrace(_paged_result(wl, serving, np.array(c.used_blocks, dtype=np.int64), segs,
                                    sum(c.num_preempted)), c.snapshots)
