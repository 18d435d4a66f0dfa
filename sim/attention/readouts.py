"""What the Attention kernels page shows, built from results: tables (rows of column -> text),
metrics (`sim.readout.Metric`s, drawn by `app.metrics.show_metrics`) and the
sentences that state numbers. Torch-free."""

from __future__ import annotations

import math

import numpy as np

from sim.attention.implementations import ImplStatus
from sim.attention.online_softmax import OnlineSoftmaxTrace, SoftmaxDemo, Traffic, hbm_traffic, run_softmax_demo
from sim.attention.shapes import IMPL_LABELS, IMPL_SHORT, TOLERANCE, AttentionShape
from sim.attention.timing import SweepResult, TimingResult
from sim.cost.memory import fmt_bytes
from sim.readout import Metric
from sim.readout import times as fmt_times


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


# --- chart titles: each chart's takeaway, worded from the result it draws ----------------------------

def fmt_ms(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def device_words(device: str) -> str:
    """'cpu' -> 'this CPU', 'cuda:0' -> 'this GPU', anything else by its name."""
    kind = device.split(":")[0]
    return {"cpu": "this CPU", "cuda": "this GPU"}.get(kind, f"this device ({device})")


def _faster(a_name: str, a_ms: float, b_name: str, b_ms: float, where: str, stat: str) -> str:
    """Which of two measured kernels ran faster, and by how much, without claiming a gap the numbers do not show."""
    times = f"{fmt_ms(a_ms)} vs {fmt_ms(b_ms)} ms per call ({stat})"
    r = b_ms / a_ms
    if f"{r:.1f}" == "1.0" and f"{1 / r:.1f}" == "1.0":
        return f"{a_name} and {b_name} took about as long {where}: {times}"
    if r > 1:
        return f"{a_name} ran {fmt_times(r)} faster than {b_name} {where}: {times}"
    return f"{a_name} ran {fmt_times(1 / r)} slower than {b_name} {where}: {times}"


def timing_takeaway(result: TimingResult, stat: str = "median") -> str:
    """The one-shape chart's title: the fastest kernel other than eager against eager, time and peak memory,
    as measured by this run on this device."""
    ok_rows = [r for r in result.rows if r.ok]
    where = f"at N = {result.shape.num_keys:,} on {device_words(result.device)}"
    eager = next((r for r in ok_rows if r.impl == "eager"), None)
    others = [r for r in ok_rows if r.impl != "eager"]
    if eager is None or not others:
        best = min(ok_rows, key=lambda r: r.stats.of(stat))
        return (f"{IMPL_SHORT[best.impl]} was the fastest kernel that ran {where}: "
                f"{fmt_ms(best.stats.of(stat) * 1e3)} ms per call ({stat})")
    best = min(others, key=lambda r: r.stats.of(stat))
    e_ms, b_ms = eager.stats.of(stat) * 1e3, best.stats.of(stat) * 1e3
    name = IMPL_SHORT[best.impl]
    if b_ms <= e_ms:
        said = _faster(name, b_ms, "eager", e_ms, where, stat)
    else:
        said = _faster("Eager", e_ms, f"{name}, the fastest other kernel,", b_ms, where, stat)
    if eager.peak_bytes is None or not best.peak_bytes:
        return said
    m = eager.peak_bytes / best.peak_bytes
    if f"{m:.1f}" == "1.0" and f"{1 / m:.1f}" == "1.0":
        return f"{said}; both peaked at about {fmt_bytes(best.peak_bytes)}"
    if m > 1:
        return f"{said}; eager's peak memory, {fmt_bytes(eager.peak_bytes)}, was {fmt_times(m)} {name}'s"
    return f"{said}; {name}'s peak memory, {fmt_bytes(best.peak_bytes)}, was {fmt_times(1 / m)} eager's"


def _ms_at(result: TimingResult, impl: str, stat: str) -> float | None:
    r = next((x for x in result.rows if x.impl == impl), None)
    return r.stats.of(stat) * 1e3 if r is not None and r.ok else None


def _versus(sweep: SweepResult) -> str | None:
    """The kernel the sweep's titles hold against eager: FLASH where it ran at the largest N, else the
    first other kernel that did."""
    ran = [r.impl for r in sweep.results[-1].rows if r.ok and r.impl != "eager"]
    return "flash" if "flash" in ran else (ran[0] if ran else None)


def sweep_time_takeaway(sweep: SweepResult, stat: str = "median") -> str:
    """The time-vs-N chart's title: how much eager's and the other kernel's time grew over the sweep."""
    first, last = sweep.results[0], sweep.results[-1]
    n0, n1 = first.shape.num_keys, last.shape.num_keys
    other = _versus(sweep)
    e0, e1 = _ms_at(first, "eager", stat), _ms_at(last, "eager", stat)
    if other is None or e0 is None or e1 is None:
        return f"Time per call vs N, {n0:,} … {n1:,} ({stat})"
    name = IMPL_SHORT[other]
    o0, o1 = _ms_at(first, other, stat), _ms_at(last, other, stat)
    if n0 == n1 or o0 is None:
        return _faster(name, o1, "eager", e1, f"at N = {n1:,} on {device_words(last.device)}", stat) \
            if o1 <= e1 else _faster("Eager", e1, name, o1, f"at N = {n1:,} on {device_words(last.device)}", stat)
    ge, go = e1 / e0, o1 / o0
    shown_e, shown_o = fmt_times(ge), fmt_times(go)
    cmp = "more than" if ge > go and shown_e != shown_o else "less than" if ge < go and shown_e != shown_o else \
        "as much as"
    return (f"From N = {n0:,} to {n1:,} ({n1 / n0:,.0f}× longer), eager's time per call grew {shown_e}, {cmp} "
            f"{name}'s {shown_o} ({stat})")


def sweep_memory_takeaway(sweep: SweepResult) -> str:
    """The memory-vs-N chart's title: eager's measured peak against the other kernel's at the largest N."""
    last = sweep.results[-1]
    n, other = last.shape.num_keys, _versus(sweep)
    eager = next((r for r in last.rows if r.impl == "eager"), None)
    if other is None or eager is None or not eager.ok or eager.peak_bytes is None or not last.row(other).peak_bytes:
        return f"Peak memory during one call vs N, up to N = {n:,}"
    name, o = IMPL_SHORT[other], last.row(other).peak_bytes
    e = eager.peak_bytes
    m = e / o
    if f"{m:.1f}" == "1.0" and f"{1 / m:.1f}" == "1.0":
        return f"At N = {n:,}, eager and {name} both peaked at about {fmt_bytes(o)} during one call"
    if m > 1:
        return f"At N = {n:,}, eager's peak memory was {fmt_bytes(e)}, {fmt_times(m)} {name}'s {fmt_bytes(o)}"
    return f"At N = {n:,}, {name}'s peak memory was {fmt_bytes(o)}, {fmt_times(1 / m)} eager's {fmt_bytes(e)}"


def sweep_speedup_takeaway(sweep: SweepResult, stat: str = "median") -> str:
    """The speedup chart's title: at the largest N, the kernel with the best time against eager."""
    last = sweep.results[-1]
    n, where = last.shape.num_keys, device_words(last.device)
    ratios = {r.impl: last.speedup(r.impl, stat=stat) for r in last.rows if r.ok and r.impl != "eager"}
    ratios = {k: v for k, v in ratios.items() if v is not None}
    if not ratios:
        return f"Speedup over eager at N = {n:,}: eager or every other kernel did not run"
    best = max(ratios, key=ratios.get)
    r, name = ratios[best], IMPL_SHORT[best]
    if f"{r:.1f}" == "1.0" and f"{1 / r:.1f}" == "1.0":
        return f"At N = {n:,} on {where}, no kernel beat eager clearly: the fastest, {name}, was about as fast ({stat})"
    if r > 1:
        return f"At N = {n:,} on {where}, {name} ran {fmt_times(r)} faster than eager, the most of any kernel ({stat})"
    return (f"At N = {n:,} on {where}, every kernel ran slower than eager: the closest, {name}, took "
            f"{fmt_times(1 / r)} as long ({stat})")


def sweep_tflops_takeaway(sweep: SweepResult, stat: str, ceiling_label: str) -> str:
    """The TFLOP/s chart's title: the best rate at the largest N against the measured matmul ceiling."""
    last = sweep.results[-1]
    n = last.shape.num_keys
    rates = {r.impl: r.flops / r.stats.of(stat) / 1e12 for r in last.rows if r.ok}
    best = max(rates, key=rates.get)
    t, c = rates[best], sweep.ceiling_flops / 1e12
    said = f"At N = {n:,}, {IMPL_SHORT[best]} reached the highest rate, {t:,.3g} TFLOP/s ({stat})"
    if c <= 0:
        return said
    if t <= c:
        return f"{said}: {t / c:.0%} of the {c:,.3g} TFLOP/s of one {ceiling_label}"
    return f"{said}: {fmt_times(t / c)} the {c:,.3g} TFLOP/s of one {ceiling_label}"


def sweep_intro(lengths: list[int]) -> str:
    """Markdown above the sweep: what it times, N from the sweep's own lengths."""
    start = f"N doubling from {lengths[0]:,} to {lengths[-1]:,}" if len(lengths) > 1 else f"N = {lengths[0]:,}"
    return (f"The same B, H, d, mask and dtype as above, {start} — eager, MATH and FLASH (and the other SDPA backends "
            "where they run). FlexAttention is left out: every N would compile again.")


def _growth(sweep: SweepResult, impl: str, value) -> float | None:
    """The exponent k of value ∝ N^k between the sweep's first and last N (None when not measured at both)."""
    first, last = sweep.results[0], sweep.results[-1]
    a, b = (next((x for x in r.rows if x.impl == impl), None) for r in (first, last))
    if a is None or b is None or not (a.ok and b.ok):
        return None
    va, vb = value(a), value(b)
    if not va or not vb or first.shape.num_keys == last.shape.num_keys:
        return None
    return math.log(vb / va) / math.log(last.shape.num_keys / first.shape.num_keys)


def sweep_caption(sweep: SweepResult, stat: str = "median") -> str:
    """Under the sweep: how each kernel's time and peak memory grew with N, measured (N² work means an
    exponent of 2), and what shares the machine."""
    first, last = sweep.results[0].shape.num_keys, sweep.results[-1].shape.num_keys
    if first == last:
        return "One N only: nothing to say about growth. Timings share the machine with whatever else runs on it."
    parts = []
    for impl in ("eager", "math", "flash"):
        t = _growth(sweep, impl, lambda r: r.stats.of(stat))
        m = _growth(sweep, impl, lambda r: r.peak_bytes)
        if t is None:
            continue
        mem = "" if m is None else f", peak memory as N^{m:.2f}"
        parts.append(f"{IMPL_SHORT[impl]}'s time grew as N^{t:.2f}{mem}")
    growth = "; ".join(parts) if parts else "no kernel ran at both ends"
    return (f"From N = {first:,} to {last:,}, measured ({stat}): {growth}. N² work or memory means an exponent of 2, "
            "N means 1. FLASH's peak is its output plus a working buffer per thread, so it also depends on the thread "
            f"count. Timings share {device_words(sweep.results[-1].device)} with whatever else runs on it, which is "
            "why small N can look erratic.")


def stepper_takeaway(trace: OnlineSoftmaxTrace, row: int, step: int) -> str:
    """The stepper chart's title: what this tile did to the running max of one query row."""
    cur, n = trace.steps[step - 1], len(trace.steps)
    m_old, m_new, tmax = float(cur.m_old[row]), float(cur.m_new[row]), float(cur.tile_max[row])
    head = f"Row {row}, tile {step} of {n} (keys {cur.start}–{cur.stop - 1})"
    if not math.isfinite(tmax):
        return f"{head} is fully masked: the running max stays {fmt_num(m_old)} and nothing is added"
    if not math.isfinite(m_old):
        return f"{head} sets the running max to {fmt_num(m_new)}: nothing was seen before, so nothing is rescaled"
    if m_new > m_old:
        return (f"{head} raises the running max from {fmt_num(m_old)} to {fmt_num(m_new)}, so l and acc shrink by "
                f"α = {fmt_num(float(cur.rescale[row]))}")
    return (f"{head} leaves the running max at {fmt_num(m_new)} (its own max is {fmt_num(tmax)}), so nothing is "
            "rescaled (α = 1)")


def trace_table_takeaway(trace: OnlineSoftmaxTrace, row: int) -> str:
    """The tile table's title: how many tiles raised the running max of one row, and how close the final
    acc / l came to the softmax over all keys at once."""
    steps = trace.steps
    seen = next((i for i, t in enumerate(steps) if math.isfinite(float(t.m_new[row]))), None)
    diff = float(np.max(np.abs(trace.output[row].astype(np.float64) - trace.reference[row].astype(np.float64))))
    if seen is None or math.isnan(diff):
        return f"Row {row}: every key is masked, so the output is undefined"
    if diff == 0:
        end = "the final acc / l equals the softmax over all keys exactly"
    else:
        end = f"the final acc / l is within {diff:.1e} of the softmax over all keys"
    later = steps[seen + 1:]
    if len(steps) == 1:
        return f"Row {row}: one tile holds every key, so nothing is rescaled; {end}"
    first = "the first" if seen == 0 else f"tile {seen + 1}, the first with an unmasked key"
    if not later:
        return f"Row {row}: no tile comes after {first}, so nothing is rescaled; {end}"
    raised = sum(1 for t in later if float(t.m_new[row]) > float(t.m_old[row]))
    if raised == 0:
        return f"Row {row}: none of the {len(later)} tiles after {first} raised the running max, so nothing was rescaled; {end}"
    return (f"Row {row}: {raised} of the {len(later)} tiles after {first} raised the running max, each rescaling l and "
            f"acc; {end}")


def parity_caption(trace: OnlineSoftmaxTrace, demo: SoftmaxDemo) -> str:
    """Under the parity metrics: how far apart tiled and plain came out here, and which is nearer the float64 truth."""
    d, te, pe = trace.max_abs_diff, trace.tiled_error, trace.plain_error
    why = ("Both compute Σ e^(s−m)·v / Σ e^(s−m); the tiled one adds the terms tile by tile and rounds once more at "
           "every rescale. Floating-point addition is not associative ((a+b)+c and a+(b+c) can differ in the last bit).")
    if d == 0:
        here = (f"Here, in {demo.dtype}, the two came out bit-for-bit identical: this input's rounding happened to "
                "agree, which the order of the additions does not promise in general.")
        verdict = "The seed's 'bitwise identical' holds for this input only; its 'exact' is right."
    else:
        here = f"Here, in {demo.dtype}, they differ by at most {d:.1e}."
        verdict = "The seed's 'bitwise identical' overstates it; its 'exact' is right."
    if te < pe:
        near = f"The tiled result is nearer the float64 truth ({te:.1e} vs {pe:.1e} for the plain one)."
    elif pe < te:
        near = f"The plain result is nearer the float64 truth ({pe:.1e} vs {te:.1e} for the tiled one)."
    else:
        near = f"Both are {te:.1e} from the float64 truth."
    return f"Exact, not approximate — but not bit-for-bit. {why} {here} {near} {verdict}"


def traffic_takeaway(traffic: Traffic, label: str) -> str:
    """The bytes-moved chart's title: standard against tiled, by the traffic model, for the shape `label`."""
    s, t = traffic.standard_bytes, traffic.tiled_bytes
    if s > t:
        return (f"{label}: standard attention moves {fmt_bytes(s)} to and from main memory, {fmt_times(s / t)} the "
                f"tiled kernel's {fmt_bytes(t)}")
    if t > s:
        return (f"{label}: the tiled kernel moves {fmt_bytes(t)} to and from main memory, {fmt_times(t / s)} standard "
                f"attention's {fmt_bytes(s)} (it re-reads K and V for every Q tile)")
    return f"{label}: standard attention and the tiled kernel both move {fmt_bytes(s)} to and from main memory"


def time_hint(num_kernels: int, budget_s: float) -> str:
    """Before the first timing: what pressing the button costs, from the timing budget."""
    return (f"Press **Time these kernels** to run them live: {num_kernels} kernel(s), each timed for about "
            f"{budget_s:g} s after one profiled call, so about {num_kernels * budget_s:,.1f} s plus warm-up when the "
            "machine is idle, more when it is busy.")


def timing_caption(result: TimingResult) -> str:
    """Under the timing chart: how peak memory and time were measured, and what disturbs them here."""
    cpu = result.device.split(":")[0] == "cpu"
    noise = (f"Other work on this machine adds noise; this run used {result.num_threads} thread(s), and on a busy CPU "
             "fewer threads can be faster." if cpu else "Other work on this GPU adds noise.")
    return (f"Peak memory: {result.memory_method}. Timing: `torch.utils.benchmark` blocks after a warm-up call; the "
            f"spread is the 25th–75th percentile of the blocks. {noise} TFLOP/s counts only the two matmuls.")


def held_caption(result: TimingResult, traffic: Traffic) -> str:
    """Under the model-vs-measured table: each measured peak as a multiple of what the model says it must hold."""
    parts = []
    for impl, (what, model_bytes) in held_bytes_model(result.shape, traffic).items():
        r = next((x for x in result.rows if x.impl == impl), None)
        if r is None or not r.ok or r.peak_bytes is None or not model_bytes:
            continue
        parts.append(f"{IMPL_SHORT[impl]}'s measured peak is {r.peak_bytes / model_bytes:,.1f}× {what} "
                     f"({fmt_bytes(r.peak_bytes)} vs {fmt_bytes(model_bytes)})")
    said = "; ".join(parts) + "." if parts else ""
    said = said[:1].upper() + said[1:]
    return (f"{said} Eager holds several N² tensors at once (scores, their scaled and masked copies, probabilities); "
            "FLASH holds the output plus working buffers per thread, none of them N².").strip()
