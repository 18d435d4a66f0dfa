"""The paged schedule: continuous batching over a block pool, preempting by recompute.

The loop admits waiting requests first-come first-served while they fit. A paged request needs only
its prompt's blocks to start; when a running request needs a block and none is free, the newest
running request is preempted: its blocks are freed and it goes back to the head of the queue to be
recomputed later (prompt + what it had generated).

Three runs of it agree exactly (tests check it, on random workloads and on pinned ones): the one Scheduler
(sim.serving.scheduler) stepping a real BlockPool one token per request per step (the reference); the Serving
page's counting loop (sim.serving.schedulers.replay_continuous) touching a request only when it crosses a block
boundary (identical block ids; used for the block-grid snapshots); and `simulate_paged_fast`, counting blocks
without naming them, fast enough for 100,000 requests.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from sim.alloc.block_pool import PoolSnapshot
from sim.alloc.schedule import (
    MAX_STEPS,
    PolicyResult,
    Segments,
    ServingConfig,
    check_fits,
    paged_slot_steps,
    token_slot_steps,
)
from sim.alloc.workload import Workload
from sim.refusal import Refusal


def _paged_result(wl: Workload, serving: ServingConfig, used: np.ndarray, segs: tuple[list, list, list, list],
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


def simulate_paged_fast(wl: Workload, serving: ServingConfig) -> PolicyResult:
    """Counts blocks without naming them, in O(1) per step and per event.

    A request admitted at step s with prompt p takes a new block at the steps s + j where p + j
    crosses a block boundary: j0 = ceil(p/bs)*bs + 1 - p (1 <= j0 <= bs), then every bs steps.
    So from admission until it leaves, it takes a block exactly on the steps t with
    t % bs == (s + j0) % bs: counting running requests per phase gives each step's new blocks.
    Same schedule as simulate_paged_stepwise (tested).
    """
    bs, nb, max_seqs = serving.block_size, serving.num_blocks, serving.max_num_seqs
    n = wl.num_requests
    min_steps = paged_slot_steps(wl, bs) // bs // nb  # block-steps needed / blocks available per step
    if min_steps > MAX_STEPS:
        raise Refusal("paged.err.min_steps", steps=f"{min_steps:,}", blocks=f"{nb:,}", max=f"{MAX_STEPS:,}")
    arrival, prompt, output = wl.arrival.tolist(), wl.prompt_len.tolist(), wl.output_len.tolist()
    phase_count = [0] * bs  # running requests that take a block on steps t with t % bs == phase
    waiting: deque[tuple[int, int, int, int]] = deque()  # (req, prompt, output, prompt blocks)
    running: dict[int, tuple[int, int, int, int]] = {}  # req -> (start, prompt, output, phase), oldest first
    finish_at: dict[int, list[int]] = {}  # step after the last one -> requests
    finish_pop = finish_at.pop
    used_series: list[int] = []
    record = used_series.append
    seg_req: list[int] = []
    seg_start: list[int] = []
    seg_end: list[int] = []
    seg_prompt: list[int] = []
    req_to_seg: dict[int, int] = {}
    used = 0
    preemptions = 0
    nxt = 0
    next_arrival = arrival[0]
    t = 0
    while nxt < n or waiting or running:
        while t >= next_arrival:
            p = prompt[nxt]
            waiting.append((nxt, p, output[nxt], -(-p // bs)))
            nxt += 1
            next_arrival = arrival[nxt] if nxt < n else math.inf
        if not running and not waiting:  # idle until the next arrival
            if next_arrival > MAX_STEPS:
                raise Refusal("paged.err.arrival", req=f"{nxt}", step=f"{next_arrival:,}", max=f"{MAX_STEPS:,}")
            used_series.extend([0] * (next_arrival - t))
            t = next_arrival
            continue
        if t >= MAX_STEPS:
            raise Refusal("paged.err.too_long", max=f"{MAX_STEPS:,}", waiting=f"{n - nxt + len(waiting):,}")
        used += phase_count[t % bs]
        if used > nb:
            while used > nb:  # preempt the newest running request; it is recomputed later
                req, (s, p, o, phase) = running.popitem()  # a dict pops its newest item
                k = t - s  # tokens it had produced
                used -= -(-(p + k) // bs)
                phase_count[phase] -= 1
                finish_at[s + o].remove(req)
                seg_end[req_to_seg[req]] = t
                waiting.appendleft((req, p + k, o - k, -(-(p + k) // bs)))
                preemptions += 1
        elif waiting and used + waiting[0][3] <= nb and len(running) < max_seqs:
            while waiting and len(running) < max_seqs:
                req, p, o, need = waiting[0]
                if used + need > nb:
                    break
                waiting.popleft()
                used += need
                phase = (t + need * bs + 1 - p) % bs
                phase_count[phase] += 1
                running[req] = (t, p, o, phase)
                if t + o in finish_at:
                    finish_at[t + o].append(req)
                else:
                    finish_at[t + o] = [req]
                req_to_seg[req] = len(seg_req)
                seg_req.append(req)
                seg_start.append(t)
                seg_end.append(t + o)
                seg_prompt.append(p)
        record(used)
        t += 1
        done = finish_pop(t, None)
        if done:
            for req in done:
                s, p, o, phase = running.pop(req)
                used -= -(-(p + o - 1) // bs)
                phase_count[phase] -= 1
    assert used == 0 and not any(phase_count), "blocks still counted after every request finished"
    return _paged_result(wl, serving, np.array(used_series, dtype=np.int64),
                         (seg_req, seg_start, seg_end, seg_prompt), preemptions)


@dataclass
class PagedTrace:
    """What simulate_paged_stepwise saw: the schedule plus pool snapshots at the asked steps."""

    result: PolicyResult | None  # None when stopped early (until=)
    snapshots: dict[int, PoolSnapshot] = field(default_factory=dict)


def simulate_paged_stepwise(wl: Workload, serving: ServingConfig, snapshot_steps=(), lazy: bool = False,
                            check: bool = False, until: int | None = None) -> PagedTrace:
    """The paged schedule with a real BlockPool, step by step, with pool snapshots at the asked steps.

    lazy=False runs the one Scheduler (sim.serving.scheduler: every running request appends its token each step,
    the reference); lazy=True is a replay that touches a request only on the steps it needs a new block
    (identical block ids, much faster, for the block-grid snapshots of long runs). check=True asserts the pool's
    invariants after every step. until=t stops after step t (then the trace has snapshots but no result).
    """
    check_fits(wl, serving)
    if not lazy:
        return _scheduler_trace(wl, serving, snapshot_steps, check, until)
    return _lazy_trace(wl, serving, snapshot_steps, check, until)


def _scheduler_trace(wl: Workload, serving: ServingConfig, snapshot_steps, check: bool,
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


def _lazy_trace(wl: Workload, serving: ServingConfig, snapshot_steps, check: bool, until: int | None) -> PagedTrace:
    """The same schedule, replayed by the Serving page's counting loop in bare decode steps: a request is touched
    only on the steps it crosses into a new block."""
    from sim.serving.scheduler import NO_BUDGET
    from sim.serving.schedulers import replay_continuous

    r = replay_continuous(wl, serving.num_blocks, serving.block_size, serving.max_num_seqs, 0, NO_BUDGET, None,
                          check=check, snapshot_steps=snapshot_steps, until=until, max_iterations=math.inf,
                          max_steps=MAX_STEPS)
    if not r.complete:
        return PagedTrace(None, r.snapshots)
    used = np.zeros(int(max(r.seg_end)), dtype=np.int64)  # idle steps hold no block
    used[np.array(r.it_start, dtype=np.int64)] = np.array(r.it_claim, dtype=np.int64) // serving.block_size
    segs = (r.seg_req, [int(x) for x in r.seg_start], [int(x) for x in r.seg_end], r.seg_prompt)
    return PagedTrace(_paged_result(wl, serving, used, segs, sum(r.num_preempted)), r.snapshots)
