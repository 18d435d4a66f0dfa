"""What the Attention kernels page shows, built from results: tables (rows of column -> text),
metrics (`sim.readout.Metric`s, drawn by `app.metrics.show_metrics`) and the
sentences that state numbers. Torch-free."""

from __future__ import annotations

import math

from sim.attention.implementations import ImplStatus
from sim.attention.online_softmax import OnlineSoftmaxTrace, SoftmaxDemo, Traffic, hbm_traffic, run_softmax_demo
from sim.attention.shapes import IMPL_LABELS, IMPL_SHORT, TOLERANCE, AttentionShape
from sim.attention.timing import SweepResult, TimingResult
from sim.cost.memory import fmt_bytes
from sim.readout import Metric


def fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f}×"


def fmt_num(x: float | None, digits: int = 4) -> str:
    """Numbers for the stepper: -inf as −∞, nan as —, else `digits` significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    return f"{x:.{digits}g}"


def _bytes_or_na(n: int | None) -> str:
    return "n/a" if n is None else fmt_bytes(n)


# --- which kernels run, one shape, one timing ---------------------------------------------------

def status_rows(statuses: list[ImplStatus]) -> list[dict]:
    return [{"Implementation": IMPL_LABELS[s.impl], "Runs here": "yes" if s.runs else "no", "Why not": s.reason}
            for s in statuses]


def backends_caption(device: str, flex_timeout_s: int) -> str:
    """How the table of kernels that run here was found."""
    return (f"Device `{device}`; each SDPA backend was forced with `torch.nn.attention.sdpa_kernel` on a tiny causal "
            "input (`sim/model/device.py`). FlexAttention is compiled with `torch.compile` in a separate process that "
            f"is stopped after {flex_timeout_s} s, so a slow compile can never hang this page.")


def shape_metrics(shape: AttentionShape, eager_peak_bytes: int) -> list[Metric]:
    """FLOPs, score entries, one N² matrix and eager's estimated peak (the memory guard's number)."""
    return [
        Metric("FLOPs per call", f"{shape.flops / 1e9:,.4f} GFLOP",
               help=f"{shape.flops:,} = 4·B·H·N_q·N_k·d" + (", halved for the causal mask" if shape.is_causal else "")),
        Metric("Score entries B·H·N_q·N_k", f"{shape.score_elems:,}"),
        Metric("One N² matrix (eager must hold)", fmt_bytes(shape.score_bytes)),
        Metric("Eager peak, estimated", fmt_bytes(eager_peak_bytes),
               help="4 N² tensors (scores, scaled, masked, probabilities) + Q, K, V, O: the guard's estimate."),
    ]


def timing_metrics(result: TimingResult) -> list[Metric]:
    """FLASH over eager (time, memory), the fastest kernel, and the largest difference from MATH."""
    ok_rows = [r for r in result.rows if r.ok]
    flash_ok = "flash" in [r.impl for r in ok_rows]
    best = max(ok_rows, key=lambda r: r.tflops)
    return [
        Metric("FLASH vs eager, time", fmt_ratio(result.speedup("flash")) if flash_ok else "n/a",
               help="median eager time / median FLASH time"),
        Metric("Eager / FLASH peak memory", fmt_ratio(result.memory_ratio("flash")) if flash_ok else "n/a"),
        Metric("Fastest kernel", IMPL_SHORT[best.impl], delta=f"{best.stats.median_s * 1e3:,.3g} ms per call"),
        Metric("Largest |Δ| vs MATH", f"{max(r.max_abs_diff for r in ok_rows):.2e}",
               help=f"Tolerance for {result.shape.dtype}: {TOLERANCE[result.shape.dtype]:.0e}"),
    ]


def timing_rows(result: TimingResult) -> list[dict]:
    """One row per kernel: time, spread, rate, ratio to eager, peak memory, difference from MATH, status."""
    with_flex = any(x.impl == "flex" for x in result.rows)
    rows = []
    for r in result.rows:
        s = r.stats
        speedup = result.speedup(r.impl)
        row = {
            "Kernel": IMPL_SHORT[r.impl],
            "Median ms": f"{s.median_s * 1e3:.4g}" if s else "—",
            "25–75th pct ms": f"{s.p25_s * 1e3:.3g}–{s.p75_s * 1e3:.3g}" if s else "",
            "TFLOP/s": f"{r.tflops:.3g}" if s else "",
            "× vs eager": f"{speedup:.2f}" if speedup else "",
            "Peak memory": _bytes_or_na(r.peak_bytes) if r.ok else "",
            "Max |Δ| vs MATH": ("0 (reference)" if r.impl == "math" else f"{r.max_abs_diff:.2e}") if r.ok else "",
            "Status": "ok" if r.ok else (f"{r.status} (see above)" if r.status == "unavailable" else
                                         f"{r.status}: {r.reason}"),
        }
        if with_flex:
            row["Compile s (once)"] = f"{r.compile_s:.1f}" if r.compile_s is not None else ""
        rows.append(row)
    return rows


def timing_heading(result: TimingResult, measured_at: str) -> str:
    """Markdown: the shape timed, when, where and with how many threads."""
    return (f"**{result.shape.label()}** — measured at {measured_at} on `{result.device}` with "
            f"{result.num_threads} thread(s). Same shape again gives the cached numbers; "
            "**Measure again** takes fresh ones.")


def stale_timing_note(result: TimingResult, shape: AttentionShape | None) -> str | None:
    """When the last timing is of another shape than the form's: which shape the numbers are for."""
    if shape is None or result.shape == shape:
        return None
    return (f"The numbers below are for {result.shape.label()}. Press **Time these kernels** to measure the "
            "shape in the form.")


