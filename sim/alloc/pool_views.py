"""What the Paged KV blocks page reads off a block pool, worded from its numbers: the time frames of the
block grid, one request's blocks, the free queue, the first-fit heap at the same step, one request's
last-block waste, and parallel sampling's shared blocks and copy-on-write copies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.block_pool import ForkResult, PoolSnapshot, block_usage
from sim.alloc.paging_readouts import sharing_takeaway
from sim.alloc.schedule import PolicyResult

NUM_FRAMES = 41  # snapshots of the block pool the time slider steps through
GRID_MAX_STEP = 20_000  # the block grid replays the pool step by step: only this far into a run
GRID_MAX_BLOCKS = 4096  # a bigger pool is not drawn block by block
FREE_QUEUE_SHOWN = 12  # free block ids listed
COPIES_SHOWN = 8  # copy-on-write copies listed


def grid_too_big(num_blocks: int) -> str | None:
    """Why the pool is not drawn block by block, or None when it is."""
    if num_blocks <= GRID_MAX_BLOCKS:
        return None
    return (f"The pool has {num_blocks:,} blocks; the grid draws at most {GRID_MAX_BLOCKS:,}. "
            "Lower the capacity or raise the block size to see it block by block.")


@dataclass(frozen=True)
class PoolFrames:
    """Evenly spaced decode steps of a paged run: `steps[frame]` is the step a time frame shows."""

    steps: tuple[int, ...]
    truncated: bool  # the run is longer than GRID_MAX_STEP: only its first steps are shown

    @property
    def distinct_steps(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.steps)))

    @property
    def slider_help(self) -> str:
        return (f"{len(self.steps)} evenly spaced decode steps of the paged run"
                + (f" (its first {GRID_MAX_STEP:,} steps)" if self.truncated else "") + ".")


def pool_frames(makespan: int, num_frames: int = NUM_FRAMES, max_step: int = GRID_MAX_STEP) -> PoolFrames:
    """`num_frames` steps from 0 to the run's last step (or `max_step`), rounded to whole steps."""
    if makespan < 1 or num_frames < 2:
        raise ValueError(f"need a run of 1+ steps and 2+ frames, got {makespan} steps and {num_frames} frames")
    last = min(makespan - 1, max_step)
    return PoolFrames(tuple(int(round(k * last / (num_frames - 1))) for k in range(num_frames)), last < makespan - 1)


def pool_title(snap: PoolSnapshot, step: int) -> str:
    running = len(snap.req_to_block_table)
    return (f"Step {step:,}: {snap.num_used_blocks:,} of {snap.num_blocks:,} blocks in use by {running} requests, "
            f"{snap.num_stored_tokens:,} tokens stored")


def request_line(snap: PoolSnapshot, req: int) -> str:
    """How many tokens a running request holds, in how many blocks (Markdown)."""
    n_tok = snap.req_to_num_tokens[req]
    blocks, slots, share = block_usage(n_tok, snap.block_size)
    return f"Request **{req}** holds **{n_tok}** tokens in **{blocks}** blocks ({share:.0%} of their {slots} slots)."


def free_queue_line(snap: PoolSnapshot, shown: int = FREE_QUEUE_SHOWN) -> str:
    """The free queue's length and the blocks it hands out next (Markdown)."""
    queue = snap.free_block_queue
    head = ", ".join(str(b) for b in queue[:shown])
    more = " …" if len(queue) > shown else ""
    return f"**Free queue** ({len(queue):,} blocks), next handed out: {head or '—'}{more}"


@dataclass(frozen=True)
class HeapView:
    """The first-fit heap's contiguous extents at one step: who holds which addresses, and what they store."""

    step: int
    capacity_tokens: int
    req: np.ndarray  # requests holding an extent
    offset: np.ndarray  # its first slot
    reserve: np.ndarray  # its length in slots
    stored: np.ndarray  # tokens written into it so far

    @property
    def num_free(self) -> int:
        return self.capacity_tokens - int(self.reserve.sum())

    @property
    def title(self) -> str:
        return (f"The first-fit heap at step {self.step:,}: {len(self.req)} requests in contiguous extents, "
                f"{self.num_free:,} slots free in holes")


def heap_at(heap: PolicyResult, step: int) -> HeapView | None:
    """The first-fit run's extents at `step` (None when no request holds one)."""
    if heap.offset is None or heap.reserve is None:
        raise ValueError(f"the {heap.policy} run has no heap addresses (only first_fit has)")
    seg = heap.segments
    ids = np.flatnonzero((seg.start <= step) & (seg.end > step))
    if not len(ids):
        return None
    return HeapView(step, heap.capacity_tokens, ids, heap.offset[ids], heap.reserve[ids],
                    seg.prompt[ids] + (step - seg.start[ids]))


def block_example_caption(num_tokens: int, block_size: int) -> str:
    blocks, slots, _ = block_usage(num_tokens, block_size)
    return (f"{num_tokens:,} tokens take {blocks:,} blocks = {slots:,} slots. Only the last block can be partly empty, "
            "so the waste per request is below one block — whatever the length.")


def fork_summary(fork: ForkResult, shown: int = COPIES_SHOWN) -> str:
    """What prefilling once and forking did to the pool: ref counts, copy-on-write copies, blocks still shared."""
    copies = ", ".join(f"{s}→{d}" for s, d in fork.cow_copies[:shown]) + (" …" if len(fork.cow_copies) > shown else "")
    return (
        f"The prompt is prefilled once into {len(fork.after_prefill.req_to_block_table[0])} blocks; forking gives "
        f"every branch the same table and raises each block's **ref_cnt** to {fork.num_branches}. "
        + (f"The prompt's last block is only partly full, so the first write of each branch into it copies it "
           f"(copy-on-write: {copies}); the last branch finds ref_cnt 1 and writes in place. "
           if fork.cow_copies else "No shared block is ever written into, so nothing is copied. ")
        + f"{fork.num_shared_blocks} blocks stay shared (labelled ×n).")


def fork_grid_title(fork: ForkResult) -> str:
    """The parallel-sampling grid's title: what sharing the prompt's blocks saved after the branches wrote."""
    return sharing_takeaway(fork.num_branches, fork.num_used_blocks, fork.num_blocks_if_copied,
                            fork.num_shared_blocks, fork.block_size,
                            lead=f"After {fork.num_generated:,} tokens per branch, ")


GRID_KEY = "Colour and r# = branch (request), ×n = a block shared by n branches (dotted outline)."


def marked_block_table(snap: PoolSnapshot, req: int) -> str:
    """A request's block table with every block another request shares starred: "0* 1* 5"."""
    return " ".join(f"{b}*" if snap.ref_cnt[b] > 1 else str(b) for b in snap.req_to_block_table[req])
