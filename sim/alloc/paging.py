"""Paged KV blocks (vLLM's PagedAttention) against contiguous allocation.

The KV cache is cut into fixed-size blocks of `block_size` token slots. A request owns a
*block table*: logical block i (its tokens i*block_size ..) -> a physical block id. Blocks come
from the head of a free queue when a request needs room and go back to its tail when the request
finishes, so a request only ever wastes the unused slots of its last block. Forked requests
(parallel sampling, beam search) share blocks through reference counts; the first write into a
shared, partly filled block copies it (copy-on-write).

The baselines keep each request's KV in one contiguous extent reserved at admission:
  reserve_max_len    : the model's maximum length (what servers before vLLM did),
  reserve_max_tokens : prompt + the request's max_tokens,
  first_fit          : prompt + max_tokens placed first-fit in one address space, so the holes
                       left between live extents (external fragmentation) can refuse a request
                       that the total free memory would hold.

Time is counted in decode steps. A request with prompt p and output o admitted at step s is
prefilled at step s (its p prompt tokens are stored and its first output token is sampled) and
decodes at steps s+1 .. s+o-1; after step s+j it holds p+j tokens. The last sampled token is never
fed back, so it never takes a slot. Memory is measured after each step's writes.

The continuous-batching loop admits waiting requests first-come first-served while they fit. A
paged request needs only its prompt's blocks to start; when a running request needs a block and
none is free, the newest running request is preempted: its blocks are freed and it goes back to the
head of the queue to be recomputed later (prompt + what it had generated).

Three implementations of the paged loop agree exactly (tests check it): `simulate_paged_stepwise`
with a real BlockPool appending one token per request per step (the reference), the same with
`lazy=True` touching a request only when it crosses a block boundary (used for the block-grid
snapshots), and `simulate_policy("paged", ...)`, a counting loop without block ids that is fast
enough for 100,000 requests.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

MAX_BLOCK_SIZE = 4096
MAX_REQUESTS = 100_000
MAX_MODEL_LEN = 32_768
MAX_CAPACITY_TOKENS = 4_194_304
MAX_STEPS = 4_000_000  # a run longer than this many decode steps is refused (time and memory)
LENGTH_DISTS = ("chat", "uniform", "fixed")
ARRIVALS = ("burst", "poisson")
POLICIES = ("paged", "reserve_max_len", "reserve_max_tokens", "first_fit")
POLICY_LABELS = {
    "paged": "Paged blocks (vLLM)",
    "reserve_max_len": "Contiguous: reserve max length",
    "reserve_max_tokens": "Contiguous: reserve prompt + max_tokens",
    "first_fit": "Contiguous first-fit heap (prompt + max_tokens)",
}
# Memory a request holds, split by what it holds (slot categories of the breakdown charts).
SLOT_KINDS = ("tokens", "last_block", "future", "never_used", "external")
SLOT_KIND_LABELS = {
    "tokens": "real tokens",
    "last_block": "unused slots of last blocks",
    "future": "reserved for tokens still to come",
    "never_used": "reserved, never used",
    "external": "free but unusable (external fragmentation)",
}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# The block pool


class BlockPool:
    """Physical blocks 0..num_blocks-1, a FIFO free queue, per-request block tables, ref counts.

    Allocation pops from the head of `free_block_queue`; freeing appends a request's blocks to
    the tail in reverse table order (its last block first), as vLLM and nano-vllm do, so the
    blocks freed longest ago are reused first.
    """

    def __init__(self, num_blocks: int, block_size: int = 16) -> None:
        if not 1 <= num_blocks <= MAX_CAPACITY_TOKENS:
            raise ValueError(f"num_blocks must be 1..{MAX_CAPACITY_TOKENS:,}, got {num_blocks}")
        if not 1 <= block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be 1..{MAX_BLOCK_SIZE}, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_block_queue: deque[int] = deque(range(num_blocks))
        self.ref_cnt: list[int] = [0] * num_blocks
        self.block_num_tokens: list[int] = [0] * num_blocks  # filled slots of each block
        self.req_to_block_table: dict[int, list[int]] = {}
        self.req_to_num_tokens: dict[int, int] = {}
        self.num_cow_copies = 0

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self.free_block_queue)

    def _table(self, req_id: int) -> list[int]:
        try:
            return self.req_to_block_table[req_id]
        except KeyError:
            raise ValueError(f"request {req_id} has no blocks in this pool") from None

    def _pop_free(self) -> int:
        block = self.free_block_queue.popleft()
        assert self.ref_cnt[block] == 0, f"block {block} in the free queue has ref_cnt {self.ref_cnt[block]}"
        self.ref_cnt[block] = 1
        self.block_num_tokens[block] = 0
        return block

    def num_new_blocks(self, req_id: int, num_new_tokens: int) -> int:
        """Blocks that appending num_new_tokens would take from the free queue (a copy-on-write copy included)."""
        bs = self.block_size
        if req_id not in self.req_to_block_table:
            return cdiv(num_new_tokens, bs)
        table, n = self.req_to_block_table[req_id], self.req_to_num_tokens[req_id]
        need = cdiv(n + num_new_tokens, bs) - len(table)
        if n % bs and self.ref_cnt[table[-1]] > 1:
            need += 1  # the shared, partly filled last block is copied before the write
        return need

    def can_append(self, req_id: int, num_new_tokens: int = 1) -> bool:
        return self.num_new_blocks(req_id, num_new_tokens) <= len(self.free_block_queue)

    def add_request(self, req_id: int, num_tokens: int) -> list[int]:
        """Allocate blocks for a new request's first num_tokens tokens (its prompt); its block table."""
        if req_id in self.req_to_block_table:
            raise ValueError(f"request {req_id} already holds blocks {self.req_to_block_table[req_id]}")
        if num_tokens < 1:
            raise ValueError(f"a request needs at least 1 token, got {num_tokens}")
        need = cdiv(num_tokens, self.block_size)
        if need > self.num_free_blocks:
            raise ValueError(f"request {req_id} needs {need} blocks for {num_tokens} tokens; "
                             f"{self.num_free_blocks} of {self.num_blocks} are free")
        self.req_to_block_table[req_id] = []
        self.req_to_num_tokens[req_id] = 0
        self.append(req_id, num_tokens)
        return list(self.req_to_block_table[req_id])

    def append(self, req_id: int, num_new_tokens: int = 1) -> list[tuple[int, int]]:
        """Store num_new_tokens more tokens: fill the last block, then take blocks from the free queue.

        A shared (ref_cnt > 1), partly filled last block is first copied to a fresh block
        (copy-on-write). Returns the (src, dst) block copies made, so a real cache can copy data.
        Raises ValueError, changing nothing, when the free queue is too short.
        """
        table = self._table(req_id)
        if num_new_tokens < 1:
            raise ValueError(f"append needs at least 1 token, got {num_new_tokens}")
        need = self.num_new_blocks(req_id, num_new_tokens)
        if need > self.num_free_blocks:
            raise ValueError(f"request {req_id} needs {need} more blocks for {num_new_tokens} tokens; "
                             f"{self.num_free_blocks} are free")
        bs = self.block_size
        n = self.req_to_num_tokens[req_id]
        left = num_new_tokens
        copies: list[tuple[int, int]] = []
        if n % bs:
            last = table[-1]
            if self.ref_cnt[last] > 1:  # copy-on-write
                new = self._pop_free()
                self.block_num_tokens[new] = self.block_num_tokens[last]
                self.ref_cnt[last] -= 1
                table[-1] = new
                copies.append((last, new))
                self.num_cow_copies += 1
                last = new
            take = min(bs - n % bs, left)
            self.block_num_tokens[last] += take
            left -= take
        while left > 0:
            block = self._pop_free()
            take = min(bs, left)
            self.block_num_tokens[block] = take
            table.append(block)
            left -= take
        self.req_to_num_tokens[req_id] = n + num_new_tokens
        return copies

    def fork(self, parent_id: int, child_id: int) -> list[int]:
        """The child shares every block of the parent (ref counts +1); no data is copied yet."""
        table = self._table(parent_id)
        if child_id in self.req_to_block_table:
            raise ValueError(f"request {child_id} already exists")
        for block in table:
            self.ref_cnt[block] += 1
        self.req_to_block_table[child_id] = list(table)
        self.req_to_num_tokens[child_id] = self.req_to_num_tokens[parent_id]
        return list(table)

    def free(self, req_id: int) -> list[int]:
        """Drop a request; blocks whose ref count reaches 0 join the free queue's tail. Returns those."""
        table = self._table(req_id)
        del self.req_to_block_table[req_id]
        del self.req_to_num_tokens[req_id]
        freed = []
        for block in reversed(table):
            self.ref_cnt[block] -= 1
            assert self.ref_cnt[block] >= 0, f"block {block} freed more often than allocated"
            if self.ref_cnt[block] == 0:
                self.block_num_tokens[block] = 0
                self.free_block_queue.append(block)
                freed.append(block)
        return freed

    def block_table(self, req_id: int) -> list[int]:
        return list(self._table(req_id))

    def num_stored_tokens(self) -> int:
        """Distinct token slots holding data (a shared block counts once)."""
        return sum(self.block_num_tokens)

    def check_invariants(self) -> None:
        """Every block is free or owned, never both; ref counts equal table occurrences; free + used == total;
        a block shared by several requests sits at the same logical index behind identical prefixes."""
        bs = self.block_size
        counted = [0] * self.num_blocks
        first_owner: dict[int, tuple[int, int]] = {}
        for req, table in self.req_to_block_table.items():
            n = self.req_to_num_tokens[req]
            assert len(table) == cdiv(n, bs), f"request {req}: {n} tokens in {len(table)} blocks"
            assert len(set(table)) == len(table), f"request {req} holds a block twice: {table}"
            for i, block in enumerate(table):
                counted[block] += 1
                want = bs if i < len(table) - 1 else n - i * bs
                assert self.block_num_tokens[block] == want, f"block {block} holds {self.block_num_tokens[block]}, want {want}"
                if block in first_owner:
                    other, j = first_owner[block]
                    assert j == i and self.req_to_block_table[other][:i] == table[:i], \
                        f"block {block} is shared by requests {other} and {req} at different positions"
                else:
                    first_owner[block] = (req, i)
        assert counted == self.ref_cnt, "ref counts do not match the block tables"
        free = set(self.free_block_queue)
        assert len(free) == len(self.free_block_queue), "a block is in the free queue twice"
        for block in range(self.num_blocks):
            assert (block in free) == (self.ref_cnt[block] == 0), f"block {block} is both free and owned, or neither"
        assert self.num_free_blocks + sum(1 for r in self.ref_cnt if r > 0) == self.num_blocks

    def snapshot(self, step: int = 0) -> PoolSnapshot:
        owner = np.full(self.num_blocks, -1, dtype=np.int64)
        logical = np.full(self.num_blocks, -1, dtype=np.int64)
        for req in sorted(self.req_to_block_table):
            for i, block in enumerate(self.req_to_block_table[req]):
                if owner[block] < 0:
                    owner[block], logical[block] = req, i
        return PoolSnapshot(
            step=step, block_size=self.block_size, owner=owner, logical_index=logical,
            ref_cnt=np.array(self.ref_cnt, dtype=np.int64), fill=np.array(self.block_num_tokens, dtype=np.int64),
            free_block_queue=tuple(self.free_block_queue),
            req_to_block_table={r: tuple(t) for r, t in self.req_to_block_table.items()},
            req_to_num_tokens=dict(self.req_to_num_tokens),
        )


