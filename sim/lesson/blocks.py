"""The Lesson's block-table story: three requests on a small paged pool, one event per frame (allocate, share by
forking, copy-on-write, grow, free), played on the lab's BlockPool itself, so every block id, reference count and
free-queue order shown is the pool's own."""

from __future__ import annotations

from dataclasses import dataclass

from sim.alloc.block_pool import BlockPool, PoolSnapshot, cdiv

NUM_BLOCKS = 12
BLOCK_SIZE = 4  # token slots per block: small enough to count on a projector
REQUESTS = ("A", "B", "C")  # request ids 0, 1, 2 as the lesson names them


@dataclass(frozen=True)
class Event:
    kind: str  # "start", "allocate", "share", "cow", "grow", "free"
    req: int  # request id (-1 for the empty pool)
    num_tokens: int  # tokens the event stores (0 for share / free)
    new_blocks: tuple[int, ...]  # blocks taken from the free queue
    copied: tuple[tuple[int, int], ...]  # (source, copy) blocks of a copy-on-write
    freed: tuple[int, ...]  # blocks returned to the free queue
    kept: tuple[int, ...]  # blocks a finishing request leaves to another that shares them


@dataclass(frozen=True)
class Frame:
    event: Event
    pool: PoolSnapshot


# (kind, request, tokens, parent): the story. A arrives with 10 tokens, B with 6; C is a second answer to A's
# prompt (parallel sampling) and shares A's blocks; A's next token lands in a shared, partly filled block and is
# copied first; C writes into the block A left it; B grows past its last block; A finishes, then B.
SCRIPT = (("allocate", 0, 10, None), ("allocate", 1, 6, None), ("share", 2, 0, 0), ("cow", 0, 1, None),
          ("grow", 2, 1, None), ("grow", 1, 3, None), ("free", 0, 0, None), ("free", 1, 0, None))


def block_story() -> tuple[Frame, ...]:
    pool = BlockPool(NUM_BLOCKS, BLOCK_SIZE)
    frames = [Frame(Event("start", -1, 0, (), (), (), ()), pool.snapshot(0))]
    for step, (kind, req, n, parent) in enumerate(SCRIPT, start=1):
        free_before = list(pool.free_block_queue)
        copied: list[tuple[int, int]] = []
        freed: list[int] = []
        kept: list[int] = []
        if kind == "allocate":
            pool.add_request(req, n)
        elif kind == "share":
            pool.fork(parent, req)
        elif kind in ("cow", "grow"):
            copied = pool.append(req, n)
        else:
            table = pool.block_table(req)
            freed = pool.free(req)
            kept = [b for b in table if b not in freed]
        pool.check_invariants()
        taken = tuple(free_before[: len(free_before) - pool.num_free_blocks + len(freed)])
        frames.append(Frame(Event(kind, req, n, taken, tuple(copied), tuple(freed), tuple(kept)), pool.snapshot(step)))
    return tuple(frames)


def expected_blocks(num_tokens: int) -> int:
    """Blocks a request of num_tokens needs: ceil(tokens / BLOCK_SIZE)."""
    return cdiv(num_tokens, BLOCK_SIZE)


def touched(frame: Frame) -> tuple[int, ...]:
    """The blocks the frame's event took, copied, wrote, freed or shared (outlined in the figure)."""
    e, pool = frame.event, frame.pool
    if e.kind == "share":
        return pool.req_to_block_table[e.req]
    if e.kind == "grow" and not e.new_blocks and not e.copied:
        return (pool.req_to_block_table[e.req][-1],)
    return tuple(dict.fromkeys([*e.new_blocks, *(b for pair in e.copied for b in pair), *e.freed]))
