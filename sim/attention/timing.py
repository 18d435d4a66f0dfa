"""Eager attention and every SDPA backend (and FlexAttention) timed live on one shape, and a sweep
of that shape over N: results as dataclasses with the ratios the page and the benchmark report.

Sizes are bounded per device (`sim/attention/limits.py`) before anything runs. Torch is imported
inside the functions: this module imports without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from sim.attention.flex import time_flex
from sim.attention.implementations import impl_statuses, kernel_fn, make_inputs
from sim.attention.limits import Limits, check_shape
from sim.attention.measure import (
    KernelTiming,
    first_line,
    max_abs_diff,
    memory_method,
    run_measuring_peak,
    time_callable,
    torch_threads,
)
from sim.attention.shapes import IMPLS, AttentionShape
from sim.msg import Msg


@dataclass(frozen=True)
class TimingResult:
    shape: AttentionShape
    device: str
    num_threads: int
    rows: tuple[KernelTiming, ...]
    memory_method: Msg | str  # how peaks were measured: a message value (sim.attention.measure.memory_method)

    def row(self, impl: str) -> KernelTiming:
        return next(r for r in self.rows if r.impl == impl)

    def speedup(self, impl: str, over: str = "eager", stat: str = "median") -> float | None:
        """Time of `over` / time of `impl`, by a statistic of the timed blocks (measure.STATS)."""
        a, b = self.row(impl), self.row(over)
        if not (a.ok and b.ok):
            return None
        return b.stats.of(stat) / a.stats.of(stat)

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


def time_in_process(shape: AttentionShape, impl: str, device, q, k, v, reference, budget_s: float
                    ) -> tuple[KernelTiming, object]:
    """One profiled call (peak memory, output for the parity check), then the timed calls.
    Returns the timing and the output (None when the kernel failed)."""
    fn = kernel_fn(impl, shape, q, k, v)
    try:
        out, peak = run_measuring_peak(fn, device)
        diff = max_abs_diff(out, out if reference is None else reference)
        stats = time_callable(fn, budget_s=budget_s, warmup=0)  # the profiled call was the warm-up
    except RuntimeError as exc:  # a backend can refuse one shape it did not refuse in the probe
        return KernelTiming(impl, "failed", first_line(exc)), None
    return KernelTiming(impl, "ok", "", stats, shape.flops, peak, diff), out


def time_attention(shape: AttentionShape, device, limits: Limits, impls: tuple[str, ...] = IMPLS[:-1],
                   budget_s: float = 0.25, flex_timeout_s: float = 120.0, num_threads: int | None = None,
                   on_progress: Callable[..., None] | None = None) -> TimingResult:
    """Time every requested implementation on one shape; unavailable ones come back with their reason.
    SDPA-MATH always runs: it is the reference for the max-abs-difference column. on_progress(impl) before each
    kernel, and on_progress("flex", seconds) while FlexAttention compiles (sim.words.attention.progress_text
    words it).

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
                                          on_wait=(lambda s: on_progress("flex", s))
                                          if on_progress else None)
        else:
            impl_to_row[impl] = time_in_process(shape, impl, device, q, k, v, reference, budget_s)[0]
    rows = tuple(impl_to_row[i] for i in IMPLS if i in impl_to_row)
    return TimingResult(shape, str(device), torch.get_num_threads(), rows, memory_method(device.type))


@dataclass(frozen=True)
class FlashVsEager:
    """Eager over FLASH at one N: time (by a statistic of the timed blocks) and peak memory."""

    num_keys: int
    time_ratio: float
    memory_ratio: float | None  # None when a peak could not be measured


@dataclass(frozen=True)
class SweepResult:
    """One timing per N, N ascending, for one B, H, d, mask and dtype; and the matmul ceiling
    (FLOP/s) measured with them."""

    results: tuple[TimingResult, ...]
    ceiling_flops: float

    @property
    def ceiling_tflops(self) -> float:
        return self.ceiling_flops / 1e12

    def __post_init__(self) -> None:
        assert self.results, "a sweep times at least one N"
        assert [r.shape.num_keys for r in self.results] == sorted({r.shape.num_keys for r in self.results})

    @property
    def label(self) -> str:
        return self.results[0].shape.sweep_label()

    @property
    def lengths(self) -> list[int]:
        return [r.shape.num_keys for r in self.results]

    def flash_vs_eager(self, stat: str = "median") -> FlashVsEager | None:
        """At the largest N; None unless both eager and FLASH ran there."""
        top = self.results[-1]
        time_ratio = top.speedup("flash", stat=stat)
        if time_ratio is None:
            return None
        return FlashVsEager(top.shape.num_keys, time_ratio, top.memory_ratio("flash"))

    def to_frame(self):
        """Every row of every timing (TimingResult.to_records), one table for the charts and the CSV."""
        import pandas as pd

        return pd.DataFrame([rec for r in self.results for rec in r.to_records()])


def sweep_attention(shape: AttentionShape, lengths: list[int], time_one: Callable[[AttentionShape], TimingResult],
                    ceiling_flops: float, on_progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """`time_one` at every N in `lengths` (ascending), the rest of `shape` kept; on_progress(i, N)
    before each."""
    results = []
    for i, n in enumerate(lengths):
        if on_progress:
            on_progress(i, n)
        results.append(time_one(replace(shape, seq_len=n)))
    return SweepResult(tuple(results), ceiling_flops)
