"""The serving engine's one config, under vLLM's names: what the scheduler (vllm/config/scheduler.py), the KV cache
(vllm/config/cache.py) and speculative decoding (vllm/config/speculative.py) are set to, flat as vLLM's engine
arguments are. The Scheduler (sim.serving.scheduler), the timed engine (sim.serving.engine) and the fast counting
loops (sim.serving.schedulers) all read this one class; derived values (blocks, the watermark in blocks, the policy)
are properties.

Two settings vLLM takes in other units are kept in tokens, as the pages set them: `capacity_tokens` is the GPU KV
cache size vLLM logs ("GPU KV cache size: N tokens"; num_gpu_blocks = capacity_tokens // block_size) and
`cpu_capacity_tokens` the host pool v0 sized from `swap_space`. A static batch reserves exactly `capacity_tokens`
contiguous slots; the paged policies use the whole blocks inside it.

A setting a user can get wrong (from the Serving page, its links or `python -m app.cli serve`) is refused with a
Refusal worded in both languages; a value no control or flag can produce is a Misuse (a bug in the lab)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.alloc.block_pool import MAX_CAPACITY_TOKENS, MAX_POOL_BLOCK_SIZE
from sim.cost.vllm_rules import ADMISSION_WATERMARK
from sim.refusal import Misuse, Refusal
from sim.serving.links import LINKS

PREEMPTION_MODES = ("recompute", "swap")  # v1 only recomputes; "swap" is v0's
BATCHING = ("iteration", "static")  # vLLM's iteration-level scheduling, or static batches (before Orca)
NO_BUDGET = 1 << 40  # max_num_batched_tokens when nothing bounds a step's tokens
MAX_NUM_SPECULATIVE_TOKENS = 8  # draft tokens per decode step the engine simulates
MAX_CPU_CAPACITY_TOKENS = MAX_CAPACITY_TOKENS  # host KV slots: a pool's bound, so even blocks of 1 slot fit one


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """One serving deployment's engine settings (module docstring). Keyword-only, vLLM's names."""

    # the scheduler (vLLM's SchedulerConfig)
    max_num_seqs: int = 256  # most requests running
    max_num_batched_tokens: int = 8192  # tokens one pass may compute, running requests' first (prompt tokens only
    # without chunked prefill)
    enable_chunked_prefill: bool = True
    preemption_mode: str = "recompute"
    watermark: float = ADMISSION_WATERMARK  # share of blocks an admission must leave free (v1: none; v0: 1%)
    batching: str = "iteration"  # "static": one padded batch at a time (Scheduler._schedule_static)
    # the KV cache (vLLM's CacheConfig)
    block_size: int = 16
    capacity_tokens: int = 16_384  # GPU KV token slots
    enable_prefix_caching: bool = False
    cpu_capacity_tokens: int = 0  # host KV slots for swapping (0: none; swap falls back to recompute)
    link: str = "pcie5"  # the GPU <-> host link swaps cross (sim.serving.links)
    # speculative decoding (vLLM's SpeculativeConfig)
    num_speculative_tokens: int = 0  # draft tokens per decode step: lookahead slots, rolled back when rejected
    draft_acceptance_rate: float = 0.8  # chance each draft token is accepted (given the ones before it were)
    seed: int = 0  # the acceptance draws' generator

    def __post_init__(self) -> None:
        # what no control, link or flag can set (each bounds its value first; the deployment caps the KV slots at
        # MAX_CAPACITY_TOKENS): a bug in the lab
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise Misuse(f"max_num_seqs and max_num_batched_tokens must be >= 1, got {self.max_num_seqs}, "
                         f"{self.max_num_batched_tokens}")
        if not 0.0 <= self.watermark <= 0.5:
            raise Misuse(f"watermark must be 0..0.5 of the blocks, got {self.watermark}")
        if self.preemption_mode not in PREEMPTION_MODES:
            raise Misuse(f"preemption_mode must be one of {PREEMPTION_MODES}, got {self.preemption_mode!r}")
        if self.batching not in BATCHING:
            raise Misuse(f"batching must be one of {BATCHING}, got {self.batching!r}")
        if self.link not in LINKS:
            raise Misuse(f"unknown link {self.link!r}; one of {', '.join(LINKS)}")
        if not 0 <= self.num_speculative_tokens <= MAX_NUM_SPECULATIVE_TOKENS or \
                not 0.0 <= self.draft_acceptance_rate <= 1.0:
            raise Misuse(f"num_speculative_tokens must be 0..{MAX_NUM_SPECULATIVE_TOKENS} and draft_acceptance_rate "
                         f"0..1, got {self.num_speculative_tokens}, {self.draft_acceptance_rate}")
        if not 1 <= self.block_size <= MAX_POOL_BLOCK_SIZE or self.capacity_tokens > MAX_CAPACITY_TOKENS:
            raise Misuse(f"block_size must be 1..{MAX_POOL_BLOCK_SIZE:,} and capacity_tokens at most "
                         f"{MAX_CAPACITY_TOKENS:,}, got {self.block_size}, {self.capacity_tokens:,}")
        # what a user can get wrong (a KV limit, or what the weights leave, or host slots against the block size; the
        # budget against the batch): `python -m app.cli serve --kv-tokens 8`, the preemption tab's host slots, the
        # step-through's budget
        if self.capacity_tokens < self.block_size:
            raise Refusal("alloc.err.capacity_block", cap=self.capacity_tokens, bs=self.block_size)
        if self.cpu_capacity_tokens and not self.block_size <= self.cpu_capacity_tokens <= MAX_CPU_CAPACITY_TOKENS:
            raise Refusal("serving.err.cpu_capacity", bs=self.block_size, max=MAX_CPU_CAPACITY_TOKENS,
                          got=self.cpu_capacity_tokens)
        need = self.max_num_seqs * (1 + self.num_speculative_tokens)
        if self.enable_chunked_prefill and self.max_num_batched_tokens < need:
            raise Refusal("serving.err.budget_decode", budget=self.max_num_batched_tokens, seqs=self.max_num_seqs,
                          per=1 + self.num_speculative_tokens, need=need)

    @property
    def num_gpu_blocks(self) -> int:
        return self.capacity_tokens // self.block_size

    @property
    def num_cpu_blocks(self) -> int:
        return self.cpu_capacity_tokens // self.block_size

    @property
    def watermark_blocks(self) -> int:
        return int(self.watermark * self.num_gpu_blocks)

    @property
    def policy(self) -> str:
        """The result's policy name: static, continuous (whole prompts) or chunked."""
        if self.batching == "static":
            return "static"
        return "chunked" if self.enable_chunked_prefill else "continuous"
