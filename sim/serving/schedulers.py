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
               by pass by `simulate_static_stepwise`; `simulate_static` counts it with the lab's one fast loop
               (sim.serving.counting), and tests/test_scheduler_static.py pins the two to each other exactly,
               every integer and every time.
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
               is counted by the same fast loop (sim.serving.counting), which counts blocks by phase, touches a
               request only when it is admitted, finishes or is preempted, and sums each pass's work from
               running totals. The tests pin it to the Scheduler exactly (sim.serving.engine on random
               workloads; the paging page's block ids).

Token conventions are sim.alloc.schedule's: after iteration s+j a request holds p+j tokens (the last sampled
token is never fed back). A decode at iteration s+j attends to p+j keys.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from sim.alloc.schedule import PoolConfig, check_fits
from sim.alloc.workload import Workload
from sim.refusal import Misuse, Refusal
from sim.serving.counting import Counted, count
from sim.serving.result import ServingResult
from sim.serving.step_cost import PassWork, extend_work

if TYPE_CHECKING:
    from sim.serving.config import EngineConfig

POLICIES = ("static", "continuous")
MAX_REQUESTS = 5000  # the page's bound; a run is a Python loop over iterations
MAX_ITERATIONS = 300_000  # a run needing more forward passes than this is refused (a few seconds)
MAX_BATCH = 1024


def _check(wl: Workload, sched: EngineConfig) -> EngineConfig:
    """The serving run's bounds, before it starts; returns `sched` unchunked."""
    cfg = replace(sched, enable_chunked_prefill=False)
    if wl.num_requests > MAX_REQUESTS:
        raise Refusal("serving.err.requests", max=f"{MAX_REQUESTS:,}", got=f"{wl.num_requests:,}")
    check_fits(wl, PoolConfig(sched.capacity_tokens, cfg.block_size, cfg.max_num_seqs))
    if cfg.max_num_batched_tokens < wl.max_model_len:
        raise Refusal("loops.err.budget", budget=cfg.max_num_batched_tokens, max_len=wl.max_model_len)
    least = int(np.ceil(wl.output_len.sum() / cfg.max_num_seqs))
    if least > MAX_ITERATIONS:
        raise Refusal("loops.err.least_passes", tokens=int(wl.output_len.sum()), batch=cfg.max_num_seqs,
                      least=least, max=MAX_ITERATIONS)
    return cfg


def simulate_static(wl: Workload, sched: EngineConfig, cost, tick_s: float = 1.0) -> ServingResult:
    """Batches of up to max_num_seqs waiting requests, each padded and run until its longest output is done: the
    Scheduler's static policy counted by the lab's one fast loop (sim.serving.counting); simulate_static_stepwise is
    the same schedule through the Scheduler, and the tests hold the two equal."""
    cfg = _check(wl, sched)
    c = count(wl, replace(cfg, batching="static"), cost, tick_s,
              max_passes=MAX_ITERATIONS)
    return _result("static", wl, sched, c, tick_s)


def simulate_static_stepwise(wl: Workload, sched: EngineConfig, cost, tick_s: float = 1.0,
                             check: bool = False) -> ServingResult:
    """Static batching as the one Scheduler's static policy (EngineConfig(batching="static")), one pass at a
    time: schedule(), price the pass's padded rectangle, update_from_output(). `simulate_static` counts the same
    schedule with the lab's one fast loop (sim.serving.counting); the tests pin the two to each other exactly."""
    from sim.serving.config import NO_BUDGET, EngineConfig
    from sim.serving.scheduler import Request, Scheduler

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
            raise Refusal("loops.err.static_passes", max=MAX_ITERATIONS)
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
    """Iteration-level scheduling over a block pool, preemption by recompute (see the module docstring), counted by
    the lab's one fast loop (sim.serving.counting). check=True names every block in a real BlockPool and asserts
    its invariants after every pass (slow; for tests)."""
    cfg = _check(wl, sched)
    c = count(wl, cfg, cost, tick_s, max_passes=MAX_ITERATIONS, check=check)
    return _result("continuous", wl, sched, c, tick_s)


def _result(policy: str, wl: Workload, sched: EngineConfig, c: Counted, tick_s: float) -> ServingResult:
    if c.limit is not None and policy == "static":
        raise Refusal("loops.err.static_passes", max=MAX_ITERATIONS)
    if c.limit is not None:
        raise Refusal("loops.err.continuous_passes", max=MAX_ITERATIONS, waiting=c.limit[1])
    ints = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return ServingResult(
        policy=policy, capacity_tokens=sched.capacity_tokens, max_num_seqs=sched.max_num_seqs,
        arrival_s=wl.arrival.astype(np.float64) * tick_s, first_token_s=np.array(c.first),
        finish_s=np.array(c.finish), prompt_len=wl.prompt_len.copy(), output_len=wl.output_len.copy(),
        num_preempted=ints(c.num_preempted), seg_req=ints(c.seg_req), seg_start_s=np.array(c.seg_start),
        seg_end_s=np.array(c.seg_end), seg_row_end_s=np.array(c.seg_row_end), it_start_s=np.array(c.it_start),
        it_seconds=np.array(c.it_sec), it_rows=ints(c.it_rows), it_tokens=ints(c.it_tokens), it_prefills=ints(c.it_pre),
        it_prefill_tokens=ints(c.it_pret), it_kv_claimed=ints(c.it_claim), it_kv_tokens=ints(c.it_kvtok),
        it_finished=ints(c.it_fin))


def simulate(wl: Workload, sched: EngineConfig, cost, policy: str, tick_s: float = 1.0) -> ServingResult:
    if policy not in POLICIES:
        raise Misuse(f"policy must be one of {POLICIES}, got {policy!r}")
    fn = simulate_static if policy == "static" else simulate_continuous
    return fn(wl, sched, cost, tick_s)
