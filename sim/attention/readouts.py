"""What the Attention kernels page shows, built from results: tables (rows of column -> text),
metrics (dicts of label, value and optional help / delta, as `st.metric` takes them) and the
sentences that state numbers. Torch-free."""

from __future__ import annotations

import math

from sim.attention.implementations import ImplStatus
from sim.attention.online_softmax import OnlineSoftmaxTrace, SoftmaxDemo, Traffic, hbm_traffic, run_softmax_demo
from sim.attention.shapes import IMPL_LABELS, IMPL_SHORT, TOLERANCE, AttentionShape
from sim.attention.timing import SweepResult, TimingResult
from sim.cost.memory import fmt_bytes


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


def shape_metrics(shape: AttentionShape, eager_peak_bytes: int) -> list[dict]:
    """FLOPs, score entries, one N² matrix and eager's estimated peak (the memory guard's number)."""
    return [
        {"label": "FLOPs per call", "value": f"{shape.flops / 1e9:,.4f} GFLOP",
         "help": f"{shape.flops:,} = 4·B·H·N_q·N_k·d" + (", halved for the causal mask" if shape.is_causal else "")},
        {"label": "Score entries B·H·N_q·N_k", "value": f"{shape.score_elems:,}"},
        {"label": "One N² matrix (eager must hold)", "value": fmt_bytes(shape.score_bytes)},
        {"label": "Eager peak, estimated", "value": fmt_bytes(eager_peak_bytes),
         "help": "4 N² tensors (scores, scaled, masked, probabilities) + Q, K, V, O: the guard's estimate."},
    ]


def timing_metrics(result: TimingResult) -> list[dict]:
    """FLASH over eager (time, memory), the fastest kernel, and the largest difference from MATH."""
    ok_rows = [r for r in result.rows if r.ok]
    flash_ok = "flash" in [r.impl for r in ok_rows]
    best = max(ok_rows, key=lambda r: r.tflops)
    return [
        {"label": "FLASH vs eager, time", "value": fmt_ratio(result.speedup("flash")) if flash_ok else "n/a",
         "help": "median eager time / median FLASH time"},
        {"label": "Eager / FLASH peak memory", "value": fmt_ratio(result.memory_ratio("flash")) if flash_ok else "n/a"},
        {"label": "Fastest kernel", "value": IMPL_SHORT[best.impl], "delta": f"{best.stats.median_s * 1e3:,.3g} ms per call"},
        {"label": "Largest |Δ| vs MATH", "value": f"{max(r.max_abs_diff for r in ok_rows):.2e}",
         "help": f"Tolerance for {result.shape.dtype}: {TOLERANCE[result.shape.dtype]:.0e}"},
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

def sweep_metrics(sweep: SweepResult, stat: str, matmul_n: int) -> list[dict]:
    """FLASH over eager at the largest N (time by `stat`, peak memory), and the measured matmul ceiling."""
    out = []
    if (got := sweep.flash_vs_eager(stat)) is not None:
        out.append({"label": f"FLASH vs eager time at N = {got.num_keys:,}", "value": f"{got.time_ratio:,.1f}×"})
        out.append({"label": f"Eager / FLASH peak memory at N = {got.num_keys:,}",
                    "value": "n/a" if got.memory_ratio is None else f"{got.memory_ratio:,.0f}×"})
    out.append({"label": "Matmul ceiling (measured)", "value": f"{sweep.ceiling_flops / 1e12:,.3g} TFLOP/s",
                "help": f"One {matmul_n:,}³ matmul in the same dtype and thread count: the rate attention's matmuls "
                        "could reach on this device."})
    return out


# --- the online softmax, stepped -------------------------------------------------------------------

def tile_metrics(trace: OnlineSoftmaxTrace, step: int, row: int) -> list[dict]:
    cur, f = trace.steps[step - 1], fmt_num
    return [
        {"label": f"Tile {step} of {len(trace.steps)}", "value": f"keys {cur.start}–{cur.stop - 1}"},
        {"label": "Running max m", "value": f"{f(float(cur.m_old[row]))} → {f(float(cur.m_new[row]))}"},
        {"label": "Rescale e^(m_old − m_new)", "value": f(float(cur.rescale[row]))},
        {"label": "Running sum l", "value": f"{f(float(cur.l_old[row]))} → {f(float(cur.l_new[row]))}"},
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


def parity_metrics(trace: OnlineSoftmaxTrace, demo: SoftmaxDemo) -> list[dict]:
    return [
        {"label": "max |tiled − plain|", "value": f"{trace.max_abs_diff:.2e}",
         "help": f"all {demo.num_queries} rows, {demo.dtype}"},
        {"label": "tiled vs float64 truth", "value": f"{trace.tiled_error:.2e}"},
        {"label": "plain vs float64 truth", "value": f"{trace.plain_error:.2e}"},
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


def traffic_metrics(traffic: Traffic) -> list[dict]:
    return [
        {"label": "Standard: bytes moved", "value": fmt_bytes(traffic.standard_bytes)},
        {"label": "Tiled: bytes moved", "value": fmt_bytes(traffic.tiled_bytes)},
        {"label": "Standard / tiled", "value": f"{traffic.standard_bytes / traffic.tiled_bytes:,.1f}×"},
        {"label": "N² bytes standard holds", "value": fmt_bytes(traffic.standard_held),
         "help": "S and P are each this big; tiled keeps one fp32 statistic per row instead: "
                 + fmt_bytes(traffic.tiled_held)},
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
