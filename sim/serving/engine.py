"""One scheduler step at a time, as vLLM's scheduler runs them: chunked prefill under a token budget, preemption by
recompute or by swapping to the host, prefix-cache hits, and lookahead slots for speculative draft tokens.

Each step (one forward pass):

  1. Running requests, oldest first, get their tokens for this pass: one for a decode (1 + k with k draft
     tokens), the rest of the prompt — at most what the budget has left — for a request still prefilling. Their
     blocks come from a sim.alloc.block_pool.BlockPool (sim.alloc.prefix_cache.PrefixCachingBlockPool with
     prefix caching). When the free queue is short the newest running request is preempted, until the request
     fits or was itself the newest:
        recompute : its blocks are freed and it goes back to the head of the waiting queue; it will prefill its
                    prompt and every token it had produced again (vLLM's only mode since v1).
        swap      : (vLLM v0) its blocks are copied to a host block pool over the link and freed on the GPU; it
                    waits in the swapped queue and is copied back before any new request is admitted. A request
                    still prefilling, or one the host has no room for, is recomputed instead.
  2. Unless something was preempted in this step: swapped requests come back first, oldest swap first; then,
     only once none is left swapped, waiting requests are admitted first-come first-served while fewer than
     `max_batch` run, the budget has tokens left and the pool keeps `watermark` of its blocks free (vLLM v1
     keeps none: the default is 0; v0 kept 1%). With `chunked` the last one admitted may get only part of its
     prompt (the rest in later steps); without it a prompt is prefilled whole or waits. Either way the running
     requests' decode tokens come out of the budget first (vLLM v1's Scheduler.schedule), so without chunking a
     prompt longer than what they leave waits (sim.serving.schedulers' continuous batching, which this
     reproduces exactly). The rules and their vLLM release: sim/cost/vllm_rules.py.
  3. The pass runs: its time is the step cost of every row's tokens plus the bytes swapped this step over the
     link. A row whose prompt is complete produces a token (a speculative row its accepted drafts + 1; rejected
     drafts' slots are rolled back). Finished requests free their blocks, oldest first.

A request's first token comes out of the pass that completes its prompt. After a pass a request holds
(tokens computed) KV slots; the last sampled token is never fed back before the next pass (sim.alloc.schedule's
convention). `record=True` keeps every step's queues, block tables and free queue for the step-through view.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from sim.alloc.block_pool import BlockPool, cdiv
from sim.alloc.prefix_cache import PrefixCachingBlockPool
from sim.alloc.schedule import ServingConfig, check_fits
from sim.alloc.workload import Workload
from sim.cost.vllm_rules import ADMISSION_WATERMARK
from sim.i18n import text
from sim.serving.links import link as find_link
from sim.serving.result import ServingResult
from sim.serving.schedulers import MAX_BATCH, MAX_ITERATIONS, MAX_REQUESTS
from sim.serving.step_cost import Work

PREEMPTION_MODES = ("recompute", "swap")
MAX_SPEC_K = 8
MAX_RECORDED_STEPS = 2000  # the step-through view keeps at most this many steps
MAX_RECORDED_REQUESTS = 64
NO_WINDOW = 1 << 40
TIER_WORDS = {1: "host", 2: "disk"}


@dataclass(frozen=True)
class EngineConfig:
    max_batch: int = 256  # most requests running (max_num_seqs)
    capacity_tokens: int = 16_384  # GPU KV token slots
    block_size: int = 16
    watermark: float = ADMISSION_WATERMARK  # share of blocks an admission must leave free (v1: none)
    token_budget: int = 8192  # tokens one step may compute (max_num_batched_tokens); prompt tokens only unchunked
    chunked: bool = True
    preemption: str = "recompute"
    cpu_capacity_tokens: int = 0  # host KV slots for swapping (0: none, swap falls back to recompute)
    link: str = "pcie5"  # the GPU <-> host link swaps cross (sim.serving.links)
    spec_k: int = 0  # draft tokens per decode step: lookahead slots reserved, rolled back when rejected
    spec_alpha: float = 0.8  # chance each draft token is accepted (given the ones before it were)
    spec_seed: int = 0
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch <= MAX_BATCH:
            raise ValueError(f"max_batch must be 1..{MAX_BATCH}, got {self.max_batch}")
        ServingConfig(self.capacity_tokens, self.block_size, self.max_batch)  # capacity and block size
        if not 0.0 <= self.watermark <= 0.5:
            raise ValueError(f"watermark must be 0..0.5 of the blocks, got {self.watermark}")
        if not 1 <= self.token_budget <= 1 << 30:
            raise ValueError(f"token_budget must be 1..{1 << 30:,}, got {self.token_budget:,}")
        if self.preemption not in PREEMPTION_MODES:
            raise ValueError(f"preemption must be one of {PREEMPTION_MODES}, got {self.preemption!r}")
        if self.cpu_capacity_tokens and not self.block_size <= self.cpu_capacity_tokens <= 1 << 26:
            raise ValueError(f"cpu_capacity_tokens must be 0 or {self.block_size}..{1 << 26:,}, "
                             f"got {self.cpu_capacity_tokens:,}")
        find_link(self.link)
        if not 0 <= self.spec_k <= MAX_SPEC_K:
            raise ValueError(f"spec_k must be 0..{MAX_SPEC_K}, got {self.spec_k}")
        if not 0.0 <= self.spec_alpha <= 1.0:
            raise ValueError(f"spec_alpha must be 0..1, got {self.spec_alpha}")
        if self.chunked and self.token_budget < self.max_batch * (1 + self.spec_k):
            raise ValueError(f"a token budget of {self.token_budget:,} cannot give each of {self.max_batch} running "
                             f"requests its {1 + self.spec_k} decode token(s) per step: raise it to at least "
                             f"{self.max_batch * (1 + self.spec_k):,} (vLLM asks max_num_batched_tokens >= max_num_seqs)")

    @property
    def num_blocks(self) -> int:
        return self.capacity_tokens // self.block_size

    @property
    def num_cpu_blocks(self) -> int:
        return self.cpu_capacity_tokens // self.block_size

    @property
    def watermark_blocks(self) -> int:
        return int(self.watermark * self.num_blocks)

    @property
    def policy(self) -> str:
        return "chunked" if self.chunked else "continuous"


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
    rows: tuple[tuple[int, str, int], ...]  # (request, "prefill" | "prefill chunk" | "decode", tokens computed)
    events: tuple[str, ...]  # what happened to blocks, in order
    block_tables: dict[int, tuple[int, ...]]  # GPU
    num_tokens: dict[int, int]  # KV tokens each GPU table holds
    cpu_block_tables: dict[int, tuple[int, ...]]
    free_queue: tuple[int, ...]  # GPU, head first
    ref_cnt: tuple[int, ...]  # GPU, per block
    num_cpu_free: int
    cached_blocks: tuple[int, ...] = ()  # blocks holding a cached prefix hash (prefix caching)
    gpu_hashes: tuple[int, ...] = ()  # the hashes those blocks hold, in block order (prefix caching)
    tier_hashes: tuple[tuple[int, ...], ...] = ()  # (host, disk) hashes, least recently used first (offload)
    event_keys: tuple = ()  # the events as (catalog key, fields), to word them in either language

    def event_lines(self, lang: str = "en") -> tuple[str, ...]:
        """What happened to blocks, in `lang` (`events` is the English)."""
        return tuple(say_event(lang, e) for e in self.event_keys) if self.event_keys else self.events

    def takeaway(self, num_blocks: int, lang: str = "en") -> str:
        """The block grid's title."""
        from sim.serving.engine_readouts import step_takeaway

        return step_takeaway(self.step, num_blocks - len(self.free_queue), num_blocks, len(self.running),
                             len(self.waiting), len(self.swapped), len(self.finished), lang)

    def rows_frame(self, lang: str = "en"):
        """What each row of the pass computed (its headers and what it did in `lang`)."""
        import pandas as pd

        h = [text(lang, f"serving.step.col.{c}") for c in ("request", "did", "tokens")]
        return pd.DataFrame({h[0]: [f"r{r}" for r, _, _ in self.rows], h[1]: [did_words(k, lang) for _, k, _ in self.rows],
                             h[2]: [n for _, _, n in self.rows]})

    def tables_frame(self, block_size: int, lang: str = "en"):
        """One row per running request: its block table, tokens held and the slots its last block leaves empty
        (headers in `lang`)."""
        import pandas as pd

        cols = [text(lang, f"serving.step.col.{c}") for c in ("request", "table", "tokens", "empty", "shared")]
        rows = []
        for req, table in sorted(self.block_tables.items()):
            n = self.num_tokens[req]
            rows.append(dict(zip(cols, (f"r{req}", " ".join(map(str, table)), n, len(table) * block_size - n,
                                        sum(1 for b in table if self.ref_cnt[b] > 1)), strict=True)))
        return pd.DataFrame(rows, columns=cols)


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
    if wl.num_requests > MAX_REQUESTS:
        raise ValueError(f"at most {MAX_REQUESTS:,} requests, got {wl.num_requests:,}")
    check_fits(wl, ServingConfig(cfg.capacity_tokens, cfg.block_size, cfg.max_batch))
    if not cfg.chunked and cfg.token_budget < wl.max_model_len:
        raise ValueError(f"without chunking, a token budget of {cfg.token_budget:,} is below the maximum length "
                         f"{wl.max_model_len:,}: a long (or recomputed) prompt could never be prefilled")
    least = int(np.ceil(wl.output_len.sum() / cfg.max_batch / (1 + cfg.spec_k)))
    if least > MAX_ITERATIONS:
        raise ValueError(f"{int(wl.output_len.sum()):,} output tokens at most {cfg.max_batch} per pass need at least "
                         f"{least:,} forward passes, past the simulator's limit of {MAX_ITERATIONS:,}")


