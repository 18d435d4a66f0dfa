"""SGLang's radix-tree view of a prefix cache: a tree whose edges are blocks of tokens.

Requests are paths from the root, and a lookup walks down until a block differs. Without evictions
it finds exactly the hashed block pool's hits (tests check it); it is also what the page draws.
"""

from __future__ import annotations

import numpy as np

from sim.alloc.workload import Request, Trace
from sim.refusal import Misuse


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
            raise Misuse(f"block_size must be >= 1, got {block_size}")
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
        raise Misuse(f"num_requests must be >= 1, got {num_requests}")
    tree = RadixTree(block_size)
    hits = [tree.add(r, i) for i, r in enumerate(trace.requests[:num_requests])]
    frame = pd.DataFrame(tree.segments(), columns=["segment", "parent", "start_block", "end_block", "requests",
                                                   "created_by", "lane"])
    return frame, np.array(hits, dtype=np.int64) * block_size
