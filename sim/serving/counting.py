"""The lab's one fast counting loop: the Scheduler's (sim.serving.scheduler) two policies without chunked prefill,
static batches and continuous batching with recompute preemption, counted instead of stepped.

The Scheduler moves every running request one token per pass. This loop keeps running totals instead and touches a
request only when something happens to it (admitted, finished, preempted), so a pass costs O(1) plus its events:

  blocks    A request admitted at pass s with prompt p holds p + (t - s) tokens after pass t, so it takes a new block
            exactly on the passes t with t = s + j0 (mod block_size), j0 = ceil(p / bs) * bs + 1 - p. Counting the
            running requests by that phase gives each pass's new blocks without naming one. When more are needed
            than are free, the newest running request is preempted (its blocks freed, recomputed later), until they
            fit: the same victims the Scheduler picks request by request, oldest first (the tests pin both).
            Block ids are named only when asked (pool snapshots, check=True): then a real BlockPool follows the
            count, and on each pass the requests of that phase append their tokens oldest first, as the Scheduler's
            would.
  work      Σ (p - s) over the running requests gives the keys every decode attends to at pass t as Σ + n t; the
            admitted prompts add their prefills; a sliding window caps what a request sees (requests that reached
            it are counted apart). cost=None counts bare decode steps: every pass is one step, idle steps included.
  policies  The admission rule is the policy.
            continuous: running requests get room first; then, unless something was preempted, waiting requests
              are admitted first come first served while fewer than max_num_seqs run, their prompts fit what
              max_num_batched_tokens leaves after one decode token per running request, and the pool keeps its
              watermark of blocks free (when something else runs).
            static: only when nothing runs, a batch of up to max_num_seqs waiting requests, cut to the rows whose
              padded rectangle, rows x (longest prompt + largest max_tokens), fits capacity_tokens (one row always
              runs). Every row is computed at the padded prompt and rides along until the batch's longest output is
              done; the rectangle is reserved whole, so there are no blocks and no preemption. A batch is timed from
              its start (its passes' seconds summed, then added to its start), as the Scheduler's static driver does.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from sim.alloc.block_pool import BlockPool, cdiv
from sim.alloc.workload import Workload
from sim.serving.config import EngineConfig
from sim.serving.step_cost import PassWork, keys_upto


@dataclass
class Counted:
    """What the loop counted: per request, per running stretch, per pass (priced runs), per step (cost=None), and
    pool snapshots. Times are seconds when priced, steps when not."""

    first: list[float]
    finish: list[float]
    num_preempted: list[int]
    seg_req: list[int]
    seg_start: list[float]
    seg_end: list[float]
    seg_row_end: list[float]  # static: a row stays in its batch until the batch is done
    seg_prompt: list[int]  # the prompt the stretch prefilled (a recomputed request's is longer)
    it_start: list[float] = field(default_factory=list)
    it_sec: list[float] = field(default_factory=list)
    it_rows: list[int] = field(default_factory=list)
    it_tokens: list[int] = field(default_factory=list)
    it_pre: list[int] = field(default_factory=list)
    it_pret: list[int] = field(default_factory=list)
    it_claim: list[int] = field(default_factory=list)
    it_kvtok: list[int] = field(default_factory=list)
    it_fin: list[int] = field(default_factory=list)
    used_blocks: list[int] = field(default_factory=list)  # cost=None: blocks held after each step (idle steps: 0)
    snapshots: dict = field(default_factory=dict)
    complete: bool = True  # False when stopped early (until=) or at a limit
    limit: tuple | None = None  # ("passes", requests left) or ("arrival", request, step) when a limit stopped it


def count(wl: Workload, cfg: EngineConfig, cost=None, tick_s: float = 1.0, *, max_passes: float = math.inf,
          snapshot_steps=(), until: int | None = None, check: bool = False) -> Counted:
    """Runs `wl` under `cfg` (batching "iteration" without chunked prefill, recompute preemption; or "static") and
    counts it (see the module docstring). cost prices each pass (a step cost: seconds(PassWork)); cost=None counts
    decode steps, where snapshot_steps (pool snapshots after that step's admissions, block ids named) and until=t
    (stop after step t) apply. A run needing more than max_passes passes (steps when cost=None) stops there with
    `limit` set, and so does, when cost=None, an idle wait for a request arriving after step max_passes."""
    assert not cfg.enable_chunked_prefill and cfg.preemption_mode == "recompute"
    assert not cfg.num_speculative_tokens and not cfg.enable_prefix_caching
    static = cfg.batching == "static"
    priced = cost is not None
    n, bs, nb = wl.num_requests, cfg.block_size, cfg.num_gpu_blocks
    max_seqs, budget, wm = cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.watermark_blocks
    rect = cfg.capacity_tokens  # a static batch's contiguous slots
    window = getattr(cost, "window", 1 << 40)
    windowed = window < (1 << 40)
    wanted = set(int(x) for x in snapshot_steps)
    naming = bool(wanted) or check  # name block ids: a real BlockPool follows the count
    assert not (naming and static), "a static batch reserves a rectangle, not blocks"
    pool = BlockPool(nb, bs) if naming else None
    stop = math.inf if until is None else until
    arrival = (wl.arrival.astype(np.float64) * tick_s).tolist() if priced else wl.arrival.tolist()
    prompt, output, max_tokens = wl.prompt_len.tolist(), wl.output_len.tolist(), wl.max_tokens.tolist()
    first, finish, preempted = [math.nan] * n, [math.nan] * n, [0] * n
    segs: tuple[list, list, list, list, list] = ([], [], [], [], [])  # req, start, end, row end, prompt
    seg_req, seg_start, seg_end, seg_row_end, seg_prompt = segs
    c = Counted(first, finish, preempted, *segs)
    used_blocks, snapshots = c.used_blocks, c.snapshots
    # (request, prompt to prefill, tokens still to produce, the prompt's blocks)
    waiting: deque[tuple[int, int, int, int]] = deque()
    # request -> (admitted at pass, prompt computed (static: padded), output, segment, real prompt, phase);
    # insertion order is age
    running: dict[int, tuple[int, int, int, int, int, int]] = {}
    phase_n = [0] * bs  # running requests taking a block on passes t with t % bs == phase
    phase_reqs: list[dict[int, None]] = [{} for _ in range(bs)] if naming else []  # the same, named, oldest first
    finish_at: dict[int, list[int]] = {}  # pass -> requests producing their last token in it
    cap_at: dict[int, list[int]] = {}  # pass -> requests whose context reaches the window then
    growing: set[int] = set()  # running requests whose context is still below the window
    used = 0  # blocks held (continuous)
    reserved = 0  # the running static batch's rectangle, in slots
    batch_end = -1  # the pass the running static batch's longest output ends
    run_a = 0  # Σ (prompt computed - s) over running requests: a decode at pass t attends to that + t keys
    held_a = 0  # Σ (real prompt - s) over running requests still producing: real tokens held
    riders, rider_tokens = 0, 0  # static rows done producing, still computed; the tokens they hold
    grow_a, n_capped = 0, 0
    now: float = 0.0 if priced else 0
    epoch, cum = 0.0, 0.0  # a static batch's start and its passes' seconds so far
    nxt, t = 0, 0
    next_arrival = arrival[0]
    record, finish_pop = used_blocks.append, finish_at.pop

    def forget(req: int, r: tuple) -> None:
        """Takes a leaving request out of the named blocks and the window's sums (when either is kept)."""
        nonlocal grow_a, n_capped
        if naming:
            del phase_reqs[r[5]][req]
            pool.free(req)
        if windowed:
            if req in growing:
                growing.discard(req)
                grow_a -= r[1] - r[0]
            else:
                n_capped -= 1

    def preempt_newest(t: int, now: float) -> tuple[int, int, int]:
        """Frees the newest running request's blocks and queues it first, to be recomputed with what it made.
        Returns it, its blocks (this pass's counted: taken or needed) and its p - s (for the sums)."""
        victim, v = running.popitem()  # a dict pops its newest item
        phase_n[v[5]] -= 1
        if naming or windowed:
            forget(victim, v)
        k = t - v[0]  # tokens it had produced
        seg_end[v[3]] = seg_row_end[v[3]] = now
        finish_at[v[0] + v[2] - 1].remove(victim)
        waiting.appendleft((victim, v[1] + k, v[2] - k, -(-(v[1] + k) // bs)))
        preempted[victim] += 1
        return victim, cdiv(v[1] + k, bs), v[1] - v[0]

    halt = min(max_passes, stop + 1)  # until= applies to bare steps, where t is the step
    while nxt < n or waiting or running:
        while next_arrival <= now:
            waiting.append((nxt, prompt[nxt], output[nxt], -(-prompt[nxt] // bs)))
            nxt += 1
            next_arrival = arrival[nxt] if nxt < n else math.inf
        if not running and not waiting:  # idle until the next arrival
            if not priced:
                if next_arrival > max_passes:
                    c.limit, c.complete = ("arrival", nxt, next_arrival), False
                    return c
                for step in range(now, min(next_arrival, stop + 1)) if wanted else ():
                    if step in wanted:
                        snapshots[step] = pool.snapshot(step)
                used_blocks.extend([0] * (next_arrival - now))
                t = next_arrival
            now = next_arrival
            continue
        if t >= halt:
            if t > stop:
                break
            c.limit, c.complete = ("passes", len(waiting) + n - nxt), False
            return c
        # 1. room for every running request's next token; preempt the newest while the blocks do not suffice
        was_preempted = False
        take = phase_n[t % bs]
        if take:
            used += take
            if not naming:
                while used > nb:
                    _victim, blocks, a = preempt_newest(t, now)
                    used, was_preempted = used - blocks, True
                    if priced:
                        run_a, held_a = run_a - a, held_a - a
            else:  # the Scheduler's order: oldest first, each preempting the newest until it fits or is the newest
                for req in list(phase_reqs[t % bs]):
                    r = running.get(req)
                    if r is None:
                        continue  # preempted for an older one
                    need = r[1] + (t - r[0]) - pool.req_to_num_tokens[req]
                    while not pool.can_append(req, need):
                        victim, blocks, a = preempt_newest(t, now)
                        used, was_preempted = used - blocks, True
                        if priced:
                            run_a, held_a = run_a - a, held_a - a
                        if victim == req:
                            break
                    else:
                        pool.append(req, need)
                assert used <= nb
        # 2. admissions (none in a pass that preempted)
        admit = None
        if static:
            if not running and waiting:
                b, top_p, top_m = 0, 0, 0
                for req, p, _o, _need in islice(waiting, min(max_seqs, len(waiting))):
                    hi_p, hi_m = max(top_p, p), max(top_m, max_tokens[req])
                    if b and (b + 1) * (hi_p + hi_m) > rect:
                        break  # the padded rectangle no longer fits
                    b, top_p, top_m = b + 1, hi_p, hi_m
                reserved = b * (top_p + top_m)
                admit = [waiting.popleft() for _ in range(b)]
                batch_end = t + max(w[2] for w in admit) - 1
                epoch, cum = now, 0.0
        elif waiting and used + waiting[0][3] <= nb and not was_preempted and len(running) < max_seqs:
            left = budget - len(running)  # every running request decodes one token first
            room = max_seqs - len(running)
            while True:
                _req, p, _o, need = waiting[0]
                if p > left or nb - used - need < (wm if running or admit else 0):
                    break
                if admit is None:
                    admit = []
                admit.append(waiting.popleft())
                used += need
                left -= p
                if len(admit) == room or not waiting:
                    break
        if admit:
            n_adm, adm_a, adm_local = 0, 0, 0
            pre_tokens, pre_real, pre_skip, pre_kg, pre_kl, pre_kvl = 0, 0, 0, 0.0, 0.0, 0.0
            for req, p_real, o, _need in admit:
                p = top_p if static else p_real  # a static row is computed at the batch's longest prompt
                seg = len(seg_req)
                phase = 0 if static else (t - p + 1) % bs  # t + ceil(p / bs) * bs + 1 - p, mod bs
                running[req] = (t, p, o, seg, p_real, phase)  # tuples of ints: the garbage collector skips them
                seg_req.append(req)
                seg_start.append(now)
                seg_end.append(math.nan)
                seg_row_end.append(math.nan)
                seg_prompt.append(p_real)
                finish_at.setdefault(t + o - 1, []).append(req)
                if not static:
                    phase_n[phase] += 1
                    if naming:
                        phase_reqs[phase][req] = None
                        pool.add_request(req, p)
                if priced:  # the pass's sums (bare steps need none)
                    run_a += p - t
                    adm_a += p - t
                    held_a += p_real - t
                    n_adm += 1
                    pre_tokens += p
                    pre_real += p_real
                    pre_skip += p - 1
                    pre_kg += p * (p + 1) / 2
                    if windowed:
                        if p >= window:  # its context is already the window
                            n_capped += 1
                            adm_local += window
                        else:
                            growing.add(req)
                            grow_a += p - t
                            adm_local += p
                            cap_at.setdefault(t + window - p, []).append(req)
                        pre_kl += float(keys_upto(p, window))
                        pre_kvl += min(p, window)
                elif first[req] != first[req]:  # NaN: its first admission
                    first[req] = now + 1
        done = finish_pop(t, None)  # requests producing their last token in this pass
        # 3. the pass: prefills of the admitted, one decode for every other running request
        if priced:
            if not admit:
                n_adm, adm_a, adm_local = 0, 0, 0
                pre_tokens, pre_real, pre_skip, pre_kg, pre_kl, pre_kvl = 0, 0, 0, 0.0, 0.0, 0.0
            if windowed:
                for req in cap_at.pop(t, ()):
                    r = running.get(req)
                    if r is not None and req in growing and r[1] - r[0] + t >= window:
                        growing.discard(req)
                        grow_a -= r[1] - r[0]
                        n_capped += 1
            n_run = len(running)
            n_dec = n_run - n_adm
            ctx_g = (run_a - adm_a) + n_dec * t  # Σ keys the decodes attend to (full-attention layers)
            if windowed:
                ctx_l = grow_a + len(growing) * t + n_capped * window - adm_local
                work = PassWork(n_dec + pre_tokens, pre_skip, ctx_g + pre_kg, ctx_l + pre_kl, ctx_g + pre_tokens,
                                ctx_l + pre_kvl)
            else:  # no sliding window: local sums equal the full ones
                work = PassWork(n_dec + pre_tokens, pre_skip, ctx_g + pre_kg, ctx_g + pre_kg, ctx_g + pre_tokens,
                                ctx_g + pre_tokens)
            sec = float(cost.seconds(work))
            if static:
                cum += sec
                end = epoch + cum
                c.it_start.append(end - sec)
            else:
                end = now + sec
                c.it_start.append(now)
            c.it_sec.append(sec)
            c.it_rows.append(n_run)
            c.it_tokens.append(n_run - riders)
            c.it_pre.append(n_adm)
            c.it_pret.append(pre_real)
            c.it_claim.append(reserved if static else used * bs)
            c.it_kvtok.append(held_a + (n_run - riders) * t + rider_tokens)
            c.it_fin.append(len(done) if done else 0)
            if admit:
                for req, *_ in admit:
                    if first[req] != first[req]:  # NaN: its first admission
                        first[req] = end
        else:
            end = now + 1
            record(used)
        if naming:
            if now in wanted:
                for req, r in running.items():  # bring every lazily tracked request up to this step
                    missing = r[1] + (t - r[0]) - pool.req_to_num_tokens[req]
                    if missing > 0:
                        pool.append(req, missing)
                snapshots[now] = pool.snapshot(now)
            if check:
                pool.check_invariants()
                assert pool.num_used_blocks == used <= nb
        # 4. requests that produced their last token; a static row leaves with its batch (whose longest is done)
        if done:
            for req in done:
                r = running[req]
                finish[req] = end
                seg_end[r[3]] = end
                if priced:
                    held_a -= r[4] - r[0]
                    if not static:  # a static row rides along, still computed, until its batch is done
                        run_a -= r[1] - r[0]
                if static:
                    riders += 1
                    rider_tokens += r[4] + r[2] - 1
                else:
                    del running[req]
                    phase_n[r[5]] -= 1
                    if naming or windowed:
                        forget(req, r)
                    used -= -(-(r[1] + r[2] - 1) // bs)
                    seg_row_end[r[3]] = end
            if t == batch_end:
                for req, r in running.items():
                    if windowed:
                        forget(req, r)
                    seg_row_end[r[3]] = end
                running.clear()
                run_a = 0  # the riders' padded prompts (their real tokens left held_a when they finished)
                riders, rider_tokens, reserved = 0, 0, 0
        now = end
        t += 1
    c.complete = not (nxt < n or waiting or running)
    for step in wanted:
        if step >= now:
            snapshots[step] = pool.snapshot(step)
    if c.complete:
        assert used == 0 and not any(phase_n), "blocks still counted after every request finished"
        assert pool is None or pool.num_free_blocks == pool.num_blocks
    return c