def simulate_engine(wl: Workload, cfg: EngineConfig, cost, tick_s: float = 1.0, *,
                    prompt_hashes: list[list[int]] | None = None, kv_bytes_per_token: int | None = None,
                    record: bool = False, check: bool = False, offload=None,
                    prefilled_first_s: np.ndarray | None = None) -> EngineRun:
    """Run the workload step by step (module docstring). prompt_hashes: each request's full prompt blocks' chained
    hashes, needed with prefix caching. record=True keeps a StepView per step (small workloads only);
    check=True asserts both pools' invariants and the token bookkeeping after every step (tests).
    offload: a sim.serving.tiers.OffloadConfig, lower tiers that keep the prefix blocks the GPU evicts (needs
    prefix caching). prefilled_first_s: (N,) for a decode instance of a disaggregated server: each request arrives
    with its prompt's KV already made elsewhere and its first token out at that time; admitted, it holds the
    prompt's KV and decodes from its second token on (outputs of 2+ tokens; no prefix caching)."""
    check_engine(wl, cfg)
    if prefilled_first_s is not None:
        if cfg.prefix_caching or len(prefilled_first_s) != wl.num_requests:
            raise ValueError("prefilled requests need one first-token time each and no prefix caching")
        if wl.num_requests and int(wl.output_len.min()) < 2:
            raise ValueError("a prefilled request must have at least 2 output tokens (the first came with its KV)")
    n, bs, max_batch = wl.num_requests, cfg.block_size, cfg.max_batch
    if record and (n > MAX_RECORDED_REQUESTS):
        raise ValueError(f"the step-through view follows at most {MAX_RECORDED_REQUESTS} requests, got {n:,}")
    if cfg.prefix_caching:
        if prompt_hashes is None or len(prompt_hashes) != n:
            raise ValueError("prefix caching needs each request's prompt block hashes (token ids)")
        pool: BlockPool = PrefixCachingBlockPool(cfg.num_blocks, bs)
    else:
        pool = BlockPool(cfg.num_blocks, bs)
    tiers = None
    if offload is not None:
        from sim.serving.tiers import TierCache, load_seconds, recompute_seconds

        if not cfg.prefix_caching:
            raise ValueError("offload tiers keep prefix blocks: turn prefix caching on")
        tiers = TierCache(offload, bs)
    tier_stats = dict(hit=[0, 0, 0], load_b=[0, 0], load_s=[0.0, 0.0], re_s=[0.0, 0.0])
    ev_seen = [0]

    def drain_evictions() -> None:
        """GPU evictions since the last call go down to the tiers, in the order they happened."""
        ev = pool.evicted
        for _block, h in ev[ev_seen[0]:]:
            tiers.evicted_from_gpu(h)
        ev_seen[0] = len(ev)
    cpu = BlockPool(max(1, cfg.num_cpu_blocks), bs)
    cpu_blocks = cfg.num_cpu_blocks
    kvb = int(getattr(cost, "kv_bytes_per_token", 0) if kv_bytes_per_token is None else kv_bytes_per_token)
    link_bw = find_link(cfg.link).bytes_per_s
    window = int(getattr(cost, "window", NO_WINDOW))
    windowed = window < NO_WINDOW
    flops_of = getattr(cost, "flops", None)
    wm, budget_all, chunked = cfg.watermark_blocks, cfg.token_budget, cfg.chunked
    k_spec = cfg.spec_k
    rng = np.random.default_rng(cfg.spec_seed)

    arrival_s = wl.arrival.astype(np.float64) * tick_s
    arrival = arrival_s.tolist()
    orig_prompt, output = wl.prompt_len.tolist(), wl.output_len.tolist()
    seg_prompt = list(orig_prompt)  # tokens to prefill in the current stretch (prompt + outputs after recompute)
    computed = [0] * n  # KV tokens stored
    produced = [0] * n
    first = [math.nan] * n
    finish = [math.nan] * n
    last_tok = [math.nan] * n
    preempted = [0] * n
    gaps: list[float] = []
    waiting: deque[int] = deque()
    swapped: deque[int] = deque()
    running: dict[int, int] = {}  # req -> its segment index; insertion order = age
    segs: tuple[list, list, list] = ([], [], [])
    its: tuple[list, ...] = tuple([] for _ in range(9))
    it_start, it_sec, it_rows, it_tok, it_pre, it_pret, it_claim, it_kvtok, it_fin = its
    stats = dict(recomputes=0, swaps=0, recomputed=0, re_flops=0.0, out_b=0, in_b=0, swap_s=0.0, hits=0,
                 reserved=0, rolled=0, spec_freed=0, peak_cpu=0)
    steps: list[StepView] = []
    now, nxt, t = 0.0, 0, 0

    hashed_upto: dict[int, int] = {}  # running request -> its full prompt blocks already offered to the cache

    def start_segment(req: int) -> None:
        hashed_upto.pop(req, None)
        running[req] = len(segs[0])
        segs[0].append(req)
        segs[1].append(now)
        segs[2].append(math.nan)

    def preempt(victim: int, events: list[tuple]) -> None:
        seg = running.pop(victim)
        segs[2][seg] = now
        preempted[victim] += 1
        blocks = pool.block_table(victim)
        done_prefill = computed[victim] >= seg_prompt[victim]
        if (cfg.preemption == "swap" and done_prefill and cpu_blocks
                and cdiv(computed[victim], bs) <= cpu.num_free_blocks):
            host = cpu.add_request(victim, computed[victim])
            pool.free(victim)
            nbytes = len(host) * bs * kvb
            stats["out_b"] += nbytes
            step_bytes[0] += nbytes
            stats["swaps"] += 1
            stats["peak_cpu"] = max(stats["peak_cpu"], cpu.num_used_blocks)
            swapped.append(victim)
            if record:
                events.append(_ev("serving.ev.swap_out", dict(r=victim, gpu=list(blocks), host=host)))
            return
        pool.free(victim)
        stats["recomputes"] += 1
        stats["recomputed"] += computed[victim]
        if flops_of is not None and computed[victim]:
            c = computed[victim]
            kl = _keys_upto(c, window) if windowed else c * (c + 1) // 2
            stats["re_flops"] += float(flops_of(Work(c, c - 1, c * (c + 1) // 2, kl, c, min(c, window))))
        seg_prompt[victim] = orig_prompt[victim] + produced[victim]
        computed[victim] = 0
        waiting.appendleft(victim)
        if record:
            events.append(_ev("serving.ev.recompute", dict(r=victim, blocks=list(blocks))))

    while nxt < n or waiting or running or swapped:
        while nxt < n and arrival[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        if not running and not waiting and not swapped:
            now = arrival[nxt]
            continue
        if t >= MAX_ITERATIONS:
            raise ValueError(f"the scheduler passed {MAX_ITERATIONS:,} forward passes with "
                             f"{len(waiting) + n - nxt:,} requests waiting: raise the KV budget or the batch size")
        events: list[tuple] = []  # (catalog key, fields): worded in either language by StepView
        step_bytes = [0]
        step_load_s = [0.0]
        budget = budget_all
        rows: list[tuple[int, int, int, str]] = []  # (req, tokens computed, draft tokens among them, what it did)
        was_preempted = False
        # 1. the running requests, oldest first
        for req in list(running):
            if req not in running:
                continue  # preempted by an older request in this step
            if chunked and budget <= 0:
                break
            if computed[req] < seg_prompt[req]:  # still prefilling (only with chunking)
                k, n_new = 0, min(seg_prompt[req] - computed[req], budget)
            else:
                k = min(k_spec, output[req] - produced[req] - 1)
                n_new = 1 + k
            while not pool.can_append(req, n_new):
                victim = next(reversed(running))
                preempt(victim, events)
                was_preempted = True
                if victim == req:
                    break
            if req not in running:
                break
            before = len(pool.req_to_block_table[req])
            pool.append(req, n_new)
            if record and len(pool.req_to_block_table[req]) > before:
                events.append(_ev("serving.ev.took", dict(r=req, blocks=pool.req_to_block_table[req][before:])))
            rows.append((req, n_new, k, "decode" if k or computed[req] >= seg_prompt[req] else _chunk_kind(
                computed[req], n_new, seg_prompt[req])))
            budget -= n_new  # running requests' tokens come out of the budget first, chunked or not
        # 2. swapped requests back, then admissions (none in a step that preempted)
        if not was_preempted:
            while swapped and len(running) < max_batch:
                req = swapped[0]
                k = min(k_spec, output[req] - produced[req] - 1)
                n_new = 1 + k
                need = cdiv(computed[req] + n_new, bs)
                if n_new > budget or pool.num_free_blocks - need < (wm if running else 0):
                    break
                swapped.popleft()
                host = cpu.free(req)
                pool.add_request(req, computed[req])
                nbytes = cdiv(computed[req], bs) * bs * kvb
                stats["in_b"] += nbytes
                step_bytes[0] += nbytes
                pool.append(req, n_new)
                start_segment(req)
                if record:
                    events.append(_ev("serving.ev.swap_in", dict(r=req, host=sorted(host), gpu=pool.block_table(req))))
                rows.append((req, n_new, k, "decode"))
                budget -= n_new
            while not swapped and waiting and len(running) < max_batch:
                req = waiting[0]
                if prefilled_first_s is not None and produced[req] == 0:  # its KV arrives: decode at once
                    k = min(k_spec, output[req] - 2)
                    n_new = 1 + k
                    if n_new > budget or \
                            pool.num_free_blocks - cdiv(seg_prompt[req] + n_new, bs) < (wm if running else 0):
                        break
                    waiting.popleft()
                    pool.add_request(req, seg_prompt[req])
                    pool.append(req, n_new)
                    computed[req] = seg_prompt[req]
                    produced[req] = 1
                    first[req] = last_tok[req] = float(prefilled_first_s[req])
                    start_segment(req)
                    if record:
                        events.append(_ev("serving.ev.arrived", dict(r=req, blocks=pool.block_table(req))))
                    rows.append((req, n_new, k, "decode"))
                    budget -= n_new
                    continue
                cached: list[int] = []
                below: list[int] = []  # tiers (1 host, 2 disk) of the blocks loaded after the GPU's hits
                if cfg.prefix_caching and computed[req] == 0:
                    most = (seg_prompt[req] - 1) // bs
                    cached = pool.find_cached_prefix(prompt_hashes[req], most)
                    if tiers is not None:
                        drain_evictions()
                        below = tiers.find(prompt_hashes[req][len(cached):most])
                hit = (len(cached) + len(below)) * bs
                n_new = seg_prompt[req] - hit
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
                waiting.popleft()
                if cfg.prefix_caching:
                    pool.add_request_with_prefix(req, cached, hit + n_new)
                else:
                    pool.add_request(req, n_new)
                computed[req] = hit
                stats["hits"] += hit
                if cfg.prefix_caching and hit:
                    tier_stats["hit"][0] += len(cached) * bs
                if below:
                    lo = len(cached)
                    tiers.touch(prompt_hashes[req][lo:lo + len(below)], below)
                    for j, tier in enumerate(below):
                        tier_stats["hit"][tier] += bs
                        ti = tier - 1
                        sec = load_seconds(bs, kvb, offload.links[ti])
                        tier_stats["load_b"][ti] += bs * kvb
                        tier_stats["load_s"][ti] += sec
                        tier_stats["re_s"][ti] += recompute_seconds(cost, bs, (lo + j) * bs)
                        step_load_s[0] += sec
                    if record:
                        events.append(_ev("serving.ev.loaded", dict(r=req, n=len(below), parts=[
                            ("serving.ev.from_tier", dict(n=below.count(t), tier=("serving.tier." + TIER_WORDS[t], {})))
                            for t in (1, 2) if t in below])))
                start_segment(req)
                if record:
                    got = pool.block_table(req)
                    events.append(_ev("serving.ev.admitted_hit", dict(r=req, n=len(cached), cached=cached,
                                                                   blocks=got[len(cached):])) if cached else
                                  _ev("serving.ev.admitted", dict(r=req, blocks=got[len(cached):])))
                rows.append((req, n_new, 0, f"prefill after {hit} cached" if hit and hit + n_new == seg_prompt[req]
                             else _chunk_kind(hit, n_new, seg_prompt[req])))
                budget -= n_new
        # 3. the pass
        tokens = skip = keys_g = keys_l = kv_g = kv_l = 0
        n_prefill_rows = prefill_tokens = 0
        for req, n_new, _k, _kind in rows:
            s = computed[req]
            tokens += n_new
            keys_g += n_new * s + n_new * (n_new + 1) // 2
            kv_g += s + n_new
            if windowed:
                keys_l += _keys_upto(s + n_new, window) - _keys_upto(s, window)
                kv_l += min(s + n_new, window)
            if s < seg_prompt[req]:  # a prefill (or its chunk); its last prompt token's logits are needed
                n_prefill_rows += 1
                prefill_tokens += n_new
                skip += n_new - (1 if s + n_new == seg_prompt[req] else 0)
        if not windowed:
            keys_l, kv_l = keys_g, kv_g
        sec = float(cost.seconds(Work(tokens, skip, keys_g, keys_l, kv_g, kv_l)))
        if step_bytes[0]:
            extra = step_bytes[0] / link_bw
            stats["swap_s"] += extra
            sec += extra
        sec += step_load_s[0]
        end = now + sec
        made = 0
        kv_after = 0
        for req, n_new, k, _kind in rows:
            computed[req] += n_new
            if computed[req] < seg_prompt[req]:
                continue  # a chunk: no token yet
            if k:
                accepted = 0
                while accepted < k and rng.random() < cfg.spec_alpha:
                    accepted += 1
                stats["reserved"] += k
                stats["rolled"] += k - accepted
                if accepted < k:
                    keep = computed[req] - (k - accepted)
                    freed = pool.truncate(req, keep)
                    stats["spec_freed"] += len(freed)
                    computed[req] = keep
                    if record:
                        events.append(_ev("serving.ev.rolled_freed" if freed else "serving.ev.rolled",
                                       dict(r=req, a=accepted, k=k, back=k - accepted, freed=freed)))
                elif record:
                    events.append(_ev("serving.ev.all_accepted", dict(r=req, k=k)))
                new_tokens = accepted + 1
            else:
                new_tokens = 1
            for j in range(new_tokens):
                if not math.isnan(last_tok[req]):
                    gaps.append(end - last_tok[req] if j == 0 else 0.0)
                last_tok[req] = end
            if math.isnan(first[req]):
                first[req] = end
            produced[req] += new_tokens
            made += new_tokens
        if cfg.prefix_caching:  # shared blocks hold their tokens once
            kv_after = pool.num_stored_tokens()
        else:
            for req in running:
                kv_after += computed[req]
        it_start.append(now)
        it_sec.append(sec)
        it_rows.append(len(rows))
        it_tok.append(made)
        it_pre.append(n_prefill_rows)
        it_pret.append(prefill_tokens)
        it_claim.append(pool.num_used_blocks * bs)
        it_kvtok.append(kv_after)
        done = [req for req in running if produced[req] >= output[req]]
        it_fin.append(len(done))
        if cfg.prefix_caching:  # full prompt blocks computed by now are cached (before the finished leave)
            for req in running:  # a block is registered once, when it fills (vLLM counts its cached blocks)
                n_full = min(computed[req] // bs, len(prompt_hashes[req]))
                if n_full > hashed_upto.get(req, 0):
                    pool.cache_full_blocks(req, prompt_hashes[req])
                    hashed_upto[req] = n_full
        for req in done:
            seg = running.pop(req)
            freed = pool.free(req)
            finish[req] = end
            segs[2][seg] = end
            if record:
                events.append(_ev("serving.ev.finished", dict(r=req, blocks=freed)))
        if tiers is not None:
            drain_evictions()
        if check:
            _check_step(pool, cpu, running, swapped, waiting, computed, seg_prompt, produced, output, bs)
            if tiers is not None:
                tiers.check_invariants()
        if record and len(steps) < MAX_RECORDED_STEPS:
            steps.append(StepView(
                t, now, end, tuple(waiting), tuple(running), tuple(swapped), tuple(done),
                tuple((req, kind, n_new) for req, n_new, _k, kind in rows),
                tuple(say_event("en", e) for e in events), {r: tuple(tb) for r, tb in pool.req_to_block_table.items()},
                dict(pool.req_to_num_tokens), {r: tuple(tb) for r, tb in cpu.req_to_block_table.items()},
                tuple(pool.free_block_queue), tuple(pool.ref_cnt), cpu.num_free_blocks if cpu_blocks else 0,
                tuple(sorted(pool.block_to_hash)) if cfg.prefix_caching else (),
                tuple(pool.block_to_hash[b] for b in sorted(pool.block_to_hash)) if cfg.prefix_caching else (),
                tiers.contents() if tiers is not None else (), tuple(events)))
        now = end
        t += 1
    assert pool.num_free_blocks == pool.num_blocks, "blocks still held after every request finished"
    assert cpu.num_free_blocks == cpu.num_blocks, "host blocks still held after every request finished"
    seg_end = np.array(segs[2])
    result = ServingResult(
        cfg.policy, cfg.capacity_tokens, max_batch, arrival_s, np.array(first), np.array(finish),
        wl.prompt_len.copy(), wl.output_len.copy(), np.array(preempted, dtype=np.int64),
        np.array(segs[0], dtype=np.int64), np.array(segs[1]), seg_end, seg_end,
        np.array(it_start), np.array(it_sec), np.array(it_rows, dtype=np.int64), np.array(it_tok, dtype=np.int64),
        np.array(it_pre, dtype=np.int64), np.array(it_pret, dtype=np.int64), np.array(it_claim, dtype=np.int64),
        np.array(it_kvtok, dtype=np.int64), np.array(it_fin, dtype=np.int64), token_gaps_s=np.array(gaps))
    return EngineRun(cfg, result, stats["recomputes"], stats["swaps"], stats["recomputed"],
                     stats["re_flops"] if flops_of is not None else math.nan, stats["out_b"], stats["in_b"],
                     stats["swap_s"], stats["hits"], stats["reserved"], stats["rolled"], stats["spec_freed"],
                     stats["peak_cpu"], tuple(steps), tuple(tier_stats["hit"]), tuple(tier_stats["load_b"]),
                     tuple(tier_stats["load_s"]), tuple(tier_stats["re_s"]),
                     tuple(n * bs * kvb for n in tiers.blocks_written) if tiers is not None else (0, 0))


def _ev(key: str, fields: dict) -> tuple:
    """One thing that happened to blocks, as (catalog key, fields): every value written out now (block lists
    change later), except nested (key, fields) phrases, worded when the event is shown."""
    def keep(v):
        return isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], dict)

    return key, {k: v if keep(v) or (isinstance(v, list) and v and keep(v[0])) else str(v) for k, v in fields.items()}


def say_event(lang: str, event: tuple) -> str:
    """An event (`_ev`) worded in `lang`; a list of phrases reads with commas."""
    key, fields = event

    def word(v):
        if isinstance(v, tuple):
            return say_event(lang, v)
        return ", ".join(say_event(lang, x) for x in v) if isinstance(v, list) else v

    return text(lang, key, **{k: word(v) for k, v in fields.items()}) if fields else text(lang, key)


DID_AFTER = re.compile(r"prefill after (\d+) cached")


def did_words(kind: str, lang: str = "en") -> str:
    """What a row computed ('prefill chunk', 'prefill after 8 cached'), in `lang`."""
    m = DID_AFTER.fullmatch(kind)
    if m:
        return text(lang, "serving.did.after", n=m[1])
    key = "serving.did." + "".join(ch if ch.isalnum() else "_" for ch in kind).strip("_")
    return text(lang, key)


def _chunk_kind(done_before: int, n_new: int, prompt: int) -> str:
    return "prefill" if done_before == 0 and n_new == prompt else (
        "prefill (last chunk)" if done_before + n_new == prompt else "prefill chunk")


def _check_step(pool, cpu, running, swapped, waiting, computed, seg_prompt, produced, output, bs) -> None:
    pool.check_invariants()
    cpu.check_invariants()
    on_gpu, on_cpu = set(pool.req_to_block_table), set(cpu.req_to_block_table)
    assert on_gpu == set(running), f"GPU tables {sorted(on_gpu)} but running {sorted(running)}"
    assert on_cpu == set(swapped), f"host tables {sorted(on_cpu)} but swapped {sorted(swapped)}"
    assert not (set(running) & set(swapped)) and not (set(running) & set(waiting))
    for req in running:
        assert pool.req_to_num_tokens[req] == computed[req], f"request {req}: pool and scheduler disagree"
    for req in swapped:
        assert cpu.req_to_num_tokens[req] == computed[req]
        assert computed[req] >= seg_prompt[req] and produced[req] < output[req]
    for req in waiting:
        assert computed[req] == 0