@dataclass(frozen=True)
class PoolSnapshot:
    step: int
    block_size: int
    owner: np.ndarray  # (num_blocks,) lowest request id holding the block, -1 when free
    logical_index: np.ndarray  # (num_blocks,) the block's index in that owner's table, -1 when free
    ref_cnt: np.ndarray  # (num_blocks,)
    fill: np.ndarray  # (num_blocks,) token slots holding data
    free_block_queue: tuple[int, ...]
    req_to_block_table: dict[int, tuple[int, ...]]
    req_to_num_tokens: dict[int, int]

    @property
    def num_blocks(self) -> int:
        return len(self.owner)

    @property
    def num_used_blocks(self) -> int:
        return int((self.ref_cnt > 0).sum())

    @property
    def num_stored_tokens(self) -> int:
        return int(self.fill.sum())

    def table_frame(self, req_id: int):
        """One row per logical block of a request: where it lives and which tokens it holds."""
        import pandas as pd

        table = self.req_to_block_table.get(req_id)
        if table is None:
            raise ValueError(f"request {req_id} holds no blocks at step {self.step}")
        n, bs = self.req_to_num_tokens[req_id], self.block_size
        rows = []
        for i, block in enumerate(table):
            hi = min(n, (i + 1) * bs) - 1
            rows.append({"logical block": i, "physical block": block, "tokens": f"{i * bs}..{hi}",
                         "slots used": f"{hi - i * bs + 1}/{bs}", "ref_cnt": int(self.ref_cnt[block])})
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True)
class WorkloadConfig:
    """N chat completions. Lengths: "chat" is log-normal (long tail; `spread` is its sigma),
    "uniform" is uniform on 1..2*mean-1, "fixed" is the mean for every request. Means default to
    ShareGPT's (161 prompt / 338 output tokens, as measured in the vLLM paper)."""

    num_requests: int = 1000
    length_dist: str = "chat"
    prompt_mean: int = 160
    output_mean: int = 340
    spread: float = 1.0
    max_model_len: int = 2048
    max_tokens: int = 1024  # the client's cap on output tokens (clamped to max_model_len - prompt)
    arrival: str = "burst"  # burst: all queued at step 0; poisson: arrival_rate requests per step
    arrival_rate: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.num_requests <= MAX_REQUESTS:
            raise ValueError(f"num_requests must be 1..{MAX_REQUESTS:,}, got {self.num_requests:,}")
        if self.length_dist not in LENGTH_DISTS:
            raise ValueError(f"length_dist must be one of {LENGTH_DISTS}, got {self.length_dist!r}")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {ARRIVALS}, got {self.arrival!r}")
        if not 2 <= self.max_model_len <= MAX_MODEL_LEN:
            raise ValueError(f"max_model_len must be 2..{MAX_MODEL_LEN:,}, got {self.max_model_len:,}")
        if not 1 <= self.max_tokens < self.max_model_len:
            raise ValueError(f"max_tokens must be 1..{self.max_model_len - 1} (below max_model_len "
                             f"{self.max_model_len}), got {self.max_tokens}")
        if not 1 <= self.prompt_mean < self.max_model_len:
            raise ValueError(f"prompt_mean must be 1..{self.max_model_len - 1}, got {self.prompt_mean}")
        if not 1 <= self.output_mean <= self.max_tokens:
            raise ValueError(f"output_mean must be 1..max_tokens={self.max_tokens}, got {self.output_mean}")
        if not 0.05 <= self.spread <= 3.0:
            raise ValueError(f"spread must be 0.05..3.0, got {self.spread}")
        if not 0.001 <= self.arrival_rate <= 1000:
            raise ValueError(f"arrival_rate must be 0.001..1000 requests per step, got {self.arrival_rate}")


