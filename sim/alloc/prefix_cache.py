"""Automatic prefix caching (vLLM style) over the paged block pool: chained block hashes, LRU eviction.

A request's tokens are cut into blocks of `block_size`. Only *full* blocks are cached. Block i is
named by a hash that covers the hash of block i-1 and block i's own token ids (plus optional extra
keys such as a LoRA adapter or a per-tenant cache salt):

    hash_0 = H(ROOT, tokens[0:bs], extra)      hash_i = H(hash_{i-1}, tokens[i*bs:(i+1)*bs], extra)

so two requests get the same hash for block i exactly when their first (i+1)*bs tokens agree. One
changed token changes its own block's hash and, through the chain, the hash of every later block:
a prefix cache can only ever reuse a contiguous prefix that starts at token 0.

The pool keeps a hash -> blocks map. A block that fills up is cached under its hash even when another
block already holds that hash (vLLM v1 does not de-duplicate, so that block tables stay append-only:
vllm/v1/core/block_pool.py, BlockPool.cache_full_blocks; see sim/cost/vllm_rules.py), and a lookup takes the
oldest of them (BlockPool.get_cached_block); when one copy is evicted the others still hit. A new request looks
its block hashes up in order and stops at the first miss; the blocks found are shared (ref_cnt + 1; a block that was free leaves the free
queue wherever it sits). Blocks of a finished request go back to the tail of the free queue but
keep their hash, so they can still be hit; a block handed out from the head of the queue loses its
hash then (eviction), so free cached blocks are evicted least-recently-freed first, a request's last
block before its first. The last prompt token is always recomputed (its logits pick the first
output token), so a request whose whole prompt is cached still computes its last block: at most
(prompt_len - 1) // block_size blocks can hit.

Serving is kept simple: requests are admitted in order; the blocks of the last `max_running`
requests stay pinned (ref_cnt > 0); a request that does not fit finishes the oldest running ones
first. Each admitted request stores its prompt and every output token but the last (never fed back,
as in sim/alloc/schedule.py), and caches its full blocks, decode blocks included — a chat's next turn hits them.

sim/alloc/radix_tree.py is SGLang's view of the same cache; sim/alloc/prefix_sweeps.py runs it over
workloads, capacities and block sizes.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.alloc.block_pool import MAX_CAPACITY_TOKENS, BlockPool, cdiv
from sim.alloc.workload import Trace
from sim.refusal import Misuse, Refusal

MAX_PREFIX_CACHE_BLOCK_SIZE = 256  # token slots per block of the prefix cache
MAX_RUNNING = 256
ROOT_HASH = bytes(8)  # the parent of every first block


# ---------------------------------------------------------------------------------------------
# Block hashes


def _extra_bytes(extra_keys: Sequence) -> bytes:
    return repr(tuple(extra_keys)).encode() if extra_keys else b""


def hash_block_tokens(parent_hash: int | None, token_ids: Sequence[int], extra_keys: Sequence = ()) -> int:
    """One block's hash: 64 bits of BLAKE2b over the parent's hash, the block's token ids (int32,
    little-endian) and the extra keys. parent_hash None means the block is the first one."""
    parent = ROOT_HASH if parent_hash is None else int(parent_hash).to_bytes(8, "little")
    data = parent + np.asarray(token_ids, dtype="<i4").tobytes() + _extra_bytes(extra_keys)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def block_hashes(token_ids, block_size: int, extra_keys: Sequence = ()) -> list[int]:
    """The chained hashes of every full block of token_ids (a partial last block has none)."""
    if block_size < 1:
        raise Misuse(f"block_size must be >= 1, got {block_size}")
    buf = np.ascontiguousarray(token_ids, dtype="<i4").tobytes()
    step = 4 * block_size
    extra = _extra_bytes(extra_keys)
    blake = hashlib.blake2b
    digests = []
    parent = ROOT_HASH
    for lo in range(0, len(buf) - step + 1, step):
        parent = blake(parent + buf[lo:lo + step] + extra, digest_size=8).digest()
        digests.append(parent)
    return [int.from_bytes(d, "little") for d in digests]



def trace_block_hashes(trace: Trace, block_size: int) -> list[list[int]]:
    """Each request's stored-token block hashes (depend on the block size, not on the capacity)."""
    return [block_hashes(r.stored(), block_size, r.extra_keys) for r in trace.requests]



