"""Figures for the KV quantization page; each builder takes `lang` ("en", "ko") for its labels (sim/i18n.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, LEGEND_BELOW, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, column_chars, set_headline
from sim.i18n import text

SCHEME_COLORS = {
    "fp16": FORMULA,
    "kivi": CACHED,
    "kivi_nores": "#9467bd",
    "token": NAIVE,
    "channel": "#ff7f0e",
    "token_res": "#8c564b",
    "token_first": "#e377c2",
    "fp8_e4m3": "#2ca02c",
    "fp8_e5m2": "#17becf",
}
PARTS = ("codes", "scales", "zero_points", "full_precision")  # each named by quant.fig.part.<part>
PART_HOVER = "%{{y}}<br>{name}: %{{x:,.1f}} B/token<extra></extra>"  # plotly's own fields, a unit
CELL_HOVER = "%{y}, %{x}: %{text}<extra></extra>"
PART_COLORS = {"codes": "#4c78a8", "scales": "#f58518", "zero_points": "#e45756", "full_precision": "#b0b0b0"}
WIDE_COLUMN_CHARS = column_chars(3 / 5)  # the bytes chart sits in the wider of two columns (3 : 2)
NARROW_COLUMN_CHARS = column_chars(2 / 5)  # the bytes-vs-context chart sits in the narrower one
SUBPLOT_TITLE_PX = 24  # room under the headline for the subplots' own titles
METRICS = ("kl", "delta_loss", "agreement")  # each axis titled by quant.fig.metric.<metric>


def metric_label(metric: str, lang: str = "en") -> str:
    """The error chart's y axis title for `metric`, with its unit."""
    return text(lang, f"quant.fig.metric.{metric}")


def bytes_by_part(rows: list[dict], num_tokens: int, title: str, lang: str = "en") -> go.Figure:
    """Horizontal stacked bars: bytes per token of each scheme, split into codes / scales / ... ;
    title: the takeaway (sim.model.quant_bytes.bytes_takeaway)."""
    labels = [r["short"] for r in rows]
    fig = go.Figure()
    for part in PARTS:
        name = text(lang, f"quant.fig.part.{part}")
        fig.add_bar(y=labels, x=[r[part] / num_tokens for r in rows], name=name, orientation="h",
                    marker_color=PART_COLORS[part],
                    hovertemplate=PART_HOVER.format(name=name))
    fig.update_layout(barmode="stack", yaxis=dict(autorange="reversed"))
    fig = base_layout(fig, "", text(lang, "quant.fig.bytes_per_token"), text(lang, "quant.fig.scheme"),
                      height=170 + 38 * len(rows))
    fig.update_layout(legend=LEGEND_BELOW)
    return set_headline(fig, title, WIDE_COLUMN_CHARS)


def bytes_vs_context(curves: dict[str, tuple[str, list[int], list[float]]], residual: int, title: str,
                     lang: str = "en") -> go.Figure:
    """key -> (label, contexts, bytes per token): the residual window's cost fades with length;
    title: the takeaway (sim.words.quant.context_takeaway)."""
    fig = go.Figure()
    for key, (label, xs, ys) in curves.items():
        fig.add_scatter(x=xs, y=ys, name=label, mode="lines", line=dict(color=SCHEME_COLORS.get(key), width=3))
    top = max(max(ys) for _, _, ys in curves.values())
    fig.add_scatter(x=[residual, residual], y=[0, top], mode="lines", name=f"R = {residual}",
                    line=dict(color="#888", dash="dot", width=2), hoverinfo="skip")
    fig.update_xaxes(type="log", tickvals=[4**k for k in range(8)])
    fig = base_layout(fig, "", text(lang, "quant.fig.tokens_in_cache"), text(lang, "quant.fig.bytes_average"),
                      height=170 + 38 * 9)
    fig.update_layout(legend=LEGEND_BELOW)
    return set_headline(fig, title, NARROW_COLUMN_CHARS)


def error_by_position(frame: pd.DataFrame, metric: str, log_y: bool, keys: list[str], title: str,
                      lang: str = "en") -> go.Figure:
    """frame: rows of PositionErrors.binned() with a 'key' column; one line per scheme;
    title: the takeaway (sim.words.quant.position_takeaway)."""
    fig = go.Figure()
    for key in keys:
        df = frame[frame["key"] == key]
        if df.empty:
            continue
        y = df[metric].to_numpy(dtype=float)
        if log_y:  # exactly 0 (every key read in full precision) has no place on a log axis: leave a gap
            y = np.where(y > 0, y, np.nan)
        fig.add_scatter(x=df["position"], y=y, name=df["scheme"].iloc[0], mode="lines+markers",
                        line=dict(color=SCHEME_COLORS.get(key), width=3), marker=dict(size=5))
    if log_y:
        fig.update_yaxes(type="log", exponentformat="power", dtick=1)  # a label a decade: no bare 2s and 5s
    fig = base_layout(fig, "", text(lang, "quant.fig.position"), metric_label(metric, lang), height=460)
    fig.update_layout(legend=dict(orientation="v", yref="paper", yanchor="top", y=1.0, xanchor="left", x=1.01))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def bits_heatmap(table: pd.DataFrame, metric: str, title: str, lang: str = "en") -> go.Figure:
    """table: one row per scheme (index: its label), one column per bit width, values of `metric`
    ("kl", "delta_loss" or "agreement"); NaN where a scheme has no such width (FP8 is 8 bits only);
    title: the takeaway (sim.words.quant.heatmap_takeaway)."""
    vals = table.to_numpy(dtype=float)
    if metric == "kl":
        z, scale, fmt = np.log10(np.clip(vals, 1e-12, None)), "Reds", ".1e"
    elif metric == "agreement":
        z, scale, fmt = vals, "Reds_r", ".1%"
    else:
        z, scale, fmt = vals, "Reds", "+.4f"
    z = np.where(np.isnan(vals), np.nan, z)
    cells = [["" if np.isnan(v) else format(v, fmt) for v in row] for row in vals]
    fig = go.Figure(go.Heatmap(z=z, x=list(table.columns), y=list(table.index), text=cells, texttemplate="%{text}",
                               textfont=dict(size=15), colorscale=scale, showscale=False, xgap=2, ygap=2,
                               hovertemplate=CELL_HOVER))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=15), title_text=text(lang, "quant.fig.scheme"))
    fig.update_xaxes(type="category", side="top", tickfont=dict(size=15), title_text=text(lang, "quant.fig.bits"))
    fig = base_layout(fig, "", "", "", height=130 + 46 * len(table))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=60)  # below it: the top axis, its ticks and title


