"""Automatic prefix caching (vLLM style) over the paging block pool, with an SGLang-style radix view.

A request's tokens are cut into blocks of `block_size`. Only *full* blocks are cached. Block i is
named by a hash that covers the hash of block i-1 and block i's own token ids (plus optional extra
keys such as a LoRA adapter or a per-tenant cache salt):

    hash_0 = H(ROOT, tokens[0:bs], extra)      hash_i = H(hash_{i-1}, tokens[i*bs:(i+1)*bs], extra)

so two requests get the same hash for block i exactly when their first (i+1)*bs tokens agree. One
changed token changes its own block's hash and, through the chain, the hash of every later block:
a prefix cache can only ever reuse a contiguous prefix that starts at token 0.

The pool keeps a hash -> block map. A new request looks its block hashes up in order and stops at
the first miss; the blocks found are shared (ref_cnt + 1; a block that was free leaves the free
queue wherever it sits). Blocks of a finished request go back to the tail of the free queue but
keep their hash, so they can still be hit; a block handed out from the head of the queue loses its
hash then (eviction), so free cached blocks are evicted least-recently-freed first, a request's last
block before its first. The last prompt token is always recomputed (its logits pick the first
output token), so a request whose whole prompt is cached still computes its last block: at most
(prompt_len - 1) // block_size blocks can hit.

Serving is kept simple: requests are admitted in order; the blocks of the last `max_running`
requests stay pinned (ref_cnt > 0); a request that does not fit finishes the oldest running ones
first. Each admitted request stores its prompt and every output token but the last (never fed back,
as in sim.alloc.paging), and caches its full blocks, decode blocks included — a chat's next turn hits them.

`RadixTree` is SGLang's view of the same thing: a tree whose edges are blocks of tokens, requests
are paths from the root, and a lookup walks down until a block differs. Without evictions it finds
exactly the hashed cache's hits (tests check it); it is also what the page draws.

The real-model part (`branch_from_prefix`, `kv_change`) imports torch lazily: the page's simulator
views never load it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from sim.alloc.paging import BlockPool, cdiv

WORKLOADS = ("system_prompt", "few_shot", "chat", "agent", "rag", "timestamp", "random")
WORKLOAD_LABELS = {
    "system_prompt": "Shared system prompt + questions",
    "few_shot": "Few-shot examples + query",
    "chat": "Multi-turn chat",
    "agent": "Agent loop (tools repeated)",
    "rag": "RAG: documents + question",
    "timestamp": "Timestamp in the system prompt",
    "random": "Random prompts (nothing shared)",
}
# What "groups" means in each workload (the page's help text).
GROUP_MEANING = {
    "system_prompt": "distinct system prompts",
    "few_shot": "tasks, each with its own examples",
    "chat": "conversations going on at once",
    "agent": "agents running at once",
    "rag": "document sets the questions are about",
    "timestamp": "distinct system prompts",
    "random": "(unused)",
}
LAYOUTS = ("fixed_first", "variable_first")
LAYOUT_LABELS = {"fixed_first": "fixed content first", "variable_first": "variable content first"}

VOCAB_SIZE = 32_000  # synthetic token ids are drawn from FIRST_ID..VOCAB_SIZE-1
FIRST_ID = 256
RAG_HEADER_LEN = 12  # "Answer from these documents:" — shorter than a 16-token block on purpose
TIMESTAMP_LEN = 8
CONTEXT_LIMIT = 8192  # a chat or agent run that would pass this starts afresh
MAX_REQUESTS = 2000
MAX_SHARED_LEN = 4096
MAX_VARIABLE_LEN = 1024
MAX_OUTPUT_LEN = 1024
MAX_GROUPS = 64
MAX_TRACE_TOKENS = 4_000_000  # stored tokens over all requests (about a second of simulation)
MAX_BLOCK_SIZE = 256
MAX_CAPACITY_TOKENS = 4_194_304
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
        raise ValueError(f"block_size must be >= 1, got {block_size}")
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


# ---------------------------------------------------------------------------------------------
# Requests and traces


@dataclass(frozen=True, eq=False)
class Request:
    prompt: np.ndarray  # (P,) int32 token ids, P >= 1
    output: np.ndarray  # (O,) int32, O >= 1; the last one is never fed back
    extra_key: str | None = None  # goes into every block hash (LoRA adapter, cache salt, ...)
    label: str = ""
    segments: tuple[tuple[str, int], ...] = ()  # (what, tokens) spans of the prompt, in order

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def output_len(self) -> int:
        return len(self.output)

    @property
    def num_stored(self) -> int:
        """Tokens whose K/V the request writes: the prompt and every output token but the last."""
        return len(self.prompt) + len(self.output) - 1

    def stored(self) -> np.ndarray:
        return np.concatenate([self.prompt, self.output[:-1]])

    @property
    def extra_keys(self) -> tuple:
        return () if self.extra_key is None else (self.extra_key,)

    def layout_text(self) -> str:
        return " ".join(f"[{name} {n:,}]" for name, n in self.segments)


@dataclass(frozen=True, eq=False)
class Trace:
    requests: tuple[Request, ...]
    workload: str = "custom"
    layout: str = ""

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("a trace needs at least one request")
        if len(self.requests) > MAX_REQUESTS:
            raise ValueError(f"a trace has at most {MAX_REQUESTS:,} requests, got {len(self.requests):,}")

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @property
    def num_stored_tokens(self) -> int:
        return sum(r.num_stored for r in self.requests)

    @property
    def max_stored(self) -> int:
        return max(r.num_stored for r in self.requests)


def trace_from_lists(prompts, outputs=None, extra_keys=None, labels=None) -> Trace:
    """A hand-written trace. Each output defaults to one token (never stored, so only the prompt is)."""
    n = len(prompts)
    outputs = [[0]] * n if outputs is None else outputs
    extra_keys = [None] * n if extra_keys is None else extra_keys
    labels = [f"request {i}" for i in range(n)] if labels is None else labels
    if not len(outputs) == len(extra_keys) == len(labels) == n:
        raise ValueError(f"{n} prompts but {len(outputs)} outputs, {len(extra_keys)} extra keys, {len(labels)} labels")
    reqs = []
    for i, (p, o, e, lab) in enumerate(zip(prompts, outputs, extra_keys, labels, strict=True)):
        p = np.asarray(p, dtype=np.int64)
        o = np.asarray(o, dtype=np.int64)
        if len(p) < 1:
            raise ValueError(f"request {i} has an empty prompt")
        if len(o) < 1:
            raise ValueError(f"request {i} produces no token: every request produces at least 1")
        for arr in (p, o):
            if arr.min() < 0 or arr.max() >= 2**31:
                raise ValueError(f"request {i}: token ids must be 0..{2**31 - 1}")
        reqs.append(Request(p.astype(np.int32), o.astype(np.int32), e, lab, (("prompt", len(p)),)))
    return Trace(tuple(reqs))


def trace_block_hashes(trace: Trace, block_size: int) -> list[list[int]]:
    """Each request's stored-token block hashes (depend on the block size, not on the capacity)."""
    return [block_hashes(r.stored(), block_size, r.extra_keys) for r in trace.requests]


