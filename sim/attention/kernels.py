"""Attention kernels timed on this device.

Two halves:

1. Live timing. The same attention — softmax(Q·Kᵀ/√d [+ causal mask]) · V — computed by
   * `eager`: explicit matmul, additive causal mask, softmax, matmul (every N×N step written out),
   * `F.scaled_dot_product_attention` forced onto each backend that really runs here
     (MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION; the others are reported with
     the reason they refused, from `sim.model.device.probe_sdpa_backends`),
   * FlexAttention, compiled in a separate process with a hard timeout (its compile can take
     tens of seconds on a small CPU; a child process is the only way to guarantee it never hangs
     the caller), its one-time compile cost reported apart from the per-call time.
   Sizes are bounded per device (`Limits`) before anything runs.

2. The online (tiled) softmax, stepped, and the HBM-traffic model live in `sim/attention/online_softmax.py`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------
# Shapes, presets, bounds
# ---------------------------------------------------------------------------------------------

IMPLS = ("eager", "math", "flash", "efficient", "cudnn", "flex")
IMPL_LABELS = {
    "eager": "eager (matmul + mask + softmax + matmul)",
    "math": "SDPA · MATH",
    "flash": "SDPA · FLASH_ATTENTION",
    "efficient": "SDPA · EFFICIENT_ATTENTION",
    "cudnn": "SDPA · CUDNN_ATTENTION",
    "flex": "FlexAttention (compiled)",
}
KINDS = ("prefill", "decode")
DTYPES = ("float32", "float16", "bfloat16")
HEAD_DIMS = (16, 32, 64, 128, 256)
ELEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# Max abs difference from SDPA-MATH that still counts as "the same attention" for random normal
# inputs: a few units in the last place of outputs whose magnitude is about 1.
TOLERANCE = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3.2e-2}

MAX_BATCH = 16
MAX_HEADS = 64
MAX_SEQ_LEN = 65_536


def dtypes_for(device_type: str) -> tuple[str, ...]:
    """fp32 on CPU (its fp16/bf16 eager paths are slow emulations); half precisions on CUDA."""
    return ("float32",) if device_type == "cpu" else ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class AttentionShape:
    batch: int = 1
    heads: int = 4
    seq_len: int = 1024  # N: keys, and queries too when prefill-shaped
    head_dim: int = 32
    causal: bool = True
    kind: str = "prefill"  # "prefill": N queries against N keys; "decode": 1 query against N keys
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"batch {self.batch} is outside 1..{MAX_BATCH}")
        if not 1 <= self.heads <= MAX_HEADS:
            raise ValueError(f"heads {self.heads} is outside 1..{MAX_HEADS}")
        if not 1 <= self.seq_len <= MAX_SEQ_LEN:
            raise ValueError(f"sequence length {self.seq_len} is outside 1..{MAX_SEQ_LEN:,}")
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"head dim {self.head_dim} is not one of {HEAD_DIMS}")
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {KINDS}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} is not one of {DTYPES}")

    @property
    def num_queries(self) -> int:
        return self.seq_len if self.kind == "prefill" else 1

    @property
    def num_keys(self) -> int:
        return self.seq_len

    @property
    def is_causal(self) -> bool:
        """The causal mask only matters for N queries; a decode query is the last position and sees every key."""
        return self.causal and self.kind == "prefill"

    @property
    def score_elems(self) -> int:
        """B·H·N_q·N_k: the entries of one score matrix that eager attention writes out."""
        return self.batch * self.heads * self.num_queries * self.num_keys

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES[self.dtype]

    @property
    def score_bytes(self) -> int:
        """Bytes of one B·H·N_q·N_k score (or probability) matrix in this dtype."""
        return self.score_elems * self.elem_bytes

    @property
    def qkvo_bytes(self) -> int:
        b, h, d = self.batch, self.heads, self.head_dim
        return b * h * d * (2 * self.num_queries + 2 * self.num_keys) * self.elem_bytes

    @property
    def flops(self) -> int:
        return attention_flops(self.batch, self.heads, self.num_queries, self.num_keys, self.head_dim, self.is_causal)

    def label(self) -> str:
        q = f"{self.num_queries:,}" if self.kind == "prefill" else "1"
        return (f"B={self.batch}, H={self.heads}, {q} queries × {self.num_keys:,} keys, d={self.head_dim}, "
                f"{'causal' if self.is_causal else 'no mask'}, {self.dtype}")


def attention_flops(batch: int, heads: int, num_queries: int, num_keys: int, head_dim: int, causal: bool) -> int:
    """4·B·H·N_q·N_k·d (2 for Q·Kᵀ, 2 for P·V, multiply-add = 2 FLOPs), halved when causal.

    Halving is the convention the FlashAttention papers use for causal prefill (the exact count
    of visible pairs is N(N+1)/2, a hair over half). Softmax and scaling are not counted."""
    flops = 4 * batch * heads * num_queries * num_keys * head_dim
    return flops // 2 if causal else flops


SHAPE_PRESETS: dict[str, AttentionShape] = {
    # The bundled model: 4 query heads of 32 dims, trained on 1,024-token windows.
    "tiny": AttentionShape(batch=1, heads=4, seq_len=1024, head_dim=32, causal=True),
    # A Llama-style head (d = 128); 8 heads keep it inside the CPU cap at 1,024 tokens.
    "llama": AttentionShape(batch=1, heads=8, seq_len=1024, head_dim=128, causal=True),
    # The sweep's base shape: one head, so N can reach 4,096 on CPU.
    "sweep": AttentionShape(batch=1, heads=1, seq_len=4096, head_dim=64, causal=True),
}
PRESET_LABELS = {
    "tiny": "Tiny model (4 heads × 32, N = 1,024)",
    "llama": "Llama-like head (8 heads × 128, N = 1,024)",
    "sweep": "Sweep base (1 head × 64, N up to the cap)",
}


@dataclass(frozen=True)
class Limits:
    """What one timing may ask of this device, checked before anything runs."""

    device_type: str
    max_score_elems: int  # B·H·N_q·N_k: keeps eager's N² tensors and its run time small
    max_flops: int  # 4·B·H·N_q·N_k·d (halved when causal): keeps one call short
    memory_bytes: int  # budget for eager's estimated peak (a share of free RAM / GPU memory)


CPU_MAX_SCORE_ELEMS = 1 << 24  # 16.8 M: N = 4,096 at B·H = 1; eager holds ~3 such fp32 matrices (~200 MB)
CPU_MAX_FLOPS = 1 << 33  # 8.6 GFLOP: about 0.1-0.4 s for eager on a 2-core CPU
CUDA_MAX_SCORE_ELEMS = 1 << 31
CUDA_MAX_FLOPS = 1 << 45


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
    """Raise ValueError, with the numbers, when `shape` would be too slow or too big here."""
    b, h, nq, nk = shape.batch, shape.heads, shape.num_queries, shape.num_keys
    if shape.dtype not in dtypes_for(limits.device_type):
        raise ValueError(f"dtype {shape.dtype} is not timed on {limits.device_type}; "
                         f"choose {', '.join(dtypes_for(limits.device_type))}")
    if shape.score_elems > limits.max_score_elems:
        raise ValueError(
            f"B·H·N_q·N_k = {b}·{h}·{nq:,}·{nk:,} = {shape.score_elems:,} score entries is over this device's cap of "
            f"{limits.max_score_elems:,} (2^{limits.max_score_elems.bit_length() - 1}); lower the batch, heads "
            f"or N (at B·H = {b * h}, N ≤ {max_prefill_len(b * h, limits):,} for prefill)")
    if shape.flops > limits.max_flops:
        raise ValueError(f"{shape.flops:,} FLOPs per call is over this device's cap of {limits.max_flops:,}; "
                         f"lower the head dim ({shape.head_dim}) or N ({nk:,})")
    need = eager_peak_estimate(shape)
    if need > limits.memory_bytes:
        raise ValueError(f"eager attention would need about {need / 2**20:,.0f} MiB (4 × {shape.score_bytes / 2**20:,.1f} "
                         f"MiB of N² tensors + Q, K, V, O) but only {limits.memory_bytes / 2**20:,.0f} MiB may be used "
                         f"here; lower B·H·N²")


def max_prefill_len(batch_heads: int, limits: Limits) -> int:
    return math.isqrt(limits.max_score_elems // max(1, batch_heads))


def sweep_lengths(shape: AttentionShape, limits: Limits, n_min: int = 128, n_max: int = MAX_SEQ_LEN) -> list[int]:
    """Powers of two from n_min up to the largest N this shape may take here."""
    out = []
    n = n_min
    while n <= min(n_max, MAX_SEQ_LEN):
        try:
            check_shape(_replace(shape, seq_len=n), limits)
        except ValueError:
            break
        out.append(n)
        n *= 2
    return out


def _replace(shape: AttentionShape, **changes) -> AttentionShape:
    from dataclasses import replace

    return replace(shape, **changes)


# ---------------------------------------------------------------------------------------------
# The implementations
# ---------------------------------------------------------------------------------------------

def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def make_inputs(shape: AttentionShape, device):
    """Seeded Q, K, V: the same numbers in every process for the same shape and seed."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(shape.seed)
    b, h, d = shape.batch, shape.heads, shape.head_dim
    q = torch.randn(b, h, shape.num_queries, d, generator=gen)  # (B, H, Nq, D)
    k = torch.randn(b, h, shape.num_keys, d, generator=gen)  # (B, H, Nk, D)
    v = torch.randn(b, h, shape.num_keys, d, generator=gen)  # (B, H, Nk, D)
    dt = torch_dtype(shape.dtype)
    return tuple(t.to(device=device, dtype=dt).contiguous() for t in (q, k, v))


