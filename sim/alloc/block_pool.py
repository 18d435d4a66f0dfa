"""The paged KV block pool (vLLM's PagedAttention), as the scheduler and the real paged cache use it.

The KV cache is cut into fixed-size blocks of `block_size` token slots. A request owns a
*block table*: logical block i (its tokens i*block_size ..) -> a physical block id. Blocks come
from the head of a free queue when a request needs room and go back to its tail when the request
finishes, so a request only ever wastes the unused slots of its last block. Forked requests
(parallel sampling, beam search) share blocks through reference counts; the first write into a
shared, partly filled block copies it (copy-on-write).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from sim.alloc.workload import MAX_MODEL_LEN
from sim.refusal import Misuse

MAX_POOL_BLOCK_SIZE = 4096  # token slots per block of a paged pool
MAX_CAPACITY_TOKENS = 4_194_304  # token slots of KV memory any simulated pool or cache may hold
MAX_BRANCHES = 64  # parallel-sampling branches forked from one prompt

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

    # Blocks are shared only by forking, so two tables sharing a block share every block before it. A prefix
    # cache also shares a block between requests whose earlier blocks hold equal tokens in different blocks.
    shares_only_by_fork = True

    def __init__(self, num_blocks: int, block_size: int = 16) -> None:
        # every pool's size is bounded before it gets here: a GPU's slots are capped at MAX_CAPACITY_TOKENS
        # (DeploymentConfig.kv_budget), the host's by EngineConfig and `--cpu-tokens` at the same number, a model's
        # cache by its context; so no block size makes more blocks than that
        if not 1 <= num_blocks <= MAX_CAPACITY_TOKENS:
            raise Misuse(f"num_blocks must be 1..{MAX_CAPACITY_TOKENS:,}, got {num_blocks:,}")
        # every block size a page or the command line offers is 1..256, and the configs check it first
        if not 1 <= block_size <= MAX_POOL_BLOCK_SIZE:
            raise Misuse(f"block_size must be 1..{MAX_POOL_BLOCK_SIZE}, got {block_size}")
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

    # Below: calls against the pool's contract. Its callers (the schedulers, the paged model cache, the lessons)
    # name their own requests and ask for room only after can_append / num_new_blocks said it is there, so each
    # of these is a bug in the lab (Misuse), never a user's input.
    def _table(self, req_id: int) -> list[int]:
        try:
            return self.req_to_block_table[req_id]
        except KeyError:
            raise Misuse(f"request {req_id} has no blocks in this pool") from None

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
            raise Misuse(f"request {req_id} already holds blocks {self.req_to_block_table[req_id]}")
        if num_tokens < 1:
            raise Misuse(f"a request needs at least 1 token, got {num_tokens}")
        need = cdiv(num_tokens, self.block_size)
        if need > self.num_free_blocks:
            raise Misuse(f"request {req_id} needs {need} blocks for {num_tokens} tokens; "
                         f"{self.num_free_blocks} of {self.num_blocks} are free")
        self.req_to_block_table[req_id] = []
        self.req_to_num_tokens[req_id] = 0
        self.append(req_id, num_tokens)
        return list(self.req_to_block_table[req_id])

    def append(self, req_id: int, num_new_tokens: int = 1) -> list[tuple[int, int]]:
        """Store num_new_tokens more tokens: fill the last block, then take blocks from the free queue.

        A shared (ref_cnt > 1), partly filled last block is first copied to a fresh block
        (copy-on-write). Returns the (src, dst) block copies made, so a real cache can copy data.
        Raises Misuse (a ValueError), changing nothing, when the free queue is too short.
        """
        table = self._table(req_id)
        if num_new_tokens < 1:
            raise Misuse(f"append needs at least 1 token, got {num_new_tokens}")
        need = self.num_new_blocks(req_id, num_new_tokens)
        if need > self.num_free_blocks:
            raise Misuse(f"request {req_id} needs {need} more blocks for {num_new_tokens} tokens; "
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

    def try_append(self, req_id: int, num_new_tokens: int) -> tuple[int, ...] | None:
        """`append` when the free queue has room: the blocks added to the request's table (none while the tokens
        fit its own last block; a copy-on-write copy replaces the last entry, it adds none), or None, changing
        nothing, when the queue is too short. The scheduler's per-token call."""
        table = self.req_to_block_table[req_id]
        n = self.req_to_num_tokens[req_id]
        filled = n % self.block_size
        if filled and filled + num_new_tokens <= self.block_size and self.ref_cnt[table[-1]] == 1:
            self.block_num_tokens[table[-1]] += num_new_tokens  # fits the last block, which it alone holds
            self.req_to_num_tokens[req_id] = n + num_new_tokens
            return ()
        if self.num_new_blocks(req_id, num_new_tokens) > len(self.free_block_queue):
            return None
        before = len(table)
        self.append(req_id, num_new_tokens)
        return tuple(table[before:])

    def fork(self, parent_id: int, child_id: int) -> list[int]:
        """The child shares every block of the parent (ref counts +1); no data is copied yet."""
        table = self._table(parent_id)
        if child_id in self.req_to_block_table:
            raise Misuse(f"request {child_id} already exists")
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
        return self._release(table)

    def _release(self, blocks: list[int]) -> list[int]:
        """One reference fewer on each block, last block first; those left with none join the free queue's
        tail (so a request's last block is reused last). Returns the freed ones."""
        freed = []
        for block in reversed(blocks):
            self.ref_cnt[block] -= 1
            assert self.ref_cnt[block] >= 0, f"block {block} freed more often than allocated"
            if self.ref_cnt[block] == 0:
                self.block_num_tokens[block] = 0
                self.free_block_queue.append(block)
                freed.append(block)
        return freed

    def truncate(self, req_id: int, num_tokens: int) -> list[int]:
        """Keep a request's first num_tokens tokens and drop the rest (draft tokens a speculative step rejected):
        blocks past them lose a reference and, at ref_cnt 0, join the free queue's tail (last block first).
        Returns the blocks freed."""
        table = self._table(req_id)
        n, bs = self.req_to_num_tokens[req_id], self.block_size
        if not 1 <= num_tokens <= n:
            raise Misuse(f"request {req_id} holds {n} tokens; can keep 1..{n}, asked {num_tokens}")
        keep = cdiv(num_tokens, bs)
        freed = self._release(table[keep:])
        del table[keep:]
        self.block_num_tokens[table[-1]] = num_tokens - (keep - 1) * bs
        self.req_to_num_tokens[req_id] = num_tokens
        return freed

    def block_table(self, req_id: int) -> list[int]:
        return list(self._table(req_id))

    def num_stored_tokens(self) -> int:
        """Distinct token slots holding data (a shared block counts once)."""
        return sum(self.block_num_tokens)

    def check_invariants(self) -> None:
        """Every block is free or owned, never both; ref counts equal table occurrences; free + used == total;
        a block shared by several requests sits at the same logical index (behind the same blocks, when
        blocks are shared only by forking)."""
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
                    assert j == i, f"block {block} is shared by requests {other} and {req} at different positions"
                    assert not self.shares_only_by_fork or self.req_to_block_table[other][:i] == table[:i], \
                        f"block {block} is shared by requests {other} and {req} behind different blocks"
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
            raise Misuse(f"request {req_id} holds no blocks at step {self.step}")
        n, bs = self.req_to_num_tokens[req_id], self.block_size
        rows = []
        for i, block in enumerate(table):
            hi = min(n, (i + 1) * bs) - 1
            rows.append({"logical block": i, "physical block": block, "tokens": f"{i * bs}..{hi}",
                         "slots used": f"{hi - i * bs + 1}/{bs}", "ref_cnt": int(self.ref_cnt[block])})
        return pd.DataFrame(rows)