# ---------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True)
class WorkloadConfig:
    """A seeded stream of requests. `shared_len` is the content that repeats (system prompt, examples,
    tool descriptions, documents); `variable_len` what is new in each request (question, message,
    observation); lengths of variable parts and outputs are drawn uniformly within ±50% of the mean."""

    workload: str = "system_prompt"
    layout: str = "fixed_first"
    num_requests: int = 200
    shared_len: int = 500
    variable_len: int = 64
    output_len: int = 64
    num_groups: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload must be one of {WORKLOADS}, got {self.workload!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        for name, lo, hi in (("num_requests", 1, MAX_REQUESTS), ("shared_len", 1, MAX_SHARED_LEN),
                             ("variable_len", 1, MAX_VARIABLE_LEN), ("output_len", 1, MAX_OUTPUT_LEN),
                             ("num_groups", 1, MAX_GROUPS), ("seed", 0, 2**32 - 1)):
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ValueError(f"{name} must be {lo:,}..{hi:,}, got {value:,}")


def _ids(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(FIRST_ID, VOCAB_SIZE, size=n).astype(np.int32)


def _jitter(rng: np.random.Generator, mean: int) -> int:
    """Uniform on ceil(mean/2) .. mean + floor(mean/2): mean `mean` (within half a token)."""
    return int(rng.integers((mean + 1) // 2, mean + mean // 2 + 1))


class _Builder:
    def __init__(self, layout: str) -> None:
        self.layout = layout
        self.requests: list[Request] = []
        self.tokens = 0

    def add(self, fixed: list[tuple[str, np.ndarray]], variable_order: list[tuple[str, np.ndarray]],
            output: np.ndarray, label: str) -> None:
        parts = fixed if self.layout == "fixed_first" else variable_order
        parts = [(name, ids) for name, ids in parts if len(ids)]
        prompt = np.concatenate([ids for _, ids in parts])
        req = Request(prompt, output, None, label, tuple((name, len(ids)) for name, ids in parts))
        self.tokens += req.num_stored
        if self.tokens > MAX_TRACE_TOKENS:
            raise ValueError(f"after {len(self.requests) + 1:,} requests this workload already stores "
                             f"{self.tokens:,} tokens, past the simulator's limit of {MAX_TRACE_TOKENS:,}: "
                             "use fewer requests or shorter prompts and outputs")
        self.requests.append(req)


def _system_like(cfg: WorkloadConfig, rng, b: _Builder, with_timestamp: bool) -> None:
    systems = [_ids(rng, cfg.shared_len) for _ in range(cfg.num_groups)]
    for i in range(cfg.num_requests):
        g = int(rng.integers(cfg.num_groups))
        q = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        sys_part = ("system prompt", systems[g])
        if with_timestamp:
            ts = ("timestamp", _ids(rng, TIMESTAMP_LEN))
            b.add([sys_part, ts, ("question", q)], [ts, sys_part, ("question", q)], out,
                  f"system prompt {g}, request {i}")
        else:
            b.add([sys_part, ("question", q)], [("question", q), sys_part], out, f"system prompt {g}, request {i}")


def _few_shot(cfg: WorkloadConfig, rng, b: _Builder) -> None:
    header = _ids(rng, max(1, cfg.shared_len // 4))
    examples = [_ids(rng, max(1, cfg.shared_len - len(header))) for _ in range(cfg.num_groups)]
    for i in range(cfg.num_requests):
        g = int(rng.integers(cfg.num_groups))
        q = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        parts = [("instructions", header), ("examples", examples[g])]
        b.add(parts + [("query", q)], [("query", q)] + parts, out, f"task {g}, request {i}")


def _chat(cfg: WorkloadConfig, rng, b: _Builder) -> None:
    system = _ids(rng, cfg.shared_len)
    history: list[list[np.ndarray]] = [[] for _ in range(cfg.num_groups)]
    conv_id = list(range(cfg.num_groups))  # a full conversation is replaced by a new one
    turn = [0] * cfg.num_groups
    next_id = cfg.num_groups
    for _ in range(cfg.num_requests):
        c = int(rng.integers(cfg.num_groups))
        msg = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        if len(system) + sum(map(len, history[c])) + len(msg) + len(out) > CONTEXT_LIMIT:
            history[c], conv_id[c], turn[c], next_id = [], next_id, 0, next_id + 1
        hist = np.concatenate(history[c]) if history[c] else np.zeros(0, np.int32)
        b.add([("system prompt", system), ("history", hist), ("message", msg)],
              [("message", msg), ("system prompt", system), ("history", hist)], out,
              f"conversation {conv_id[c]}, turn {turn[c]}")
        history[c] += [msg, out]
        turn[c] += 1


def _agent(cfg: WorkloadConfig, rng, b: _Builder) -> None:
    tools = _ids(rng, cfg.shared_len)
    task: list[np.ndarray] = [_ids(rng, _jitter(rng, cfg.variable_len)) for _ in range(cfg.num_groups)]
    steps: list[list[np.ndarray]] = [[] for _ in range(cfg.num_groups)]  # a1, o1, a2, o2, ...
    run_id = list(range(cfg.num_groups))
    step = [0] * cfg.num_groups
    next_id = cfg.num_groups
    for _ in range(cfg.num_requests):
        a = int(rng.integers(cfg.num_groups))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        if len(tools) + len(task[a]) + sum(map(len, steps[a])) + len(out) > CONTEXT_LIMIT:
            task[a] = _ids(rng, _jitter(rng, cfg.variable_len))
            steps[a], run_id[a], step[a], next_id = [], next_id, 0, next_id + 1
        if steps[a]:  # the newest observation is what this step adds
            older = np.concatenate(steps[a][:-1])
            new = ("observation", steps[a][-1])
            b.add([("tool descriptions", tools), ("task", task[a]), ("earlier steps", older), new],
                  [new, ("tool descriptions", tools), ("task", task[a]), ("earlier steps", older)], out,
                  f"agent run {run_id[a]}, step {step[a]}")
        else:
            b.add([("tool descriptions", tools), ("task", task[a])], [("task", task[a]), ("tool descriptions", tools)],
                  out, f"agent run {run_id[a]}, step 0")
        steps[a] += [out, _ids(rng, _jitter(rng, cfg.variable_len))]
        step[a] += 1


def _rag(cfg: WorkloadConfig, rng, b: _Builder) -> None:
    header = _ids(rng, RAG_HEADER_LEN)
    docs = [_ids(rng, cfg.shared_len) for _ in range(cfg.num_groups)]
    for i in range(cfg.num_requests):
        g = int(rng.integers(cfg.num_groups))
        q = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        h, d, qq = ("instructions", header), ("documents", docs[g]), ("question", q)
        b.add([h, d, qq], [h, qq, d], out, f"document set {g}, question {i}")


def _random(cfg: WorkloadConfig, rng, b: _Builder) -> None:
    for i in range(cfg.num_requests):
        p = ("prompt", _ids(rng, _jitter(rng, cfg.shared_len + cfg.variable_len)))
        b.add([p], [p], _ids(rng, _jitter(rng, cfg.output_len)), f"request {i}")


def make_trace(cfg: WorkloadConfig) -> Trace:
    rng = np.random.default_rng(cfg.seed)
    b = _Builder(cfg.layout)
    if cfg.workload in ("system_prompt", "timestamp"):
        _system_like(cfg, rng, b, cfg.workload == "timestamp")
    elif cfg.workload == "few_shot":
        _few_shot(cfg, rng, b)
    elif cfg.workload == "chat":
        _chat(cfg, rng, b)
    elif cfg.workload == "agent":
        _agent(cfg, rng, b)
    elif cfg.workload == "rag":
        _rag(cfg, rng, b)
    else:
        _random(cfg, rng, b)
    return Trace(tuple(b.requests), cfg.workload, cfg.layout)


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
    """sim.alloc.paging.BlockPool plus a hash -> block map. Free blocks keep their hash until the free queue
    hands them out again; that is the eviction (least recently freed first)."""

    def __init__(self, num_blocks: int, block_size: int = 16) -> None:
        super().__init__(num_blocks, block_size)
        self.free_block_queue = FreeBlockQueue(range(num_blocks))
        self.hash_to_block: dict[int, int] = {}
        self.block_to_hash: dict[int, int] = {}
        self.evicted: list[tuple[int, int]] = []  # (block, hash) in eviction order

    def _pop_free(self) -> int:
        block = super()._pop_free()
        h = self.block_to_hash.pop(block, None)
        if h is not None:
            del self.hash_to_block[h]
            self.evicted.append((block, h))
        return block

    @property
    def num_cached_blocks(self) -> int:
        return len(self.hash_to_block)

    def find_cached_prefix(self, hashes: Sequence[int], max_blocks: int) -> list[int]:
        """Blocks holding the longest run of hashes[0..] that is cached, at most max_blocks of them."""
        found = []
        get = self.hash_to_block.get
        for h in hashes[:max(0, max_blocks)]:
            block = get(h)
            if block is None:
                break
            found.append(block)
        return found

    def num_free_after_touch(self, blocks: Sequence[int]) -> int:
        """Free blocks left for new allocations once `blocks` are taken out of the free queue."""
        return self.num_free_blocks - sum(1 for b in blocks if self.ref_cnt[b] == 0)

    def add_request_with_prefix(self, req_id: int, cached_blocks: Sequence[int], num_tokens: int) -> list[int]:
        """A new request whose first len(cached_blocks) blocks are cache hits: share them, then take
        fresh blocks for the rest of its num_tokens tokens. Raises ValueError, changing nothing, when
        the free queue is too short."""
        bs = self.block_size
        if req_id in self.req_to_block_table:
            raise ValueError(f"request {req_id} already holds blocks {self.req_to_block_table[req_id]}")
        hit_tokens = len(cached_blocks) * bs
        if num_tokens <= hit_tokens:
            raise ValueError(f"request {req_id}: {num_tokens} tokens but {hit_tokens} cached; at least the last "
                             "prompt token must be computed")
        need = cdiv(num_tokens, bs) - len(cached_blocks)
        free = self.num_free_after_touch(cached_blocks)
        if need > free:
            raise ValueError(f"request {req_id} needs {need} new blocks for {num_tokens - hit_tokens} tokens; "
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
        hash is already cached (the recomputed last block of a fully cached prompt) stays private."""
        table = self.req_to_block_table[req_id]
        n_full = min(self.req_to_num_tokens[req_id] // self.block_size, len(hashes))
        new = 0
        for block, h in zip(table[:n_full], hashes[:n_full], strict=True):
            known = self.block_to_hash.get(block)
            if known is not None:
                assert known == h, f"block {block} is cached as {known:x}, asked to hold {h:x}"
                continue
            if h in self.hash_to_block:
                continue
            self.hash_to_block[h] = block
            self.block_to_hash[block] = h
            new += 1
        return new

    def check_invariants(self) -> None:
        super().check_invariants()
        assert len(self.hash_to_block) == len(self.block_to_hash), "hash maps disagree in size"
        for h, b in self.hash_to_block.items():
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
        if not 1 <= self.block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be 1..{MAX_BLOCK_SIZE}, got {self.block_size}")
        if not self.block_size <= self.capacity_tokens <= MAX_CAPACITY_TOKENS:
            raise ValueError(f"capacity_tokens must be {self.block_size}..{MAX_CAPACITY_TOKENS:,} (at least one "
                             f"block of {self.block_size}), got {self.capacity_tokens:,}")
        if not 1 <= self.max_running <= MAX_RUNNING:
            raise ValueError(f"max_running must be 1..{MAX_RUNNING}, got {self.max_running}")

    @property
    def num_blocks(self) -> int:
        return self.capacity_tokens // self.block_size


@dataclass(frozen=True, eq=False)
class PrefixCacheResult:
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
    labels: tuple[str, ...]

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
    def num_computed_tokens(self) -> int:
        """Prompt tokens the prefill had to compute."""
        return self.num_prompt_tokens - self.num_hit_tokens

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from the cache."""
        return self.num_hit_tokens / self.num_prompt_tokens

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

    @property
    def prefill_speedup(self) -> float:
        """Prefill work without the cache / with it."""
        return self.num_prompt_tokens / self.num_computed_tokens

    def throughput_gain(self, decode_weight: float) -> float:
        return work_ratio(self.num_prompt_tokens, self.num_computed_tokens, self.num_decode_steps, decode_weight)

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
    (P + w·D) / (P − hits + w·D). With w = 0 it is the prefill speedup alone (the upper bound)."""
    if decode_weight < 0:
        raise ValueError(f"decode_weight must be >= 0, got {decode_weight}")
    if computed_tokens < 1 or computed_tokens > prompt_tokens:
        raise ValueError(f"computed_tokens must be 1..{prompt_tokens}, got {computed_tokens}")
    d = decode_weight * decode_steps
    return (prompt_tokens + d) / (computed_tokens + d)


def simulate(trace: Trace, cache: CacheConfig = CacheConfig(), hashes: list[list[int]] | None = None,
             check: bool = False) -> PrefixCacheResult:
    """Run the trace through a prefix-caching block pool (see the module docstring).
    `hashes` (from trace_block_hashes at this block size) may be passed in to reuse them;
    check=True asserts the pool's invariants after every request."""
    bs = cache.block_size
    if trace.max_stored > cache.num_blocks * bs:
        i = max(range(trace.num_requests), key=lambda j: trace.requests[j].num_stored)
        n = trace.requests[i].num_stored
        raise ValueError(f"request {i} stores {n:,} tokens = {cdiv(n, bs):,} blocks of {bs}, but the cache holds "
                         f"{cache.num_blocks:,} blocks ({cache.num_blocks * bs:,} tokens): raise the capacity to at "
                         f"least {cdiv(n, bs) * bs:,} tokens")
    if hashes is None:
        hashes = trace_block_hashes(trace, bs)
    if len(hashes) != trace.num_requests:
        raise ValueError(f"{len(hashes)} hash lists for {trace.num_requests} requests")
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


def simulate_workload(cfg: WorkloadConfig, cache: CacheConfig = CacheConfig()) -> PrefixCacheResult:
    return simulate(make_trace(cfg), cache)


def compare_workloads(cfg: WorkloadConfig, cache: CacheConfig, workloads=WORKLOADS):
    """Every workload in both layouts, same sizes: one row each (the overview chart)."""
    import pandas as pd

    rows = []
    for wl in workloads:
        for layout in LAYOUTS:
            r = simulate(make_trace(replace(cfg, workload=wl, layout=layout)), cache)
            rows.append({"workload": wl, "layout": layout, "prompt_tokens": r.num_prompt_tokens,
                         "hit_tokens": r.num_hit_tokens, "computed_tokens": r.num_computed_tokens,
                         "hit_rate": r.hit_rate, "prefill_speedup": r.prefill_speedup,
                         "evictions": r.num_evictions, "requests_with_hit": r.num_requests_with_hit,
                         "decode_steps": r.num_decode_steps})
    return pd.DataFrame(rows)


DEFAULT_CAPACITIES = tuple(2**k for k in range(10, 19))  # 1,024 .. 262,144 tokens
DEFAULT_BLOCK_SIZES = (8, 16, 32, 64, 128, 256)  # the chosen size is always added


def capacity_sweep(trace: Trace, cache: CacheConfig, capacities: Sequence[int] = DEFAULT_CAPACITIES):
    """Hit rate as the cache grows (block size and concurrency fixed). Capacities too small for the
    largest request are left out."""
    import pandas as pd

    hashes = trace_block_hashes(trace, cache.block_size)
    rows = []
    for cap in sorted(set(capacities) | {cache.capacity_tokens}):
        if cap // cache.block_size * cache.block_size < trace.max_stored:
            continue
        r = simulate(trace, replace(cache, capacity_tokens=cap), hashes)
        rows.append({"capacity_tokens": cap, "hit_rate": r.hit_rate, "evictions": r.num_evictions,
                     "hit_tokens": r.num_hit_tokens})
    return pd.DataFrame(rows, columns=["capacity_tokens", "hit_rate", "evictions", "hit_tokens"])


def block_size_sweep(trace: Trace, cache: CacheConfig, block_sizes: Sequence[int] = DEFAULT_BLOCK_SIZES):
    """Hit rate by block size at the same capacity in tokens: larger blocks lose the partial tail of
    every shared prefix (and a prefix shorter than one block never hits)."""
    import pandas as pd

    rows = []
    for bs in sorted(set(block_sizes) | {cache.block_size}):
        cap = cache.capacity_tokens // bs * bs
        if bs > cache.capacity_tokens or cap < cdiv(trace.max_stored, bs) * bs:
            continue
        r = simulate(trace, replace(cache, block_size=bs, capacity_tokens=cap))
        rows.append({"block_size": bs, "hit_rate": r.hit_rate, "evictions": r.num_evictions,
                     "hit_tokens": r.num_hit_tokens})
    return pd.DataFrame(rows, columns=["block_size", "hit_rate", "evictions", "hit_tokens"])


# ---------------------------------------------------------------------------------------------
# Two prompts, block by block (the page's first view)


def compare_two_prompts(ids_a: Sequence[int], ids_b: Sequence[int], block_size: int):
    """Request A, then request B, through the cache; one row per block of each with its hash and fate."""
    import pandas as pd

    trace = trace_from_lists([list(ids_a), list(ids_b)])
    cache = CacheConfig(block_size, max(cdiv(len(ids_a), block_size) + cdiv(len(ids_b), block_size), 1) * block_size,
                        max_running=2)
    hashes = trace_block_hashes(trace, block_size)
    res = simulate(trace, cache, hashes)
    rows = []
    seen: set[int] = set()
    for r, (name, ids) in enumerate((("A", ids_a), ("B", ids_b))):
        hit_blocks = int(res.hit_tokens[r]) // block_size
        for i in range(cdiv(len(ids), block_size)):
            lo, hi = i * block_size, min(len(ids), (i + 1) * block_size)
            full = i < len(hashes[r])
            h = hashes[r][i] if full else None
            if i < hit_blocks:
                fate = "hit"
            elif not full:
                fate = "computed, partial block: not cached"
            elif h in seen:  # cached, but it holds the last prompt token, which is always recomputed
                fate = "computed again: holds the last prompt token"
            else:
                fate = "computed, cached"
            parent = None if i == 0 or not full else hashes[r][i - 1]
            rows.append({"request": name, "block": i, "tokens": f"{lo}..{hi - 1}", "first_token": lo,
                         "num_tokens": hi - lo, "hash": f"{h:016x}" if h is not None else "—",
                         "parent hash": f"{parent:016x}" if parent is not None else ("root" if full else "—"),
                         "fate": fate, "ids": list(ids[lo:hi])})
        seen.update(hashes[r])
    return pd.DataFrame(rows), res


# ---------------------------------------------------------------------------------------------
# The radix-tree view (SGLang)


class _Node:
    __slots__ = ("children", "parent", "depth", "created_by", "requests")

    def __init__(self, parent: _Node | None, depth: int, created_by: int) -> None:
        self.children: dict[bytes, _Node] = {}
        self.parent = parent
        self.depth = depth  # block index; the root is -1
        self.created_by = created_by
        self.requests: list[int] = []


class RadixTree:
    """Requests as paths of blocks from a root (one root per extra key). No eviction: it keeps every
    full block it has seen, so its hits are the best any cache of this block size could give."""

    def __init__(self, block_size: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.block_size = block_size
        self.roots: dict[str | None, _Node] = {}
        self.num_nodes = 0

    def add(self, req: Request, req_id: int) -> int:
        """Look the request up (the hit, in blocks, capped so the last prompt token is computed), then
        insert its full blocks. Returns the number of hit blocks."""
        bs = self.block_size
        buf = np.ascontiguousarray(req.stored(), dtype="<i4").tobytes()
        step = 4 * bs
        node = self.roots.setdefault(req.extra_key, _Node(None, -1, req_id))
        max_hit = (req.prompt_len - 1) // bs
        hit, matching = 0, True
        for i in range(req.num_stored // bs):
            key = buf[i * step:(i + 1) * step]
            child = node.children.get(key)
            if child is None:
                matching = False
                child = node.children[key] = _Node(node, i, req_id)
                self.num_nodes += 1
            elif matching and i < max_hit:
                hit += 1
            child.requests.append(req_id)
            node = child
        return hit

    def segments(self) -> list[dict]:
        """The tree with runs of blocks merged (one segment per edge of a compressed radix tree), each
        with a lane for drawing: the earliest request's path runs straight, later branches below."""
        segs: list[dict] = []
        lane = [0]

        def visit(node: _Node, parent_seg: int | None) -> int:
            start = node
            while len(node.children) == 1:
                (child,) = node.children.values()
                if len(child.requests) != len(node.requests):
                    break
                node = child
            seg_id = len(segs)
            segs.append({"segment": seg_id, "parent": parent_seg, "start_block": start.depth,
                         "end_block": node.depth + 1, "requests": tuple(start.requests),
                         "created_by": start.created_by, "lane": None})
            kids = sorted(node.children.values(), key=lambda c: (c.created_by, c.requests[0]))
            if not kids:
                segs[seg_id]["lane"] = lane[0]
                lane[0] += 1
            for j, child in enumerate(kids):
                child_lane = visit(child, seg_id)
                if j == 0:
                    segs[seg_id]["lane"] = child_lane
            return segs[seg_id]["lane"]

        for root in self.roots.values():
            for child in sorted(root.children.values(), key=lambda c: c.created_by):
                visit(child, None)
        return segs


def radix_hit_tokens(trace: Trace, block_size: int) -> np.ndarray:
    tree = RadixTree(block_size)
    return np.array([tree.add(r, i) * block_size for i, r in enumerate(trace.requests)], dtype=np.int64)


def radix_view(trace: Trace, block_size: int, num_requests: int):
    """The first num_requests requests as a compressed tree: a frame of segments (page figure)."""
    import pandas as pd

    if num_requests < 1:
        raise ValueError(f"num_requests must be >= 1, got {num_requests}")
    tree = RadixTree(block_size)
    hits = [tree.add(r, i) for i, r in enumerate(trace.requests[:num_requests])]
    frame = pd.DataFrame(tree.segments(), columns=["segment", "parent", "start_block", "end_block", "requests",
                                                   "created_by", "lane"])
    return frame, np.array(hits, dtype=np.int64) * block_size
