"""The contiguous baselines: each request's KV in one extent reserved at admission.

  reserve_max_len    : the model's maximum length (what servers before vLLM did),
  reserve_max_tokens : prompt + the request's max_tokens,
  first_fit          : prompt + max_tokens placed first-fit in one address space, so the holes
                       left between live extents (external fragmentation) can refuse a request
                       that the total free memory would hold.
Requests are admitted first-come first-served while their reservation fits.
"""

from __future__ import annotations

import bisect
import heapq

import numpy as np

from sim.alloc.schedule import PolicyResult, PoolConfig, Segments, token_slot_steps
from sim.alloc.workload import Workload


def _slot_steps_reserved(wl: Workload, reserve: np.ndarray, external: int) -> dict[str, int]:
    p, o = wl.prompt_len, wl.output_len
    return {"tokens": token_slot_steps(wl), "last_block": 0, "future": int(np.sum(o * (o - 1) // 2)),
            "never_used": int(np.sum(o * (reserve - (p + o - 1)))), "external": int(external)}



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


def simulate_contiguous(wl: Workload, serving: PoolConfig, policy: str) -> PolicyResult:
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
        first_start=st, slot_steps=_slot_steps_reserved(wl, reserve, external), peak_running=seg.peak_running(),
        offset=np.array(offset, dtype=np.int64) if heap is not None else None, reserve=reserve,
        external=(lo, hi, free) if heap is not None else None,
    )