@dataclass(frozen=True)
class Workload:
    arrival: np.ndarray  # (N,) step at which each request arrives, nondecreasing
    prompt_len: np.ndarray  # (N,) >= 1
    output_len: np.ndarray  # (N,) 1..max_tokens
    max_tokens: np.ndarray  # (N,) the request's output cap, <= max_model_len - prompt_len
    max_model_len: int

    def __post_init__(self) -> None:
        n = len(self.arrival)
        if n < 1 or n > MAX_REQUESTS:
            raise ValueError(f"a workload has 1..{MAX_REQUESTS:,} requests, got {n:,}")
        for name in ("prompt_len", "output_len", "max_tokens"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries for {n} requests")
        if np.any(np.diff(self.arrival) < 0) or self.arrival[0] < 0:
            raise ValueError("arrivals must be nondecreasing steps >= 0")
        if self.prompt_len.min() < 1:
            raise ValueError(f"every prompt needs at least 1 token (shortest: {self.prompt_len.min()})")
        if self.output_len.min() < 1:
            raise ValueError(f"every request produces at least 1 token (shortest: {self.output_len.min()})")
        bad = np.flatnonzero(self.output_len > self.max_tokens)
        if len(bad):
            i = bad[0]
            raise ValueError(f"request {i} produces {self.output_len[i]} tokens, above its max_tokens {self.max_tokens[i]}")
        bad = np.flatnonzero(self.prompt_len + self.max_tokens > self.max_model_len)
        if len(bad):
            i = bad[0]
            raise ValueError(f"request {i}: prompt {self.prompt_len[i]} + max_tokens {self.max_tokens[i]} "
                             f"exceeds max_model_len {self.max_model_len}")

    @property
    def num_requests(self) -> int:
        return len(self.arrival)

    @property
    def peak_tokens(self) -> np.ndarray:
        """Tokens each request holds at its last step: prompt + output - 1."""
        return self.prompt_len + self.output_len - 1

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"request": np.arange(self.num_requests), "arrival_step": self.arrival,
                             "prompt_tokens": self.prompt_len, "output_tokens": self.output_len,
                             "max_tokens": self.max_tokens})