def eager_attention(q, k, v, causal: bool):
    """What a model without a fused kernel does: every N_q×N_k intermediate is a real tensor."""
    import torch

    from sim.model.transformer import causal_additive_mask

    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, Nq, Nk)
    if causal:
        scores = scores + causal_additive_mask(nq, nk, device=q.device, dtype=scores.dtype)  # (Nq, Nk) broadcast
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (B, H, Nq, Nk)
    return probs @ v  # (B, H, Nq, D)


def sdpa_attention(q, k, v, causal: bool, backend: str):
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    from sim.model.device import sdpa_backend_enum

    with sdpa_kernel(sdpa_backend_enum(backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (B, H, Nq, D)


def kernel_fn(impl: str, shape: AttentionShape, q, k, v) -> Callable[[], object]:
    """A no-argument callable computing the attention with `impl` (not flex: that runs in a child)."""
    causal = shape.is_causal
    if impl == "eager":
        return lambda: eager_attention(q, k, v, causal)
    if impl in ("math", "flash", "efficient", "cudnn"):
        return lambda: sdpa_attention(q, k, v, causal, impl)
    raise ValueError(f"no in-process kernel {impl!r}; choose one of {IMPLS[:-1]}")


@dataclass(frozen=True)
class ImplStatus:
    impl: str
    runs: bool
    reason: str  # "" when it runs


def flex_status(device) -> ImplStatus:
    """Whether FlexAttention can be compiled here (without compiling it)."""
    import torch

    device = torch.device(device)
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError as exc:
        return ImplStatus("flex", False, f"this torch has no FlexAttention ({exc})")
    if device.type == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return ImplStatus("flex", False, "torch.compile needs Triton on CUDA and it is not installed")
        return ImplStatus("flex", True, "")
    if device.type != "cpu":
        return ImplStatus("flex", False, f"FlexAttention is not compiled for {device.type} here")
    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        return ImplStatus("flex", False, "torch.compile on CPU needs a C++ compiler (g++) and none is on PATH")
    return ImplStatus("flex", True, "")


def impl_statuses(device, dtype: str) -> list[ImplStatus]:
    """Every implementation in IMPLS order: eager always runs; SDPA backends as probed; flex as found."""
    import torch

    from sim.model.device import probe_sdpa_backends

    device = torch.device(device)
    probes = {p.name: p for p in probe_sdpa_backends(device, torch_dtype(dtype))}
    out = [ImplStatus("eager", True, "")]
    out += [ImplStatus(n, probes[n].runs, probes[n].reason) for n in ("math", "flash", "efficient", "cudnn")]
    out.append(flex_status(device))
    return out


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stats:
    times_s: tuple[float, ...]  # seconds per call, one per measured block

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s))

    @property
    def p25_s(self) -> float:
        return float(np.percentile(self.times_s, 25))

    @property
    def p75_s(self) -> float:
        return float(np.percentile(self.times_s, 75))

    @property
    def min_s(self) -> float:
        return min(self.times_s)


