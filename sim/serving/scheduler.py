"""One scheduler in vLLM v1's shape: `Request`s with a status, a `KVCacheManager` over the block pool, and a
`Scheduler` whose `schedule()` plans one forward pass (`SchedulerOutput`) and whose `update_from_output()` applies
what the pass produced. Continuous batching, chunked prefill, recompute and swap preemption, prefix caching with
lower tiers and lookahead slots for draft tokens are options of this one loop, and static batching
(`batching="static"`, `_schedule_static`) is its other policy; every simulator that batches
requests over a block pool drives it (sim.serving.engine for timed runs, sim.alloc.paged_schedule for the paging
page's decode steps; the one fast counting loop, sim.serving.counting, is pinned to it). The rules follow vLLM's
core scheduler in the release sim.cost.vllm_rules.VLLM_VERSION names (vllm/v1/core/sched/scheduler.py,
vllm/v1/request.py, vllm/v1/core/kv_cache_manager.py), learned, not copied; swapping and the admission watermark
are vLLM v0's, kept to compare.

One step, as `schedule()` plans it:

  1. Running requests, oldest first, get their tokens: one for a decode (1 + k with k draft tokens), the rest of
     the prompt — at most what the budget has left — for one still prefilling (only with chunked prefill). When
     the free queue is short the newest running request is preempted, until the request fits or was itself the
     newest: recompute frees its blocks and puts it back at the head of the waiting queue (it will prefill its
     prompt and every token it had produced again); swap (v0) copies its blocks to the host pool instead, when
     its prompt is complete and the host has room.
  2. Unless something was preempted: swapped requests come back first, oldest swap first; then, once none is
     left swapped, waiting requests are admitted first-come first-served while fewer than `max_num_seqs` run,
     the budget has tokens left and the pool keeps `watermark` of its blocks free. With chunked prefill the last
     one admitted may get only part of its prompt; without it a prompt is prefilled whole or waits. Either way
     the running requests' tokens come out of `max_num_batched_tokens` first.

`update_from_output()` then advances every scheduled request's `num_computed_tokens`; a request whose prompt is
complete gets its sampled token (a speculative one its accepted drafts + 1, rejected drafts' slots rolled back);
full prompt blocks are offered to the prefix cache; finished requests free their blocks, oldest first.

Token convention (sim.alloc.schedule's): after a pass a request holds `num_computed_tokens` KV slots; its last
sampled token is fed back, and stored, only by the next pass.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from itertools import accumulate
from typing import NamedTuple

from sim.alloc.block_pool import BlockPool, cdiv
from sim.alloc.prefix_cache import PrefixCachingBlockPool
from sim.msg import Msg, Word
from sim.serving.config import BATCHING, NO_BUDGET, PREEMPTION_MODES, EngineConfig

__all__ = ["BATCHING", "NO_BUDGET", "PREEMPTION_MODES", "EngineConfig", "KVCacheManager", "Request", "RequestStatus",
           "RowKind", "Scheduler", "SchedulerOutput", "StepResult", "prefill_kind"]



class RequestStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"  # recomputed later: waiting again, at the head of the queue
    SWAPPED = "swapped"  # v0: its KV on the host, waiting to be copied back
    FINISHED = "finished"


class RowKind(Word):
    """What a scheduled row computes in a pass, as the step-through view words it."""

    PREFILL = "prefill"
    PREFILL_CHUNK = "prefill_chunk"
    LAST_CHUNK = "prefill__last_chunk"
    DECODE = "decode"

    @classmethod
    def prefix(cls) -> str:
        return "serving.did"


def prefill_kind(num_computed: int, num_new: int, num_prefill: int, num_cached: int = 0) -> Word | Msg:
    """A prefill row's kind: whole, a chunk, the last chunk, or the rest after `num_cached` prefix-cache hits."""
    if num_cached and num_computed == num_cached and num_computed + num_new == num_prefill:
        return Msg("serving.did.after", n=num_cached)
    if num_computed == 0 and num_new == num_prefill:
        return RowKind.PREFILL
    return RowKind.LAST_CHUNK if num_computed + num_new == num_prefill else RowKind.PREFILL_CHUNK