def workload_from_lengths(prompt_len, output_len, arrival=None, max_tokens=None, max_model_len: int = 2048) -> Workload:
    """A hand-written workload (tests, small examples). max_tokens defaults to each output length."""
    p = np.asarray(prompt_len, dtype=np.int64)
    o = np.asarray(output_len, dtype=np.int64)
    a = np.zeros(len(p), dtype=np.int64) if arrival is None else np.asarray(arrival, dtype=np.int64)
    m = o.copy() if max_tokens is None else np.broadcast_to(np.asarray(max_tokens, dtype=np.int64), p.shape).copy()
    return Workload(a, p, o, m, int(max_model_len))


def _draw_lengths(rng: np.random.Generator, dist: str, mean: int, spread: float, n: int) -> np.ndarray:
    if dist == "fixed":
        return np.full(n, mean, dtype=np.int64)
    if dist == "uniform":
        return rng.integers(1, 2 * mean, size=n, endpoint=False).astype(np.int64)  # 1..2*mean-1, mean `mean`
    mu = math.log(mean) - spread**2 / 2  # log-normal whose mean is `mean`
    return np.rint(rng.lognormal(mu, spread, size=n)).astype(np.int64)


def make_workload(cfg: WorkloadConfig) -> Workload:
    rng = np.random.default_rng(cfg.seed)
    n, L = cfg.num_requests, cfg.max_model_len
    prompt = np.clip(_draw_lengths(rng, cfg.length_dist, cfg.prompt_mean, cfg.spread, n), 1, L - 1)
    cap = np.minimum(cfg.max_tokens, L - prompt)
    output = np.clip(_draw_lengths(rng, cfg.length_dist, cfg.output_mean, cfg.spread, n), 1, cap)
    if cfg.arrival == "burst":
        arrival = np.zeros(n, dtype=np.int64)
    else:
        arrival = np.floor(np.cumsum(rng.exponential(1.0 / cfg.arrival_rate, size=n))).astype(np.int64)
    return Workload(arrival, prompt, output, cap.astype(np.int64), L)


# ---------------------------------------------------------------------------------------------
# Closed forms (time-integrated slots, summed over each request's steps)


def _sum_cdiv(n: np.ndarray, b: int) -> np.ndarray:
    """sum_{k=1..n} ceil(k / b), elementwise."""
    q, r = n // b, n % b
    return b * q * (q + 1) // 2 + r * (q + 1)


def token_slot_steps(wl: Workload) -> int:
    """Sum over every step of every request of the tokens it holds: sum_r sum_j (p + j), j < o."""
    p, o = wl.prompt_len, wl.output_len
    return int(np.sum(o * p + o * (o - 1) // 2))


def paged_slot_steps(wl: Workload, block_size: int) -> int:
    """Sum over every step of every request of its allocated slots: ceil((p + j) / bs) * bs."""
    p, o = wl.prompt_len, wl.output_len
    blocks = _sum_cdiv(p + o - 1, block_size) - _sum_cdiv(p - 1, block_size)
    return int(np.sum(blocks)) * block_size


def block_usage(num_tokens: int, block_size: int) -> tuple[int, int, float]:
    """(blocks, slots, share of the slots holding tokens): 17 tokens in 16-slot blocks -> (2, 32, 0.53)."""
    if num_tokens < 1 or not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise ValueError(f"need num_tokens >= 1 and block_size 1..{MAX_BLOCK_SIZE}, got {num_tokens}, {block_size}")
    blocks = cdiv(num_tokens, block_size)
    return blocks, blocks * block_size, num_tokens / (blocks * block_size)


@dataclass(frozen=True)
class BlockSizeTradeoff:
    block_size: np.ndarray
    last_block_waste: np.ndarray  # share of allocated slot-steps left empty in last blocks
    mean_table_len: np.ndarray  # block-table entries per request at its peak
    max_table_len: np.ndarray

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"block_size": self.block_size, "last_block_waste": self.last_block_waste,
                             "mean_table_len": self.mean_table_len, "max_table_len": self.max_table_len})


