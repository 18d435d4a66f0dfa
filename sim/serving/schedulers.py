"""Serving many requests on one GPU: static vs continuous batching.

Both schedulers run the same seeded workloads as the paging page (sim.alloc.workload) and are iteration-level: one
iteration is one forward pass of the model over every row in the batch, timed by a step cost
(sim.serving.step_cost).

  static     : take up to `max_num_seqs` waiting requests, pad them to a rectangle (the longest prompt,
               then one decode step per token of the longest output) and run that batch to the end
               before the next one starts. Rows that finished early still ride along (and are still
               computed) until the batch's slowest request is done. The batch reserves its padded
               KV rectangle, rows × (longest prompt + largest max_tokens), so it can never run out
               mid-batch; a batch that would not fit in the KV budget is cut to the rows that fit.
               This is the one Scheduler's (sim.serving.scheduler) static policy (batching="static"), driven pass
               by pass by `simulate_static_stepwise`; `simulate_static` is its fast loop, whole batches in closed
               form with vectorized pass times (about 40-80x faster on 5,000 requests), and
               tests/test_scheduler_static.py pins the two to each other exactly, every integer and every time.
  continuous : (Orca's iteration-level scheduling with vLLM's paged memory.) Every iteration, the
               running requests first get room for their next token from a sim.alloc.block_pool.BlockPool;
               when the pool is empty the newest running request is preempted — its blocks are freed
               and it goes back to the head of the queue, to be recomputed later (prompt + what it had
               produced). Then, unless something was preempted, waiting requests are admitted
               first-come first-served while there are fewer than `max_num_seqs` running, their prompts
               fit in what `max_num_batched_tokens` has left after every running request's decode token (vLLM
               v1's Scheduler.schedule: running requests first), and the pool keeps `watermark` of its
               blocks free after the prompt's blocks are taken (v0 kept 1%; v1 keeps none). A request admitted at iteration s is prefilled at s
               (its first token comes out of that pass) and decodes at s+1 .. s+o-1; finished
               requests leave at the end of their last iteration, and their slots are reused at once.
               This is the one Scheduler's (sim.serving.scheduler) continuous policy without chunking; it
               is counted here by `replay_continuous`, the lab's fast counting loop, which touches a request
               only when it crosses into a new block and sums each pass's work from running totals. The
               tests pin it to the Scheduler exactly (sim.serving.engine on random workloads; the paging
               page's block ids).

Token conventions are sim.alloc.schedule's: after iteration s+j a request holds p+j tokens (the last sampled
token is never fed back). A decode at iteration s+j attends to p+j keys.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim.alloc.block_pool import BlockPool, cdiv
from sim.alloc.schedule import ServingConfig, check_fits
from sim.alloc.workload import Workload
from sim.refusal import Refusal
from sim.serving.result import ServingResult
from sim.serving.step_cost import PassWork, extend_work, keys_upto

if TYPE_CHECKING:
    from sim.serving.engine import EngineConfig

POLICIES = ("static", "continuous")
MAX_REQUESTS = 5000  # the page's bound; a run is a Python loop over iterations
MAX_ITERATIONS = 300_000  # a run needing more forward passes than this is refused (a few seconds)
MAX_BATCH = 1024


def _check(wl: Workload, sched: EngineConfig) -> None:
    if wl.num_requests > MAX_REQUESTS:
        raise ValueError(f"at most {MAX_REQUESTS:,} requests, got {wl.num_requests:,}")
    check_fits(wl, ServingConfig(sched.capacity_tokens, sched.block_size, sched.max_num_seqs))
    if sched.max_num_batched_tokens < wl.max_model_len:
        raise ValueError(f"max_batched_tokens {sched.max_num_batched_tokens:,} is below the maximum length "
                         f"{wl.max_model_len:,}: a long (or recomputed) prompt could never be prefilled")
    least = int(np.ceil(wl.output_len.sum() / sched.max_num_seqs))
    if least > MAX_ITERATIONS:
        raise ValueError(f"{int(wl.output_len.sum()):,} output tokens at most {sched.max_num_seqs} per pass need at least "
                         f"{least:,} forward passes, past the simulator's limit of {MAX_ITERATIONS:,}: raise the "
                         "batch size or use fewer or shorter requests")


def simulate_static(wl: Workload, sched: EngineConfig, cost, tick_s: float = 1.0) -> ServingResult:
    """Batches of up to max_num_seqs waiting requests, each padded and run until its longest output is done: the
    Scheduler's static policy computed a batch at a time (the fast loop; simulate_static_stepwise is the same
    schedule through the Scheduler, and the tests hold the two equal)."""
    _check(wl, sched)
    n, window = wl.num_requests, getattr(cost, "window", 1 << 40)
    arrival = wl.arrival.astype(np.float64) * tick_s
    p_all, o_all, mt_all = wl.prompt_len, wl.output_len, wl.max_tokens
    start = np.zeros(n)
    first = np.zeros(n)
    finish = np.zeros(n)
    row_end = np.zeros(n)
    it_parts: dict[str, list[np.ndarray]] = {k: [] for k in ("start", "sec", "rows", "tok", "pre", "pret", "claim",
                                                             "kvtok", "fin")}
    now = 0.0
    nxt = 0
    total_its = 0
    while nxt < n:
        now = max(now, arrival[nxt])
        ready = int(np.searchsorted(arrival, now, side="right"))  # requests that have arrived by now
        b = min(sched.max_num_seqs, ready - nxt)
        # cut the batch to the rows whose padded reservation fits the KV budget
        while b > 1:
            rows = slice(nxt, nxt + b)
            if b * (int(p_all[rows].max()) + int(mt_all[rows].max())) <= sched.capacity_tokens:
                break
            b -= 1
        rows = slice(nxt, nxt + b)
        p, o = p_all[rows], o_all[rows]
        pmax, omax = int(p.max()), int(o.max())
        reserve = b * (pmax + int(mt_all[rows].max()))  # one row always fits (check_fits)
        total_its += omax
        if total_its > MAX_ITERATIONS:
            raise ValueError(f"static batching passed {MAX_ITERATIONS:,} forward passes: raise the batch size or "
                             "use fewer or shorter requests")
        pre = extend_work(pmax, 0, window, logits_rows=1)
        secs = [np.atleast_1d(cost.seconds(PassWork(b * pmax, pre.lm_skip * b, pre.keys_g * b, pre.keys_l * b,
                                                pre.kv_g * b, pre.kv_l * b)))]
        if omax > 1:
            ctx = pmax + np.arange(1, omax, dtype=np.float64)  # keys a decode at step j attends to
            dw = extend_work(1, ctx - 1, window)
            secs.append(np.atleast_1d(cost.seconds(PassWork(b, 0, dw.keys_g * b, dw.keys_l * b, dw.kv_g * b,
                                                         dw.kv_l * b))) * np.ones(omax - 1))
        sec = np.concatenate(secs)
        ends = now + np.cumsum(sec)
        start[rows] = now
        first[rows] = ends[0]
        finish[rows] = ends[o - 1]
        row_end[rows] = ends[-1]
        j = np.arange(omax)
        o_sorted = np.sort(o)
        alive = b - np.searchsorted(o_sorted, j, side="right")  # rows with o > j produce a token at step j
        held = np.minimum(j[:, None], o[None, :] - 1) + p[None, :]  # (steps, rows) real tokens held
        it_parts["start"].append(ends - sec)
        it_parts["sec"].append(sec)
        it_parts["rows"].append(np.full(omax, b))
        it_parts["tok"].append(alive)
        it_parts["pre"].append(np.r_[b, np.zeros(omax - 1, dtype=np.int64)])
        it_parts["pret"].append(np.r_[int(p.sum()), np.zeros(omax - 1, dtype=np.int64)])
        it_parts["claim"].append(np.full(omax, reserve))
        it_parts["kvtok"].append(held.sum(axis=1))
        it_parts["fin"].append(np.bincount(o - 1, minlength=omax))
        now = float(ends[-1])
        nxt += b
    cat = {k: np.concatenate(v) for k, v in it_parts.items()}
    idx = np.arange(n)
    ints = {k: v.astype(np.int64) for k, v in cat.items()}
    return ServingResult(
        policy="static", capacity_tokens=sched.capacity_tokens, max_num_seqs=sched.max_num_seqs, arrival_s=arrival,
        first_token_s=first, finish_s=finish, prompt_len=p_all.copy(), output_len=o_all.copy(),
        num_preempted=np.zeros(n, dtype=np.int64), seg_req=idx, seg_start_s=start, seg_end_s=finish,
        seg_row_end_s=row_end, it_start_s=cat["start"], it_seconds=cat["sec"], it_rows=ints["rows"],
        it_tokens=ints["tok"], it_prefills=ints["pre"], it_prefill_tokens=ints["pret"], it_kv_claimed=ints["claim"],
        it_kv_tokens=ints["kvtok"], it_finished=ints["fin"])


def simulate_static_stepwise(wl: Workload, sched: EngineConfig, cost, tick_s: float = 1.0,
                             check: bool = False) -> ServingResult:
    """Static batching as the one Scheduler's static policy (EngineConfig(batching="static")), one pass at a
    time: schedule(), price the pass's padded rectangle, update_from_output(). `simulate_static` is the fast loop
    for the same schedule (whole batches in closed form); the tests pin the two to each other exactly."""
    from sim.serving.scheduler import NO_BUDGET, EngineConfig, Request, Scheduler

    _check(wl, sched)
    n, window = wl.num_requests, getattr(cost, "window", 1 << 40)
    arrival = wl.arrival.astype(np.float64) * tick_s
    s = Scheduler(EngineConfig(max_num_seqs=sched.max_num_seqs, max_num_batched_tokens=NO_BUDGET,
                               block_size=sched.block_size, capacity_tokens=sched.capacity_tokens,
                               enable_chunked_prefill=False, watermark=0.0, batching="static"))
    reqs = [Request(i, int(p), int(o), max_output_tokens=int(m))
            for i, (p, o, m) in enumerate(zip(wl.prompt_len, wl.output_len, wl.max_tokens, strict=True))]
    start, first, finish, row_end = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    its: dict[str, list] = {k: [] for k in ("start", "sec", "rows", "tok", "pre", "pret", "claim", "kvtok", "fin")}
    now = t0 = cum = 0.0
    nxt = 0
    batch: list[int] = []
    while nxt < n or s.has_unfinished_requests():
        if not s.running:  # a new batch: the clock jumps to the next arrival when nothing waits
            if not s.waiting:
                now = max(now, arrival[nxt])
            while nxt < n and arrival[nxt] <= now:
                s.add_request(reqs[nxt])
                nxt += 1
            t0, cum = now, 0.0
        out = s.schedule()
        st = out.static
        b = st.num_rows
        if st.step == 0:
            batch = list(out.started)
            pre = extend_work(st.padded_prompt_len, 0, window, logits_rows=1)
            work = PassWork(b * st.padded_prompt_len, pre.lm_skip * b, pre.keys_g * b, pre.keys_l * b, pre.kv_g * b,
                            pre.kv_l * b)
        else:
            dw = extend_work(1, np.float64(st.padded_prompt_len + st.step) - 1, window)
            work = PassWork(b, 0, dw.keys_g * b, dw.keys_l * b, dw.kv_g * b, dw.kv_l * b)
        sec = float(np.atleast_1d(cost.seconds(work))[0])
        cum += sec
        end = t0 + cum
        res = s.update_from_output(out)
        if check:
            s.check()
        if st.step == 0:
            start[batch] = t0
            first[batch] = end
        finish[res.finished] = end
        if not s.running:  # the batch is done: every row leaves now
            row_end[batch] = end
        its["start"].append(end - sec)
        its["sec"].append(sec)
        its["rows"].append(b)
        its["tok"].append(len(res.new_tokens))
        its["pre"].append(b if st.step == 0 else 0)
        its["pret"].append(out.total_num_scheduled_tokens if st.step == 0 else 0)
        its["claim"].append(st.num_reserved_tokens)
        its["kvtok"].append(res.num_kv_tokens)
        its["fin"].append(len(res.finished))
        if len(its["sec"]) > MAX_ITERATIONS:
            raise ValueError(f"static batching passed {MAX_ITERATIONS:,} forward passes: raise the batch size or "
                             "use fewer or shorter requests")
        now = end
    ints = {k: np.array(its[k], dtype=np.int64) for k in ("rows", "tok", "pre", "pret", "claim", "kvtok", "fin")}
    idx = np.arange(n)
    return ServingResult(
        policy="static", capacity_tokens=sched.capacity_tokens, max_num_seqs=sched.max_num_seqs, arrival_s=arrival,
        first_token_s=first, finish_s=finish, prompt_len=wl.prompt_len.copy(), output_len=wl.output_len.copy(),
        num_preempted=np.zeros(n, dtype=np.int64), seg_req=idx, seg_start_s=start, seg_end_s=finish.copy(),
        seg_row_end_s=row_end, it_start_s=np.array(its["start"]), it_seconds=np.array(its["sec"]),
        it_rows=ints["rows"], it_tokens=ints["tok"], it_prefills=ints["pre"], it_prefill_tokens=ints["pret"],
        it_kv_claimed=ints["claim"], it_kv_tokens=ints["kvtok"], it_finished=ints["fin"])


def simulate_continuous(wl: Workload, sched: EngineConfig, cost, tick_s: float = 1.0,
                        check: bool = False) -> ServingResult:
    """Iteration-level scheduling over a BlockPool, preemption by recompute (see the module docstring).

    check=True asserts the pool's invariants after every iteration (slow; for tests)."""
    _check(wl, sched)
    r = replay_continuous(wl, sched.num_gpu_blocks, sched.block_size, sched.max_num_seqs, sched.watermark_blocks,
                          sched.max_num_batched_tokens, cost, tick_s, check=check)
    seg_end = np.array(r.seg_end)
    ints = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return ServingResult(
        policy="continuous", capacity_tokens=sched.capacity_tokens, max_num_seqs=sched.max_num_seqs, arrival_s=r.arrival_s,
        first_token_s=np.array(r.first), finish_s=np.array(r.finish), prompt_len=wl.prompt_len.copy(),
        output_len=wl.output_len.copy(), num_preempted=ints(r.num_preempted), seg_req=ints(r.seg_req),
        seg_start_s=np.array(r.seg_start), seg_end_s=seg_end, seg_row_end_s=seg_end, it_start_s=np.array(r.it_start),
        it_seconds=np.array(r.it_sec), it_rows=ints(r.it_rows), it_tokens=ints(r.it_rows), it_prefills=ints(r.it_pre),
        it_prefill_tokens=ints(r.it_pret), it_kv_claimed=ints(r.it_claim), it_kv_tokens=ints(r.it_kvtok),
        it_finished=ints(r.it_fin))