@dataclass(eq=False)
class Request:
    """One request as the scheduler tracks it (vLLM's Request). `max_tokens` is the output it produces: the
    simulated client ignores EOS and stops at its output length, as vLLM's benchmarks do."""

    request_id: int
    num_prompt_tokens: int
    max_tokens: int
    block_hashes: list[int] | None = None  # its full prompt blocks' chained hashes (prefix caching)
    arrives_prefilled: bool = False  # a disaggregated decode instance: the prompt's KV and first token come along
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0  # KV slots it holds
    num_output_tokens: int = 0  # tokens sampled so far
    num_preemptions: int = 0
    max_output_tokens: int = 0  # the client's cap (0: max_tokens); a static batch reserves room for this many
    num_prefill_tokens: int = field(init=False)  # tokens to compute before this stretch samples: the prompt, and
    # after a recompute preemption every token it had produced too

    def __post_init__(self) -> None:
        self.num_prefill_tokens = self.num_prompt_tokens

    @property
    def num_tokens(self) -> int:
        """Prompt and output tokens so far (vLLM's num_tokens)."""
        return self.num_prompt_tokens + self.num_output_tokens

    @property
    def is_prefilling(self) -> bool:
        return self.num_computed_tokens < self.num_prefill_tokens

    @property
    def is_finished(self) -> bool:
        return self.num_output_tokens >= self.max_tokens


class ScheduledRow(NamedTuple):
    """One request's share of a pass."""

    request_id: int
    num_new_tokens: int
    num_draft_tokens: int  # of those, draft tokens to verify
    kind: Word | Msg  # RowKind, or the prefill after prefix-cache hits
    num_computed_tokens: int  # KV it holds before the pass
    num_prefill_tokens: int  # its prefill target (a row samples once this is reached)


class Preemption(NamedTuple):
    request_id: int
    swapped: bool
    num_tokens: int  # KV tokens it held: dropped (recompute) or copied to the host (swap)
    num_host_blocks: int  # blocks written to the host (swap)


class StaticPass(NamedTuple):
    """A static batch's pass: every one of `num_rows` rows computes `padded_prompt_len` tokens at `step` 0 (short
    prompts padded) and one token at each later step, finished rows included, until the longest output is done."""

    num_rows: int
    padded_prompt_len: int
    step: int  # 0: the prefill; j: the j-th decode, attending to padded_prompt_len + j keys
    num_reserved_tokens: int  # the batch's KV rectangle, rows x (padded prompt + largest max_tokens)

    @property
    def num_tokens(self) -> int:
        """Tokens the pass computes, padding included."""
        return self.num_rows * (self.padded_prompt_len if self.step == 0 else 1)


@dataclass
class SchedulerOutput:
    """The plan for one pass (vLLM's SchedulerOutput, with what the simulators count)."""

    rows: list[ScheduledRow] = field(default_factory=list)
    preempted: list[Preemption] = field(default_factory=list)
    started: list[int] = field(default_factory=list)  # requests starting a running stretch, in order
    new_block_ids: dict[int, tuple[int, ...]] = field(default_factory=dict)  # blocks each request took this step
    # (a request starting a stretch: its whole GPU block table)
    swapped_in: list[int] = field(default_factory=list)  # the KV tokens each swapped-in request copied back
    prefix_hits: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)  # (request, GPU blocks hit,
    # the tier (1 host, 2 disk) of each further block loaded from below)
    events: list[Msg] = field(default_factory=list)  # what happened to blocks, in order
    static: StaticPass | None = None  # static batching: the padded rectangle this pass computes

    @property
    def num_scheduled_tokens(self) -> dict[int, int]:
        return {r.request_id: r.num_new_tokens for r in self.rows}

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(r.num_new_tokens for r in self.rows)

    @property
    def num_padding_tokens(self) -> int:
        """Tokens a static batch computes for no request: short prompts' padding, finished rows' decodes."""
        return self.static.num_tokens - self.total_num_scheduled_tokens if self.static else 0


@dataclass
class StepResult:
    """What `update_from_output` did: tokens each row sampled (row order), the requests that finished, and the
    KV right after the pass (before the finished left)."""

    new_tokens: list[tuple[int, int]]
    finished: list[int]
    num_kv_tokens: int
    num_used_blocks: int
    events: list[Msg]
    num_draft_tokens: int = 0  # lookahead slots verified in this pass
    num_rejected_tokens: int = 0  # of those, slots rolled back
    num_blocks_rolled_back: int = 0  # blocks the rollbacks freed


