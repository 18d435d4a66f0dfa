"""Figures for the Decode cost page."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, NAIVE, PART_COLORS, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline
from sim.cost.decode_readouts import PART_LABELS

HALF_WIDTH_CHARS = 44  # the two at-scale charts share the page's width
SUBPLOT_TITLES_PX = 24  # room for the subplot titles between the headline and the plots


def flops_per_step(naive: pd.DataFrame, cached: pd.DataFrame, formula_naive: list[int],
                   formula_cached: list[int], log_y: bool, title: str) -> go.Figure:
    """title: the takeaway (sim.cost.decode_readouts.per_step_takeaway)."""
    fig = go.Figure()
    for df, formula, name, color in ((naive, formula_naive, "naive", NAIVE), (cached, formula_cached, "cached", CACHED)):
        fig.add_scatter(x=df["step"], y=df["flops"], mode="markers", name=f"{name}: counted on the model",
                        marker=dict(color=color, size=6))
        fig.add_scatter(x=df["step"], y=formula, mode="lines", name=f"{name}: closed-form formula",
                        line=dict(color=FORMULA, width=1.5, dash="dot" if name == "cached" else "dash"))
    fig.update_yaxes(type="log" if log_y else "linear")
    base_layout(fig, "", "step (0 = prefill)", "FLOPs")
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def cumulative_flops(naive: pd.DataFrame, cached: pd.DataFrame, title: str) -> go.Figure:
    """title: the takeaway (DecodeComparison.flops_takeaway)."""
    fig = go.Figure()
    fig.add_scatter(x=naive["step"], y=naive["flops"].cumsum(), name="naive", line=dict(color=NAIVE, width=3))
    fig.add_scatter(x=cached["step"], y=cached["flops"].cumsum(), name="cached", line=dict(color=CACHED, width=3))
    base_layout(fig, "", "step", "FLOPs so far")
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def wall_time_per_step(naive: pd.DataFrame, cached: pd.DataFrame, title: str) -> go.Figure:
    """title: the takeaway (DecodeComparison.wall_time_takeaway)."""
    fig = go.Figure()
    fig.add_scatter(x=naive["step"], y=naive["wall_s"] * 1e3, name="naive", mode="lines+markers",
                    line=dict(color=NAIVE), marker=dict(size=4))
    fig.add_scatter(x=cached["step"], y=cached["wall_s"] * 1e3, name="cached", mode="lines+markers",
                    line=dict(color=CACHED), marker=dict(size=4))
    base_layout(fig, "", "step", "milliseconds")
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def flops_by_part(naive: pd.DataFrame, cached: pd.DataFrame, title: str) -> go.Figure:
    """title: the takeaway (sim.cost.decode_readouts.parts_takeaway)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("naive: recompute everything", "cached: one new token"))
    for col, df in ((1, naive), (2, cached)):
        for part, label in PART_LABELS.items():
            fig.add_scatter(x=df["step"], y=df[f"flops_{part}"], name=label, stackgroup=f"s{col}",
                            line=dict(color=PART_COLORS[part], width=0.5), legendgroup=part,
                            showlegend=col == 1, row=1, col=col)
    fig.update_yaxes(title_text="FLOPs per step")
    fig.update_xaxes(title_text="step (0 = prefill)")
    base_layout(fig, "", "", "", height=420)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLES_PX)


def computed_grid(naive: np.ndarray, cached: np.ndarray, token_labels: list[str], title: str) -> go.Figure:
    """title: the takeaway (sim.cost.decode_readouts.grid_takeaway); the colours are named in the page's caption."""
    colorscale = [[0, "#f4f4f4"], [0.33, "#f4f4f4"], [0.34, "#9ecae1"], [0.66, "#9ecae1"], [0.67, "#d62728"], [1, "#d62728"]]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.06,
                        subplot_titles=("naive: Q, K, V recomputed for every position",
                                        "cached: one new Q, K, V; earlier K, V read"))
    hover = np.array(["untouched", "K, V read from cache", "Q, K, V computed"])
    for col, grid in ((1, naive), (2, cached)):
        fig.add_heatmap(z=grid, zmin=0, zmax=2, colorscale=colorscale, showscale=False, xgap=1, ygap=1,
                        x=list(range(grid.shape[1])), y=list(range(grid.shape[0])),
                        customdata=hover[grid], hovertemplate="step %{y}, position %{x}: %{customdata}<extra></extra>",
                        row=1, col=col)
    fig.update_yaxes(autorange="reversed", title_text="step (one per new token)")
    fig.update_xaxes(title_text="position (token)", tickmode="array", tickvals=list(range(len(token_labels))),
                     ticktext=token_labels, tickangle=0, tickfont=dict(size=10))
    base_layout(fig, "", "", "", height=460)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLES_PX)


def scale_figure(points, total: bool, title: str) -> go.Figure:
    """title: the takeaway (sim.cost.decode_readouts.scale_takeaway)."""
    x = [p.length for p in points]
    naive = [p.naive_total if total else p.naive_step for p in points]
    cached = [p.cached_total if total else p.cached_step for p in points]
    fig = go.Figure()
    fig.add_scatter(x=x, y=naive, name="naive: O(N²·D² + N³·D)" if total else "naive: O(N·D² + N²·D)",
                    line=dict(color=NAIVE, width=3))
    fig.add_scatter(x=x, y=cached, name="cached: O(N·D² + N²·D)" if total else "cached: O(D² + N·D)",
                    line=dict(color=CACHED, width=3))
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    base_layout(fig, "", "sequence length N (tokens)", "FLOPs to generate N tokens" if total else "FLOPs of the step at N")
    return set_headline(fig, title, HALF_WIDTH_CHARS)