def flex_note(result: TimingResult) -> tuple[bool, str] | None:
    """(FlexAttention gave a timing, the sentence about it), or None when it was not asked for."""
    flex = next((r for r in result.rows if r.impl == "flex"), None)
    if flex is None:
        return None
    if flex.ok:
        return True, (f"FlexAttention's one-time cost (block mask + `torch.compile`): **{flex.compile_s:,.1f} s**, paid "
                      f"before the first call and not in its {flex.stats.median_s * 1e3:,.3g} ms per call. A new "
                      "shape compiles again.")
    return False, f"FlexAttention did not give a timing: {flex.status} — {flex.reason}. The other kernels are unaffected."


# --- sweep over N --------------------------------------------------------------------------------

def no_sweep_warning(shape: AttentionShape) -> str:
    """Not even the sweep's first N fits this device's cap at the shape's B·H."""
    return f"At B·H = {shape.batch * shape.heads} not even N = 128 fits this device's cap; lower B or H."


def one_length_caption(lengths: list[int]) -> str:
    return f"Only N = {lengths[0]:,} fits at this B·H."


def lengths_up_to(lengths: list[int], largest: int) -> list[int]:
    """The sweep's lengths no longer than the chosen largest N."""
    return [n for n in lengths if n <= largest]


def sweep_progress(i: int, n: int, num_lengths: int) -> str:
    return f"N = {n:,} ({i + 1} of {num_lengths})"


def sweep_heading(sweep: SweepResult) -> str:
    return f"**{sweep.label}** — N = {sweep.lengths[0]:,} … {sweep.lengths[-1]:,}"


def sweep_metrics(sweep: SweepResult, stat: str, matmul_n: int) -> list[Metric]:
    """FLASH over eager at the largest N (time by `stat`, peak memory), and the measured matmul ceiling."""
    out = []
    if (got := sweep.flash_vs_eager(stat)) is not None:
        out.append(Metric(f"FLASH vs eager time at N = {got.num_keys:,}", f"{got.time_ratio:,.1f}×"))
        out.append(Metric(f"Eager / FLASH peak memory at N = {got.num_keys:,}",
                          "n/a" if got.memory_ratio is None else f"{got.memory_ratio:,.0f}×"))
    out.append(Metric("Matmul ceiling (measured)", f"{sweep.ceiling_flops / 1e12:,.3g} TFLOP/s",
                      help=f"One {matmul_n:,}³ matmul in the same dtype and thread count: the rate attention's matmuls "
                           "could reach on this device."))
    return out


# --- the online softmax, stepped -------------------------------------------------------------------

def tile_metrics(trace: OnlineSoftmaxTrace, step: int, row: int) -> list[Metric]:
    cur, f = trace.steps[step - 1], fmt_num
    return [
        Metric(f"Tile {step} of {len(trace.steps)}", f"keys {cur.start}–{cur.stop - 1}"),
        Metric("Running max m", f"{f(float(cur.m_old[row]))} → {f(float(cur.m_new[row]))}"),
        Metric("Rescale e^(m_old − m_new)", f(float(cur.rescale[row]))),
        Metric("Running sum l", f"{f(float(cur.l_old[row]))} → {f(float(cur.l_new[row]))}"),
    ]


def tile_updates(trace: OnlineSoftmaxTrace, step: int, row: int) -> str:
    """The three updates of one tile for one row, with its numbers (Markdown)."""
    cur, f = trace.steps[step - 1], fmt_num
    return (
        f"#### Tile {step}: the three updates for row {row}\n"
        f"- **m** = max(m_old, max of this tile's scores) = max({f(float(cur.m_old[row]))}, "
        f"{f(float(cur.tile_max[row]))}) = **{f(float(cur.m_new[row]))}**\n"
        f"- **l** = e^(m_old − m)·l_old + Σ e^(s − m) = {f(float(cur.rescale[row]))} × {f(float(cur.l_old[row]))} + "
        f"{f(float(cur.p[row].sum()))} = **{f(float(cur.l_new[row]))}**\n"
        f"- **acc** = e^(m_old − m)·acc_old + Σ e^(s − m)·v; **acc / l** = "
        f"[{', '.join(f(float(x), 4) for x in cur.partial[row])}] — exactly attention over keys 0–{cur.stop - 1}"
    )