def block_size_tradeoff(wl: Workload, sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256)) -> BlockSizeTradeoff:
    """Small blocks waste little of the last block but need long block tables; large ones the reverse."""
    sizes = np.array(sorted(set(int(s) for s in sizes)), dtype=np.int64)
    tokens = token_slot_steps(wl)
    waste, mean_len, max_len = [], [], []
    for b in sizes:
        alloc = paged_slot_steps(wl, int(b))
        waste.append(1 - tokens / alloc)
        table = -(-wl.peak_tokens // b)
        mean_len.append(float(table.mean()))
        max_len.append(int(table.max()))
    return BlockSizeTradeoff(sizes, np.array(waste), np.array(mean_len), np.array(max_len, dtype=np.int64))


# ---------------------------------------------------------------------------------------------
# Serving simulation


@dataclass(frozen=True)
class ServingConfig:
    capacity_tokens: int = 16_384  # KV slots the accelerator holds for the cache
    block_size: int = 16
    max_num_seqs: int = 256  # the scheduler's cap on running requests

    def __post_init__(self) -> None:
        if not 1 <= self.block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be 1..{MAX_BLOCK_SIZE}, got {self.block_size}")
        if not 1 <= self.capacity_tokens <= MAX_CAPACITY_TOKENS:
            raise ValueError(f"capacity must be 1..{MAX_CAPACITY_TOKENS:,} token slots, got {self.capacity_tokens:,}")
        if self.capacity_tokens < self.block_size:
            raise ValueError(f"capacity {self.capacity_tokens} is smaller than one block of {self.block_size}")
        if not 1 <= self.max_num_seqs <= MAX_REQUESTS:
            raise ValueError(f"max_num_seqs must be 1..{MAX_REQUESTS:,}, got {self.max_num_seqs}")

    @property
    def num_blocks(self) -> int:
        return self.capacity_tokens // self.block_size


def check_fits(wl: Workload, serving: ServingConfig) -> None:
    """Every policy must be able to run the longest request alone."""
    if serving.capacity_tokens < wl.max_model_len:
        raise ValueError(f"a KV capacity of {serving.capacity_tokens:,} token slots cannot hold one request of the "
                         f"maximum length {wl.max_model_len:,}: raise the capacity or lower the maximum length")
    paged = serving.num_blocks * serving.block_size
    if paged < wl.max_model_len:
        raise ValueError(f"{serving.num_blocks} blocks of {serving.block_size} slots ({paged:,}) cannot hold one request "
                         f"of the maximum length {wl.max_model_len:,}: raise the capacity or use smaller blocks")


@dataclass(frozen=True)
class Segments:
    """Stretches a request spends running: steps start..end-1 holding prompt + (t - start) tokens.
    A preempted paged request has several (recomputed with a longer prompt)."""

    req: np.ndarray
    start: np.ndarray
    end: np.ndarray
    prompt: np.ndarray

    def tokens_at(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(running requests, stored tokens) at each step, from sorted prefix sums."""
        order_s, order_e = np.argsort(self.start, kind="stable"), np.argsort(self.end, kind="stable")
        s_sorted, e_sorted = self.start[order_s], self.end[order_e]
        c = self.prompt - self.start  # tokens at step t: c + t
        cs = np.concatenate([[0], np.cumsum(c[order_s])])
        ce = np.concatenate([[0], np.cumsum(c[order_e])])
        ns = np.searchsorted(s_sorted, steps, side="right")
        ne = np.searchsorted(e_sorted, steps, side="right")
        running = ns - ne
        return running, cs[ns] - ce[ne] + running * steps

    def amount_at(self, steps: np.ndarray, per_seg: np.ndarray) -> np.ndarray:
        """Sum of a constant per-segment amount over the segments running at each step."""
        order_s, order_e = np.argsort(self.start, kind="stable"), np.argsort(self.end, kind="stable")
        cs = np.concatenate([[0], np.cumsum(per_seg[order_s])])
        ce = np.concatenate([[0], np.cumsum(per_seg[order_e])])
        return cs[np.searchsorted(self.start[order_s], steps, side="right")] - \
            ce[np.searchsorted(self.end[order_e], steps, side="right")]


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    capacity_tokens: int
    block_size: int
    makespan: int  # steps until the last request finished
    num_requests: int
    num_output_tokens: int
    num_preemptions: int
    segments: Segments
    first_start: np.ndarray  # (N,) the step each request first ran
    slot_steps: dict[str, int]  # SLOT_KINDS -> slots summed over every step
    peak_running: int
    used_blocks: np.ndarray | None = None  # paged: blocks in use after each step
    offset: np.ndarray | None = None  # first_fit: each request's start address
    reserve: np.ndarray | None = None  # contiguous: each request's reserved slots
    external: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # first_fit: (from, to, free slots) refused

    @property
    def label(self) -> str:
        return POLICY_LABELS[self.policy]

    @property
    def claimed_slot_steps(self) -> int:
        return sum(self.slot_steps.values())

    @property
    def token_share(self) -> float:
        """Share of the KV memory claimed by requests (and stranded between them) that holds real tokens."""
        return self.slot_steps["tokens"] / self.claimed_slot_steps

    @property
    def mean_running(self) -> float:
        return float(np.sum(self.segments.end - self.segments.start)) / self.makespan

    @property
    def tokens_per_step(self) -> float:
        return self.num_output_tokens / self.makespan

    @property
    def capacity_share_tokens(self) -> float:
        """Real tokens as a share of the whole capacity over the run (idle memory counts against it)."""
        return self.slot_steps["tokens"] / (self.capacity_tokens * self.makespan)

    def series(self, num_points: int = 400):
        """Sampled over time: running requests and slots by kind. A frame with one row per sampled step."""
        import pandas as pd

        steps = np.unique(np.linspace(0, self.makespan - 1, min(self.makespan, num_points)).round().astype(np.int64))
        running, tokens = self.segments.tokens_at(steps)
        cols = {"step": steps, "running": running, "tokens": tokens}
        zero = np.zeros_like(steps)
        if self.policy == "paged":
            cols["last_block"] = self.used_blocks[steps] * self.block_size - tokens
            cols["future"] = cols["never_used"] = cols["external"] = zero
        else:
            seg = self.segments
            reserve = self.reserve[seg.req]
            peak = seg.prompt + (seg.end - seg.start) - 1
            reserved = seg.amount_at(steps, reserve)
            last = seg.amount_at(steps, peak)
            cols["last_block"] = zero
            cols["future"] = last - tokens
            cols["never_used"] = reserved - last
            ext = zero.copy()
            if self.external is not None and len(self.external[0]):
                lo, hi, free = self.external
                i = np.searchsorted(lo, steps, side="right") - 1
                inside = (i >= 0) & (steps < hi[np.maximum(i, 0)])
                ext = np.where(inside, free[np.maximum(i, 0)], 0)
            cols["external"] = ext
        frame = pd.DataFrame(cols)
        frame.insert(0, "policy", self.policy)
        return frame


def _slot_steps_reserved(wl: Workload, reserve: np.ndarray, external: int) -> dict[str, int]:
    p, o = wl.prompt_len, wl.output_len
    return {"tokens": token_slot_steps(wl), "last_block": 0, "future": int(np.sum(o * (o - 1) // 2)),
            "never_used": int(np.sum(o * (reserve - (p + o - 1)))), "external": int(external)}


def _peak_running(seg: Segments) -> int:
    s_sorted, e_sorted = np.sort(seg.start), np.sort(seg.end)
    running = np.arange(1, len(s_sorted) + 1) - np.searchsorted(e_sorted, s_sorted, side="right")
    return int(running.max())


def _first_start(seg: Segments, n: int) -> np.ndarray:
    first = np.full(n, -1, dtype=np.int64)
    order = np.argsort(seg.start, kind="stable")[::-1]  # later first, so the earliest wins
    first[seg.req[order]] = seg.start[order]
    return first


class _FirstFitHeap:
    """One address space 0..capacity; holes kept sorted by start and merged when freed."""

    def __init__(self, capacity: int) -> None:
        self.starts = [0]
        self.sizes = [capacity]
        self.free_total = capacity

    def alloc(self, size: int) -> int:
        for i, s in enumerate(self.sizes):
            if s >= size:
                off = self.starts[i]
                if s == size:
                    del self.starts[i], self.sizes[i]
                else:
                    self.starts[i] += size
                    self.sizes[i] -= size
                self.free_total -= size
                return off
        return -1

    def free(self, off: int, size: int) -> None:
        i = bisect.bisect_left(self.starts, off)
        self.starts.insert(i, off)
        self.sizes.insert(i, size)
        self.free_total += size
        if i + 1 < len(self.starts) and self.starts[i] + self.sizes[i] == self.starts[i + 1]:
            self.sizes[i] += self.sizes.pop(i + 1)
            self.starts.pop(i + 1)
        if i > 0 and self.starts[i - 1] + self.sizes[i - 1] == self.starts[i]:
            self.sizes[i - 1] += self.sizes.pop(i)
            self.starts.pop(i)


def _simulate_contiguous(wl: Workload, serving: ServingConfig, policy: str) -> PolicyResult:
    """Event-driven: a request holds its reservation from admission to finish, so only arrivals and
    finishes change anything. FCFS, so requests start in arrival order."""
    n, cap = wl.num_requests, serving.capacity_tokens
    reserve = (np.full(n, wl.max_model_len, dtype=np.int64) if policy == "reserve_max_len"
               else wl.prompt_len + wl.max_tokens)
    arrival, out, res = wl.arrival.tolist(), wl.output_len.tolist(), reserve.tolist()
    start = [0] * n
    offset = [0] * n
    heap = _FirstFitHeap(cap) if policy == "first_fit" else None
    ext_lo: list[int] = []
    ext_hi: list[int] = []
    ext_free: list[int] = []
    finishing: list[tuple[int, int]] = []  # (end step, request)
    reserved = 0
    max_seqs = serving.max_num_seqs
    t = 0
    for r in range(n):
        t = max(t, arrival[r])
        need = res[r]
        while True:
            while finishing and finishing[0][0] <= t:
                _, q = heapq.heappop(finishing)
                reserved -= res[q]
                if heap is not None:
                    heap.free(offset[q], res[q])
            if len(finishing) < max_seqs:
                if heap is None:
                    if reserved + need <= cap:
                        break
                else:
                    off = heap.alloc(need)
                    if off >= 0:
                        offset[r] = off
                        break
                    if heap.free_total >= need:  # enough memory in total, none of it in one piece
                        ext_lo.append(t)
                        ext_hi.append(finishing[0][0])
                        ext_free.append(heap.free_total)
            t = finishing[0][0]
        reserved += need
        start[r] = t
        heapq.heappush(finishing, (t + out[r], r))
    st = np.array(start, dtype=np.int64)
    seg = Segments(np.arange(n), st, st + wl.output_len, wl.prompt_len.copy())
    lo, hi, free = (np.array(x, dtype=np.int64) for x in (ext_lo, ext_hi, ext_free))
    external = int(np.sum((hi - lo) * free))
    return PolicyResult(
        policy=policy, capacity_tokens=cap, block_size=serving.block_size, makespan=int(seg.end.max()),
        num_requests=n, num_output_tokens=int(wl.output_len.sum()), num_preemptions=0, segments=seg,
        first_start=st, slot_steps=_slot_steps_reserved(wl, reserve, external), peak_running=_peak_running(seg),
        offset=np.array(offset, dtype=np.int64) if heap is not None else None, reserve=reserve,
        external=(lo, hi, free) if heap is not None else None,
    )


def _paged_result(wl: Workload, serving: ServingConfig, used: np.ndarray, segs: tuple[list, list, list, list],
                  num_preemptions: int) -> PolicyResult:
    seg = Segments(*(np.array(x, dtype=np.int64) for x in segs))
    tokens = token_slot_steps(wl)
    allocated = int(used.sum()) * serving.block_size
    slot_steps = {"tokens": tokens, "last_block": allocated - tokens, "future": 0, "never_used": 0, "external": 0}
    return PolicyResult(
        policy="paged", capacity_tokens=serving.capacity_tokens, block_size=serving.block_size, makespan=len(used),
        num_requests=wl.num_requests, num_output_tokens=int(wl.output_len.sum()), num_preemptions=num_preemptions,
        segments=seg, first_start=_first_start(seg, wl.num_requests), slot_steps=slot_steps,
        peak_running=_peak_running(seg), used_blocks=used,
    )


def _simulate_paged_fast(wl: Workload, serving: ServingConfig) -> PolicyResult:
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
        raise ValueError(f"this workload needs at least {min_steps:,} decode steps in {nb:,} blocks, past the "
                         f"simulator's limit of {MAX_STEPS:,}: raise the KV capacity or use fewer or shorter requests")
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
                raise ValueError(f"request {nxt} arrives at step {next_arrival:,}, past the simulator's limit of "
                                 f"{MAX_STEPS:,} steps: raise the arrival rate or lower the number of requests")
            used_series.extend([0] * (next_arrival - t))
            t = next_arrival
            continue
        if t >= MAX_STEPS:
            raise ValueError(f"the paged run passed {MAX_STEPS:,} decode steps with {n - nxt + len(waiting):,} requests "
                             "still waiting: raise the KV capacity or shorten the requests")
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
    """The paged loop with a real BlockPool, step by step.

    Each step: running requests (oldest first) get room for their next token, preempting the newest
    running request while the pool is empty; then, unless something was preempted, waiting requests
    are admitted FCFS while their prompt's blocks are free; then requests on their last step are freed.
    lazy=False appends one token per running request per step; lazy=True touches a request only on
    the steps it needs a new block (identical block ids, much faster). check=True asserts the pool's
    invariants after every step. until=t stops after step t (then the trace has snapshots but no result).
    """
    check_fits(wl, serving)
    bs, max_seqs = serving.block_size, serving.max_num_seqs
    pool = BlockPool(serving.num_blocks, bs)
    n = wl.num_requests
    arrival, prompt, output = wl.arrival.tolist(), wl.prompt_len.tolist(), wl.output_len.tolist()
    wanted = set(int(s) for s in snapshot_steps)
    snapshots: dict[int, PoolSnapshot] = {}
    waiting: deque[tuple[int, int, int]] = deque()
    running: list[list[int]] = []  # [req, start, prompt, output, segment], oldest first
    crossings: dict[int, list[int]] = {}  # lazy: step -> segments that need a new block then
    used_series: list[int] = []
    segs: tuple[list, list, list, list] = ([], [], [], [])
    req_to_seg: dict[int, int] = {}
    preemptions = 0
    nxt = 0
    t = 0

    def sync(r: list[int]) -> None:  # bring a lazily tracked request's token count up to step t
        missing = r[2] + (t - r[1]) - pool.req_to_num_tokens[r[0]]
        if missing > 0:
            pool.append(r[0], missing)

    stop = math.inf if until is None else until
    while (nxt < n or waiting or running) and t <= stop:
        while nxt < n and arrival[nxt] <= t:
            waiting.append((nxt, prompt[nxt], output[nxt]))
            nxt += 1
        if not running and not waiting:
            if arrival[nxt] > MAX_STEPS:
                raise ValueError(f"request {nxt} arrives at step {arrival[nxt]:,}, past the limit of {MAX_STEPS:,} steps")
            for step in range(t, int(min(arrival[nxt], stop + 1))):
                used_series.append(0)
                if step in wanted:
                    snapshots[step] = pool.snapshot(step)
            t = arrival[nxt]
            continue
        preempted = False
        if lazy:
            due = set(crossings.pop(t, ()))
            todo = [r for r in running if r[4] in due]
        else:
            todo = list(running)
        for r in todo:
            if r not in running:
                break  # preempted while an older request made room: everything after it was too
            needed = r[2] + (t - r[1]) - pool.req_to_num_tokens[r[0]]
            while not pool.can_append(r[0], needed):
                victim = running.pop()
                pool.free(victim[0])
                k = t - victim[1]
                segs[2][req_to_seg[victim[0]]] = t
                waiting.appendleft((victim[0], victim[2] + k, victim[3] - k))
                preemptions += 1
                preempted = True
                if victim is r:
                    break
            else:
                pool.append(r[0], needed)
                if lazy:
                    nxt_cross = cdiv(pool.req_to_num_tokens[r[0]], bs) * bs + 1 - r[2] + r[1]
                    if nxt_cross < r[1] + r[3]:
                        crossings.setdefault(nxt_cross, []).append(r[4])
                continue
            break
        if not preempted:
            while waiting and len(running) < max_seqs and pool.num_free_blocks >= cdiv(waiting[0][1], bs):
                req, p, o = waiting.popleft()
                pool.add_request(req, p)
                running.append([req, t, p, o, len(segs[0])])
                req_to_seg[req] = len(segs[0])
                for lst, v in zip(segs, (req, t, t + o, p), strict=True):
                    lst.append(v)
                if lazy:
                    first = cdiv(p, bs) * bs + 1 - p + t
                    if first < t + o:
                        crossings.setdefault(first, []).append(running[-1][4])
        used_series.append(pool.num_used_blocks)
        if t in wanted:
            if lazy:
                for r in running:
                    sync(r)
            snapshots[t] = pool.snapshot(t)
        if check:
            pool.check_invariants()
        keep = []
        for r in running:
            if r[1] + r[3] - 1 == t:
                pool.free(r[0])
            else:
                keep.append(r)
        running = keep
        t += 1
    for step in wanted:
        if step >= t:
            snapshots[step] = pool.snapshot(step)
    if nxt < n or waiting or running:
        return PagedTrace(None, snapshots)
    result = _paged_result(wl, serving, np.array(used_series, dtype=np.int64), segs, preemptions)
    return PagedTrace(result, snapshots)


def simulate_policy(wl: Workload, serving: ServingConfig, policy: str) -> PolicyResult:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    check_fits(wl, serving)
    if policy == "paged":
        return _simulate_paged_fast(wl, serving)
    return _simulate_contiguous(wl, serving, policy)


@dataclass(frozen=True)
class Comparison:
    workload: Workload
    serving: ServingConfig
    results: dict[str, PolicyResult]

    def to_frame(self):
        """One row per policy: where the claimed KV memory went, and how many requests ran at once."""
        import pandas as pd

        base = self.results["reserve_max_len"]
        rows = []
        for policy, r in self.results.items():
            claimed = r.claimed_slot_steps
            row = {"policy": policy, "allocation": r.label, "real_tokens_pct": 100 * r.token_share}
            for kind in SLOT_KINDS[1:]:
                row[f"{kind}_pct"] = 100 * r.slot_steps[kind] / claimed
            row.update({
                "mean_running": r.mean_running, "peak_running": r.peak_running, "makespan_steps": r.makespan,
                "tokens_per_step": r.tokens_per_step, "speedup_vs_max_len": base.makespan / r.makespan,
                "preemptions": r.num_preemptions, "capacity_used_by_tokens_pct": 100 * r.capacity_share_tokens,
            })
            rows.append(row)
        return pd.DataFrame(rows)

    def series(self, num_points: int = 400):
        import pandas as pd

        return pd.concat([r.series(num_points) for r in self.results.values()], ignore_index=True)


def compare_policies(wl: Workload, serving: ServingConfig, policies=POLICIES) -> Comparison:
    check_fits(wl, serving)
    return Comparison(wl, serving, {p: simulate_policy(wl, serving, p) for p in policies})


# ---------------------------------------------------------------------------------------------
# Parallel sampling: n branches fork from one prompt


@dataclass(frozen=True)
class ForkResult:
    prompt_len: int
    num_branches: int
    num_generated: int
    block_size: int
    after_prefill: PoolSnapshot
    after_fork: PoolSnapshot
    final: PoolSnapshot
    cow_copies: tuple[tuple[int, int], ...]  # (src, dst) in the order they happened

    @property
    def num_used_blocks(self) -> int:
        return self.final.num_used_blocks

    @property
    def num_blocks_if_copied(self) -> int:
        """Each branch with a private copy of the prompt: n full-length block tables."""
        return self.num_branches * cdiv(self.prompt_len + self.num_generated, self.block_size)

    @property
    def saved_share(self) -> float:
        return 1 - self.num_used_blocks / self.num_blocks_if_copied

    @property
    def num_shared_blocks(self) -> int:
        return int((self.final.ref_cnt > 1).sum())


def simulate_parallel_sampling(prompt_len: int, num_branches: int, num_generated: int, block_size: int = 16) -> ForkResult:
    """Prefill a prompt once, fork it into num_branches requests, then let each branch write
    num_generated tokens (branches take turns each step). Ids: branch b is request b."""
    if not 1 <= prompt_len <= MAX_MODEL_LEN:
        raise ValueError(f"prompt_len must be 1..{MAX_MODEL_LEN}, got {prompt_len}")
    if not 1 <= num_branches <= 64:
        raise ValueError(f"num_branches must be 1..64, got {num_branches}")
    if not 0 <= num_generated <= MAX_MODEL_LEN:
        raise ValueError(f"num_generated must be 0..{MAX_MODEL_LEN}, got {num_generated}")
    per_branch = cdiv(prompt_len + num_generated, block_size)
    pool = BlockPool(num_branches * per_branch + 1, block_size)
    pool.add_request(0, prompt_len)
    after_prefill = pool.snapshot(0)
    for b in range(1, num_branches):
        pool.fork(0, b)
    after_fork = pool.snapshot(0)
    copies: list[tuple[int, int]] = []
    for step in range(num_generated):
        for b in range(num_branches):
            copies += pool.append(b, 1)
        if step == 0:
            pool.check_invariants()
    pool.check_invariants()
    return ForkResult(prompt_len, num_branches, num_generated, block_size, after_prefill, after_fork,
                      pool.snapshot(num_generated), tuple(copies))