def time_callable(fn: Callable[[], object], budget_s: float = 0.25, min_reps: int = 3, max_reps: int = 25,
                  warmup: int = 1) -> Stats:
    """Warm up, then time blocks of calls with torch.utils.benchmark (it synchronizes CUDA around
    every block). The first block is a single call; it sizes the rest: blocks of enough calls to
    last about a millisecond, as many as fit `budget_s` but at least `min_reps`. Returns seconds
    per call, one per block (the single-call block is kept only when calls are slow)."""
    import torch
    from torch.utils.benchmark import Timer

    for _ in range(warmup):
        fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    first = max(float(timer.timeit(1).median), 1e-7)
    number = max(1, int(1e-3 / first))
    times = [first] if number == 1 else []
    reps = int(min(max_reps, max(min_reps, budget_s / (first * number))))
    times += [float(timer.timeit(number).median) for _ in range(reps - len(times))]
    return Stats(tuple(times))


def cpu_peak_bytes(fn: Callable[[], object]) -> tuple[object, int | None]:
    """Run `fn` once under the profiler: (its output, the peak bytes held through torch's CPU
    allocator during the call, output included). The peak is None when this torch does not
    expose allocation events."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    try:
        events = prof.profiler.kineto_results.events()
        mem = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    except (AttributeError, RuntimeError):
        return out, None
    cur = peak = 0
    for _t, nbytes in mem:
        cur += nbytes
        peak = max(peak, cur)
    return out, int(peak)


def cuda_peak_bytes(fn: Callable[[], object], device) -> tuple[object, int]:
    """Run `fn` once: (its output, max_memory_allocated during the call minus what was allocated before)."""
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    out = fn()
    torch.cuda.synchronize(device)
    return out, int(torch.cuda.max_memory_allocated(device) - base)


def run_measuring_peak(fn: Callable[[], object], device) -> tuple[object, int | None]:
    import torch

    device = torch.device(device)
    return cuda_peak_bytes(fn, device) if device.type == "cuda" else cpu_peak_bytes(fn)


def memory_method(device_type: str) -> str:
    if device_type == "cuda":
        return "torch.cuda.max_memory_allocated during one call, minus what was allocated before"
    return ("the peak of bytes held through torch's CPU allocator during one call, summed from the "
            "profiler's allocation and free events (profile_memory=True)")


@dataclass(frozen=True)
class KernelTiming:
    impl: str
    status: str  # "ok", "unavailable", "failed", "timed out"
    reason: str = ""
    stats: Stats | None = None
    flops: int = 0
    peak_bytes: int | None = None  # measured, output included
    max_abs_diff: float | None = None  # vs SDPA-MATH, same inputs
    compile_s: float | None = None  # one-time cost (FlexAttention: block mask + torch.compile)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tflops(self) -> float | None:
        return self.flops / self.stats.median_s / 1e12 if self.stats else None


@dataclass(frozen=True)
class TimingResult:
    shape: AttentionShape
    device: str
    num_threads: int
    rows: tuple[KernelTiming, ...]
    memory_method: str

    def row(self, impl: str) -> KernelTiming:
        return next(r for r in self.rows if r.impl == impl)

    def speedup(self, impl: str, over: str = "eager") -> float | None:
        a, b = self.row(impl), self.row(over)
        if not (a.ok and b.ok):
            return None
        return b.stats.median_s / a.stats.median_s

    def memory_ratio(self, impl: str, over: str = "eager") -> float | None:
        a, b = self.row(impl), self.row(over)
        if not (a.ok and b.ok) or not a.peak_bytes or b.peak_bytes is None:
            return None
        return b.peak_bytes / a.peak_bytes

    def to_records(self) -> list[dict]:
        s = self.shape
        out = []
        for r in self.rows:
            out.append({
                "implementation": r.impl, "status": r.status, "reason": r.reason, "device": self.device,
                "threads": self.num_threads, "batch": s.batch, "heads": s.heads, "queries": s.num_queries,
                "keys": s.num_keys, "head_dim": s.head_dim, "causal": s.is_causal, "dtype": s.dtype,
                "median_ms": r.stats.median_s * 1e3 if r.stats else None,
                "p25_ms": r.stats.p25_s * 1e3 if r.stats else None,
                "p75_ms": r.stats.p75_s * 1e3 if r.stats else None,
                "min_ms": r.stats.min_s * 1e3 if r.stats else None,
                "blocks_timed": len(r.stats.times_s) if r.stats else 0,
                "flops": r.flops, "tflops": r.tflops, "peak_bytes": r.peak_bytes,
                "eager_n2_bytes": s.score_bytes, "max_abs_diff_vs_math": r.max_abs_diff, "compile_s": r.compile_s,
            })
        return out


def _max_abs_diff(a, b) -> float:
    return float((a.float() - b.float()).abs().max().item())


def time_in_process(shape: AttentionShape, impl: str, device, q, k, v, reference, budget_s: float
                    ) -> tuple[KernelTiming, object]:
    """One profiled call (peak memory, output for the parity check), then the timed calls.
    Returns the timing and the output (None when the kernel failed)."""
    fn = kernel_fn(impl, shape, q, k, v)
    try:
        out, peak = run_measuring_peak(fn, device)
        diff = _max_abs_diff(out, out if reference is None else reference)
        stats = time_callable(fn, budget_s=budget_s, warmup=0)  # the profiled call was the warm-up
    except RuntimeError as exc:  # a backend can refuse one shape it did not refuse in the probe
        return KernelTiming(impl, "failed", _first_line(exc)), None
    return KernelTiming(impl, "ok", "", stats, shape.flops, peak, diff), out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


@contextmanager
def torch_threads(num_threads: int | None):
    """Run with `num_threads` intra-op threads (None: the lab's default), then restore the old count."""
    import torch

    from sim.model.device import pick_num_threads

    want = pick_num_threads() if num_threads is None else num_threads
    if want < 1:
        raise ValueError(f"threads {want} must be at least 1")
    old = torch.get_num_threads()
    torch.set_num_threads(want)
    try:
        yield want
    finally:
        torch.set_num_threads(old)


def time_attention(shape: AttentionShape, device, limits: Limits, impls: tuple[str, ...] = IMPLS[:-1],
                   budget_s: float = 0.25, flex_timeout_s: float = 120.0, num_threads: int | None = None,
                   on_progress: Callable[[str], None] | None = None) -> TimingResult:
    """Time every requested implementation on one shape; unavailable ones come back with their reason.
    SDPA-MATH always runs: it is the reference for the max-abs-difference column.

    Raises ValueError (with the numbers) when the shape is over this device's limits."""
    check_shape(shape, limits)
    with torch_threads(num_threads):
        return _time_attention(shape, device, impls, budget_s, flex_timeout_s, on_progress)


def _time_attention(shape, device, impls, budget_s, flex_timeout_s, on_progress) -> TimingResult:
    import torch

    device = torch.device(device)
    statuses = {s.impl: s for s in impl_statuses(device, shape.dtype)}
    q, k, v = make_inputs(shape, device)
    # MATH runs first: its output is the reference every other kernel is compared with.
    if on_progress:
        on_progress("math")
    math_row, reference = time_in_process(shape, "math", device, q, k, v, None, budget_s)
    if reference is None:
        raise RuntimeError(f"SDPA's MATH backend failed on {shape.label()}: {math_row.reason}")
    impl_to_row = {"math": math_row}
    for impl in IMPLS:
        if impl not in impls or impl == "math":
            continue
        if on_progress:
            on_progress(impl)
        st = statuses[impl]
        if not st.runs:
            impl_to_row[impl] = KernelTiming(impl, "unavailable", st.reason)
        elif impl == "flex":
            impl_to_row[impl] = time_flex(shape, device, budget_s=budget_s, timeout_s=flex_timeout_s,
                                          on_wait=(lambda s: on_progress(f"flex: compiling and timing, {s:.0f} s"))
                                          if on_progress else None)
        else:
            impl_to_row[impl] = time_in_process(shape, impl, device, q, k, v, reference, budget_s)[0]
    rows = tuple(impl_to_row[i] for i in IMPLS if i in impl_to_row)
    return TimingResult(shape, str(device), torch.get_num_threads(), rows, memory_method(device.type))


def matmul_size(device_type: str) -> int:
    """A square matmul big enough to keep the device busy: 1,024 on a CPU, 8,192 on a GPU."""
    return 8192 if device_type == "cuda" else 1024


def matmul_rate(device, dtype: str = "float32", n: int | None = None, reps: int = 5,
                num_threads: int | None = None) -> float:
    """Achieved FLOP/s of one n×n×n matmul on this device: the practical ceiling for attention's matmuls."""
    import torch

    n = n or matmul_size(torch.device(device).type)
    with torch_threads(num_threads):
        return _matmul_rate(device, dtype, n, reps)


def _matmul_rate(device, dtype: str, n: int, reps: int) -> float:
    import torch

    device = torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=torch_dtype(dtype))
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=torch_dtype(dtype))
    stats = time_callable(lambda: a @ b, budget_s=0.2, min_reps=reps, max_reps=reps)
    return 2 * n**3 / stats.median_s


