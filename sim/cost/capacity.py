"""What fits on a GPU: the memory left for the KV cache after the weights, the most requests and the
longest context it holds, and what each KV dtype buys on the same GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sim.cost.gpus import GpuPreset
from sim.cost.memory import (
    KV_DTYPES,
    MAX_GPUS,
    SCALE_BYTES,
    WEIGHT_DTYPE_BITS,
    ZERO_BYTES,
    MemoryConfig,
    _check_int,
    kv_memory,
    request_bytes,
    weight_bytes,
)
from sim.refusal import Misuse

PARTS = ("weights", "kv", "free", "aside")  # Capacity.breakdown's parts; their names: kvmem.part.<id>


@dataclass(frozen=True)
class GpuConfig:
    gpu: GpuPreset
    num_gpus: int = 1
    utilization: float = 0.9  # the fraction a server may use (vLLM's --gpu-memory-utilization)
    weight_dtype: str = "bf16"

    def __post_init__(self) -> None:
        _check_int("num_gpus", self.num_gpus, 1, MAX_GPUS)
        # the page's utilization slider is 0.05..1.0 and its weight dtype a choice: past them is the lab's bug
        if not (isinstance(self.utilization, int | float) and math.isfinite(self.utilization)
                and 0.05 <= self.utilization <= 1.0):
            raise Misuse(f"utilization must be within 0.05..1.0, got {self.utilization!r}")
        if self.weight_dtype not in WEIGHT_DTYPE_BITS:
            raise Misuse(f"weight_dtype must be one of {', '.join(WEIGHT_DTYPE_BITS)}, got {self.weight_dtype!r}")

    @property
    def total_bytes(self) -> int:
        return self.gpu.memory_bytes * self.num_gpus

    @property
    def usable_bytes(self) -> int:
        return math.floor(self.total_bytes * self.utilization)



@dataclass(frozen=True)
class Capacity:
    total_bytes: int  # every GPU's memory
    usable_bytes: int  # × utilization
    weight_bytes: int
    kv_bytes: int  # the cache at the chosen batch and context
    max_requests: int  # at the chosen context
    max_context: int  # at the chosen batch, up to the model's trained context
    max_context_limited_by: str  # "memory" or "model"

    @property
    def kv_budget_bytes(self) -> int:
        """What is left for the cache after the weights (negative: the weights alone do not fit)."""
        return self.usable_bytes - self.weight_bytes

    @property
    def headroom_bytes(self) -> int:
        return self.kv_budget_bytes - self.kv_bytes

    @property
    def fits(self) -> bool:
        return self.headroom_bytes >= 0

    def breakdown(self) -> list[tuple[str, int]]:
        """(part, bytes) stacking up to the total: weights, KV, free, reserved (or over); each part one of PARTS."""
        parts = [("weights", self.weight_bytes), ("kv", self.kv_bytes)]
        if self.headroom_bytes >= 0:
            parts.append(("free", self.headroom_bytes))
        return parts + [("aside", self.total_bytes - self.usable_bytes)]


def max_context(cfg: MemoryConfig, kv_budget: int) -> tuple[int, str]:
    """Largest context (≤ the model's trained context) whose cache for cfg.batch requests fits in
    kv_budget bytes, and what limits it ("memory" or "model")."""
    limit = cfg.arch.max_position_embeddings
    if kv_budget <= 0:
        return 0, "memory"
    # peak bytes: a chunked layer held a whole chunk on the way to a context (the only peak above the final count)
    if cfg.batch * request_bytes(cfg, limit, peak=True) <= kv_budget:
        return limit, "model"
    lo, hi = 0, limit  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cfg.batch * request_bytes(cfg, mid, peak=True) <= kv_budget:
            lo = mid
        else:
            hi = mid
    return lo, "memory"


def capacity(cfg: MemoryConfig, gpu: GpuConfig) -> Capacity:
    w = weight_bytes(cfg.arch, gpu.weight_dtype)
    per_request = request_bytes(cfg)
    budget = gpu.usable_bytes - w
    max_req = budget // request_bytes(cfg, peak=True) if budget > 0 else 0
    ctx, limited = max_context(cfg, budget)
    return Capacity(gpu.total_bytes, gpu.usable_bytes, w, per_request * cfg.batch, max_req, ctx, limited)


@dataclass(frozen=True)
class DtypeRow:
    kv_dtype: str
    bytes_per_token: int
    per_request_bytes: int
    total_bytes: int
    max_requests: int
    vs_fp16: float  # per-request bytes relative to fp16


def dtype_table(cfg: MemoryConfig, gpu: GpuConfig) -> tuple[DtypeRow, ...]:
    """Every KV dtype for the same model, batch, context and GPU: what a smaller format buys."""
    fp16 = request_bytes(replace(cfg, kv_dtype="fp16"))
    rows = []
    for name in KV_DTYPES:
        c = replace(cfg, kv_dtype=name)
        m = kv_memory(c)
        cap = capacity(c, gpu)
        rows.append(DtypeRow(name, m.bytes_per_token, m.per_request_bytes, m.total_bytes, cap.max_requests,
                             m.per_request_bytes / fp16))
    return tuple(rows)


def int8_vs_fp16(group_size: int) -> float:
    """INT8 with a 2-byte scale and a 2-byte zero point per group, relative to FP16."""
    return (8 * group_size + 8 * (SCALE_BYTES + ZERO_BYTES)) / (16 * group_size)
