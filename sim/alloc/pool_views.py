"""What the Paged KV blocks page reads off a block pool: the time frames of the block grid and the first-fit heap
at the same step, as numbers (sim/words/paging.py words them, with one request's blocks, the free queue and parallel
sampling's shared blocks)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.block_pool import PoolSnapshot
from sim.alloc.schedule import PolicyResult
from sim.refusal import Misuse

NUM_FRAMES = 41  # snapshots of the block pool the time slider steps through
GRID_MAX_STEP = 20_000  # the block grid replays the pool step by step: only this far into a run
GRID_MAX_BLOCKS = 4096  # a bigger pool is not drawn block by block
FREE_QUEUE_SHOWN = 12  # free block ids listed
COPIES_SHOWN = 8  # copy-on-write copies listed


@dataclass(frozen=True)
class PoolFrames:
    """Evenly spaced decode steps of a paged run: `steps[frame]` is the step a time frame shows."""

    steps: tuple[int, ...]
    truncated: bool  # the run is longer than GRID_MAX_STEP: only its first steps are shown

    @property
    def distinct_steps(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.steps)))


def pool_frames(makespan: int, num_frames: int = NUM_FRAMES, max_step: int = GRID_MAX_STEP) -> PoolFrames:
    """`num_frames` steps from 0 to the run's last step (or `max_step`), rounded to whole steps."""
    if makespan < 1 or num_frames < 2:
        raise Misuse(f"need a run of 1+ steps and 2+ frames, got {makespan} steps and {num_frames} frames")
    last = min(makespan - 1, max_step)
    return PoolFrames(tuple(int(round(k * last / (num_frames - 1))) for k in range(num_frames)), last < makespan - 1)


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


def heap_at(heap: PolicyResult, step: int) -> HeapView | None:
    """The first-fit run's extents at `step` (None when no request holds one)."""
    if heap.offset is None or heap.reserve is None:
        raise Misuse(f"the {heap.policy} run has no heap addresses (only first_fit has)")
    seg = heap.segments
    ids = np.flatnonzero((seg.start <= step) & (seg.end > step))
    if not len(ids):
        return None
    return HeapView(step, heap.capacity_tokens, ids, heap.offset[ids], heap.reserve[ids],
                    seg.prompt[ids] + (step - seg.start[ids]))


def marked_block_table(snap: PoolSnapshot, req: int) -> str:
    """A request's block table with every block another request shares starred: "0* 1* 5"."""
    return " ".join(f"{b}*" if snap.ref_cnt[b] > 1 else str(b) for b in snap.req_to_block_table[req])