# ---------------------------------------------------------------------------------------------
# FlexAttention: compiled in a child process with a hard timeout
# ---------------------------------------------------------------------------------------------

FLEX_MARKER = "KVLAB_FLEX_RESULT "


def time_flex(shape: AttentionShape, device, budget_s: float = 0.25, timeout_s: float = 120.0,
              on_wait: Callable[[float], None] | None = None) -> KernelTiming:
    """Compile and time FlexAttention in a separate Python process (killed after `timeout_s`).

    on_wait(seconds so far) is called about once a second while the child works; if it raises (a
    user pressed Stop), the child and its compile workers are killed and the exception goes on."""
    import time

    import torch

    request = json.dumps({"shape": asdict(shape), "device": str(device), "budget_s": budget_s,
                          "threads": torch.get_num_threads()})
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Its own process group, so that a timeout also stops the compile workers torch.compile starts.
    proc = subprocess.Popen([sys.executable, "-m", "sim.attention.kernels", "--flex-child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            start_new_session=True)
    t0 = time.perf_counter()
    try:
        pending = request
        while True:
            elapsed = time.perf_counter() - t0
            try:
                stdout, stderr = proc.communicate(pending, timeout=max(0.01, min(1.0, timeout_s - elapsed)))
                break
            except subprocess.TimeoutExpired:
                pending = None  # sent once; communicate() may be retried without losing output
                elapsed = time.perf_counter() - t0
                if elapsed >= timeout_s:
                    _kill_group(proc)
                    return KernelTiming("flex", "timed out", f"compiling and timing FlexAttention took over "
                                        f"{timeout_s:.0f} s here and was stopped (torch.compile is slow on a small CPU)")
                if on_wait is not None:
                    on_wait(elapsed)
    finally:
        if proc.poll() is None:  # an exception other than the timeout
            _kill_group(proc)
    for line in reversed(stdout.splitlines()):
        if line.startswith(FLEX_MARKER):
            got = json.loads(line[len(FLEX_MARKER):])
            break
    else:
        tail = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return KernelTiming("flex", "failed", f"the FlexAttention process gave no result: {tail[:300]}")
    if got["status"] != "ok":
        return KernelTiming("flex", got["status"], got["reason"])
    return KernelTiming("flex", "ok", "", Stats(tuple(got["times_s"])), shape.flops, got["peak_bytes"],
                        got["max_abs_diff"], got["compile_s"])


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


def _flex_child(request: dict) -> dict:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    shape = AttentionShape(**request["shape"])
    device = torch.device(request["device"])
    torch.set_num_threads(int(request["threads"]))
    q, k, v = make_inputs(shape, device)
    reference = sdpa_attention(q, k, v, shape.is_causal, "math")  # (B, H, Nq, D)
    offset = shape.num_keys - shape.num_queries  # query i sits at position offset + i

    def visible(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    t0 = time.perf_counter()
    block_mask = (create_block_mask(visible, None, None, shape.num_queries, shape.num_keys, device=str(device))
                  if shape.is_causal else None)
    compiled = torch.compile(flex_attention, dynamic=False)
    out = compiled(q, k, v, block_mask=block_mask)
    if device.type == "cuda":
        torch.cuda.synchronize()
    first_s = time.perf_counter() - t0

    def fn():
        return compiled(q, k, v, block_mask=block_mask)

    _out, peak = run_measuring_peak(fn, device)
    stats = time_callable(fn, budget_s=float(request["budget_s"]), warmup=0)
    return {"status": "ok", "reason": "", "times_s": list(stats.times_s), "compile_s": max(0.0, first_s - stats.median_s),
            "peak_bytes": peak, "max_abs_diff": _max_abs_diff(out, reference)}


def _flex_child_main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        result = _flex_child(request)
    except Exception as exc:  # noqa: BLE001 - any compile error is reported to the parent as text
        result = {"status": "failed", "reason": f"{type(exc).__name__}: {_first_line(exc)}"}
    sys.stdout.write(FLEX_MARKER + json.dumps(result) + "\n")

if __name__ == "__main__":
    if sys.argv[1:] == ["--flex-child"]:
        _flex_child_main()
