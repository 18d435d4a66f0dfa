"""Figures for the Roofline page."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures import CACHED, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline


def roofline(peak_flops: float, bandwidth: float, hw_name: str, points: list[dict], traces: list[dict],
             title: str) -> go.Figure:
    """points: {name, intensity, flops_per_s, color, symbol}; traces: {name, x, y, color} lines
    of points as one setting changes; title: the chart's headline (built by sim, never user text)."""
    xs = [p["intensity"] for p in points] + [x for t in traces for x in t["x"]] + [peak_flops / bandwidth]
    lo = 10 ** np.floor(np.log10(max(min(xs), 1e-3)) - 1)
    hi = 10 ** np.ceil(np.log10(max(xs)) + 1)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig = go.Figure()
    fig.add_scatter(x=x, y=np.minimum(peak_flops, x * bandwidth), name=f"{hw_name} roof",
                    line=dict(color="#333", width=3), hovertemplate="%{x:.3g} FLOP/B → %{y:.3g} FLOP/s<extra></extra>")
    ridge = peak_flops / bandwidth
    # On log axes plotly places annotations in log10 units (shapes in data units): add them apart.
    fig.add_vline(x=ridge, line=dict(color="#888", dash="dot"))
    fig.add_annotation(x=np.log10(ridge), y=0, yref="paper", text=f"ridge {ridge:,.0f} FLOP/byte", showarrow=False,
                       xanchor="left", yanchor="bottom")
    for t in traces:
        fig.add_scatter(x=t["x"], y=t["y"], mode="lines+markers", name=t["name"], line=dict(color=t["color"], width=1.5),
                        marker=dict(size=5), text=t.get("labels"), hovertemplate="%{text}<extra></extra>")
    for p in points:
        fig.add_scatter(x=[p["intensity"]], y=[p["flops_per_s"]], mode="markers+text", name=p["name"],
                        text=[p["name"]], textposition="top center",
                        marker=dict(size=14, color=p["color"], symbol=p.get("symbol", "circle"),
                                    line=dict(color="white", width=1)))
    fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOPs per byte moved)")
    fig.update_yaxes(type="log", title_text="attainable FLOP/s")
    base_layout(fig, "", "", "", height=520)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


HALF_WIDTH_CHARS = 44  # the batch sweeps sit side by side, each half the page


def sweep_lines(rows: list, metric: str, ylabel: str, title: str, ridge: float | None = None) -> go.Figure:
    """One line per context of a decode batch sweep (sim.cost.roofline.batch_sweep's points): `metric` against
    batch; title: the takeaway (intensity_takeaway / tokens_takeaway), never user text."""
    fig = go.Figure()
    contexts = sorted({r.context for r in rows})
    colors = [CACHED, "#2ca02c", "#ff7f0e", NAIVE, "#9467bd"]
    for i, S in enumerate(contexts):
        pts = [r for r in rows if r.context == S]
        fig.add_scatter(x=[r.batch for r in pts], y=[getattr(r, metric) for r in pts], name=f"context {S:,}",
                        mode="lines+markers", line=dict(color=colors[i % len(colors)], width=2.5))
    if ridge is not None:
        fig.add_hline(y=ridge, line=dict(color="#888", dash="dot"))
        fig.add_annotation(x=0, xref="paper", y=np.log10(ridge), text="ridge: compute-bound above", showarrow=False,
                           xanchor="left", yanchor="bottom")
    fig.update_xaxes(type="log", title_text="batch (requests decoded together)")
    fig.update_yaxes(type="log", title_text=ylabel)
    base_layout(fig, "", "", "", height=400)
    return set_headline(fig, title, HALF_WIDTH_CHARS)


def bytes_breakdown(rows: list[tuple[str, float, float, float]], title: str) -> go.Figure:
    """rows: (label, weights, kv, activations) bytes; title: the takeaway (sim.cost.roofline.bytes_takeaway)."""
    fig = go.Figure()
    labels = [r[0] for r in rows]
    for i, (part, color) in enumerate((("weights", "#4c78a8"), ("KV cache", "#e45756"), ("activations", "#72b7b2"))):
        fig.add_bar(y=labels, x=[r[i + 1] / 1e9 for r in rows], name=part, orientation="h", marker_color=color,
                    hovertemplate=f"{part}: %{{x:,.3f}} GB<extra></extra>")
    fig.update_layout(barmode="stack")
    # in GB, not plotly's SI "150B" (billions), which reads as 150 bytes
    fig.update_xaxes(title_text="moved per step (GB, 10⁹ bytes)")
    fig.update_yaxes(title_text="step")
    base_layout(fig, "", "", "", height=260)
    return set_headline(fig, title, FULL_WIDTH_CHARS)