def final_outputs(trace: OnlineSoftmaxTrace, row: int) -> str:
    out = ", ".join(fmt_num(float(x), 6) for x in trace.output[row])
    ref = ", ".join(fmt_num(float(x), 6) for x in trace.reference[row])
    return f"**After the last tile:** tiled = [{out}]; softmax over all keys at once = [{ref}]."


def parity_metrics(trace: OnlineSoftmaxTrace, demo: SoftmaxDemo) -> list[Metric]:
    return [
        Metric("max |tiled − plain|", f"{trace.max_abs_diff:.2e}",
               help=f"all {demo.num_queries} rows, {demo.dtype}"),
        Metric("tiled vs float64 truth", f"{trace.tiled_error:.2e}"),
        Metric("plain vs float64 truth", f"{trace.plain_error:.2e}"),
    ]


def masked_tile_warning(demo: SoftmaxDemo, row: int) -> str | None:
    """When the first tile is fully masked: what the same kernel without the guard returns for `row`."""
    if demo.masked_prefix < demo.tile:
        return None
    unguarded = run_softmax_demo(demo, guard_masked=False)
    return (f"The first {demo.masked_prefix} keys are masked, so tile 1 is fully masked: its max is −∞ and "
            f"e^(s − m) = e^(−∞ − (−∞)) is nan. Without a guard — the seed's `tiled_softmax_dot` has none — row "
            f"{row}'s output would be [{', '.join(format(float(x), '.4g') for x in unguarded.output[row])}]. This "
            "stepper (like real kernels) shifts by 0 while the max is still −∞, so masked tiles add nothing.")


# --- bytes moved and held -------------------------------------------------------------------------

def shape_traffic(shape: AttentionShape, tile: int) -> Traffic:
    """The traffic model for `shape` with square tiles: `tile` rows of Q, and of K/V, per tile."""
    return hbm_traffic(shape.batch, shape.heads, shape.num_queries, shape.num_keys, shape.head_dim,
                       shape.elem_bytes, tile, tile, shape.is_causal)


def traffic_metrics(traffic: Traffic) -> list[Metric]:
    return [
        Metric("Standard: bytes moved", fmt_bytes(traffic.standard_bytes)),
        Metric("Tiled: bytes moved", fmt_bytes(traffic.tiled_bytes)),
        Metric("Standard / tiled", f"{traffic.standard_bytes / traffic.tiled_bytes:,.1f}×"),
        Metric("N² bytes standard holds", fmt_bytes(traffic.standard_held),
               help="S and P are each this big; tiled keeps one fp32 statistic per row instead: "
                    + fmt_bytes(traffic.tiled_held)),
    ]


def traffic_caption(shape: AttentionShape, tile: int) -> str:
    num_q_tiles = -(-shape.num_queries // tile)
    return (
        f"Standard: read Q and K, write S, read S, write P, read P and V, write O — four N_q×N_k passes. Tiled "
        f"(Q tiles outside, as in the seed's pseudo-code): Q read once, O written once, but K and V are read once "
        f"**per Q tile** ({num_q_tiles:,} Q tiles here{', only up to the diagonal' if shape.is_causal else ''}) — "
        "the seed's 'one HBM round trip per tile' hides that re-read. Bigger tiles re-read less; on a GPU the tile "
        "size is set by how much SRAM a block has. A model of traffic, not a measurement.")


def held_bytes_model(shape: AttentionShape, traffic: Traffic) -> dict[str, tuple[str, int]]:
    """impl -> (what it must hold, bytes) by the model: eager one N² matrix (S or P); FLASH its output O
    plus one fp32 statistic per query row."""
    return {"eager": ("one N² matrix (S or P)", traffic.standard_held),
            "flash": ("O + one fp32 statistic per row", traffic.tiled_held + shape.output_bytes)}


def memory_model_rows(result: TimingResult, traffic: Traffic) -> list[dict]:
    """Eager and FLASH (where they ran): the model's bytes next to the measured peak of `result`."""
    rows = []
    for impl, (what, model_bytes) in held_bytes_model(result.shape, traffic).items():
        r = next((x for x in result.rows if x.impl == impl), None)
        if r is not None and r.ok:
            rows.append({"Kernel": IMPL_LABELS[impl], "Model: what it must hold": what,
                         "Model bytes": fmt_bytes(model_bytes), "Measured peak": _bytes_or_na(r.peak_bytes)})
    return rows