def channel_heatmaps(k_abs: np.ndarray, v_abs: np.ndarray, layer: int, head: int, title: str, lang: str = "en"
                     ) -> go.Figure:
    """(T, D) |K| and |V| of one layer and KV head: tokens down, channels across;
    title: the takeaway (sim.words.quant.heatmaps_takeaway)."""
    where = dict(layer=f"{layer}", head=f"{head}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=(text(lang, "quant.fig.map_k", **where),
                                                        text(lang, "quant.fig.map_v", **where)),
                        horizontal_spacing=0.14)
    for col, (arr, name) in enumerate(((k_abs, "K"), (v_abs, "V")), start=1):
        hover = text(lang, "quant.fig.map_hover", name=name)
        fig.add_trace(go.Heatmap(z=arr, colorscale="Viridis", coloraxis=f"coloraxis{col}",
                                 hovertemplate=hover), row=1, col=col)
        fig.update_xaxes(title_text=text(lang, "quant.fig.channel"), row=1, col=col)
        fig.update_yaxes(title_text=text(lang, "quant.fig.position"), autorange="reversed", row=1, col=col)
    fig.update_layout(coloraxis1=dict(colorscale="Viridis", colorbar=dict(x=0.43, len=0.9, thickness=14, title="|K|")),
                      coloraxis2=dict(colorscale="Viridis", colorbar=dict(x=1.0, len=0.9, thickness=14, title="|V|")))
    fig = base_layout(fig, "", "", "", height=480)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def channel_bars(k_mean: np.ndarray, v_mean: np.ndarray, title: str, lang: str = "en") -> go.Figure:
    """Mean |value| of each channel over the tokens, K against V, each over its own median;
    title: the takeaway (sim.words.quant.bars_takeaway)."""
    ch = np.arange(len(k_mean))
    fig = go.Figure()
    fig.add_bar(x=ch, y=k_mean / np.median(k_mean), name="K", marker_color=CACHED)
    fig.add_bar(x=ch, y=v_mean / np.median(v_mean), name="V", marker_color="#ff7f0e")
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    fig.update_layout(barmode="group")
    fig = base_layout(fig, "", text(lang, "quant.fig.channel"), text(lang, "quant.fig.mean_over_median"), height=340)
    return set_headline(fig, title, WIDE_COLUMN_CHARS)


def outlier_errors(frame: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """frame: case, axis, rel_error_other, rel_error_scores; title: the takeaway
    (sim.words.quant.outlier_takeaway)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(text(lang, "quant.fig.err_ordinary"),
                                                        text(lang, "quant.fig.err_scores")))
    for axis, color in (("token", NAIVE), ("channel", CACHED)):
        name = text(lang, f"quant.fig.k_{axis}")
        df = frame[frame["axis"] == axis]
        cases = [text(lang, f"quant.fig.case.{c}") for c in df["case"]]
        fig.add_bar(x=cases, y=df["rel_error_other"], name=name, marker_color=color, legendgroup=axis,
                    row=1, col=1, texttemplate="%{y:.0%}", textposition="outside")
        fig.add_bar(x=cases, y=df["rel_error_scores"], name=name, marker_color=color, legendgroup=axis,
                    showlegend=False, row=1, col=2, texttemplate="%{y:.0%}", textposition="outside")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    fig.update_layout(barmode="group")
    fig = base_layout(fig, "", "", "", height=380)
    fig.update_yaxes(title_text=text(lang, "quant.fig.rel_rms"))
    fig.update_xaxes(title_text=text(lang, "quant.fig.keys_quantized"))
    fig.update_layout(legend=dict(LEGEND_BELOW, xanchor="center", x=0.5),
                      margin=dict(t=40))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def real_channel_heatmaps(k_mean: np.ndarray, v_mean: np.ndarray, lang: str = "en") -> go.Figure:
    """Layer × channel mean |K| and mean |V| of the real model, side by side, each on its own colour scale."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=[text(lang, "real.kv.title_k"), text(lang, "real.kv.title_v")],
                        horizontal_spacing=0.12)
    for col, m in enumerate((k_mean, v_mean), start=1):
        fig.add_heatmap(z=m, colorscale="Viridis", row=1, col=col, colorbar=dict(x=0.44 if col == 1 else 1.0,
                        title=text(lang, "real.kv.color")),
                        hovertemplate=text(lang, "real.kv.hover"))
        fig.update_xaxes(title_text=text(lang, "real.kv.x"), row=1, col=col)
        fig.update_yaxes(title_text=text(lang, "real.kv.y"), row=1, col=col)
    base_layout(fig, "", "", "", height=440)
    return fig
