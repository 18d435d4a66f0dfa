"""This machine, measured with torch: its copy bandwidth and matmul FLOP/s (a `MachineProbe`), how many
operations a call dispatches, and the real tiny model's cached decode step next to the roofline's
prediction (a `TinyDecodePoint`). The roofline itself is numpy-only, in sim/cost/roofline.py."""

from __future__ import annotations

import math
import statistics

import torch

from sim.cost.roofline import MachineProbe, TinyDecodePoint
from sim.model.device import Stopwatch, pick_device, pick_dtype
from sim.refusal import Misuse


def probe_machine(device=None, *, dtype=None, copy_mib: int = 64, matmul_n: int = 1024, repeats: int = 10) -> MachineProbe:
    """A copy-bandwidth test (read + write of a large buffer) and a matmul FLOP/s test, each the
    best of `repeats` runs after a warm-up. Short: well under a second on a small CPU."""
    device = torch.device(device) if device is not None else pick_device()
    dtype = dtype or pick_dtype(device)
    if not 1 <= copy_mib <= 4096 or not 64 <= matmul_n <= 8192:
        raise Misuse(f"probe sizes out of range: copy {copy_mib} MiB (1..4096), matmul {matmul_n} (64..8192)")

    def best(fn) -> float:
        with Stopwatch(device):  # warm-up, synced
            fn()
        times = []
        for _ in range(repeats):
            with Stopwatch(device) as clock:
                fn()
            times.append(clock.seconds)
        return min(times)

    n = copy_mib * 2**20 // 4
    src = torch.empty(n, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    t_copy = best(lambda: dst.copy_(src))
    a = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype)
    b = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype)
    t_mm = best(lambda: a @ b)
    bw = 2 * n * 4 / t_copy
    flops = 2 * matmul_n**3 / t_mm
    if not (math.isfinite(bw) and bw > 0 and math.isfinite(flops) and flops > 0):
        raise RuntimeError("the probe measured no positive figure")
    return MachineProbe(bw, flops, str(device), str(dtype).removeprefix("torch."), copy_mib, matmul_n, repeats)


def count_ops(fn) -> int:
    """How many aten operations `fn()` dispatches (each one a kernel launch on a GPU)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counter.n += 1
            return func(*args, **(kwargs or {}))

    with Counter():
        fn()
    return Counter.n


def measure_tiny_decode(model, probe: MachineProbe, num_tokens: int = 96) -> TinyDecodePoint:
    """Cached decoding on the real model: bytes and FLOPs per step from the op counter, time
    measured; the median decode step (the prefill is left out)."""
    from sim.model.generate import decode_one_token, generate, prefill
    from sim.model.kvcache import ContiguousKVCache

    if not 8 <= num_tokens <= 1000:
        raise Misuse(f"num_tokens must be 8..1000, got {num_tokens}")
    prompt = list(b"ROMEO.\n")
    generate(model, prompt, 8, mode="cached")  # warm-up
    steps = generate(model, prompt, num_tokens, mode="cached").steps[1:]
    mid = sorted(steps, key=lambda s: s.wall_s)[len(steps) // 2]
    wall = statistics.median(s.wall_s for s in steps)
    nbytes, flops = mid.bytes_weights + mid.bytes_kv, mid.flops
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=16, device=model.device, dtype=model.dtype)
    ids = torch.tensor([prompt], device=model.device)  # (1, T)
    prefill(model, ids, cache)
    ops = count_ops(lambda: decode_one_token(model, ids[:, -1:], len(prompt), cache=cache))
    intensity = flops / nbytes
    attainable = min(probe.peak_flops, intensity * probe.bandwidth)
    predicted = max(flops / probe.peak_flops, nbytes / probe.bandwidth)
    return TinyDecodePoint(nbytes, flops, wall, predicted, ops, intensity, flops / wall, attainable)
