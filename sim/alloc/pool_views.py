"""What the Paged KV blocks page reads off a block pool, worded from its numbers: the time frames of the
block grid, one request's blocks, the free queue, the first-fit heap at the same step, one request's
last-block waste, and parallel sampling's shared blocks and copy-on-write copies. Each sentence takes `lang`
("en" or "ko") and is worded from the catalogs (sim/i18n.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.block_pool import ForkResult, PoolSnapshot, block_usage
from sim.alloc.paging_readouts import sharing_takeaway
from sim.alloc.schedule import PolicyResult
from sim.i18n import text

NUM_FRAMES = 41  # snapshots of the block pool the time slider steps through
GRID_MAX_STEP = 20_000  # the block grid replays the pool step by step: only this far into a run
GRID_MAX_BLOCKS = 4096  # a bigger pool is not drawn block by block
FREE_QUEUE_SHOWN = 12  # free block ids listed
COPIES_SHOWN = 8  # copy-on-write copies listed


def grid_too_big(num_blocks: int, lang: str = "en") -> str | None:
    """Why the pool is not drawn block by block, or None when it is."""
    if num_blocks <= GRID_MAX_BLOCKS:
        return None
    return text(lang, "paged.s.grid_too_big", n=f"{num_blocks:,}", max=f"{GRID_MAX_BLOCKS:,}")


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
        return self.help_in("en")

    def help_in(self, lang: str) -> str:
        """The time slider's help in `lang`."""
        return text(lang, "paged.s.frames", n=f"{len(self.steps)}",
                    first=text(lang, "paged.s.frames_first", max=f"{GRID_MAX_STEP:,}") if self.truncated else "")


def pool_frames(makespan: int, num_frames: int = NUM_FRAMES, max_step: int = GRID_MAX_STEP) -> PoolFrames:
    """`num_frames` steps from 0 to the run's last step (or `max_step`), rounded to whole steps."""
    if makespan < 1 or num_frames < 2:
        raise ValueError(f"need a run of 1+ steps and 2+ frames, got {makespan} steps and {num_frames} frames")
    last = min(makespan - 1, max_step)
    return PoolFrames(tuple(int(round(k * last / (num_frames - 1))) for k in range(num_frames)), last < makespan - 1)


def pool_title(snap: PoolSnapshot, step: int, lang: str = "en") -> str:
    running = len(snap.req_to_block_table)
    return text(lang, "paged.s.pool_title", step=f"{step:,}", used=f"{snap.num_used_blocks:,}",
                total=f"{snap.num_blocks:,}", running=f"{running}", tokens=f"{snap.num_stored_tokens:,}")


def request_line(snap: PoolSnapshot, req: int, lang: str = "en") -> str:
    """How many tokens a running request holds, in how many blocks (Markdown)."""
    n_tok = snap.req_to_num_tokens[req]
    blocks, slots, share = block_usage(n_tok, snap.block_size)
    return text(lang, "paged.s.request_line", req=f"{req}", tokens=f"{n_tok}", blocks=f"{blocks}",
                share=f"{share:.0%}", slots=f"{slots}")


def free_queue_line(snap: PoolSnapshot, shown: int = FREE_QUEUE_SHOWN, lang: str = "en") -> str:
    """The free queue's length and the blocks it hands out next (Markdown)."""
    queue = snap.free_block_queue
    head = ", ".join(str(b) for b in queue[:shown])
    more = " …" if len(queue) > shown else ""
    return text(lang, "paged.s.free_queue", n=f"{len(queue):,}", head=f"{head or '—'}{more}")


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
        return self.title_in("en")

    def title_in(self, lang: str) -> str:
        """The heap chart's title in `lang`."""
        return text(lang, "paged.s.heap_title", step=f"{self.step:,}", n=f"{len(self.req)}",
                    free=f"{self.num_free:,}")


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


def block_example_caption(num_tokens: int, block_size: int, lang: str = "en") -> str:
    blocks, slots, _ = block_usage(num_tokens, block_size)
    return text(lang, "paged.s.block_example", tokens=f"{num_tokens:,}", blocks=f"{blocks:,}", slots=f"{slots:,}")


def fork_summary(fork: ForkResult, shown: int = COPIES_SHOWN, lang: str = "en") -> str:
    """What prefilling once and forking did to the pool: ref counts, copy-on-write copies, blocks still shared."""
    copies = ", ".join(f"{s}→{d}" for s, d in fork.cow_copies[:shown]) + (" …" if len(fork.cow_copies) > shown else "")
    cow = (text(lang, "paged.s.fork.cow", copies=copies) if fork.cow_copies else text(lang, "paged.s.fork.no_cow"))
    return text(lang, "paged.s.fork.summary", blocks=f"{len(fork.after_prefill.req_to_block_table[0])}",
                n=f"{fork.num_branches}", cow=cow, shared=f"{fork.num_shared_blocks}")


def fork_grid_title(fork: ForkResult, lang: str = "en") -> str:
    """The parallel-sampling grid's title: what sharing the prompt's blocks saved after the branches wrote."""
    return sharing_takeaway(fork.num_branches, fork.num_used_blocks, fork.num_blocks_if_copied,
                            fork.num_shared_blocks, fork.block_size,
                            lead=text(lang, "paged.s.fork.lead", n=f"{fork.num_generated:,}"), lang=lang)


def grid_key(lang: str = "en") -> str:
    """The legend of a forked pool's grid."""
    return text(lang, "paged.s.grid_key")


GRID_KEY = grid_key()


def marked_block_table(snap: PoolSnapshot, req: int) -> str:
    """A request's block table with every block another request shares starred: "0* 1* 5"."""
    return " ".join(f"{b}*" if snap.ref_cnt[b] > 1 else str(b) for b in snap.req_to_block_table[req])


TABLE_COLUMNS = {"logical block": "logical", "physical block": "physical", "tokens": "tokens",
                 "slots used": "slots_used", "ref_cnt": "ref_cnt"}


def table_frame(snap: PoolSnapshot, req: int, lang: str = "en"):
    """A request's block table (PoolSnapshot.table_frame) with its column headers in `lang`."""
    frame = snap.table_frame(req)
    return frame.rename(columns={c: text(lang, f"paged.table.{k}") for c, k in TABLE_COLUMNS.items()})


def results_table(frame, lang: str = "en"):
    """The results table as the page shows it: headers and allocator names in `lang` (the CSV keeps the English
    identifiers)."""
    if lang == "en":
        return frame
    from sim.alloc.schedule import policy_label

    shown = frame.assign(policy=[policy_label(p, lang) for p in frame["policy"]])
    return shown.rename(columns={c: text(lang, f"paged.col.{c}") for c in frame.columns})
