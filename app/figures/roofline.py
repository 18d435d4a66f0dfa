"""Figures for the Roofline page."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures import CACHED, NAIVE, base_layout, log_line, si_log_ticks
from app.figures.edges import room_above_labels
from app.figures.headline import FULL_WIDTH_CHARS, HALF_WIDTH_CHARS, set_headline
from sim.words import text


def roofline(peak_flops: float, bandwidth: float, hw_name: str, points: list[dict], traces: list[dict],
             title: str, lang: str = "en") -> go.Figure:
    """points: {name, intensity, flops_per_s, color, symbol}; traces: {name, x, y, color} lines
    of points as one setting changes; title: the chart's headline (built by sim, never user text)."""
    xs = [p["intensity"] for p in points] + [x for t in traces for x in t["x"]] + [peak_flops / bandwidth]
    lo = 10 ** np.floor(np.log10(max(min(xs), 1e-3)) - 1)
    hi = 10 ** np.ceil(np.log10(max(xs)) + 1)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig = go.Figure()
    fig.add_scatter(x=x, y=np.minimum(peak_flops, x * bandwidth), name=text(lang, "roofline.fig.roof", hw=hw_name),
                    line=dict(color="#333", width=3), hovertemplate=text(lang, "roofline.fig.hover_roof"))
    ridge = peak_flops / bandwidth
    log_line(fig, "x", ridge, text(lang, "roofline.fig.ridge", ridge=f"{ridge:,.0f}"), dict(color="#888", dash="dot"))
    for t in traces:
        fig.add_scatter(x=t["x"], y=t["y"], mode="lines+markers", name=t["name"], line=dict(color=t["color"], width=1.5),
                        marker=dict(size=5), text=t.get("labels"), hovertemplate="%{text}<extra></extra>")
    for p in points:
        fig.add_scatter(x=[p["intensity"]], y=[p["flops_per_s"]], mode="markers+text", name=p["name"],
                        text=[p["name"]], textposition="top center",
                        marker=dict(size=14, color=p["color"], symbol=p.get("symbol", "circle"),
                                    line=dict(color="white", width=1)))
    fig.update_xaxes(type="log", title_text=text(lang, "roofline.fig.x_intensity"), **si_log_ticks(x))
    fig.update_yaxes(type="log", title_text=text(lang, "roofline.fig.y_flops"),
                     **si_log_ticks([y for tr in fig.data for y in tr.y]))
    room_above_labels(fig)  # a point on the roof ("prefill") has its label over it
    base_layout(fig, "", "", "", height=520)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def sweep_lines(rows: list, metric: str, ylabel: str, title: str, ridge: float | None = None,
                lang: str = "en") -> go.Figure:
    """One line per context of a decode batch sweep (sim.cost.roofline.batch_sweep's points): `metric` against
    batch; title: the takeaway (intensity_takeaway / tokens_takeaway), never user text."""
    fig = go.Figure()
    contexts = sorted({r.context for r in rows})
    colors = [CACHED, "#2ca02c", "#ff7f0e", NAIVE, "#9467bd"]
    for i, S in enumerate(contexts):
        pts = [r for r in rows if r.context == S]
        fig.add_scatter(x=[r.batch for r in pts], y=[getattr(r, metric) for r in pts], name=text(lang, "roofline.fig.context", S=f"{S:,}"),
                        mode="lines+markers", line=dict(color=colors[i % len(colors)], width=2.5))
    if ridge is not None:
        log_line(fig, "y", ridge, text(lang, "roofline.fig.ridge_above"), dict(color="#888", dash="dot"))
    # labels at powers of ten (and 2x, 5x over a short span), never plotly's bare minor digits read as values
    fig.update_xaxes(type="log", title_text=text(lang, "roofline.fig.x_batch"), **si_log_ticks([r.batch for r in rows]))
    fig.update_yaxes(type="log", title_text=ylabel, **si_log_ticks([getattr(r, metric) for r in rows]
                                                                   + ([ridge] if ridge else [])))
    base_layout(fig, "", "", "", height=400)
    return set_headline(fig, title, HALF_WIDTH_CHARS)


def bytes_breakdown(rows: list[tuple[str, float, float, float]], title: str, lang: str = "en") -> go.Figure:
    """rows: (label, weights, kv, activations) bytes; title: the takeaway (sim.words.roofline.bytes_takeaway)."""
    fig = go.Figure()
    labels = [r[0] for r in rows]
    for i, (key, color) in enumerate((("weights", "#4c78a8"), ("kv", "#e45756"), ("activations", "#72b7b2"))):
        part = text(lang, f"roofline.fig.part.{key}")
        fig.add_bar(y=labels, x=[r[i + 1] / 1e9 for r in rows], name=part, orientation="h", marker_color=color,
                    hovertemplate=text(lang, "roofline.fig.hover_part", part=part))
    fig.update_layout(barmode="stack")
    # in GB, not plotly's SI "150B" (billions), which reads as 150 bytes
    fig.update_xaxes(title_text=text(lang, "roofline.fig.x_moved"))
    fig.update_yaxes(title_text=text(lang, "roofline.fig.y_step"))
    base_layout(fig, "", "", "", height=260)
    return set_headline(fig, title, FULL_WIDTH_CHARS)