@dataclass
class Replay:
    """What replay_continuous recorded: per request, per running stretch, per pass, and pool snapshots."""

    arrival_s: np.ndarray
    first: list[float]
    finish: list[float]
    num_preempted: list[int]
    seg_req: list[int]
    seg_start: list[float]
    seg_end: list[float]
    seg_prompt: list[int]
    it_start: list[float]
    it_sec: list[float]
    it_rows: list[int]
    it_pre: list[int]
    it_pret: list[int]
    it_claim: list[int]
    it_kvtok: list[int]
    it_fin: list[int]
    snapshots: dict = field(default_factory=dict)
    complete: bool = True  # False when stopped early (until=)


def replay_continuous(wl: Workload, num_blocks: int, block_size: int, max_num_seqs: int, watermark_blocks: int,
                      max_num_batched_tokens: int, cost, tick_s: float = 1.0, *, check: bool = False,
                      snapshot_steps=(), until: int | None = None,
                      max_iterations: float = MAX_ITERATIONS, max_steps: int = 0) -> Replay:
    """The Scheduler's continuous batching (sim.serving.scheduler, recompute, no chunking), counted lazily: a
    running request is touched only on the iteration it crosses into a new block, and a pass's work is summed from
    running totals, so a run costs O(blocks taken) rather than O(tokens). Same block ids, same schedule (tested).

    cost=None counts bare decode steps (every pass 1 s, no PassWork built): the paging page's schedule, where
    snapshot_steps (pool snapshots after that step's admissions, every lazily tracked request brought up to date)
    and until=t (stop after step t) apply; steps are then whole seconds, and an idle wait for a request arriving
    after max_steps is refused."""
    n, bs, max_batch = wl.num_requests, block_size, max_num_seqs
    window = getattr(cost, "window", 1 << 40)
    pool = BlockPool(num_blocks, bs)
    wm = watermark_blocks
    arrival_s = wl.arrival.astype(np.float64) * tick_s
    arrival = arrival_s.tolist()
    prompt, output = wl.prompt_len.tolist(), wl.output_len.tolist()
    wanted = set(int(x) for x in snapshot_steps)
    snapshots: dict = {}
    stop = math.inf if until is None else until
    first = [math.nan] * n
    finish = [math.nan] * n
    preempted = [0] * n
    waiting: deque[tuple[int, int, int]] = deque()  # (req, prompt to prefill, tokens still to produce)
    running: dict[int, list[int]] = {}  # req -> [start it, prompt, output, segment]; insertion order = age
    crossings: dict[int, list[tuple[int, int]]] = {}  # iteration -> (segment, request) needing a new block then
    finish_at: dict[int, list[int]] = {}
    cap_at: dict[int, list[int]] = {}  # iteration -> requests whose context reaches the window then
    growing: set[int] = set()  # running requests whose context is still below the window
    segs: tuple[list, list, list, list] = ([], [], [], [])  # req, start_s, end_s, prompt
    its: tuple[list, ...] = tuple([] for _ in range(8))
    (it_start, it_sec, it_rows, it_pre, it_pret, it_claim, it_kvtok, it_fin) = its
    # Σ over running requests of (p - s): a request's context at iteration t is p - s + t
    run_a, grow_a = 0, 0
    n_capped = 0
    now = 0.0
    nxt = 0
    t = 0
    windowed = window < (1 << 40)

    def leave(req: int, r: list[int]) -> None:
        nonlocal run_a, grow_a, n_capped
        run_a -= r[1] - r[0]
        if windowed:
            if req in growing:
                growing.discard(req)
                grow_a -= r[1] - r[0]
            else:
                n_capped -= 1

    while (nxt < n or waiting or running) and now <= stop:
        while nxt < n and arrival[nxt] <= now:
            waiting.append((nxt, prompt[nxt], output[nxt]))
            nxt += 1
        if not running and not waiting:
            if cost is None and arrival[nxt] > max_steps:
                raise Refusal("paged.err.arrival", req=f"{nxt}", step=f"{int(arrival[nxt]):,}", max=f"{max_steps:,}")
            for step in range(int(now), int(min(arrival[nxt], stop + 1))) if wanted else ():
                if step in wanted:
                    snapshots[step] = pool.snapshot(step)
            now = arrival[nxt]
            continue
        if t >= max_iterations:
            raise ValueError(f"continuous batching passed {MAX_ITERATIONS:,} forward passes with "
                             f"{len(waiting) + n - nxt:,} requests waiting: raise the KV budget or the batch size")
        if windowed:
            for req in cap_at.pop(t, ()):
                r = running.get(req)
                if r is not None and req in growing and r[1] - r[0] + t >= window:
                    growing.discard(req)
                    grow_a -= r[1] - r[0]
                    n_capped += 1
        # 1. room for every running request's next token, oldest first; preempt the newest when the pool is empty
        was_preempted = False
        for seg, req in sorted(crossings.pop(t, ())):  # segment ids grow with admission: oldest first
            r = running.get(req)
            if r is None or r[3] != seg:
                continue  # preempted since (and maybe re-admitted with another schedule)
            need = r[1] + (t - r[0]) - pool.req_to_num_tokens[req]
            while not pool.can_append(req, need):
                victim = next(reversed(running))
                v = running.pop(victim)
                leave(victim, v)
                pool.free(victim)
                k = t - v[0]  # tokens it had produced
                segs[2][v[3]] = now
                finish_at[v[0] + v[2] - 1].remove(victim)
                waiting.appendleft((victim, v[1] + k, v[2] - k))
                preempted[victim] += 1
                was_preempted = True
                if victim == req:
                    break
            else:
                pool.append(req, need)
                nxt_cross = cdiv(pool.req_to_num_tokens[req], bs) * bs + 1 - r[1] + r[0]
                if nxt_cross < r[0] + r[2]:
                    crossings.setdefault(nxt_cross, []).append((seg, req))
        # 2. admissions (none in an iteration that preempted)
        adm_a, n_adm, adm_local = 0, 0, 0
        pre_tokens, pre_skip, pre_kg, pre_kl, pre_kvl = 0, 0, 0.0, 0.0, 0.0
        if not was_preempted:
            left = max_num_batched_tokens - len(running)  # every running request decodes one token first
            while waiting and len(running) < max_batch:
                req, p, o = waiting[0]
                need = cdiv(p, bs)
                if pre_tokens + p > left:
                    break
                if pool.num_free_blocks - need < (wm if running else 0):
                    break
                waiting.popleft()
                pool.add_request(req, p)
                running[req] = [t, p, o, len(segs[0])]
                segs[0].append(req)
                segs[1].append(now)
                segs[2].append(math.nan)
                segs[3].append(p)
                finish_at.setdefault(t + o - 1, []).append(req)
                first_cross = cdiv(p, bs) * bs + 1 - p + t
                if first_cross < t + o:
                    crossings.setdefault(first_cross, []).append((running[req][3], req))
                run_a += p - t
                adm_a += p - t
                n_adm += 1
                if windowed:
                    if p >= window:  # its context is already the window
                        n_capped += 1
                        adm_local += window
                    else:
                        growing.add(req)
                        grow_a += p - t
                        adm_local += p
                        cap_at.setdefault(t + window - p, []).append(req)
                pre_tokens += p
                if cost is not None:
                    pre_skip += p - 1
                    pre_kg += p * (p + 1) / 2
                    if windowed:
                        pre_kl += float(keys_upto(p, window))
                        pre_kvl += min(p, window)
        # 3. the pass: prefills of the admitted, one decode for every other running request
        n_dec = len(running) - n_adm
        if cost is None:
            sec = 1.0
        else:
            ctx_g = (run_a - adm_a) + n_dec * t  # Σ keys the decodes attend to (full-attention layers)
            if windowed:
                ctx_l = grow_a + len(growing) * t + n_capped * window - adm_local
                work = PassWork(n_dec + pre_tokens, pre_skip, ctx_g + pre_kg, ctx_l + pre_kl, ctx_g + pre_tokens,
                            ctx_l + pre_kvl)
            else:  # no sliding window: local sums equal the full ones
                work = PassWork(n_dec + pre_tokens, pre_skip, ctx_g + pre_kg, ctx_g + pre_kg, ctx_g + pre_tokens,
                            ctx_g + pre_tokens)
            sec = float(cost.seconds(work))
        end = now + sec
        for req in list(running)[len(running) - n_adm:] if n_adm else ():
            if math.isnan(first[req]):
                first[req] = end
        it_start.append(now)
        it_sec.append(sec)
        it_rows.append(n_dec + n_adm)
        it_pre.append(n_adm)
        it_pret.append(pre_tokens)
        it_claim.append(pool.num_used_blocks * bs)
        it_kvtok.append(run_a + len(running) * t)
        if wanted and int(now) in wanted:
            for req, r in running.items():  # bring every lazily tracked request up to this step
                missing = r[1] + (t - r[0]) - pool.req_to_num_tokens[req]
                if missing > 0:
                    pool.append(req, missing)
            snapshots[int(now)] = pool.snapshot(int(now))
        if check:
            pool.check_invariants()
            assert pool.num_used_blocks <= num_blocks
        done = finish_at.pop(t, ())
        it_fin.append(len(done))
        for req in done:
            r = running.pop(req)
            leave(req, r)
            pool.free(req)
            finish[req] = end
            segs[2][r[3]] = end
        now = end
        t += 1
    complete = not (nxt < n or waiting or running)
    for step in wanted:
        if step >= now:
            snapshots[step] = pool.snapshot(step)
    if complete:
        assert pool.num_free_blocks == pool.num_blocks, "blocks still held after every request finished"
    return Replay(arrival_s, first, finish, preempted, *segs, *its, snapshots=snapshots, complete=complete)


def simulate(wl: Workload, sched: EngineConfig, cost, policy: str, tick_s: float = 1.0) -> ServingResult:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    fn = simulate_static if policy == "static" else simulate_continuous
    return fn(wl, sched, cost, tick_s)
