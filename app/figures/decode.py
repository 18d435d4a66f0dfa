"""Figures for the Decode cost page. Each takes `lang` ("en" or "ko") for its legend, axis and subplot titles; the
title it is given (the takeaway) is already worded in that language."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, NAIVE, PART_COLORS, base_layout, si_log_ticks
from app.figures.headline import FULL_WIDTH_CHARS, HALF_WIDTH_CHARS, set_headline
from sim.words import text
from sim.words.decode import PART_LABELS, mode_label, part_label

SUBPLOT_TITLES_PX = 24  # room for the subplot titles between the headline and the plots
# the growth orders in the at-scale legends: per step, and for the whole answer
ORDERS = {("naive", False): "O(N·D² + N²·D)", ("cached", False): "O(D² + N·D)",
          ("naive", True): "O(N²·D² + N³·D)", ("cached", True): "O(N·D² + N²·D)"}


def _t(lang: str, key: str, **fields: object) -> str:
    return text(lang, f"decode.fig.{key}", **fields)


def _grid_hover(lang: str) -> str:
    return f"{_t(lang, 'step')} %{{y}}, {_t(lang, 'position')} %{{x}}: %{{customdata}}<extra></extra>"


def flops_per_step(naive: pd.DataFrame, cached: pd.DataFrame, formula_naive: list[int],
                   formula_cached: list[int], log_y: bool, title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.decode.per_step_takeaway)."""
    fig = go.Figure()
    for df, formula, mode, color in ((naive, formula_naive, "naive", NAIVE), (cached, formula_cached, "cached", CACHED)):
        fig.add_scatter(x=df["step"], y=df["flops"], mode="markers", name=_t(lang, "counted", mode=mode_label(mode, lang)),
                        marker=dict(color=color, size=6))
        fig.add_scatter(x=df["step"], y=formula, mode="lines", name=_t(lang, "formula", mode=mode_label(mode, lang)),
                        line=dict(color=FORMULA, width=1.5, dash="dot" if mode == "cached" else "dash"))
    if log_y:
        fig.update_yaxes(type="log", **si_log_ticks([*naive["flops"], *cached["flops"], *formula_naive, *formula_cached]))
    else:
        fig.update_yaxes(type="linear", exponentformat="SI")  # 1G, not plotly's 1B
    base_layout(fig, "", _t(lang, "step_prefill"), _t(lang, "flops"))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def cumulative_flops(naive: pd.DataFrame, cached: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (DecodeComparison.flops_takeaway)."""
    fig = go.Figure()
    fig.add_scatter(x=naive["step"], y=naive["flops"].cumsum(), name=mode_label("naive", lang),
                    line=dict(color=NAIVE, width=3))
    fig.add_scatter(x=cached["step"], y=cached["flops"].cumsum(), name=mode_label("cached", lang),
                    line=dict(color=CACHED, width=3))
    fig.update_yaxes(exponentformat="SI")  # 1G, not plotly's 1B
    base_layout(fig, "", _t(lang, "step"), _t(lang, "flops_so_far"))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def wall_time_per_step(naive: pd.DataFrame, cached: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (DecodeComparison.wall_time_takeaway)."""
    fig = go.Figure()
    fig.add_scatter(x=naive["step"], y=naive["wall_s"] * 1e3, name=mode_label("naive", lang), mode="lines+markers",
                    line=dict(color=NAIVE), marker=dict(size=4))
    fig.add_scatter(x=cached["step"], y=cached["wall_s"] * 1e3, name=mode_label("cached", lang), mode="lines+markers",
                    line=dict(color=CACHED), marker=dict(size=4))
    base_layout(fig, "", _t(lang, "step"), _t(lang, "milliseconds"))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def flops_by_part(naive: pd.DataFrame, cached: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.decode.parts_takeaway)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(_t(lang, "parts_naive"), _t(lang, "parts_cached")))
    for col, df in ((1, naive), (2, cached)):
        for part in PART_LABELS:
            fig.add_scatter(x=df["step"], y=df[f"flops_{part}"], name=part_label(part, lang), stackgroup=f"s{col}",
                            line=dict(color=PART_COLORS[part], width=0.5), legendgroup=part,
                            showlegend=col == 1, row=1, col=col)
    fig.update_yaxes(title_text=_t(lang, "flops_per_step"), exponentformat="SI")
    fig.update_xaxes(title_text=_t(lang, "step_prefill"))
    base_layout(fig, "", "", "", height=420)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLES_PX)


def computed_grid(naive: np.ndarray, cached: np.ndarray, token_labels: list[str], title: str,
                  lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.decode.grid_takeaway); the colours are named in the page's caption."""
    colorscale = [[0, "#f4f4f4"], [0.33, "#f4f4f4"], [0.34, "#9ecae1"], [0.66, "#9ecae1"], [0.67, "#d62728"], [1, "#d62728"]]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.06,
                        subplot_titles=(_t(lang, "grid_naive"), _t(lang, "grid_cached")))
    hover = np.array([_t(lang, "cell.untouched"), _t(lang, "cell.read"), _t(lang, "cell.computed")])
    for col, grid in ((1, naive), (2, cached)):
        fig.add_heatmap(z=grid, zmin=0, zmax=2, colorscale=colorscale, showscale=False, xgap=1, ygap=1,
                        x=list(range(grid.shape[1])), y=list(range(grid.shape[0])),
                        customdata=hover[grid], hovertemplate=_grid_hover(lang), row=1, col=col)
    fig.update_yaxes(autorange="reversed", title_text=_t(lang, "step_per_token"))
    fig.update_xaxes(title_text=_t(lang, "position_token"), tickmode="array", tickvals=list(range(len(token_labels))),
                     ticktext=token_labels, tickangle=0, tickfont=dict(size=10))
    base_layout(fig, "", "", "", height=460)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLES_PX)


def scale_figure(points, total: bool, title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.decode.scale_takeaway)."""
    x = [p.length for p in points]
    naive = [p.naive_total if total else p.naive_step for p in points]
    cached = [p.cached_total if total else p.cached_step for p in points]
    fig = go.Figure()
    for mode, y, color in (("naive", naive, NAIVE), ("cached", cached, CACHED)):
        fig.add_scatter(x=x, y=y, name=f"{mode_label(mode, lang)}: {ORDERS[mode, total]}", line=dict(color=color, width=3))
    ticks = x[::2]  # every other power of two, whole numbers: plotly's own log ticks label 2s and 5s as bare digits
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{n:,}" for n in ticks])
    fig.update_yaxes(type="log", **si_log_ticks(naive + cached))
    base_layout(fig, "", _t(lang, "length_n"), _t(lang, "flops_total" if total else "flops_at_n"))
    return set_headline(fig, title, HALF_WIDTH_CHARS)