# ---------------------------------------------------------------------------------------------
# The block pool with a prefix cache


class FreeBlockQueue:
    """The free queue with O(1) removal from anywhere (vLLM keeps a doubly linked list for this):
    a free cached block that gets a hit leaves the queue wherever it sits."""

    def __init__(self, blocks=()) -> None:
        self._blocks: OrderedDict[int, None] = OrderedDict.fromkeys(blocks)

    def popleft(self) -> int:
        if not self._blocks:
            raise IndexError("the free queue is empty")
        return self._blocks.popitem(last=False)[0]

    def append(self, block: int) -> None:
        assert block not in self._blocks, f"block {block} is already in the free queue"
        self._blocks[block] = None

    def remove(self, block: int) -> None:
        del self._blocks[block]

    def __len__(self) -> int:
        return len(self._blocks)

    def __iter__(self):
        return iter(self._blocks)

    def __contains__(self, block) -> bool:
        return block in self._blocks


class PrefixCachingBlockPool(BlockPool):
    """sim.alloc.block_pool.BlockPool plus a hash -> block map. Free blocks keep their hash until the free queue
    hands them out again; that is the eviction (least recently freed first)."""

    shares_only_by_fork = False  # a hit shares a block behind equal tokens, not necessarily the same blocks

    def __init__(self, num_blocks: int, block_size: int = 16) -> None:
        super().__init__(num_blocks, block_size)
        self.free_block_queue = FreeBlockQueue(range(num_blocks))
        self.hash_to_blocks: dict[int, dict[int, None]] = {}  # hash -> its blocks, oldest first (duplicates kept)
        self.block_to_hash: dict[int, int] = {}
        self.evicted: list[tuple[int, int]] = []  # (block, hash) in eviction order

    def _pop_free(self) -> int:
        block = super()._pop_free()
        h = self.block_to_hash.pop(block, None)
        if h is not None:
            copies = self.hash_to_blocks[h]
            del copies[block]
            if not copies:
                del self.hash_to_blocks[h]
            self.evicted.append((block, h))
        return block

    @property
    def num_cached_blocks(self) -> int:
        """Blocks holding a hash (two blocks with equal tokens count twice, as vLLM keeps both)."""
        return len(self.block_to_hash)

    def find_cached_prefix(self, hashes: Sequence[int], max_blocks: int) -> list[int]:
        """Blocks holding the longest run of hashes[0..] that is cached, at most max_blocks of them."""
        found = []
        get = self.hash_to_blocks.get
        for h in hashes[:max(0, max_blocks)]:
            copies = get(h)
            if not copies:
                break
            found.append(next(iter(copies)))  # the oldest copy, as vLLM's get_cached_block
        return found

    def num_free_after_touch(self, blocks: Sequence[int]) -> int:
        """Free blocks left for new allocations once `blocks` are taken out of the free queue."""
        return self.num_free_blocks - sum(1 for b in blocks if self.ref_cnt[b] == 0)

    def add_request_with_prefix(self, req_id: int, cached_blocks: Sequence[int], num_tokens: int) -> list[int]:
        """A new request whose first len(cached_blocks) blocks are cache hits: share them, then take
        fresh blocks for the rest of its num_tokens tokens. Raises Misuse, changing nothing, when
        the free queue is too short (simulate_prefix_cache frees requests until it is not)."""
        bs = self.block_size
        if req_id in self.req_to_block_table:
            raise Misuse(f"request {req_id} already holds blocks {self.req_to_block_table[req_id]}")
        hit_tokens = len(cached_blocks) * bs
        if num_tokens <= hit_tokens:
            raise Misuse(f"request {req_id}: {num_tokens} tokens but {hit_tokens} cached; at least the last "
                         "prompt token must be computed")
        need = cdiv(num_tokens, bs) - len(cached_blocks)
        free = self.num_free_after_touch(cached_blocks)
        if need > free:
            raise Misuse(f"request {req_id} needs {need} new blocks for {num_tokens - hit_tokens} tokens; "
                         f"{free} of {self.num_blocks} are free")
        for b in cached_blocks:
            assert b in self.block_to_hash, f"block {b} is not cached"
            if self.ref_cnt[b] == 0:
                self.free_block_queue.remove(b)
                self.block_num_tokens[b] = bs
            self.ref_cnt[b] += 1
        self.req_to_block_table[req_id] = list(cached_blocks)
        self.req_to_num_tokens[req_id] = hit_tokens
        self.append(req_id, num_tokens - hit_tokens)
        return list(self.req_to_block_table[req_id])

    def cache_full_blocks(self, req_id: int, hashes: Sequence[int]) -> int:
        """Register the request's full blocks under their hashes; the number newly cached. A block whose
        hash another block already holds (the recomputed last block of a fully cached prompt) is cached too,
        a duplicate, as vLLM does: it still hits once the first copy is evicted."""
        table = self.req_to_block_table[req_id]
        n_full = min(self.req_to_num_tokens[req_id] // self.block_size, len(hashes))
        new = 0
        for block, h in zip(table[:n_full], hashes[:n_full], strict=True):
            known = self.block_to_hash.get(block)
            if known is not None:
                assert known == h, f"block {block} is cached as {known:x}, asked to hold {h:x}"
                continue
            self.hash_to_blocks.setdefault(h, {})[block] = None
            self.block_to_hash[block] = h
            new += 1
        return new

    def check_invariants(self) -> None:
        super().check_invariants()
        assert sum(map(len, self.hash_to_blocks.values())) == len(self.block_to_hash), "hash maps disagree in size"
        for h, blocks in self.hash_to_blocks.items():
            assert blocks, f"hash {h:x} is kept with no block"
            for b in blocks:
                assert self.block_to_hash[b] == h, f"block {b} and hash {h:x} do not point at each other"



# ---------------------------------------------------------------------------------------------
# Simulation


@dataclass(frozen=True)
class CacheConfig:
    block_size: int = 16
    capacity_tokens: int = 16_384  # KV token slots; the pool has capacity // block_size blocks
    max_running: int = 8  # requests whose blocks stay pinned (ref_cnt > 0) at once
    enable_caching: bool = True

    def __post_init__(self) -> None:
        # every caller bounds these first: the page's controls (block sizes 2..256, capacity 256..), the command line
        # (its own limits and message), the sweeps (they skip what cannot hold a request), the real chat's own sizing
        if not 1 <= self.block_size <= MAX_PREFIX_CACHE_BLOCK_SIZE:
            raise Misuse(f"block_size must be 1..{MAX_PREFIX_CACHE_BLOCK_SIZE}, got {self.block_size}")
        if not self.block_size <= self.capacity_tokens <= MAX_CAPACITY_TOKENS:
            raise Misuse(f"capacity_tokens must be {self.block_size}..{MAX_CAPACITY_TOKENS:,} (at least one "
                         f"block of {self.block_size}), got {self.capacity_tokens:,}")
        if not 1 <= self.max_running <= MAX_RUNNING:
            raise Misuse(f"max_running must be 1..{MAX_RUNNING}, got {self.max_running}")

    @property
    def num_blocks(self) -> int:
        return self.capacity_tokens // self.block_size


class _PrefillWork:
    """What a run's hits buy, from its num_prompt_tokens, num_hit_tokens and num_decode_steps."""

    num_prompt_tokens: int
    num_hit_tokens: int
    num_decode_steps: int

    @property
    def num_computed_tokens(self) -> int:
        """Prompt tokens the prefill had to compute."""
        return self.num_prompt_tokens - self.num_hit_tokens

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from the cache."""
        return self.num_hit_tokens / self.num_prompt_tokens

    @property
    def prefill_speedup(self) -> float:
        """Prefill work without the cache / with it."""
        return self.num_prompt_tokens / self.num_computed_tokens

    def throughput_gain(self, decode_weight: float) -> float:
        return work_ratio(self.num_prompt_tokens, self.num_computed_tokens, self.num_decode_steps, decode_weight)


@dataclass(frozen=True)
class HitTotals(_PrefillWork):
    """A run's totals without its per-request arrays (what a sweep over many workloads keeps)."""

    num_prompt_tokens: int
    num_hit_tokens: int
    num_decode_steps: int
    num_evictions: int
    num_requests_with_hit: int


@dataclass(frozen=True, eq=False)
class PrefixCacheResult(_PrefillWork):
    cache: CacheConfig
    prompt_len: np.ndarray  # (N,)
    output_len: np.ndarray  # (N,)
    hit_tokens: np.ndarray  # (N,) prompt tokens whose K/V came from the cache
    new_cached_blocks: np.ndarray  # (N,) blocks the request added to the cache
    block_tables: tuple[tuple[int, ...], ...]  # each request's block table when admitted
    evictions: tuple[tuple[int, int, int], ...]  # (request being admitted, block, hash) in order
    max_ref_cnt: int  # the most requests holding one block at once (cache hits while it was pinned + 1)
    num_distinct_reused: int  # distinct cached blocks that were hit at least once
    num_early_finishes: int  # running requests finished early to make room
    num_cached_blocks: int  # still cached once every request has finished
    labels: tuple[object, ...]  # each request's label: a message value (sim.msg.Msg) or a name

    @property
    def num_requests(self) -> int:
        return len(self.prompt_len)

    @property
    def num_prompt_tokens(self) -> int:
        return int(self.prompt_len.sum())

    @property
    def num_hit_tokens(self) -> int:
        return int(self.hit_tokens.sum())

    @property
    def num_hit_blocks(self) -> int:
        return self.num_hit_tokens // self.cache.block_size

    @property
    def num_evictions(self) -> int:
        return len(self.evictions)

    @property
    def num_requests_with_hit(self) -> int:
        return int((self.hit_tokens > 0).sum())

    @property
    def num_decode_steps(self) -> int:
        """Each output token after the first costs a decode step (the first comes out of the prefill)."""
        return int((self.output_len - 1).sum())

    def totals(self) -> HitTotals:
        return HitTotals(self.num_prompt_tokens, self.num_hit_tokens, self.num_decode_steps, self.num_evictions,
                         self.num_requests_with_hit)

    def to_frame(self):
        import pandas as pd

        bs = self.cache.block_size
        ev = np.bincount([e[0] for e in self.evictions], minlength=self.num_requests) if self.evictions \
            else np.zeros(self.num_requests, dtype=np.int64)
        return pd.DataFrame({
            "request": np.arange(self.num_requests), "label": list(self.labels),
            "prompt_tokens": self.prompt_len, "hit_tokens": self.hit_tokens,
            "computed_tokens": self.prompt_len - self.hit_tokens,
            "hit_blocks": self.hit_tokens // bs, "new_cached_blocks": self.new_cached_blocks,
            "evictions": ev, "output_tokens": self.output_len,
        })


def work_ratio(prompt_tokens: int, computed_tokens: int, decode_steps: int, decode_weight: float) -> float:
    """Serving work without the cache / with it, counting a decode step as `decode_weight` prefill tokens:
    (P + w·D) / (P − hits + w·D). With w = 0 it is the prefill speedup alone (the upper bound). The page's
    decode-step cost is 0..100, and computed tokens come from a result (the last prompt token is always computed)."""
    if decode_weight < 0:
        raise Misuse(f"decode_weight must be >= 0, got {decode_weight}")
    if computed_tokens < 1 or computed_tokens > prompt_tokens:
        raise Misuse(f"computed_tokens must be 1..{prompt_tokens}, got {computed_tokens}")
    d = decode_weight * decode_steps
    return (prompt_tokens + d) / (computed_tokens + d)


def simulate_prefix_cache(trace: Trace, cache: CacheConfig = CacheConfig(), hashes: list[list[int]] | None = None,
             check: bool = False) -> PrefixCacheResult:
    """Run the trace through a prefix-caching block pool (see the module docstring).
    `hashes` (from trace_block_hashes at this block size) may be passed in to reuse them;
    check=True asserts the pool's invariants after every request."""
    bs = cache.block_size
    if trace.max_stored > cache.num_blocks * bs:
        i = max(range(trace.num_requests), key=lambda j: trace.requests[j].num_stored)
        n = trace.requests[i].num_stored
        # the page's capacity and its workload's sizes are chosen apart (256 slots, a 4,096-token prompt): the user's
        raise Refusal("alloc.err.cache_too_small", req=i, n=n, blocks=cdiv(n, bs), bs=bs, num_blocks=cache.num_blocks,
                      slots=cache.num_blocks * bs, need=cdiv(n, bs) * bs)
    if hashes is None:
        hashes = trace_block_hashes(trace, bs)
    if len(hashes) != trace.num_requests:
        raise Misuse(f"{len(hashes)} hash lists for {trace.num_requests} requests")
    pool = PrefixCachingBlockPool(cache.num_blocks, bs)
    n = trace.num_requests
    hit_tokens = np.zeros(n, dtype=np.int64)
    new_cached = np.zeros(n, dtype=np.int64)
    tables: list[tuple[int, ...]] = []
    evictions: list[tuple[int, int, int]] = []
    reused: set[int] = set()
    max_ref = 0
    early = 0
    live: deque[int] = deque()
    for i, req in enumerate(trace.requests):
        if len(live) >= cache.max_running:
            pool.free(live.popleft())
        hs = hashes[i]
        cached = pool.find_cached_prefix(hs, (req.prompt_len - 1) // bs) if cache.enable_caching else []
        need = cdiv(req.num_stored, bs) - len(cached)
        while need > pool.num_free_after_touch(cached):
            assert live, "a request that fits the pool alone must fit once every other request is gone"
            pool.free(live.popleft())
            early += 1
        before = len(pool.evicted)
        tables.append(tuple(pool.add_request_with_prefix(i, cached, req.num_stored)))
        evictions += [(i, b, h) for b, h in pool.evicted[before:]]
        if cached:
            hit_tokens[i] = len(cached) * bs
            reused.update(hs[:len(cached)])
            max_ref = max(max_ref, max(pool.ref_cnt[b] for b in cached))
        if cache.enable_caching:
            new_cached[i] = pool.cache_full_blocks(i, hs)
        live.append(i)
        if check:
            pool.check_invariants()
    while live:
        pool.free(live.popleft())
    if check:
        pool.check_invariants()
        assert pool.num_free_blocks == pool.num_blocks
    return PrefixCacheResult(
        cache=cache, prompt_len=np.array([r.prompt_len for r in trace.requests], dtype=np.int64),
        output_len=np.array([r.output_len for r in trace.requests], dtype=np.int64), hit_tokens=hit_tokens,
        new_cached_blocks=new_cached, block_tables=tuple(tables), evictions=tuple(evictions), max_ref_cnt=max_ref,
        num_distinct_reused=len(reused), num_early_finishes=early, num_cached_blocks=pool.num_cached_blocks,
        labels=tuple(r.label for r in trace.requests),
    )
