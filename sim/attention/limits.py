"""What one timing may ask of this device: caps on score entries and FLOPs, and a memory guard
for eager attention's N² tensors, checked before anything runs. Torch only inside the functions
that look at a real device."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from sim.attention.shapes import MAX_SEQ_LEN, AttentionShape, dtypes_for
from sim.refusal import Refusal

CPU_MAX_SCORE_ELEMS = 1 << 24  # 16.8 M: N = 4,096 at B·H = 1; eager holds ~3 such fp32 matrices (~200 MB)
CPU_MAX_FLOPS = 1 << 33  # 8.6 GFLOP: about 0.1-0.4 s for eager on a 2-core CPU
CUDA_MAX_SCORE_ELEMS = 1 << 31
CUDA_MAX_FLOPS = 1 << 45


@dataclass(frozen=True)
class Limits:
    """What one timing may ask of this device, checked before anything runs."""

    device_type: str
    max_score_elems: int  # B·H·N_q·N_k: keeps eager's N² tensors and its run time small
    max_flops: int  # 4·B·H·N_q·N_k·d (halved when causal): keeps one call short
    memory_bytes: int  # budget for eager's estimated peak (a share of free RAM / GPU memory)


def available_memory_bytes(device) -> int:
    """Free memory the timing may use: CUDA's free bytes, or MemAvailable from /proc/meminfo."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30  # no /proc (not Linux): assume 4 GiB


def device_limits(device, memory_share: float = 0.5) -> Limits:
    import torch

    device = torch.device(device)
    mem = int(available_memory_bytes(device) * memory_share)
    if device.type == "cuda":
        return Limits("cuda", CUDA_MAX_SCORE_ELEMS, CUDA_MAX_FLOPS, mem)
    return Limits(device.type, CPU_MAX_SCORE_ELEMS, CPU_MAX_FLOPS, mem)


def eager_peak_estimate(shape: AttentionShape) -> int:
    """Bytes eager attention may hold at once: Q, K, V, O plus up to four N² tensors
    (raw scores, scaled scores, the additive mask and its sum, probabilities)."""
    return 4 * shape.score_bytes + shape.qkvo_bytes


def check_shape(shape: AttentionShape, limits: Limits) -> None:
    """Raise a Refusal, with the numbers, when `shape` would be too slow or too big here."""
    b, h, nq, nk = shape.batch, shape.heads, shape.num_queries, shape.num_keys
    if shape.dtype not in dtypes_for(limits.device_type):
        raise Refusal("kernels.err.dtype", dtype=shape.dtype, device=limits.device_type,
                      choose=", ".join(dtypes_for(limits.device_type)))
    if shape.score_elems > limits.max_score_elems:
        raise Refusal("kernels.err.entries", b=b, h=h, nq=nq, nk=nk, elems=shape.score_elems,
                      cap=limits.max_score_elems, bits=limits.max_score_elems.bit_length() - 1, bh=b * h,
                      max_n=max_prefill_len(b * h, limits))
    if shape.flops > limits.max_flops:
        raise Refusal("kernels.err.flops", flops=shape.flops, cap=limits.max_flops, d=shape.head_dim, nk=nk)
    need = eager_peak_estimate(shape)
    if need > limits.memory_bytes:
        raise Refusal("kernels.err.memory", need=need / 2**20, n2=shape.score_bytes / 2**20,
                      budget=limits.memory_bytes / 2**20)


def max_prefill_len(batch_heads: int, limits: Limits) -> int:
    return math.isqrt(limits.max_score_elems // max(1, batch_heads))


def sweep_lengths(shape: AttentionShape, limits: Limits, n_min: int = 128, n_max: int = MAX_SEQ_LEN) -> list[int]:
    """Powers of two from n_min up to the largest N this shape may take here."""
    out = []
    n = n_min
    while n <= min(n_max, MAX_SEQ_LEN):
        try:
            check_shape(replace(shape, seq_len=n), limits)
        except ValueError:
            break
        out.append(n)
        n *= 2
    return out
