"""What every allocator's run produces, and the KV slots it claims, counted over time.

Time is counted in decode steps. A request with prompt p and output o admitted at step s is
prefilled at step s (its p prompt tokens are stored and its first output token is sampled) and
decodes at steps s+1 .. s+o-1; after step s+j it holds p+j tokens. The last sampled token is never
fed back, so it never takes a slot. Memory is measured after each step's writes.

A run is a `PolicyResult`: the `Segments` each request ran in, and its claimed slots summed over every
step, split by what they hold (`SLOT_KINDS`). Closed forms give the token and paged totals exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.block_pool import MAX_CAPACITY_TOKENS, MAX_POOL_BLOCK_SIZE
from sim.alloc.workload import MAX_LENGTH_WORKLOAD_REQUESTS, Workload
from sim.refusal import Misuse, Refusal

MAX_STEPS = 4_000_000  # a run longer than this many decode steps is refused (time and memory)
POLICIES = ("paged", "reserve_max_len", "reserve_max_tokens", "first_fit")
POLICY_LABELS = {
    "paged": "Paged blocks (vLLM)",
    "reserve_max_len": "Contiguous: reserve max length",
    "reserve_max_tokens": "Contiguous: reserve prompt + max_tokens",
    "first_fit": "Contiguous first-fit heap (prompt + max_tokens)",
}

# Memory a request holds, split by what it holds (slot categories of the breakdown charts).
SLOT_KINDS = ("tokens", "last_block", "future", "never_used", "external")


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



@dataclass(frozen=True)
class PoolConfig:
    """The paging page's pool: the KV slots, block size and batch cap its allocation policies (contiguous
    reservations, first-fit, paged blocks) are compared over, counted in decode steps. It is not a serving config: that one (sim.serving.config.EngineConfig) adds the token budget, chunking, preemption, the watermark
    and speculation, and times each pass; the paged policy here is that engine's Scheduler with none of them
    (`engine_config`)."""

    capacity_tokens: int = 16_384  # KV slots the accelerator holds for the cache
    block_size: int = 16
    max_num_seqs: int = 256  # the scheduler's cap on running requests

    def __post_init__(self) -> None:
        # Block size and batch come from controls and flags that stay inside these ranges (1..256 and
        # 1..1,024): a bug. The capacity is a user's: the serving engine's KV slots are what the GPU, the model and
        # --kv-tokens / the KV limit leave, so they can fall below one block (or to none).
        if not 1 <= self.block_size <= MAX_POOL_BLOCK_SIZE:
            raise Misuse(f"block_size must be 1..{MAX_POOL_BLOCK_SIZE}, got {self.block_size}")
        if not 1 <= self.capacity_tokens <= MAX_CAPACITY_TOKENS:
            raise Refusal("alloc.err.capacity_range", max=MAX_CAPACITY_TOKENS, n=self.capacity_tokens)
        if self.capacity_tokens < self.block_size:
            raise Refusal("alloc.err.capacity_block", cap=self.capacity_tokens, bs=self.block_size)
        if not 1 <= self.max_num_seqs <= MAX_LENGTH_WORKLOAD_REQUESTS:
            raise Misuse(f"max_num_seqs must be 1..{MAX_LENGTH_WORKLOAD_REQUESTS:,}, got {self.max_num_seqs}")

    @property
    def num_blocks(self) -> int:
        return self.capacity_tokens // self.block_size

    @property
    def engine_config(self):
        """The serving engine config (sim.serving.config) whose Scheduler this page's paged schedule is: decode steps
        with no token budget, no watermark, recompute preemption."""
        from sim.serving.config import NO_BUDGET, EngineConfig

        return EngineConfig(max_num_seqs=self.max_num_seqs, max_num_batched_tokens=NO_BUDGET,
                            block_size=self.block_size, capacity_tokens=self.capacity_tokens,
                            enable_chunked_prefill=False, watermark=0.0)


def check_fits(wl: Workload, serving: PoolConfig) -> None:
    """Every policy must be able to run the longest request alone."""
    if serving.capacity_tokens < wl.max_model_len:
        raise Refusal("alloc.err.capacity", cap=serving.capacity_tokens, max_len=wl.max_model_len)
    paged = serving.num_blocks * serving.block_size
    if paged < wl.max_model_len:
        raise Refusal("alloc.err.blocks", n=serving.num_blocks, bs=serving.block_size, slots=paged,
                      max_len=wl.max_model_len)


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

    def peak_running(self) -> int:
        """The most segments running at one step."""
        s_sorted, e_sorted = np.sort(self.start), np.sort(self.end)
        running = np.arange(1, len(s_sorted) + 1) - np.searchsorted(e_sorted, s_sorted, side="right")
        return int(running.max())

    def first_start(self, num_requests: int) -> np.ndarray:
        """(num_requests,) the step each request first ran, -1 if it never did."""
        first = np.full(num_requests, -1, dtype=np.int64)
        order = np.argsort(self.start, kind="stable")[::-1]  # later first, so the earliest wins
        first[self.req[order]] = self.start[order]
        return first


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

