"""The Attention kernels page's results in words (moved here from sim/attention/readouts.py): tables (rows of
column -> text), metrics (`sim.readout.Metric`s, drawn by `app.metrics.show_metrics`), the timing records with
each kernel's reason worded, and the sentences that state numbers. Torch-free. Every function that words text
takes `lang` ("en" by default) and builds it from the catalog (assets/i18n/<lang>/attention_kernels.json)."""

from __future__ import annotations

import math

import numpy as np

from sim.attention.implementations import ImplStatus
from sim.attention.online_softmax import OnlineSoftmaxTrace, SoftmaxDemo, Traffic, hbm_traffic, run_softmax_demo
from sim.attention.shapes import IMPL_LABELS, IMPL_SHORT, TOLERANCE, AttentionShape
from sim.attention.timing import SweepResult, TimingResult
from sim.cost.memory import fmt_bytes
from sim.msg import Msg
from sim.readout import Metric
from sim.readout import times as fmt_times
from sim.words import catalog, say, text


def _t(lang: str, key: str, /, **fields: object) -> str:
    return text(lang, f"kernels.{key}", **fields)


def fmt_ratio(x: float | None, lang: str = "en") -> str:
    return _t(lang, "na") if x is None else f"{x:,.1f}×"


def fmt_num(x: float | None, digits: int = 4) -> str:
    """Numbers for the stepper: -inf as −∞, nan as —, else `digits` significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    return f"{x:.{digits}g}"


def _bytes_or_na(n: int | None, lang: str = "en") -> str:
    return _t(lang, "na") if n is None else fmt_bytes(n)


# --- names: kernels, shapes, statistics, devices ---------------------------------------------------

def impl_label(impl: str, lang: str = "en") -> str:
    """An implementation's long name: the catalog's where it has words (eager, FlexAttention), else the backend."""
    key = f"kernels.impl.{impl}"
    return text(lang, key) if key in catalog(lang) else IMPL_LABELS[impl]


def stat_word(stat: str, lang: str = "en") -> str:
    """'median' / 'fastest block' (measure.STATS keys, the URL values) in the page language."""
    return _t(lang, "stat." + stat.replace(" ", "_"))


def _mask_word(shape: AttentionShape, lang: str) -> str:
    return _t(lang, "shape.causal" if shape.is_causal else "shape.no_mask")


def shape_label(shape: AttentionShape, lang: str = "en") -> str:
    """AttentionShape.label() in `lang`: 'B=1, H=4, 1,024 queries × 1,024 keys, d=32, causal, float32'."""
    q = f"{shape.num_queries:,}" if shape.kind == "prefill" else "1"
    return _t(lang, "shape.label", b=f"{shape.batch}", h=f"{shape.heads}", q=q, k=f"{shape.num_keys:,}",
              d=f"{shape.head_dim}", mask=_mask_word(shape, lang), dtype=shape.dtype)


def sweep_label(shape: AttentionShape, lang: str = "en") -> str:
    """AttentionShape.sweep_label() in `lang`: the label with N left open."""
    key = "shape.sweep_prefill" if shape.kind == "prefill" else "shape.sweep_decode"
    return _t(lang, key, b=f"{shape.batch}", h=f"{shape.heads}", d=f"{shape.head_dim}",
              mask=_mask_word(shape, lang), dtype=shape.dtype)


def device_words(device: str, lang: str = "en") -> str:
    """'cpu' -> 'this CPU', 'cuda:0' -> 'this GPU', anything else by its name."""
    kind = device.split(":")[0]
    return _t(lang, f"device.{kind}") if kind in ("cpu", "cuda") else _t(lang, "device.other", device=device)


# --- which kernels run, one shape, one timing ---------------------------------------------------

def reason_text(reason, lang: str = "en") -> str:
    """Why a kernel does not run, in `lang`: the lab's own reasons are message values; torch's messages as torch
    wrote them (sim.model.device's probes give Msg("home.why.cpu_only") for a CUDA-only backend on a CPU)."""
    return say(lang, reason) if isinstance(reason, Msg) else reason


def status_rows(statuses: list[ImplStatus], lang: str = "en") -> list[dict]:
    col = {k: _t(lang, f"col.{k}") for k in ("impl", "runs", "why_not")}
    return [{col["impl"]: impl_label(s.impl, lang), col["runs"]: _t(lang, "yes" if s.runs else "no"),
             col["why_not"]: reason_text(s.reason, lang)} for s in statuses]


def backends_caption(device: str, flex_timeout_s: int, lang: str = "en") -> str:
    """How the table of kernels that run here was found."""
    return _t(lang, "s.backends", device=device, timeout=f"{flex_timeout_s}")


def shape_metrics(shape: AttentionShape, eager_peak_bytes: int, lang: str = "en") -> list[Metric]:
    """FLOPs, score entries, one N² matrix and eager's estimated peak (the memory guard's number)."""
    return [
        Metric(_t(lang, "m.flops"), f"{shape.flops / 1e9:,.4f} GFLOP",
               help=_t(lang, "m.flops_help", n=f"{shape.flops:,}") + (_t(lang, "m.flops_halved") if shape.is_causal
                                                                        else "")),
        Metric(_t(lang, "m.entries"), f"{shape.score_elems:,}"),
        Metric(_t(lang, "m.n2"), fmt_bytes(shape.score_bytes)),
        Metric(_t(lang, "m.eager_peak"), fmt_bytes(eager_peak_bytes), help=_t(lang, "m.eager_peak_help")),
    ]


def timing_metrics(result: TimingResult, lang: str = "en") -> list[Metric]:
    """FLASH over eager (time, memory), the fastest kernel, and the largest difference from MATH."""
    ok_rows = [r for r in result.rows if r.ok]
    flash_ok = "flash" in [r.impl for r in ok_rows]
    best = max(ok_rows, key=lambda r: r.tflops)
    na = _t(lang, "na")
    return [
        Metric(_t(lang, "m.flash_time"), fmt_ratio(result.speedup("flash"), lang) if flash_ok else na,
               help=_t(lang, "m.flash_time_help")),
        Metric(_t(lang, "m.flash_memory"), fmt_ratio(result.memory_ratio("flash"), lang) if flash_ok else na),
        Metric(_t(lang, "m.fastest"), IMPL_SHORT[best.impl],
               delta=_t(lang, "m.per_call", ms=f"{best.stats.median_s * 1e3:,.3g}")),
        Metric(_t(lang, "m.max_diff"), f"{max(r.max_abs_diff for r in ok_rows):.2e}",
               help=_t(lang, "m.tolerance", dtype=result.shape.dtype, tol=f"{TOLERANCE[result.shape.dtype]:.0e}")),
    ]


def _status(r, lang: str) -> str:
    if r.ok:
        return _t(lang, "status.ok")
    if r.status == "unavailable":
        return _t(lang, "status.unavailable")
    return _t(lang, "status.other", status=_t(lang, "status." + r.status.replace(" ", "_")),
              reason=reason_text(r.reason, lang))


def timing_rows(result: TimingResult, lang: str = "en") -> list[dict]:
    """One row per kernel: time, spread, rate, ratio to eager, peak memory, difference from MATH, status."""
    with_flex = any(x.impl == "flex" for x in result.rows)
    col = {k: _t(lang, f"col.{k}") for k in ("kernel", "median", "spread", "tflops", "vs_eager", "peak", "diff",
                                             "status", "compile")}
    rows = []
    for r in result.rows:
        s = r.stats
        speedup = result.speedup(r.impl)
        row = {
            col["kernel"]: IMPL_SHORT[r.impl],
            col["median"]: f"{s.median_s * 1e3:.4g}" if s else "—",
            col["spread"]: f"{s.p25_s * 1e3:.3g}–{s.p75_s * 1e3:.3g}" if s else "",
            col["tflops"]: f"{r.tflops:.3g}" if s else "",
            col["vs_eager"]: f"{speedup:.2f}" if speedup else "",
            col["peak"]: _bytes_or_na(r.peak_bytes, lang) if r.ok else "",
            col["diff"]: (_t(lang, "reference") if r.impl == "math" else f"{r.max_abs_diff:.2e}") if r.ok else "",
            col["status"]: _status(r, lang),
        }
        if with_flex:
            row[col["compile"]] = f"{r.compile_s:.1f}" if r.compile_s is not None else ""
        rows.append(row)
    return rows


def timing_heading(result: TimingResult, measured_at: str, lang: str = "en") -> str:
    """Markdown: the shape timed, when, where and with how many threads."""
    return _t(lang, "s.timing_heading", shape=shape_label(result.shape, lang), at=measured_at, device=result.device,
              threads=f"{result.num_threads}")


def stale_timing_note(result: TimingResult, shape: AttentionShape | None, lang: str = "en") -> str | None:
    """When the last timing is of another shape than the form's: which shape the numbers are for."""
    if shape is None or result.shape == shape:
        return None
    return _t(lang, "s.stale", shape=shape_label(result.shape, lang))


def flex_note(result: TimingResult, lang: str = "en") -> tuple[bool, str] | None:
    """(FlexAttention gave a timing, the sentence about it), or None when it was not asked for."""
    flex = next((r for r in result.rows if r.impl == "flex"), None)
    if flex is None:
        return None
    if flex.ok:
        return True, _t(lang, "s.flex_ok", compile=f"{flex.compile_s:,.1f}", ms=f"{flex.stats.median_s * 1e3:,.3g}")
    return False, _t(lang, "s.flex_failed", status=_t(lang, "status." + flex.status.replace(" ", "_")),
                     reason=reason_text(flex.reason, lang))


# --- sweep over N --------------------------------------------------------------------------------

def no_sweep_warning(shape: AttentionShape, lang: str = "en") -> str:
    """Not even the sweep's first N fits this device's cap at the shape's B·H."""
    return _t(lang, "s.no_sweep", bh=f"{shape.batch * shape.heads}")


def one_length_caption(lengths: list[int], lang: str = "en") -> str:
    return _t(lang, "s.one_length", n=f"{lengths[0]:,}")


def progress_text(impl: str, waited_s: float | None = None, lang: str = "en") -> str:
    """What a timing is doing now (sim.attention.timing.time_attention's on_progress): 'Timing math…', or how long
    FlexAttention has been compiling."""
    if waited_s is None:
        return _t(lang, "s.timing_impl", impl=impl)
    return _t(lang, "s.timing_flex_wait", s=f"{waited_s:.0f}")


def lengths_up_to(lengths: list[int], largest: int) -> list[int]:
    """The sweep's lengths no longer than the chosen largest N."""
    return [n for n in lengths if n <= largest]


def sweep_progress(i: int, n: int, num_lengths: int, lang: str = "en") -> str:
    return _t(lang, "s.sweep_progress", n=f"{n:,}", i=f"{i + 1}", total=f"{num_lengths}")


def sweep_heading(sweep: SweepResult, lang: str = "en") -> str:
    return _t(lang, "s.sweep_heading", label=sweep_label(sweep.results[0].shape, lang), lo=f"{sweep.lengths[0]:,}",
              hi=f"{sweep.lengths[-1]:,}")


def sweep_metrics(sweep: SweepResult, stat: str, matmul_n: int, lang: str = "en") -> list[Metric]:
    """FLASH over eager at the largest N (time by `stat`, peak memory), and the measured matmul ceiling."""
    out = []
    if (got := sweep.flash_vs_eager(stat)) is not None:
        n = f"{got.num_keys:,}"
        out.append(Metric(_t(lang, "m.sweep_time", n=n), f"{got.time_ratio:,.1f}×"))
        out.append(Metric(_t(lang, "m.sweep_memory", n=n),
                          _t(lang, "na") if got.memory_ratio is None else f"{got.memory_ratio:,.0f}×"))
    out.append(Metric(_t(lang, "m.ceiling"), f"{sweep.ceiling_flops / 1e12:,.3g} TFLOP/s",
                      help=_t(lang, "m.ceiling_help", n=f"{matmul_n:,}")))
    return out


# --- the online softmax, stepped -------------------------------------------------------------------

def tile_metrics(trace: OnlineSoftmaxTrace, step: int, row: int, lang: str = "en") -> list[Metric]:
    cur, f = trace.steps[step - 1], fmt_num
    return [
        Metric(_t(lang, "m.tile", step=f"{step}", n=f"{len(trace.steps)}"),
               _t(lang, "m.keys", a=f"{cur.start}", b=f"{cur.stop - 1}")),
        Metric(_t(lang, "m.running_max"), f"{f(float(cur.m_old[row]))} → {f(float(cur.m_new[row]))}"),
        Metric(_t(lang, "m.rescale"), f(float(cur.rescale[row]))),
        Metric(_t(lang, "m.running_sum"), f"{f(float(cur.l_old[row]))} → {f(float(cur.l_new[row]))}"),
    ]


def tile_updates(trace: OnlineSoftmaxTrace, step: int, row: int, lang: str = "en") -> str:
    """The three updates of one tile for one row, with its numbers (Markdown)."""
    cur, f = trace.steps[step - 1], fmt_num
    return _t(lang, "s.tile_updates", step=f"{step}", row=f"{row}", m_old=f(float(cur.m_old[row])),
              tile_max=f(float(cur.tile_max[row])), m_new=f(float(cur.m_new[row])), alpha=f(float(cur.rescale[row])),
              l_old=f(float(cur.l_old[row])), p=f(float(cur.p[row].sum())), l_new=f(float(cur.l_new[row])),
              partial=", ".join(f(float(x), 4) for x in cur.partial[row]), last=f"{cur.stop - 1}")


def final_outputs(trace: OnlineSoftmaxTrace, row: int, lang: str = "en") -> str:
    out = ", ".join(fmt_num(float(x), 6) for x in trace.output[row])
    ref = ", ".join(fmt_num(float(x), 6) for x in trace.reference[row])
    return _t(lang, "s.final", out=out, ref=ref)


def parity_metrics(trace: OnlineSoftmaxTrace, demo: SoftmaxDemo, lang: str = "en") -> list[Metric]:
    return [
        Metric(_t(lang, "m.tiled_plain"), f"{trace.max_abs_diff:.2e}",
               help=_t(lang, "m.tiled_plain_help", n=f"{demo.num_queries}", dtype=demo.dtype)),
        Metric(_t(lang, "m.tiled_truth"), f"{trace.tiled_error:.2e}"),
        Metric(_t(lang, "m.plain_truth"), f"{trace.plain_error:.2e}"),
    ]


def masked_tile_warning(demo: SoftmaxDemo, row: int, lang: str = "en") -> str | None:
    """When the first tile is fully masked: what the same kernel without the guard returns for `row`."""
    if demo.masked_prefix < demo.tile:
        return None
    unguarded = run_softmax_demo(demo, guard_masked=False)
    return _t(lang, "s.masked_tile", n=f"{demo.masked_prefix}", row=f"{row}",
              out=", ".join(format(float(x), ".4g") for x in unguarded.output[row]))


# --- bytes moved and held -------------------------------------------------------------------------

def shape_traffic(shape: AttentionShape, tile: int) -> Traffic:
    """The traffic model for `shape` with square tiles: `tile` rows of Q, and of K/V, per tile."""
    return hbm_traffic(shape.batch, shape.heads, shape.num_queries, shape.num_keys, shape.head_dim,
                       shape.elem_bytes, tile, tile, shape.is_causal)


def traffic_metrics(traffic: Traffic, lang: str = "en") -> list[Metric]:
    return [
        Metric(_t(lang, "m.standard_moved"), fmt_bytes(traffic.standard_bytes)),
        Metric(_t(lang, "m.tiled_moved"), fmt_bytes(traffic.tiled_bytes)),
        Metric(_t(lang, "m.standard_tiled"), f"{traffic.standard_bytes / traffic.tiled_bytes:,.1f}×"),
        Metric(_t(lang, "m.held"), fmt_bytes(traffic.standard_held),
               help=_t(lang, "m.held_help", tiled=fmt_bytes(traffic.tiled_held))),
    ]


def traffic_caption(shape: AttentionShape, tile: int, lang: str = "en") -> str:
    num_q_tiles = -(-shape.num_queries // tile)
    return _t(lang, "s.traffic_caption", tiles=f"{num_q_tiles:,}",
              diagonal=_t(lang, "s.traffic_diagonal") if shape.is_causal else "")


def held_bytes_model(shape: AttentionShape, traffic: Traffic, lang: str = "en") -> dict[str, tuple[str, int]]:
    """impl -> (what it must hold, bytes) by the model: eager one N² matrix (S or P); FLASH its output O
    plus one fp32 statistic per query row."""
    return {"eager": (_t(lang, "held.eager"), traffic.standard_held),
            "flash": (_t(lang, "held.flash"), traffic.tiled_held + shape.output_bytes)}


def memory_model_rows(result: TimingResult, traffic: Traffic, lang: str = "en") -> list[dict]:
    """Eager and FLASH (where they ran): the model's bytes next to the measured peak of `result`."""
    col = {k: _t(lang, f"col.{k}") for k in ("kernel", "model_what", "model_bytes", "measured_peak")}
    rows = []
    for impl, (what, model_bytes) in held_bytes_model(result.shape, traffic, lang).items():
        r = next((x for x in result.rows if x.impl == impl), None)
        if r is not None and r.ok:
            rows.append({col["kernel"]: impl_label(impl, lang), col["model_what"]: what,
                         col["model_bytes"]: fmt_bytes(model_bytes),
                         col["measured_peak"]: _bytes_or_na(r.peak_bytes, lang)})
    return rows


# --- chart titles: each chart's takeaway, worded from the result it draws ----------------------------

def fmt_ms(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def _reads_even(ratio: float) -> bool:
    """A ratio that shows as 1.0× whichever way round it is read (one decimal): no gap worth a sentence."""
    return f"{ratio:.1f}" == "1.0" and f"{1 / ratio:.1f}" == "1.0"

def _faster(a_name: str, a_ms: float, b_name: str, b_ms: float, where: str, stat: str, lang: str = "en") -> str:
    """Which of two measured kernels ran faster, and by how much, without claiming a gap the numbers do not show."""
    fields = {"a": a_name, "b": b_name, "where": where,
              "times": _t(lang, "s.times", a=fmt_ms(a_ms), b=fmt_ms(b_ms), stat=stat_word(stat, lang))}
    r = b_ms / a_ms
    if _reads_even(r):
        return _t(lang, "s.faster.same", **fields)
    if r > 1:
        return _t(lang, "s.faster.faster", x=fmt_times(r), **fields)
    return _t(lang, "s.faster.slower", x=fmt_times(1 / r), **fields)


def timing_takeaway(result: TimingResult, stat: str = "median", lang: str = "en") -> str:
    """The one-shape chart's title: the fastest kernel other than eager against eager, time and peak memory,
    as measured by this run on this device."""
    ok_rows = [r for r in result.rows if r.ok]
    where = _t(lang, "s.where", n=f"{result.shape.num_keys:,}", device=device_words(result.device, lang))
    eager = next((r for r in ok_rows if r.impl == "eager"), None)
    others = [r for r in ok_rows if r.impl != "eager"]
    if eager is None or not others:
        best = min(ok_rows, key=lambda r: r.stats.of(stat))
        return _t(lang, "s.timing.only", name=IMPL_SHORT[best.impl], where=where,
                  ms=fmt_ms(best.stats.of(stat) * 1e3), stat=stat_word(stat, lang))
    best = min(others, key=lambda r: r.stats.of(stat))
    e_ms, b_ms = eager.stats.of(stat) * 1e3, best.stats.of(stat) * 1e3
    name = IMPL_SHORT[best.impl]
    if b_ms <= e_ms:
        said = _faster(name, b_ms, _t(lang, "eager"), e_ms, where, stat, lang)
    else:
        said = _faster(_t(lang, "eager_cap"), e_ms, _t(lang, "s.fastest_other", name=name), b_ms, where, stat, lang)
    if eager.peak_bytes is None or not best.peak_bytes:
        return said
    m = eager.peak_bytes / best.peak_bytes
    if _reads_even(m):
        return _t(lang, "s.timing.peak_same", said=said, peak=fmt_bytes(best.peak_bytes))
    if m > 1:
        return _t(lang, "s.timing.peak_eager", said=said, peak=fmt_bytes(eager.peak_bytes), x=fmt_times(m), name=name)
    return _t(lang, "s.timing.peak_other", said=said, peak=fmt_bytes(best.peak_bytes), x=fmt_times(1 / m), name=name)


def _ms_at(result: TimingResult, impl: str, stat: str) -> float | None:
    r = next((x for x in result.rows if x.impl == impl), None)
    return r.stats.of(stat) * 1e3 if r is not None and r.ok else None


def _versus(sweep: SweepResult) -> str | None:
    """The kernel the sweep's titles hold against eager: FLASH where it ran at the largest N, else the
    first other kernel that did."""
    ran = [r.impl for r in sweep.results[-1].rows if r.ok and r.impl != "eager"]
    return "flash" if "flash" in ran else (ran[0] if ran else None)


def sweep_time_takeaway(sweep: SweepResult, stat: str = "median", lang: str = "en") -> str:
    """The time-vs-N chart's title: how much eager's and the other kernel's time grew over the sweep."""
    first, last = sweep.results[0], sweep.results[-1]
    n0, n1 = first.shape.num_keys, last.shape.num_keys
    other = _versus(sweep)
    e0, e1 = _ms_at(first, "eager", stat), _ms_at(last, "eager", stat)
    if other is None or e0 is None or e1 is None:
        return _t(lang, "s.sweep_time.plain", lo=f"{n0:,}", hi=f"{n1:,}", stat=stat_word(stat, lang))
    name = IMPL_SHORT[other]
    o0, o1 = _ms_at(first, other, stat), _ms_at(last, other, stat)
    if n0 == n1 or o0 is None:
        where = _t(lang, "s.where", n=f"{n1:,}", device=device_words(last.device, lang))
        return _faster(name, o1, _t(lang, "eager"), e1, where, stat, lang) if o1 <= e1 else \
            _faster(_t(lang, "eager_cap"), e1, name, o1, where, stat, lang)
    ge, go = e1 / e0, o1 / o0
    shown_e, shown_o = fmt_times(ge), fmt_times(go)
    cmp = "more" if ge > go and shown_e != shown_o else "less" if ge < go and shown_e != shown_o else "same"
    return _t(lang, f"s.sweep_time.{cmp}", lo=f"{n0:,}", hi=f"{n1:,}", longer=f"{n1 / n0:,.0f}", e=shown_e,
              name=name, o=shown_o, stat=stat_word(stat, lang))


def sweep_memory_takeaway(sweep: SweepResult, lang: str = "en") -> str:
    """The memory-vs-N chart's title: eager's measured peak against the other kernel's at the largest N."""
    last = sweep.results[-1]
    n, other = last.shape.num_keys, _versus(sweep)
    eager = next((r for r in last.rows if r.impl == "eager"), None)
    if other is None or eager is None or not eager.ok or eager.peak_bytes is None or not last.row(other).peak_bytes:
        return _t(lang, "s.sweep_mem.plain", n=f"{n:,}")
    name, o = IMPL_SHORT[other], last.row(other).peak_bytes
    e = eager.peak_bytes
    m = e / o
    fields = {"n": f"{n:,}", "name": name, "e": fmt_bytes(e), "o": fmt_bytes(o)}
    if _reads_even(m):
        return _t(lang, "s.sweep_mem.same", **fields)
    if m > 1:
        return _t(lang, "s.sweep_mem.eager", x=fmt_times(m), **fields)
    return _t(lang, "s.sweep_mem.other", x=fmt_times(1 / m), **fields)


def sweep_speedup_takeaway(sweep: SweepResult, stat: str = "median", lang: str = "en") -> str:
    """The speedup chart's title: at the largest N, the kernel with the best time against eager."""
    last = sweep.results[-1]
    n, where = last.shape.num_keys, device_words(last.device, lang)
    ratios = {r.impl: last.speedup(r.impl, stat=stat) for r in last.rows if r.ok and r.impl != "eager"}
    ratios = {k: v for k, v in ratios.items() if v is not None}
    if not ratios:
        return _t(lang, "s.speedup.none", n=f"{n:,}")
    best = max(ratios, key=ratios.get)
    r, name = ratios[best], IMPL_SHORT[best]
    fields = {"n": f"{n:,}", "where": where, "name": name, "stat": stat_word(stat, lang)}
    if _reads_even(r):
        return _t(lang, "s.speedup.same", **fields)
    if r > 1:
        return _t(lang, "s.speedup.faster", x=fmt_times(r), **fields)
    return _t(lang, "s.speedup.slower", x=fmt_times(1 / r), **fields)


def ceiling_label(matmul_n: int, lang: str = "en") -> str:
    """'1,024³ matmul here': the measured matmul the TFLOP/s chart holds the kernels against."""
    return _t(lang, "s.ceiling_label", n=f"{matmul_n:,}")


def sweep_tflops_takeaway(sweep: SweepResult, stat: str, ceiling_label: str, lang: str = "en") -> str:
    """The TFLOP/s chart's title: the best rate at the largest N against the measured matmul ceiling."""
    last = sweep.results[-1]
    n = last.shape.num_keys
    rates = {r.impl: r.flops / r.stats.of(stat) / 1e12 for r in last.rows if r.ok}
    best = max(rates, key=rates.get)
    t, c = rates[best], sweep.ceiling_flops / 1e12
    said = _t(lang, "s.tflops.said", n=f"{n:,}", name=IMPL_SHORT[best], t=f"{t:,.3g}", stat=stat_word(stat, lang))
    if c <= 0:
        return said
    if t <= c:
        return _t(lang, "s.tflops.below", said=said, share=f"{t / c:.0%}", c=f"{c:,.3g}", label=ceiling_label)
    return _t(lang, "s.tflops.above", said=said, x=fmt_times(t / c), c=f"{c:,.3g}", label=ceiling_label)


def sweep_intro(lengths: list[int], lang: str = "en") -> str:
    """Markdown above the sweep: what it times, N from the sweep's own lengths."""
    start = (_t(lang, "s.intro.doubling", lo=f"{lengths[0]:,}", hi=f"{lengths[-1]:,}") if len(lengths) > 1
             else _t(lang, "s.intro.one", n=f"{lengths[0]:,}"))
    return _t(lang, "s.intro", start=start)


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


def sweep_caption(sweep: SweepResult, stat: str = "median", lang: str = "en") -> str:
    """Under the sweep: how each kernel's time and peak memory grew with N, measured (N² work means an
    exponent of 2), and what shares the machine."""
    first, last = sweep.results[0].shape.num_keys, sweep.results[-1].shape.num_keys
    if first == last:
        return _t(lang, "s.caption.one_n")
    parts = []
    for impl in ("eager", "math", "flash"):
        t = _growth(sweep, impl, lambda r: r.stats.of(stat))
        m = _growth(sweep, impl, lambda r: r.peak_bytes)
        if t is None:
            continue
        mem = "" if m is None else _t(lang, "s.caption.mem", k=f"{m:.2f}")
        parts.append(_t(lang, "s.caption.part", name=IMPL_SHORT[impl], k=f"{t:.2f}", mem=mem))
    growth = text(lang, "clause.sep").join(parts) if parts else _t(lang, "s.caption.none")
    return _t(lang, "s.caption", lo=f"{first:,}", hi=f"{last:,}", stat=stat_word(stat, lang), growth=growth,
              device=device_words(sweep.results[-1].device, lang))


def stepper_takeaway(trace: OnlineSoftmaxTrace, row: int, step: int, lang: str = "en") -> str:
    """The stepper chart's title: what this tile did to the running max of one query row."""
    cur, n = trace.steps[step - 1], len(trace.steps)
    m_old, m_new, tmax = float(cur.m_old[row]), float(cur.m_new[row]), float(cur.tile_max[row])
    fields = {"head": _t(lang, "s.step.head", row=f"{row}", step=f"{step}", n=f"{n}", a=f"{cur.start}",
                         b=f"{cur.stop - 1}"), "old": fmt_num(m_old), "new": fmt_num(m_new)}
    if not math.isfinite(tmax):
        return _t(lang, "s.step.masked", **fields)
    if not math.isfinite(m_old):
        return _t(lang, "s.step.first", **fields)
    if m_new > m_old:
        return _t(lang, "s.step.raises", alpha=fmt_num(float(cur.rescale[row])), **fields)
    return _t(lang, "s.step.leaves", tmax=fmt_num(tmax), **fields)


def trace_table_takeaway(trace: OnlineSoftmaxTrace, row: int, lang: str = "en") -> str:
    """The tile table's title: how many tiles raised the running max of one row, and how close the final
    acc / l came to the softmax over all keys at once."""
    steps = trace.steps
    seen = next((i for i, t in enumerate(steps) if math.isfinite(float(t.m_new[row]))), None)
    diff = float(np.max(np.abs(trace.output[row].astype(np.float64) - trace.reference[row].astype(np.float64))))
    if seen is None or math.isnan(diff):
        return _t(lang, "s.table.undefined", row=f"{row}")
    end = _t(lang, "s.table.exact") if diff == 0 else _t(lang, "s.table.within", diff=f"{diff:.1e}")
    later = steps[seen + 1:]
    if len(steps) == 1:
        return _t(lang, "s.table.one_tile", row=f"{row}", end=end)
    first = _t(lang, "s.table.first") if seen == 0 else _t(lang, "s.table.first_unmasked", tile=f"{seen + 1}")
    fields = {"row": f"{row}", "end": end, "first": first, "later": f"{len(later)}"}
    if not later:
        return _t(lang, "s.table.no_later", **fields)
    raised = sum(1 for t in later if float(t.m_new[row]) > float(t.m_old[row]))
    if raised == 0:
        return _t(lang, "s.table.none_raised", **fields)
    return _t(lang, "s.table.raised", raised=f"{raised}", **fields)


def parity_caption(trace: OnlineSoftmaxTrace, demo: SoftmaxDemo, lang: str = "en") -> str:
    """Under the parity metrics: how far apart tiled and plain came out here, and which is nearer the float64 truth."""
    d, te, pe = trace.max_abs_diff, trace.tiled_error, trace.plain_error
    if d == 0:
        here = _t(lang, "s.parity.identical", dtype=demo.dtype)
        verdict = _t(lang, "s.parity.verdict_identical")
    else:
        here = _t(lang, "s.parity.differ", dtype=demo.dtype, d=f"{d:.1e}")
        verdict = _t(lang, "s.parity.verdict_differ")
    if te < pe:
        near = _t(lang, "s.parity.tiled_nearer", te=f"{te:.1e}", pe=f"{pe:.1e}")
    elif pe < te:
        near = _t(lang, "s.parity.plain_nearer", te=f"{te:.1e}", pe=f"{pe:.1e}")
    else:
        near = _t(lang, "s.parity.both", te=f"{te:.1e}")
    return _t(lang, "s.parity", why=_t(lang, "s.parity.why"), here=here, near=near, verdict=verdict)


def traffic_takeaway(traffic: Traffic, label: str, lang: str = "en") -> str:
    """The bytes-moved chart's title: standard against tiled, by the traffic model, for the shape `label`."""
    s, t = traffic.standard_bytes, traffic.tiled_bytes
    fields = {"label": label, "s": fmt_bytes(s), "t": fmt_bytes(t)}
    if s > t:
        return _t(lang, "s.traffic.standard_more", x=fmt_times(s / t), **fields)
    if t > s:
        return _t(lang, "s.traffic.tiled_more", x=fmt_times(t / s), **fields)
    return _t(lang, "s.traffic.same", **fields)


def time_hint(num_kernels: int, budget_s: float, lang: str = "en") -> str:
    """Before the first timing: what pressing the button costs, from the timing budget."""
    return _t(lang, "s.time_hint", n=f"{num_kernels}", budget=f"{budget_s:g}", total=f"{num_kernels * budget_s:,.1f}")


def timing_caption(result: TimingResult, lang: str = "en") -> str:
    """Under the timing chart: how peak memory and time were measured, and what disturbs them here."""
    cpu = result.device.split(":")[0] == "cpu"
    noise = _t(lang, "s.noise.cpu", threads=f"{result.num_threads}") if cpu else _t(lang, "s.noise.gpu")
    return _t(lang, "s.timing_caption", method=memory_method_text(result, lang), noise=noise)


def memory_method_text(result: TimingResult, lang: str = "en") -> str:
    """How peak memory was measured (sim.attention.measure.memory_method, a message value), in `lang`."""
    return say(lang, result.memory_method)


def held_caption(result: TimingResult, traffic: Traffic, lang: str = "en") -> str:
    """Under the model-vs-measured table: each measured peak as a multiple of what the model says it must hold."""
    parts = []
    for impl, (what, model_bytes) in held_bytes_model(result.shape, traffic, lang).items():
        r = next((x for x in result.rows if x.impl == impl), None)
        if r is None or not r.ok or r.peak_bytes is None or not model_bytes:
            continue
        parts.append(_t(lang, "s.held.part", name=IMPL_SHORT[impl], x=f"{r.peak_bytes / model_bytes:,.1f}", what=what,
                        peak=fmt_bytes(r.peak_bytes), model=fmt_bytes(model_bytes)))
    said = text(lang, "clause.sep").join(parts) + "." if parts else ""
    said = said[:1].upper() + said[1:] if lang == "en" else said  # a sentence may start with "eager"
    return (said + _t(lang, "s.held.tail")).strip()


# --- timing records, reasons worded ---------------------------------------------------------------

def _worded(records: list[dict], lang: str) -> list[dict]:
    return [{**r, "reason": say(lang, r["reason"])} for r in records]


def timing_frame(result, lang: str = "en"):
    """TimingResult.to_records as a table, reasons worded (the page's chart data and CSV: English)."""
    import pandas as pd

    return pd.DataFrame(_worded(result.to_records(), lang))


def sweep_frame(sweep, lang: str = "en"):
    """SweepResult.to_frame with the reasons worded (the sweep's charts and CSV: English)."""
    import pandas as pd

    return pd.DataFrame(_worded([rec for r in sweep.results for rec in r.to_records()], lang))


def caps_sentence(limits, lang: str = "en") -> str:
    """This device's caps (sim.attention.limits.Limits) in one sentence (moved here from Limits.caps_sentence)."""
    return text(lang, "kernels.s.caps", elems=f"{limits.max_score_elems:,}", flops=f"{limits.max_flops:,}",
                memory=fmt_bytes(limits.memory_bytes))