def block_usage(num_tokens: int, block_size: int) -> tuple[int, int, float]:
    """(blocks, slots, share of the slots holding tokens): 17 tokens in 16-slot blocks -> (2, 32, 0.53)."""
    if num_tokens < 1 or not 1 <= block_size <= MAX_POOL_BLOCK_SIZE:
        raise Misuse(f"need num_tokens >= 1 and block_size 1..{MAX_POOL_BLOCK_SIZE}, got {num_tokens}, {block_size}")
    blocks = cdiv(num_tokens, block_size)
    return blocks, blocks * block_size, num_tokens / (blocks * block_size)



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
    num_generated tokens (branches take turns each step). Ids: branch b is request b. The page's controls stay
    inside these ranges (app/controls/paged_blocks.py), so one outside them is a bug."""
    if not 1 <= prompt_len <= MAX_MODEL_LEN:
        raise Misuse(f"prompt_len must be 1..{MAX_MODEL_LEN}, got {prompt_len}")
    if not 1 <= num_branches <= MAX_BRANCHES:
        raise Misuse(f"num_branches must be 1..{MAX_BRANCHES}, got {num_branches}")
    if not 0 <= num_generated <= MAX_MODEL_LEN:
        raise Misuse(f"num_generated must be 0..{MAX_MODEL_LEN}, got {num_generated}")
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