class KVCacheManager:
    """The GPU block pool (prefix-caching or plain), the host pool swapped requests wait in, and the optional
    lower tiers evicted prefix blocks go down to (sim.serving.tiers.TierCache)."""

    def __init__(self, config: EngineConfig, tiers=None) -> None:
        bs = config.block_size
        self.block_size = bs
        self.enable_prefix_caching = config.enable_prefix_caching
        self.pool: BlockPool = (PrefixCachingBlockPool if config.enable_prefix_caching else BlockPool)(
            config.num_gpu_blocks, bs)
        self.num_cpu_blocks = config.num_cpu_blocks
        self.cpu = BlockPool(max(1, config.num_cpu_blocks), bs)
        self.tiers = tiers
        self.peak_cpu_blocks = 0
        self._evictions_seen = 0

    def allocate_slots(self, request_id: int, num_new_tokens: int) -> tuple[int, ...] | None:
        """Room for a running request's next tokens, taking blocks from the free queue: the blocks taken (often
        none), or None (nothing taken) when the queue is too short."""
        return self.pool.try_append(request_id, num_new_tokens)

    def get_block_ids(self, request_id: int) -> list[int]:
        return self.pool.block_table(request_id)

    def drain_evictions(self) -> None:
        """GPU evictions since the last call go down to the tiers, in the order they happened."""
        ev = self.pool.evicted
        for _block, h in ev[self._evictions_seen:]:
            self.tiers.evicted_from_gpu(h)
        self._evictions_seen = len(ev)

    def get_computed_blocks(self, request: Request) -> tuple[list[int], list[int]]:
        """(GPU blocks holding its leading prompt blocks, tiers of the blocks found below them); the last prompt
        token is always computed, so at most (prompt - 1) // block_size blocks hit."""
        if not self.enable_prefix_caching or request.num_computed_tokens:
            return [], []
        most = (request.num_prefill_tokens - 1) // self.block_size
        cached = self.pool.find_cached_prefix(request.block_hashes, most)
        below: list[int] = []
        if self.tiers is not None:
            self.drain_evictions()
            below = self.tiers.find(request.block_hashes[len(cached):most])
        return cached, below

    def swap_out(self, request: Request) -> list[int] | None:
        """Copy a request's KV to the host and free its GPU blocks; None (nothing done) when the host lacks room."""
        n = request.num_computed_tokens
        if not self.num_cpu_blocks or cdiv(n, self.block_size) > self.cpu.num_free_blocks:
            return None
        host = self.cpu.add_request(request.request_id, n)
        self.pool.free(request.request_id)
        self.peak_cpu_blocks = max(self.peak_cpu_blocks, self.cpu.num_used_blocks)
        return host

    def check(self) -> None:
        self.pool.check_invariants()
        self.cpu.check_invariants()
        if self.tiers is not None:
            self.tiers.check_invariants()


