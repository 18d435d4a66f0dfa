"""Measuring one kernel: blocks of timed calls, the peak memory of one call, the intra-op thread
count, the matmul ceiling, and the row (`KernelTiming`) each measurement becomes.

Torch is imported inside the functions: this module imports without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from sim.attention.implementations import torch_dtype
from sim.msg import Msg
from sim.refusal import Misuse
from sim.work.threads import pick_num_threads


def run_alone(queue, fn: Callable, *args, **kwargs):
    """Run `fn` holding `queue` (a `sim.work.queue.WorkQueue`) exclusively. Two timings at once would
    disturb each other's numbers, a timing next to another session's model run would be wrong too, and
    forcing an SDPA backend is process-wide."""
    with queue.slot(exclusive=True):
        return fn(*args, **kwargs)


# A statistic of the timed blocks -> its column in TimingResult.to_records(). The median is the honest
# typical cost; the fastest block the cost with the least interference from other work on the machine.
STATS = {"median": "median_ms", "fastest block": "min_ms"}


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

    def of(self, stat: str) -> float:
        """Seconds per call by one of STATS: the median block or the fastest one."""
        if stat not in STATS:
            raise Misuse(f"statistic {stat!r} is not one of {tuple(STATS)}")
        return self.median_s if stat == "median" else self.min_s


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

    from sim.model.device import synchronize

    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    out = fn()
    synchronize(device)
    return out, int(torch.cuda.max_memory_allocated(device) - base)


def run_measuring_peak(fn: Callable[[], object], device) -> tuple[object, int | None]:
    import torch

    device = torch.device(device)
    return cuda_peak_bytes(fn, device) if device.type == "cuda" else cpu_peak_bytes(fn)


def memory_method(device_type: str) -> Msg:
    """How a peak was measured on this device type, a message value (sim/words/attention.py words it)."""
    return Msg("kernels.method.cuda" if device_type == "cuda" else "kernels.method.cpu")


@dataclass(frozen=True)
class KernelTiming:
    impl: str
    status: str  # "ok", "unavailable", "failed", "timed out"
    reason: str | Msg = ""  # why it did not run: a message value (the lab's), else torch's words
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


def max_abs_diff(a, b) -> float:
    return float((a.float() - b.float()).abs().max().item())


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


@contextmanager
def torch_threads(num_threads: int | None) -> Iterator[int]:
    """Run with `num_threads` intra-op threads (None: the lab's default), then restore the old count."""
    import torch

    want = pick_num_threads() if num_threads is None else num_threads
    if want < 1:
        raise Misuse(f"threads {want} must be at least 1")
    old = torch.get_num_threads()
    torch.set_num_threads(want)
    try:
        yield want
    finally:
        torch.set_num_threads(old)


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

