"""Figures for the Attention masks page."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline


def token_labels(ids: list[int]) -> list[str]:
    """One short printable label per byte, made unique by position for the axis."""
    out = []
    for i, t in enumerate(ids):
        ch = chr(t) if 33 <= t < 127 else {32: "␣", 10: "⏎"}.get(t, "·")
        out.append(f"{ch}<sub>{i}</sub>")
    return out


def mask_heatmap(mask: np.ndarray, labels: list[str], title: str) -> go.Figure:
    z = mask.astype(float)
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        colorscale=[[0, "#eeeeee"], [1, CACHED]],
        hovertemplate="query %{y} → key %{x}: %{z}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed", title_text="query (row)")
    fig.update_xaxes(title_text="key (column)", side="top", tickangle=0)
    n = len(labels)
    return base_layout(fig, title, "", "", height=max(360, min(720, 18 * n + 120)))


def attention_pair(a: np.ndarray, b: np.ndarray, labels: list[str], titles: tuple[str, str]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    for col, z in ((1, a), (2, b)):
        fig.add_heatmap(z=z, x=labels, y=labels, zmin=0, zmax=1, colorscale="Blues", showscale=col == 2,
                        hovertemplate="query %{y} → key %{x}: %{z:.3f}<extra></extra>", row=1, col=col)
    fig.update_yaxes(autorange="reversed", title_text="query (token)", tickfont=dict(size=9))
    fig.update_xaxes(tickangle=0, tickfont=dict(size=9), title_text="key (token)")
    return base_layout(fig, "Attention weights (rows sum to 1)", "", "", height=520)


def row_weights(variant_to_weights: dict[str, np.ndarray], allowed: np.ndarray, labels: list[str], row: int) -> go.Figure:
    fig = go.Figure()
    for name, w in variant_to_weights.items():
        fig.add_bar(x=labels, y=w, name=name)
    forbidden = [i for i, ok in enumerate(allowed) if not ok]
    if forbidden:
        fig.add_vrect(x0=forbidden[0] - 0.5, x1=forbidden[-1] + 0.5, fillcolor=NAIVE, opacity=0.08, line_width=0,
                      annotation_text="masked (future) keys", annotation_position="top left")
    fig.update_layout(barmode="group")
    return base_layout(fig, f"Softmax weights of query row {row}", "key", "weight", height=400)


def row_diffs(causal: list[float], full: list[float], title: str) -> go.Figure:
    """title: the takeaway (sim.attention.maps.append_takeaway)."""
    fig = go.Figure()
    x = list(range(len(causal)))
    fig.add_bar(x=x, y=full, name="no mask (every token sees every token)", marker_color=NAIVE)
    fig.add_bar(x=x, y=causal, name="causal mask", marker_color=CACHED)
    fig.update_layout(barmode="group")
    base_layout(fig, "", "position", "max |Δ logit|", height=360)
    return set_headline(fig, title, FULL_WIDTH_CHARS)