class Scheduler:
    """The waiting, running and swapped queues over one KVCacheManager (module docstring)."""

    def __init__(self, config: EngineConfig, tiers=None, *, record: bool = False) -> None:
        self.config = config
        self.kv = KVCacheManager(config, tiers)
        self.record = record  # keep events (what happened to blocks) for the step-through view
        self.requests: dict[int, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # insertion order = age
        self.swapped: deque[Request] = deque()
        self._hashed_upto: dict[int, int] = {}  # running request -> full prompt blocks offered to the cache
        self._static: StaticPass | None = None  # the static batch in flight

    def add_request(self, request: Request) -> None:
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    # --- static batching -----------------------------------------------------------------------------------

    def _schedule_static(self) -> SchedulerOutput:
        """Static batching (before Orca): when nothing runs, the first `max_num_seqs` waiting requests form a batch,
        cut to the rows whose padded KV rectangle, rows x (longest prompt + largest max_output_tokens), fits
        `capacity_tokens` (one row always fits); step 0 prefills every row padded to the longest prompt, each
        later step decodes one token in every row, finished rows included, until the batch's longest output is
        done. The rectangle is one contiguous tensor, not paged: the block pool stays untouched."""
        cfg, out = self.config, SchedulerOutput()
        if self.running:
            prev = self._static
            out.static = prev._replace(step=prev.step + 1)
            out.rows = [ScheduledRow(r.request_id, 1, 0, RowKind.DECODE, r.num_computed_tokens, r.num_prefill_tokens)
                        for r in self.running.values() if not r.is_finished]
            self._static = out.static
            return out
        cap = cfg.capacity_tokens
        b = min(cfg.max_num_seqs, len(self.waiting))
        if not b:
            return out
        head = [self.waiting[i] for i in range(b)]
        p_max = list(accumulate((r.num_prompt_tokens for r in head), max))
        m_max = list(accumulate((r.max_output_tokens or r.max_tokens for r in head), max))
        while b > 1 and b * (p_max[b - 1] + m_max[b - 1]) > cap:
            b -= 1
        for _ in range(b):
            req = self.waiting.popleft()
            req.status = RequestStatus.RUNNING
            self.running[req.request_id] = req
            out.started.append(req.request_id)
            out.rows.append(ScheduledRow(req.request_id, req.num_prompt_tokens, 0, RowKind.PREFILL, 0,
                                         req.num_prefill_tokens))
        out.static = self._static = StaticPass(b, p_max[b - 1], 0, b * (p_max[b - 1] + m_max[b - 1]))
        return out

    def _update_static(self, out: SchedulerOutput) -> StepResult:
        """Every scheduled row samples one token; a finished row keeps its place until the whole batch is done."""
        finished = []
        for row in out.rows:
            req = self.requests[row.request_id]
            req.num_computed_tokens += row.num_new_tokens
            req.num_output_tokens += 1
            if req.is_finished:
                req.status = RequestStatus.FINISHED
                finished.append(row.request_id)
        kv_tokens = sum(r.num_computed_tokens for r in self.running.values())
        used = cdiv(self._static.num_reserved_tokens, self.config.block_size)
        if all(r.is_finished for r in self.running.values()):
            self.running.clear()
            self._static = None
        return StepResult([(r.request_id, 1) for r in out.rows], finished, kv_tokens, used, [])

    # --- schedule ------------------------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        if self.config.batching == "static":
            return self._schedule_static()
        cfg, pool, bs = self.config, self.kv.pool, self.config.block_size
        out = SchedulerOutput()
        record, events = self.record, out.events
        budget = cfg.max_num_batched_tokens
        chunked = cfg.enable_chunked_prefill
        k_spec = cfg.num_speculative_tokens
        running = self.running
        allocate = self.kv.allocate_slots
        was_preempted = False
        # 1. the running requests, oldest first
        for req in list(running.values()):
            rid = req.request_id
            if rid not in running:
                continue  # preempted by an older request in this step
            if chunked and budget <= 0:
                break
            computed, target = req.num_computed_tokens, req.num_prefill_tokens
            if computed < target:  # still prefilling (only with chunked prefill)
                k, n_new = 0, min(target - computed, budget)
            else:
                k = min(k_spec, req.max_tokens - req.num_output_tokens - 1)
                n_new = 1 + k
            while (new := allocate(rid, n_new)) is None:
                victim = next(reversed(running.values()))
                self._preempt(victim, out)
                was_preempted = True
                if victim is req:
                    break
            if rid not in running:
                break
            if new:
                out.new_block_ids[rid] = new
                if record:
                    events.append(Msg("serving.ev.took", r=rid, blocks=list(new)))
            kind = RowKind.DECODE if k or computed >= target else prefill_kind(computed, n_new, target)
            out.rows.append(ScheduledRow(rid, n_new, k, kind, computed, target))
            budget -= n_new
        if was_preempted:  # 2. no admissions in a step that preempted
            return out
        wm = cfg.watermark_blocks
        while self.swapped and len(running) < cfg.max_num_seqs:
            req = self.swapped[0]
            rid = req.request_id
            k = min(k_spec, req.max_tokens - req.num_output_tokens - 1)
            n_new = 1 + k
            need = cdiv(req.num_computed_tokens + n_new, bs)
            if n_new > budget or pool.num_free_blocks - need < (wm if running else 0):
                break
            self.swapped.popleft()
            host = self.kv.cpu.free(rid)
            pool.add_request(rid, req.num_computed_tokens)
            out.swapped_in.append(req.num_computed_tokens)
            pool.append(rid, n_new)
            self._start(req, out)
            if record:
                events.append(Msg("serving.ev.swap_in", r=rid, host=sorted(host), gpu=pool.block_table(rid)))
            out.rows.append(ScheduledRow(rid, n_new, k, RowKind.DECODE, req.num_computed_tokens,
                                         req.num_prefill_tokens))
            budget -= n_new
        while not self.swapped and self.waiting and len(running) < cfg.max_num_seqs:
            req = self.waiting[0]
            rid = req.request_id
            if req.arrives_prefilled and req.num_output_tokens == 0:  # its KV arrives: it decodes at once
                k = min(k_spec, req.max_tokens - 2)
                n_new = 1 + k
                if n_new > budget or \
                        pool.num_free_blocks - cdiv(req.num_prefill_tokens + n_new, bs) < (wm if running else 0):
                    break
                self.waiting.popleft()
                pool.add_request(rid, req.num_prefill_tokens)
                pool.append(rid, n_new)
                req.num_computed_tokens = req.num_prefill_tokens
                req.num_output_tokens = 1
                self._start(req, out)
                if record:
                    events.append(Msg("serving.ev.arrived", r=rid, blocks=pool.block_table(rid)))
                out.rows.append(ScheduledRow(rid, n_new, k, RowKind.DECODE, req.num_computed_tokens,
                                             req.num_prefill_tokens))
                budget -= n_new
                continue
            cached, below = self.kv.get_computed_blocks(req)
            hit = (len(cached) + len(below)) * bs
            n_new = req.num_prefill_tokens - hit
            if chunked:
                if budget <= 0:
                    break
                n_new = min(n_new, budget)
            elif n_new > budget:  # a whole prompt, after the running requests' tokens, or it waits
                break
            need = cdiv(hit + n_new, bs) - len(cached)
            free = pool.num_free_after_touch(cached) if cached else pool.num_free_blocks
            if free - need < (wm if running else 0):
                break
            self.waiting.popleft()
            if cfg.enable_prefix_caching:
                pool.add_request_with_prefix(rid, cached, hit + n_new)
            else:
                pool.add_request(rid, n_new)
            req.num_computed_tokens = hit
            if cfg.enable_prefix_caching:
                out.prefix_hits.append((rid, len(cached), tuple(below)))
            if below:
                lo = len(cached)
                self.kv.tiers.touch(req.block_hashes[lo:lo + len(below)], below)
                if record:
                    events.append(Msg("serving.ev.loaded", r=rid, n=len(below), parts=[
                        Msg("serving.ev.from_tier", n=below.count(t), tier=Msg(f"serving.tier.{_TIER[t]}"))
                        for t in (1, 2) if t in below]))
            self._start(req, out)
            if record:
                got = pool.block_table(rid)
                events.append(Msg("serving.ev.admitted_hit", r=rid, n=len(cached), cached=cached,
                                  blocks=got[len(cached):]) if cached else
                              Msg("serving.ev.admitted", r=rid, blocks=got))
            out.rows.append(ScheduledRow(rid, n_new, 0, prefill_kind(hit, n_new, req.num_prefill_tokens, hit),
                                         hit, req.num_prefill_tokens))
            budget -= n_new
        return out

    def _start(self, req: Request, out: SchedulerOutput) -> None:
        out.new_block_ids[req.request_id] = tuple(self.kv.pool.req_to_block_table[req.request_id])
        self._hashed_upto.pop(req.request_id, None)
        req.status = RequestStatus.RUNNING
        self.running[req.request_id] = req
        out.started.append(req.request_id)

    def _preempt(self, victim: Request, out: SchedulerOutput) -> None:
        rid = victim.request_id
        del self.running[rid]
        victim.num_preemptions += 1
        blocks = self.kv.pool.block_table(rid)
        if self.config.preemption_mode == "swap" and not victim.is_prefilling:
            host = self.kv.swap_out(victim)
            if host is not None:
                victim.status = RequestStatus.SWAPPED
                self.swapped.append(victim)
                out.preempted.append(Preemption(rid, True, victim.num_computed_tokens, len(host)))
                if self.record:
                    out.events.append(Msg("serving.ev.swap_out", r=rid, gpu=blocks, host=host))
                return
        self.kv.pool.free(rid)
        out.preempted.append(Preemption(rid, False, victim.num_computed_tokens, 0))
        victim.num_prefill_tokens = victim.num_tokens
        victim.num_computed_tokens = 0
        victim.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(victim)
        if self.record:
            out.events.append(Msg("serving.ev.recompute", r=rid, blocks=blocks))

    # --- update_from_output --------------------------------------------------------------------------------

    def sampling_rows(self, out: SchedulerOutput) -> list[ScheduledRow]:
        """The rows that sample in this pass and carry draft tokens to verify, in row order (the model runner
        decides how many of each row's drafts it accepts)."""
        return [r for r in out.rows if r.num_draft_tokens and
                r.num_computed_tokens + r.num_new_tokens >= r.num_prefill_tokens]

    def update_from_output(self, out: SchedulerOutput, num_accepted: dict[int, int] | None = None) -> StepResult:
        """Apply a pass: KV computed, tokens sampled (`num_accepted`: drafts each speculative row accepted),
        prefix blocks cached, finished requests freed."""
        if self.config.batching == "static":
            return self._update_static(out)
        pool, record = self.kv.pool, self.record
        events: list[Msg] = []
        new_tokens = []
        drafts = rejected = rolled_blocks = 0
        for row in out.rows:
            req = self.requests[row.request_id]
            req.num_computed_tokens += row.num_new_tokens
            if req.num_computed_tokens < req.num_prefill_tokens:
                continue  # a chunk: no token yet
            k = row.num_draft_tokens
            made = 1
            if k:
                accepted = num_accepted[row.request_id]
                drafts += k
                rejected += k - accepted
                if accepted < k:
                    keep = req.num_computed_tokens - (k - accepted)
                    freed = pool.truncate(row.request_id, keep)
                    rolled_blocks += len(freed)
                    req.num_computed_tokens = keep
                    if record:
                        events.append(Msg("serving.ev.rolled_freed" if freed else "serving.ev.rolled",
                                          r=row.request_id, a=accepted, k=k, back=k - accepted, freed=freed))
                elif record:
                    events.append(Msg("serving.ev.all_accepted", r=row.request_id, k=k))
                made = accepted + 1
            req.num_output_tokens += made
            new_tokens.append((row.request_id, made))
        if self.config.enable_prefix_caching:  # shared blocks hold their tokens once
            kv_tokens = pool.num_stored_tokens()
        else:
            kv_tokens = sum(r.num_computed_tokens for r in self.running.values())
        used = pool.num_used_blocks
        finished = [rid for rid, r in self.running.items() if r.num_output_tokens >= r.max_tokens]  # is_finished
        if self.config.enable_prefix_caching:  # full prompt blocks computed by now are cached, before any leaves
            bs = self.config.block_size
            for rid, r in self.running.items():  # a block is registered once, when it fills
                n_full = min(r.num_computed_tokens // bs, len(r.block_hashes))
                if n_full > self._hashed_upto.get(rid, 0):
                    pool.cache_full_blocks(rid, r.block_hashes)
                    self._hashed_upto[rid] = n_full
        for rid in finished:
            req = self.running.pop(rid)
            req.status = RequestStatus.FINISHED
            freed = pool.free(rid)
            if record:
                events.append(Msg("serving.ev.finished", r=rid, blocks=freed))
        if self.kv.tiers is not None:
            self.kv.drain_evictions()
        return StepResult(new_tokens, finished, kv_tokens, used, events, drafts, rejected, rolled_blocks)

    # --- checks --------------------------------------------------------------------------------------------

    def check(self) -> None:
        """Both pools' invariants and the token bookkeeping (tests)."""
        self.kv.check()
        pool, cpu = self.kv.pool, self.kv.cpu
        on_gpu, on_cpu = set(pool.req_to_block_table), set(cpu.req_to_block_table)
        running, swapped = set(self.running), {r.request_id for r in self.swapped}
        waiting = {r.request_id for r in self.waiting}
        if self.config.batching == "static":  # the batch's rectangle is not paged
            assert not on_gpu and not on_cpu and not swapped
            assert (self._static is None) == (not running) and not (running & waiting)
            if self._static is not None:
                assert len(running) == self._static.num_rows
                cap = self.config.capacity_tokens
                assert self._static.num_reserved_tokens <= cap or len(running) == 1
            for req in self.running.values():
                assert req.num_computed_tokens == req.num_prompt_tokens + min(self._static.step, req.max_tokens - 1)
            return
        assert on_gpu == running, f"GPU tables {sorted(on_gpu)} but running {sorted(running)}"
        assert on_cpu == swapped, f"host tables {sorted(on_cpu)} but swapped {sorted(swapped)}"
        assert not (running & swapped) and not (running & waiting)
        for rid, req in self.running.items():
            assert pool.req_to_num_tokens[rid] == req.num_computed_tokens, f"request {rid}: pool and scheduler disagree"
            assert req.status is RequestStatus.RUNNING
        for req in self.swapped:
            assert cpu.req_to_num_tokens[req.request_id] == req.num_computed_tokens
            assert not req.is_prefilling and not req.is_finished
        for req in self.waiting:
            assert req.num_computed_tokens == 0


_TIER = {1: "host", 2: "disk"}
