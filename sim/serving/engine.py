"""The Serving engine: a workload run through the one Scheduler (sim.serving.scheduler, vLLM v1's shape), each
pass timed by a step cost, with swap traffic over a link, loads from offload tiers and speculative acceptance
drawn from a seeded generator.

Per pass, `simulate_engine` asks the scheduler for its plan (`schedule()`), prices it (the step cost of every
row's tokens, plus the bytes swapped over the link and the blocks loaded from lower tiers), draws how many draft
tokens each speculative row accepts, and hands that back (`update_from_output()`). A request's first token comes
out of the pass that completes its prompt. `record=True` keeps every step's queues, block tables and free queue
for the step-through view. The rules and their vLLM release: sim/cost/vllm_rules.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.alloc.block_pool import cdiv
from sim.alloc.schedule import PoolConfig, check_fits
from sim.alloc.workload import Workload
from sim.msg import Msg, Word
from sim.refusal import Misuse, Refusal
from sim.serving.config import MAX_NUM_SPECULATIVE_TOKENS, PREEMPTION_MODES, EngineConfig
from sim.serving.links import link as find_link
from sim.serving.result import ServingResult
from sim.serving.scheduler import Request, Scheduler
from sim.serving.schedulers import MAX_ITERATIONS, MAX_REQUESTS
from sim.serving.step_cost import PassWork

__all__ = ["MAX_NUM_SPECULATIVE_TOKENS", "PREEMPTION_MODES", "EngineConfig", "EngineRun", "StepView", "simulate_engine"]

MAX_RECORDED_STEPS = 2000  # the step-through view keeps at most this many steps
MAX_RECORDED_REQUESTS = 64
NO_WINDOW = 1 << 40


@dataclass(frozen=True)
class StepView:
    """One step as the step-through view draws it: queues after the step, what each row computed, what happened
    to blocks, every block table and the free queue (after finished requests left)."""

    step: int
    start_s: float
    end_s: float
    waiting: tuple[int, ...]
    running: tuple[int, ...]
    swapped: tuple[int, ...]
    finished: tuple[int, ...]  # requests that left in this step
    rows: tuple[tuple[int, Word | Msg, int], ...]  # (request, what it computed: RowKind or a Msg, tokens computed)
    events: tuple[Msg, ...]  # what happened to blocks, in order (worded by sim.words.serving.event_line)
    block_tables: dict[int, tuple[int, ...]]  # GPU
    num_tokens: dict[int, int]  # KV tokens each GPU table holds
    cpu_block_tables: dict[int, tuple[int, ...]]
    free_queue: tuple[int, ...]  # GPU, head first
    ref_cnt: tuple[int, ...]  # GPU, per block
    num_cpu_free: int
    cached_blocks: tuple[int, ...] = ()  # blocks holding a cached prefix hash (prefix caching)
    gpu_hashes: tuple[int, ...] = ()  # the hashes those blocks hold, in block order (prefix caching)
    tier_hashes: tuple[tuple[int, ...], ...] = ()  # (host, disk) hashes, least recently used first (offload)

    def num_used_blocks(self, num_blocks: int) -> int:
        return num_blocks - len(self.free_queue)


@dataclass(frozen=True, eq=False)
class EngineRun:
    config: EngineConfig
    result: ServingResult
    num_recomputes: int  # preemptions that discarded the KV
    num_swaps: int  # preemptions that moved it to the host
    recomputed_tokens: int  # KV tokens thrown away by recompute preemptions (computed again later)
    recompute_flops: float  # what computing them again cost (the step cost's FLOPs; nan when it has none)
    swap_out_bytes: int
    swap_in_bytes: int
    swap_seconds: float  # time the link added to passes
    prefix_hit_tokens: int  # prompt tokens found in the prefix cache at admission
    spec_reserved_slots: int  # lookahead slots reserved for draft tokens
    spec_rolled_back_slots: int  # of those, the ones whose draft was rejected
    spec_blocks_freed: int  # blocks handed back by rollbacks
    peak_cpu_blocks: int
    steps: tuple[StepView, ...] = field(default=())
    tier_hit_tokens: tuple[int, int, int] = (0, 0, 0)  # prompt tokens found on the GPU, in the host, on disk
    load_bytes: tuple[int, int] = (0, 0)  # bytes loaded back from the host, from disk
    load_seconds: tuple[float, float] = (0.0, 0.0)  # what those loads added to passes
    load_recompute_seconds: tuple[float, float] = (0.0, 0.0)  # what prefilling those tokens again would have cost
    offload_written_bytes: tuple[int, int] = (0, 0)  # bytes copied down into the host, into the disk (overlapped)

    @property
    def swap_bytes(self) -> int:
        return self.swap_out_bytes + self.swap_in_bytes


def _keys_upto(n: int, w: int) -> int:
    """Σ_{i=1..n} min(i, w), exactly (integers)."""
    return n * (n + 1) // 2 if n <= w else w * (w + 1) // 2 + (n - w) * w


def check_engine(wl: Workload, cfg: EngineConfig) -> None:
    """What a user's workload and settings can get wrong before the run: a prompt the pool or (unchunked) the token
    budget cannot hold, more forward passes than the simulator runs. (Every caller bounds the requests below
    MAX_REQUESTS first: a trace holds at most sim.alloc.trace.MAX_TRACE_REQUESTS, a study MAX_STUDY_REQUESTS, a
    shared-prefix workload MAX_SHARED_REQUESTS; the comparison refuses more itself.)"""
    if wl.num_requests > MAX_REQUESTS:
        raise Misuse(f"at most {MAX_REQUESTS:,} requests, got {wl.num_requests:,}")
    check_fits(wl, PoolConfig(capacity_tokens=cfg.capacity_tokens, block_size=cfg.block_size))
    if not cfg.enable_chunked_prefill and cfg.max_num_batched_tokens < wl.max_model_len:
        raise Refusal("serving.err.budget_unchunked", budget=cfg.max_num_batched_tokens, n=wl.max_model_len)
    outputs = int(wl.output_len.sum())
    least = int(np.ceil(outputs / cfg.max_num_seqs / (1 + cfg.num_speculative_tokens)))
    if least > MAX_ITERATIONS:
        raise Refusal("serving.err.passes", tokens=outputs, seqs=cfg.max_num_seqs, least=least, max=MAX_ITERATIONS)


def _pass_work(rows, window: int) -> tuple[PassWork, int, int]:
    """What a pass computes, summed over its rows (each row's new tokens attend to what it holds plus themselves),
    with the number of prefill rows and their tokens."""
    windowed = window < NO_WINDOW
    tokens = skip = keys_g = keys_l = kv_g = kv_l = 0
    n_prefill_rows = prefill_tokens = 0
    for row in rows:
        s, n_new = row.num_computed_tokens, row.num_new_tokens
        tokens += n_new
        keys_g += n_new * s + n_new * (n_new + 1) // 2
        kv_g += s + n_new
        if windowed:
            keys_l += _keys_upto(s + n_new, window) - _keys_upto(s, window)
            kv_l += min(s + n_new, window)
        if s < row.num_prefill_tokens:  # a prefill (or its chunk); its last prompt token's logits are needed
            n_prefill_rows += 1
            prefill_tokens += n_new
            skip += n_new - (1 if s + n_new == row.num_prefill_tokens else 0)
    if not windowed:
        keys_l, kv_l = keys_g, kv_g
    return PassWork(tokens, skip, keys_g, keys_l, kv_g, kv_l), n_prefill_rows, prefill_tokens


def _step_view(sched: Scheduler, step: int, start_s: float, end_s: float, out, res) -> StepView:
    """The queues, rows, events and pools after one step, for the step-through view."""
    pool, cpu, cfg = sched.kv.pool, sched.kv.cpu, sched.config
    hashed = sorted(pool.block_to_hash) if cfg.enable_prefix_caching else ()
    return StepView(
        step, start_s, end_s, tuple(r.request_id for r in sched.waiting), tuple(sched.running),
        tuple(r.request_id for r in sched.swapped), tuple(res.finished),
        tuple((row.request_id, row.kind, row.num_new_tokens) for row in out.rows), tuple(out.events + res.events),
        {r: tuple(tb) for r, tb in pool.req_to_block_table.items()}, dict(pool.req_to_num_tokens),
        {r: tuple(tb) for r, tb in cpu.req_to_block_table.items()}, tuple(pool.free_block_queue), tuple(pool.ref_cnt),
        cpu.num_free_blocks if cfg.num_cpu_blocks else 0, tuple(hashed), tuple(pool.block_to_hash[b] for b in hashed),
        sched.kv.tiers.contents() if sched.kv.tiers is not None else ())


def simulate_engine(wl: Workload, cfg: EngineConfig, cost, tick_s: float = 1.0, *,
                    prompt_hashes: list[list[int]] | None = None, kv_bytes_per_token: int | None = None,
                    record: bool = False, check: bool = False, offload=None,
                    prefilled_first_s: np.ndarray | None = None) -> EngineRun:
    """Run the workload through the Scheduler (sim.serving.scheduler), timing each pass with `cost`.
    prompt_hashes: each request's full prompt blocks' chained hashes, needed with prefix caching. record=True keeps
    a StepView per step (small workloads only); check=True asserts both pools' invariants and the token bookkeeping
    after every step (tests). offload: a sim.serving.tiers.OffloadConfig, lower tiers that keep the prefix blocks
    the GPU evicts (needs prefix caching). prefilled_first_s: (N,) for a decode instance of a disaggregated server:
    each request arrives with its prompt's KV already made elsewhere and its first token out at that time;
    admitted, it holds the prompt's KV and decodes from its second token on (outputs of 2+ tokens; no prefix
    caching)."""
    check_engine(wl, cfg)
    if prefilled_first_s is not None:
        # sim.serving.disagg's decode pool is the one caller: it passes each request's time and 2+ output tokens
        if cfg.enable_prefix_caching or len(prefilled_first_s) != wl.num_requests:
            raise Misuse("prefilled requests need one first-token time each and no prefix caching")
        if wl.num_requests and int(wl.output_len.min()) < 2:
            raise Misuse("a prefilled request must have at least 2 output tokens (the first came with its KV)")
    n, bs = wl.num_requests, cfg.block_size
    if record and (n > MAX_RECORDED_REQUESTS):
        raise Misuse(f"the step-through view follows at most {MAX_RECORDED_REQUESTS} requests, got {n:,}")
    if cfg.enable_prefix_caching and (prompt_hashes is None or len(prompt_hashes) != n):
        raise Misuse("prefix caching needs each request's prompt block hashes (token ids)")
    tiers = None
    if offload is not None:
        from sim.serving.tiers import TierCache, load_seconds, recompute_seconds

        if not cfg.enable_prefix_caching:
            raise Misuse("offload tiers keep prefix blocks: turn prefix caching on")
        tiers = TierCache(offload, bs)
    sched = Scheduler(cfg, tiers, record=record)
    pool, cpu = sched.kv.pool, sched.kv.cpu
    kvb = int(getattr(cost, "kv_bytes_per_token", 0) if kv_bytes_per_token is None else kv_bytes_per_token)
    link_bw = find_link(cfg.link).bytes_per_s
    window = int(getattr(cost, "window", NO_WINDOW))
    windowed = window < NO_WINDOW
    flops_of = getattr(cost, "flops", None)
    rng = np.random.default_rng(cfg.seed)

    arrival_s = wl.arrival.astype(np.float64) * tick_s
    arrival = arrival_s.tolist()
    requests = [Request(i, p, o, prompt_hashes[i] if cfg.enable_prefix_caching else None, prefilled_first_s is not None)
                for i, (p, o) in enumerate(zip(wl.prompt_len.tolist(), wl.output_len.tolist(), strict=True))]
    first = [math.nan] * n
    finish = [math.nan] * n
    last_tok = [math.nan] * n
    gaps: list[float] = []
    seg_req: list[int] = []
    seg_start: list[float] = []
    seg_end: list[float] = []
    req_to_seg: dict[int, int] = {}
    it_start, it_sec, it_rows, it_tok, it_pre, it_pret, it_claim, it_kvtok, it_fin = ([] for _ in range(9))
    stats = dict(recomputes=0, swaps=0, recomputed=0, re_flops=0.0, out_b=0, in_b=0, swap_s=0.0, hits=0,
                 reserved=0, rolled=0, spec_freed=0)
    tier_hit, load_b, load_s, re_s = [0, 0, 0], [0, 0], [0.0, 0.0], [0.0, 0.0]
    steps: list[StepView] = []
    now, nxt, t = 0.0, 0, 0
    while nxt < n or sched.has_unfinished_requests():
        while nxt < n and arrival[nxt] <= now:
            sched.add_request(requests[nxt])
            nxt += 1
        if not sched.has_unfinished_requests():
            now = arrival[nxt]
            continue
        if t >= MAX_ITERATIONS:
            raise Refusal("serving.err.stuck", max=MAX_ITERATIONS, waiting=len(sched.waiting) + n - nxt)
        out = sched.schedule()
        # what the plan moved: preemptions, swaps, prefix hits and loads from the tiers, new running stretches
        step_bytes, step_load_s = 0, 0.0
        for pre in out.preempted:
            seg_end[req_to_seg[pre.request_id]] = now
            if pre.swapped:
                stats["swaps"] += 1
                stats["out_b"] += pre.num_host_blocks * bs * kvb
                step_bytes += pre.num_host_blocks * bs * kvb
                continue
            c = pre.num_tokens
            stats["recomputes"] += 1
            stats["recomputed"] += c
            if flops_of is not None and c:
                kl = _keys_upto(c, window) if windowed else c * (c + 1) // 2
                stats["re_flops"] += float(flops_of(PassWork(c, c - 1, c * (c + 1) // 2, kl, c, min(c, window))))
        for c in out.swapped_in:
            stats["in_b"] += cdiv(c, bs) * bs * kvb
            step_bytes += cdiv(c, bs) * bs * kvb
        for _rid, n_gpu, below in out.prefix_hits:
            stats["hits"] += (n_gpu + len(below)) * bs
            tier_hit[0] += n_gpu * bs
            for j, tier in enumerate(below):
                tier_hit[tier] += bs
                ti = tier - 1
                sec = load_seconds(bs, kvb, offload.links[ti])
                load_b[ti] += bs * kvb
                load_s[ti] += sec
                re_s[ti] += recompute_seconds(cost, bs, (n_gpu + j) * bs)
                step_load_s += sec
        for rid in out.started:
            req_to_seg[rid] = len(seg_req)
            seg_req.append(rid)
            seg_start.append(now)
            seg_end.append(math.nan)
            if requests[rid].arrives_prefilled and math.isnan(first[rid]):
                first[rid] = last_tok[rid] = float(prefilled_first_s[rid])
        work, n_prefill_rows, prefill_tokens = _pass_work(out.rows, window)
        sec = float(cost.seconds(work))
        if step_bytes:
            extra = step_bytes / link_bw
            stats["swap_s"] += extra
            sec += extra
        sec += step_load_s
        end = now + sec
        # the model's output: each speculative row accepts each draft with chance draft_acceptance_rate, in order
        accepted = {}
        for row in sched.sampling_rows(out):
            a = 0
            while a < row.num_draft_tokens and rng.random() < cfg.draft_acceptance_rate:
                a += 1
            accepted[row.request_id] = a
        res = sched.update_from_output(out, accepted)
        stats["reserved"] += res.num_draft_tokens
        stats["rolled"] += res.num_rejected_tokens
        stats["spec_freed"] += res.num_blocks_rolled_back
        made = 0
        for rid, new_tokens in res.new_tokens:
            for j in range(new_tokens):
                if not math.isnan(last_tok[rid]):
                    gaps.append(end - last_tok[rid] if j == 0 else 0.0)
                last_tok[rid] = end
            if math.isnan(first[rid]):
                first[rid] = end
            made += new_tokens
        it_start.append(now)
        it_sec.append(sec)
        it_rows.append(len(out.rows))
        it_tok.append(made)
        it_pre.append(n_prefill_rows)
        it_pret.append(prefill_tokens)
        it_claim.append(res.num_used_blocks * bs)
        it_kvtok.append(res.num_kv_tokens)
        it_fin.append(len(res.finished))
        for rid in res.finished:
            finish[rid] = end
            seg_end[req_to_seg[rid]] = end
        if check:
            sched.check()
        if record and len(steps) < MAX_RECORDED_STEPS:
            steps.append(_step_view(sched, t, now, end, out, res))
        now = end
        t += 1
    assert pool.num_free_blocks == pool.num_blocks, "blocks still held after every request finished"
    assert cpu.num_free_blocks == cpu.num_blocks, "host blocks still held after every request finished"
    seg_end_a = np.array(seg_end)
    ints = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    result = ServingResult(
        policy=cfg.policy, capacity_tokens=cfg.capacity_tokens, max_num_seqs=cfg.max_num_seqs, arrival_s=arrival_s,
        first_token_s=np.array(first), finish_s=np.array(finish), prompt_len=wl.prompt_len.copy(),
        output_len=wl.output_len.copy(), num_preempted=ints([r.num_preemptions for r in requests]),
        seg_req=ints(seg_req), seg_start_s=np.array(seg_start), seg_end_s=seg_end_a, seg_row_end_s=seg_end_a,
        it_start_s=np.array(it_start), it_seconds=np.array(it_sec), it_rows=ints(it_rows), it_tokens=ints(it_tok),
        it_prefills=ints(it_pre), it_prefill_tokens=ints(it_pret), it_kv_claimed=ints(it_claim),
        it_kv_tokens=ints(it_kvtok), it_finished=ints(it_fin), token_gaps_s=np.array(gaps))
    return EngineRun(
        config=cfg, result=result, num_recomputes=stats["recomputes"], num_swaps=stats["swaps"],
        recomputed_tokens=stats["recomputed"], recompute_flops=stats["re_flops"] if flops_of is not None else math.nan,
        swap_out_bytes=stats["out_b"], swap_in_bytes=stats["in_b"], swap_seconds=stats["swap_s"],
        prefix_hit_tokens=stats["hits"], spec_reserved_slots=stats["reserved"],
        spec_rolled_back_slots=stats["rolled"], spec_blocks_freed=stats["spec_freed"],
        peak_cpu_blocks=sched.kv.peak_cpu_blocks, steps=tuple(steps), tier_hit_tokens=tuple(tier_hit),
        load_bytes=tuple(load_b), load_seconds=tuple(load_s), load_recompute_seconds=tuple(re_s),
        offload_written_bytes=tuple(n * bs * kvb for n in tiers.blocks_written) if tiers is not None else (0, 0))
