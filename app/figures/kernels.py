"""Figures for the Attention kernels page: data in, go.Figure out, no st calls."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, LEGEND_BELOW, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, HALF_WIDTH_CHARS, set_headline
from sim.attention.shapes import IMPL_SHORT
from sim.words import text
from sim.words.attention import fmt_num

IMPL_COLORS = {
    "eager": NAIVE,
    "math": "#8c8c8c",
    "flash": CACHED,
    "efficient": "#54a24b",
    "cudnn": "#b279a2",
    "flex": "#f58518",
}
DONE, CURRENT, LATER, MAX_LINE = CACHED, "#f58518", "#d9d9d9", FORMULA
BIG = 18  # font size for the stepper: it is read from the back of a room
TABLE_INK = "#31333f"  # the trace table's fills are light in either theme: its text is dark in either too
SUBPLOT_TITLE_PX = 24  # room under the headline for the subplots' own titles


def mib(n: float) -> float:
    return n / 2**20


# --- one shape ---------------------------------------------------------------------------------

def _t(lang: str, key: str, /, **fields: object) -> str:
    return text(lang, f"kernels.fig.{key}", **fields)


def kernel_bars(df: pd.DataFrame, eager_n2_bytes: int, title: str, lang: str = "en") -> go.Figure:
    """Left: median time per call with the interquartile range; right: measured peak memory (log);
    title: the takeaway (sim.words.attention.timing_takeaway)."""
    ok = df[df["status"] == "ok"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, vertical_spacing=0,
                        subplot_titles=(_t(lang, "bars.time"), _t(lang, "bars.memory")))
    names = [IMPL_SHORT[i] for i in ok["implementation"]]
    colors = [IMPL_COLORS[i] for i in ok["implementation"]]
    fig.add_bar(x=names, y=ok["median_ms"], marker_color=colors, showlegend=False, row=1, col=1,
                error_y=dict(type="data", symmetric=False, array=ok["p75_ms"] - ok["median_ms"],
                             arrayminus=ok["median_ms"] - ok["p25_ms"]),
                text=[f"{v:.3g} ms" for v in ok["median_ms"]], textposition="outside", cliponaxis=False)
    mem = ok["peak_bytes"].astype(float)
    fig.add_bar(x=names, y=mem / 2**20, marker_color=colors, showlegend=False, row=1, col=2,
                text=[f"{mib(v):.3g} MiB" if v == v else text(lang, "kernels.na") for v in mem], textposition="outside", cliponaxis=False)
    fig.add_scatter(x=[names[0], names[-1]], y=[mib(eager_n2_bytes)] * 2, mode="lines+text", row=1, col=2,
                    line=dict(color=FORMULA, dash="dash"), name=_t(lang, "bars.n2_name"),
                    text=["", _t(lang, "bars.n2_text", mib=f"{mib(eager_n2_bytes):.3g}")], textposition="bottom left",
                    textfont=dict(size=14, color=FORMULA))
    top_ms = float(ok["p75_ms"].max()) if len(ok) else 1.0
    fig.update_yaxes(title_text=_t(lang, "bars.y_time"), range=[0, 1.2 * top_ms], row=1, col=1)
    fig.update_xaxes(title_text=_t(lang, "kernel"))
    mem_mib = [mib(v) for v in mem if v == v and v > 0] + [mib(eager_n2_bytes)]
    fig.update_yaxes(title_text=_t(lang, "bars.y_memory"), type="log", dtick=1, row=1, col=2,
                     range=[math.log10(min(mem_mib)) - 0.4, math.log10(max(mem_mib)) + 0.35])
    base_layout(fig, "", "", "", height=420)
    fig.update_layout(margin=dict(l=10, r=10, t=40, b=10), showlegend=False)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


# --- sweep over N ------------------------------------------------------------------------------

def _by_impl(df: pd.DataFrame):
    ok = df[df["status"] == "ok"]
    for impl, part in ok.groupby("implementation", sort=False):
        yield impl, part.sort_values("keys")


def _log_axes(fig: go.Figure, df: pd.DataFrame) -> None:
    ns = sorted(df["keys"].unique())
    fig.update_xaxes(type="log", tickvals=ns, ticktext=[f"{n:,}" for n in ns])
    fig.update_yaxes(type="log", dtick=1)  # one label per decade


def _sweep_layout(fig: go.Figure, title: str, y: str, lang: str = "en") -> go.Figure:
    base_layout(fig, "", _t(lang, "sweep.x"), y, height=420)
    fig.update_layout(legend=LEGEND_BELOW)
    return set_headline(fig, title, HALF_WIDTH_CHARS)


def sweep_time(df: pd.DataFrame, col: str, title: str, lang: str = "en") -> go.Figure:
    """Time per call against N (log–log); with the median, bars show the 25th–75th percentile of the timed
    blocks; title: the takeaway (sim.words.attention.sweep_time_takeaway)."""
    fig = go.Figure()
    for impl, part in _by_impl(df):
        err = (dict(type="data", symmetric=False, array=part["p75_ms"] - part["median_ms"],
                    arrayminus=part["median_ms"] - part["p25_ms"], thickness=1) if col == "median_ms" else None)
        fig.add_scatter(x=part["keys"], y=part[col], name=IMPL_SHORT[impl], mode="lines+markers",
                        line=dict(color=IMPL_COLORS[impl], width=3), error_y=err)
    _log_axes(fig, df)
    return _sweep_layout(fig, title, _t(lang, "sweep.y_time"), lang)


def sweep_memory(df: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """Measured peak memory against N (log–log); title: sim.words.attention.sweep_memory_takeaway."""
    fig = go.Figure()
    for impl, part in _by_impl(df):
        fig.add_scatter(x=part["keys"], y=part["peak_bytes"] / 2**20, name=IMPL_SHORT[impl], mode="lines+markers",
                        line=dict(color=IMPL_COLORS[impl], width=3))
    n2 = df.drop_duplicates("keys").sort_values("keys")
    fig.add_scatter(x=n2["keys"], y=n2["eager_n2_bytes"] / 2**20, name=_t(lang, "sweep.n2_name"), mode="lines",
                    line=dict(color=FORMULA, dash="dash"))
    _log_axes(fig, df)
    return _sweep_layout(fig, title, _t(lang, "sweep.y_memory"), lang)


def sweep_speedup(df: pd.DataFrame, col: str, title: str, lang: str = "en") -> go.Figure:
    """Eager time / time of each kernel (median or fastest block); title:
    sim.words.attention.sweep_speedup_takeaway."""
    fig = go.Figure()
    eager = df[(df["implementation"] == "eager") & (df["status"] == "ok")].set_index("keys")[col]
    for impl, part in _by_impl(df):
        if impl == "eager":
            continue
        part = part[part["keys"].isin(eager.index)]
        fig.add_scatter(x=part["keys"], y=eager.loc[part["keys"]].to_numpy() / part[col].to_numpy(),
                        name=IMPL_SHORT[impl], mode="lines+markers", line=dict(color=IMPL_COLORS[impl], width=3))
    fig.add_hline(y=1, line=dict(color=NAIVE, dash="dot"), annotation_text=_t(lang, "sweep.as_fast"))
    ns = sorted(df["keys"].unique())
    fig.update_xaxes(type="log", tickvals=ns, ticktext=[f"{n:,}" for n in ns])
    return _sweep_layout(fig, title, _t(lang, "sweep.y_speedup"), lang)


def sweep_tflops(df: pd.DataFrame, col: str, ceiling_tflops: float | None, ceiling_label: str,
                 title: str, lang: str = "en") -> go.Figure:
    """Achieved TFLOP/s (4·B·H·N²·d, halved when causal) against N; title:
    sim.words.attention.sweep_tflops_takeaway."""
    fig = go.Figure()
    for impl, part in _by_impl(df):
        tflops = part["flops"] / (part[col] / 1e3) / 1e12
        fig.add_scatter(x=part["keys"], y=tflops, name=IMPL_SHORT[impl], mode="lines+markers",
                        line=dict(color=IMPL_COLORS[impl], width=3))
    if ceiling_tflops:
        fig.add_hline(y=ceiling_tflops, line=dict(color=FORMULA, dash="dash"),
                      annotation_text=_t(lang, "sweep.ceiling", label=ceiling_label, x=f"{ceiling_tflops:.3g}"), annotation_position="top left")
    _log_axes(fig, df)
    return _sweep_layout(fig, title, _t(lang, "sweep.y_tflops"), lang)


# --- online softmax stepper --------------------------------------------------------------------

def softmax_step(trace, row: int, step: int, title: str, lang: str = "en") -> go.Figure:
    """Top: every key's score, tiles shaded; done tiles blue, the current one orange, later grey; the
    running max drawn over the keys seen so far. Bottom: the weights the kernel holds after this
    step (exp(s − m) / l over the keys seen so far) next to the final softmax over all keys.
    title: the takeaway (sim.words.attention.stepper_takeaway)."""
    scores = trace.scores[row].astype(float)
    nk = scores.size
    cur = trace.steps[step - 1]
    keys = np.arange(nk)
    status = np.where(keys < cur.start, "done", np.where(keys < cur.stop, "current", "later"))
    color = {"done": DONE, "current": CURRENT, "later": LATER}
    finite = np.isfinite(scores)
    lo = float(min(0.0, scores[finite].min())) if finite.any() else -1.0
    hi = float(max(0.0, scores[finite].max())) if finite.any() else 1.0
    pad = 0.12 * (hi - lo or 1.0)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, row_heights=[0.55, 0.45],
                        subplot_titles=(_t(lang, "step.scores", row=f"{row}", step=f"{step}", n=f"{len(trace.steps)}",
                                           a=f"{cur.start}", b=f"{cur.stop - 1}"), _t(lang, "step.weights")))
    for tile in trace.steps:  # alternate shading marks the tiles
        if tile.index % 2 == 0:
            fig.add_vrect(x0=tile.start - 0.5, x1=tile.stop - 0.5, fillcolor="#f0f0f0", line_width=0, layer="below",
                          row=1, col=1)
    fig.add_bar(x=keys[finite], y=scores[finite], marker_color=[color[s] for s in status[finite]], showlegend=False,
                text=[fmt_num(v, 3) for v in scores[finite]], textposition="outside", cliponaxis=False,
                textfont=dict(size=BIG - 4), row=1, col=1,
                hovertemplate=_t(lang, "step.hover"))
    if (~finite).any():
        fig.add_scatter(x=keys[~finite], y=[lo] * int((~finite).sum()), mode="markers+text", text=["−∞"] * int((~finite).sum()),
                        textposition="top center", marker=dict(symbol="x", size=12, color=FORMULA),
                        name=_t(lang, "step.masked"), textfont=dict(size=BIG - 2), row=1, col=1)
    for t in trace.steps[:step]:  # running max after each tile, over the keys of that tile
        m = float(t.m_new[row])
        if math.isfinite(m):
            fig.add_scatter(x=[t.start - 0.45, t.stop - 0.55], y=[m, m], mode="lines",
                            line=dict(color=MAX_LINE, width=4 if t.index == step - 1 else 2,
                                      dash="solid" if t.index == step - 1 else "dot"),
                            showlegend=t.index == step - 1, name=_t(lang, "step.running_max"), row=1, col=1)
    m_now = float(cur.m_new[row])
    if math.isfinite(m_now):
        fig.add_annotation(x=cur.stop - 0.5, y=m_now, text=f"<b>m = {fmt_num(m_now)}</b>", showarrow=False,
                           xanchor="left", xshift=4, font=dict(size=BIG), bgcolor="rgba(128,128,128,0.2)",
                           row=1, col=1)
    seen = keys < cur.stop
    l_now = float(cur.l_new[row])
    with np.errstate(invalid="ignore", over="ignore"):
        held = np.where(seen & finite, np.exp(scores - (m_now if math.isfinite(m_now) else 0.0)), 0.0)
        held = held / l_now if l_now > 0 else np.zeros_like(held)
        final = np.where(finite, np.exp(scores - scores[finite].max()), 0.0) if finite.any() else np.zeros(nk)
        final = final / final.sum() if final.sum() > 0 else final
    fig.add_bar(x=keys, y=held, marker_color=[color[s] for s in status], name=_t(lang, "step.held"), row=2, col=1)
    fig.add_scatter(x=keys, y=final, mode="markers", name=_t(lang, "step.final"),
                    marker=dict(symbol="diamond-open", size=14, color=FORMULA, line=dict(width=2.5, color=FORMULA)),
                    row=2, col=1)
    fig.update_yaxes(title_text=_t(lang, "step.y_score"), range=[lo - pad, hi + 2 * pad], row=1, col=1)
    fig.update_yaxes(title_text=_t(lang, "step.y_weight"), range=[0, 1.05], row=2, col=1)
    fig.update_xaxes(title_text=_t(lang, "step.x_key"), dtick=1 if nk <= 32 else 4, row=2, col=1)
    base_layout(fig, "", "", "", height=640)
    fig.update_layout(font=dict(size=BIG - 2), margin=dict(l=10, r=10, t=40, b=10),
                      legend=LEGEND_BELOW)
    fig.update_annotations(font_size=BIG - 2)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def softmax_trace_table(trace, row: int, step: int, title: str, lang: str = "en") -> go.Figure:
    """Every tile's numbers for one query row, the current tile highlighted, big enough for a projector;
    title: the takeaway (sim.words.attention.trace_table_takeaway)."""
    header = [_t(lang, f"table.{k}") for k in ("tile", "keys", "tile_max", "m_before", "m_after", "rescale", "sum",
                                                "l_after", "partial")]
    cols = [[] for _ in header]
    for t in trace.steps:
        vals = [str(t.index + 1), f"{t.start}–{t.stop - 1}", fmt_num(float(t.tile_max[row])),
                fmt_num(float(t.m_old[row])), fmt_num(float(t.m_new[row])), fmt_num(float(t.rescale[row])),
                fmt_num(float(t.p[row].sum())), fmt_num(float(t.l_new[row])),
                "[" + ", ".join(fmt_num(float(x), 3) for x in t.partial[row]) + "]"]
        for c, v in zip(cols, vals, strict=True):
            c.append(v)
    fill = [[("#ffe0b2" if i == step - 1 else ("#e3f2fd" if i < step - 1 else "white")) for i in range(len(trace.steps))]]
    fig = go.Figure(go.Table(
        columnwidth=[40, 60, 75, 75, 75, 75, 85, 75, 230],
        header=dict(values=[f"<b>{h}</b>" for h in header], font=dict(size=BIG - 4, color=TABLE_INK),
                    fill_color="#eeeeee", align="center", height=44),
        cells=dict(values=cols, font=dict(size=BIG - 2, family="monospace", color=TABLE_INK),
                   fill_color=fill * len(header), align="right", height=34),
    ))
    # Streamlit's own template: its placeholder colours (the cell lines) become the theme's in the browser
    fig.update_layout(height=90 + 36 * len(trace.steps), margin=dict(l=0, r=0, t=10, b=0), template="streamlit")
    return set_headline(fig, title, FULL_WIDTH_CHARS)


# --- HBM traffic -------------------------------------------------------------------------------

TRAFFIC_COLORS = {"read_q_k": "#4c78a8", "read_q": "#4c78a8", "read_k": "#72b7b2", "write_s": "#e45756",
                  "read_s": "#ff9d98", "write_p": "#f58518", "read_p": "#ffbf79", "read_v": "#54a24b",
                  "write_o": "#b279a2", "write_row_stats": "#9d755d"}


def traffic_part(part: str, lang: str = "en") -> str:
    """A traffic model part ('read_q_k', 'write_s', …: sim.attention.online_softmax.hbm_traffic's keys, each a
    catalog word's id) as the legend names it."""
    return _t(lang, "part." + part)


def traffic_bars(traffic, title: str, lang: str = "en") -> go.Figure:
    """Bytes moved by standard and tiled attention, part by part; title: the takeaway, which names the shape
    (sim.words.attention.traffic_takeaway)."""
    fig = go.Figure()
    shown = set()
    standard, tiled = _t(lang, "traffic.standard"), _t(lang, "traffic.tiled")
    for which, parts in ((standard, traffic.standard_parts), (tiled, traffic.tiled_parts)):
        for part, nbytes in parts.items():
            name = traffic_part(part, lang)
            fig.add_bar(y=[which], x=[mib(nbytes)], name=name, orientation="h", legendgroup=part,
                        showlegend=part not in shown, marker_color=TRAFFIC_COLORS[part],
                        hovertemplate=_t(lang, "traffic.hover", part=name))
            shown.add(part)
    for which, total in ((standard, traffic.standard_bytes), (tiled, traffic.tiled_bytes)):
        fig.add_annotation(y=which, x=mib(total), text=f"{mib(total):,.3g} MiB", showarrow=False, xanchor="left",
                           xshift=6, font=dict(size=16))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(range=[0, mib(max(traffic.standard_bytes, traffic.tiled_bytes)) * 1.2])
    base_layout(fig, "", _t(lang, "traffic.x"), _t(lang, "kernel"), height=380)
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(l=10, r=10, t=40, b=10))
    return set_headline(fig, title, FULL_WIDTH_CHARS)
