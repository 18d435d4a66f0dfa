"""Figures for the Serving page's engine tabs: latency against the chunk budget, recompute against swap, the block
pool at one step, a trace's prefix hits. Data in, go.Figure out; every title is the computed takeaway."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, LEGEND_BELOW, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline
from app.text import for_plotly
from sim.i18n import text
from sim.msg import Msg
from sim.words.serving import cell

SUBPLOT_TITLE_PX = 24
MODE_COLORS = {"recompute": NAIVE, "swap": CACHED}
FREE_COLOR = "#e8e8e8"
REQUEST_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf"]
GRID_COLUMNS = 8


def _cells(frame: pd.DataFrame, cells: dict | None, column: str) -> list:
    """A text column's cells: the run's messages when it gives them (`cell_msgs`), else the frame's own values."""
    return list(cells[column]) if cells and column in cells else list(frame[column])


def chunk_budget(frame: pd.DataFrame, title: str, lang: str = "en", cells: dict | None = None) -> go.Figure:
    """Left: inter-token latency p50/p99 at each budget; right: time to first token p50/p95; the last category is
    whole-prompt prefill (unchunked)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=[
        text(lang, "serving.g.gap_one"), text(lang, "serving.g.ttft")])
    x = [str(cell(lang, b)) for b in _cells(frame, cells, "budget")]
    for col, (a, b, unit, scale) in enumerate((("itl_p50_ms", "itl_p99_ms", "ms", 1), ("ttft_p50_s", "ttft_p95_s",
                                                                                      "s", 1)), start=1):
        for name, dash, color in ((a, "solid", CACHED), (b, "dot", NAIVE)):
            q = name.split("_")[1]
            fig.add_scatter(x=x, y=frame[name] * scale, mode="lines+markers", name=f"{q} ({unit})",
                            line=dict(color=color, dash=dash, width=2), legendgroup=f"{q}{col}", row=1, col=col,
                            hovertemplate=text(lang, "serving.g.budget_hover", q=q, unit=unit) + "<extra></extra>")
        fig.update_yaxes(title_text=text(lang, "serving.f.latency", unit=unit), rangemode="tozero", row=1, col=col)
    fig.update_xaxes(title_text=text(lang, "serving.g.budget_axis"), type="category")
    fig = base_layout(fig, "", "", "")
    fig.update_layout(legend=LEGEND_BELOW, height=440, margin=dict(l=10, r=10, t=90, b=10))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def preemption(frame: pd.DataFrame, title: str, lang: str = "en", cells: dict | None = None) -> go.Figure:
    """Recompute vs swap: tail latencies side by side, and what each paid (TFLOP computed again, GB moved)."""
    panels = tuple((key, text(lang, f"serving.g.{key}"), unit) for key, unit in
                   (("ttft_p95_s", "s"), ("itl_p99_ms", "ms"), ("e2e_p99_s", "s")))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p[1] for p in panels], horizontal_spacing=0.08)
    for col, (key, label, unit) in enumerate(panels, start=1):
        for (_, row), name in zip(frame.iterrows(), _cells(frame, cells, "preemption"), strict=True):
            mode, name = row["preemption"], cell(lang, name)  # mode: the run's key (its colour), name: its words
            fig.add_bar(x=[name], y=[row[key]], name=name, legendgroup=mode, showlegend=col == 1,
                        marker_color=MODE_COLORS[mode], text=[f"{row[key]:,.3g}"], textposition="outside",
                        cliponaxis=False, row=1, col=col, hovertemplate=f"{name}: %{{y:,.4g}}<extra>{label}</extra>")
        fig.update_yaxes(title_text=text(lang, "serving.f.latency", unit=unit), rangemode="tozero", row=1, col=col)
    fig.update_xaxes(title_text=text(lang, "serving.g.mode_axis"))
    fig = base_layout(fig, "", "", "")
    fig.update_layout(legend=LEGEND_BELOW, height=420, margin=dict(l=10, r=10, t=90, b=10))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def block_grid(num_blocks: int, block_size: int, tables: dict, ref_cnt, free_queue, title: str,
               name: str = "GPU", cached=(), lang: str = "en") -> go.Figure:
    """One cell per physical block, GRID_COLUMNS a row: coloured by the request holding it, labelled
    'r<request>.<logical index>' with its fill; a free block shows its place in the free queue; a block held by
    several requests shows ×ref_cnt; a free block that still holds a cached prefix says so (a hit can take it back)."""
    rows = -(-num_blocks // GRID_COLUMNS)
    owner = np.full(rows * GRID_COLUMNS, -2.0)  # -2: past the pool, -1: free
    labels = [""] * (rows * GRID_COLUMNS)
    for b in range(num_blocks):
        owner[b] = -1
    pos = {b: i for i, b in enumerate(free_queue)}
    cached = set(cached)
    for b, i in pos.items():
        labels[b] = f"{b}<br>" + text(lang, "serving.g.free_cached" if b in cached else "serving.g.free", i=f"{i + 1}")
    for req in sorted(tables):
        for i, b in enumerate(tables[req]):
            if owner[b] >= 0:
                continue  # shared: labelled by its first holder
            owner[b] = req
            shared = f" ×{ref_cnt[b]}" if ref_cnt is not None and ref_cnt[b] > 1 else ""
            labels[b] = f"{b}<br>r{req}.{i}{shared}"
    palette = ["rgba(0,0,0,0)", FREE_COLOR] + REQUEST_COLORS  # code 0: past the pool, 1: free, 2..: a request
    n = len(palette)
    colors = []
    for k, c in enumerate(palette):  # a step colour scale: code k fills [k/n, (k+1)/n]
        colors += [[k / n, c], [(k + 1) / n, c]]
    z = np.where(owner >= 0, owner % len(REQUEST_COLORS) + 2, owner + 2).reshape(rows, GRID_COLUMNS)
    fig = go.Figure(go.Heatmap(z=z, zmin=-0.5, zmax=n - 0.5, colorscale=colors, showscale=False, xgap=3, ygap=3,
                               text=np.array(labels, dtype=object).reshape(rows, GRID_COLUMNS), texttemplate="%{text}",
                               hoverinfo="text", x=list(range(GRID_COLUMNS)), y=list(range(rows))))
    fig.update_yaxes(autorange="reversed", tickvals=list(range(rows)),
                     ticktext=[str(r * GRID_COLUMNS) for r in range(rows)])
    fig.update_xaxes(tickvals=list(range(GRID_COLUMNS)), ticktext=[f"+{c}" for c in range(GRID_COLUMNS)])
    fig = base_layout(fig, "", text(lang, "serving.g.block_x", name=name), text(lang, "serving.g.block_y"),
                      height=120 + 46 * rows)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def trace_hits(frame: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """Each request's prompt: tokens served from the prefix cache and tokens computed (stacked)."""
    fig = go.Figure()
    x = [for_plotly(v) for v in frame["request"]]  # the file's own ids: plotly reads tags in labels
    fig.add_bar(x=x, y=frame["hit_tokens"], name=text(lang, "serving.g.from_cache"), marker_color=CACHED,
                hovertemplate=text(lang, "serving.g.cached_hover") + "<extra></extra>")
    fig.add_bar(x=x, y=frame["computed_tokens"], name=text(lang, "serving.g.computed"), marker_color=FORMULA,
                hovertemplate=text(lang, "serving.g.computed_hover") + "<extra></extra>")
    fig.update_layout(barmode="stack")
    fig = base_layout(fig, "", text(lang, "serving.g.request_axis"), text(lang, "serving.g.prompt_tokens"), height=380)
    fig.update_layout(legend=LEGEND_BELOW)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def _panels(titles: list[str]):
    return make_subplots(rows=1, cols=len(titles), subplot_titles=titles, horizontal_spacing=0.09)


def _finish(fig: go.Figure, title: str, x_title: str, height: int = 430) -> go.Figure:
    fig.update_xaxes(title_text=x_title)
    fig = base_layout(fig, "", "", "")
    fig.update_layout(legend=LEGEND_BELOW, height=height, margin=dict(l=10, r=10, t=90, b=10))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


TIER_COLORS = {"gpu_hit_pct": CACHED, "host_hit_pct": "#2ca02c", "disk_hit_pct": "#9467bd", "computed_pct": FORMULA}
TIER_KEYS = ("gpu_hit_pct", "host_hit_pct", "disk_hit_pct", "computed_pct")


def offload(frame: pd.DataFrame, title: str, lang: str = "en", cells: dict | None = None) -> go.Figure:
    """Left: where each prompt token came from, per set of tiers (stacked %); right: time to first token p50/p95."""
    fig = _panels([text(lang, "serving.g.where_from"), text(lang, "serving.g.ttft")])
    x = [cell(lang, v) for v in _cells(frame, cells, "tiers")]
    base = np.zeros(len(frame))
    for key in TIER_KEYS:
        label = text(lang, f"serving.g.{key}")  # stacked by hand (explicit base, one offset group): TTFT stays grouped
        fig.add_bar(x=x, y=frame[key], base=base.copy(), offsetgroup="share", name=label,
                    marker_color=TIER_COLORS[key], row=1, col=1, hovertemplate=f"%{{x}}: %{{y:.1f}}% {label}<extra></extra>")
        base += frame[key].to_numpy()
    for key, name, color in (("ttft_p50_s", "TTFT p50", CACHED), ("ttft_p95_s", "TTFT p95", NAIVE)):
        fig.add_bar(x=x, y=frame[key], name=name, marker_color=color, row=1, col=2, text=[f"{v:.3g}" for v in frame[key]],
                    textposition="outside", cliponaxis=False, hovertemplate=f"%{{x}}: {name} %{{y:.3g}} s<extra></extra>")
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=text(lang, "serving.g.share_axis"), range=[0, 100], row=1, col=1)
    fig.update_yaxes(title_text=text(lang, "serving.g.ttft_axis"), rangemode="tozero", row=1, col=2)
    return _finish(fig, title, text(lang, "serving.g.tiers_axis"))


def disagg(frame: pd.DataFrame, title: str, lang: str = "en", cells: dict | None = None) -> go.Figure:
    """Colocated vs disaggregated: time to first token, gaps between tokens, requests meeting both SLOs."""
    fig = _panels([text(lang, "serving.g.ttft"), text(lang, "serving.g.gap"), text(lang, "serving.g.slo_panel")])
    x = [cell(lang, Msg("serving.cell.colocated")), cell(lang, Msg("serving.cell.disaggregated"))]  # its two rows
    for col, pairs, unit in ((1, (("ttft_p50_s", "p50"), ("ttft_p95_s", "p95")), "s"),
                             (2, (("itl_p50_ms", "p50"), ("itl_p99_ms", "p99")), "ms")):
        for (key, q), color in zip(pairs, (CACHED, NAIVE), strict=True):
            fig.add_bar(x=x, y=frame[key], name=f"{q} ({unit})", marker_color=color, legendgroup=f"{q}{col}", row=1,
                        col=col, text=[f"{v:.3g}" for v in frame[key]], textposition="outside", cliponaxis=False,
                        hovertemplate=f"%{{x}}: {q} %{{y:.3g}} {unit}<extra></extra>")
        fig.update_yaxes(title_text=text(lang, "serving.f.latency", unit=unit), rangemode="tozero", row=1, col=col)
    fig.add_bar(x=x, y=frame["slo_met_pct"], name=text(lang, "serving.g.slo_met"), marker_color=FORMULA, row=1, col=3,
                text=[f"{v:.0f}%" for v in frame["slo_met_pct"]], textposition="outside", cliponaxis=False,
                hovertemplate=text(lang, "serving.g.slo_hover") + "<extra></extra>")
    fig.update_yaxes(title_text=text(lang, "serving.g.requests_pct"), range=[0, 110], row=1, col=3)
    fig.update_layout(barmode="group")
    return _finish(fig, title, text(lang, "serving.g.pool_axis"))


def routing(frame: pd.DataFrame, title: str, lang: str = "en", cells: dict | None = None) -> go.Figure:
    """Round-robin vs prefix-aware: prompt tokens from the cache, throughput, time to first token."""
    fig = _panels([text(lang, "serving.g.from_cache_panel"), text(lang, "serving.g.throughput"),
                   text(lang, "serving.g.ttft")])
    x = [cell(lang, v) for v in _cells(frame, cells, "router")]
    fig.add_bar(x=x, y=frame["hit_rate_pct"], name=text(lang, "serving.col.hit_rate_pct"), marker_color=CACHED, row=1, col=1,
                text=[f"{v:.0f}%" for v in frame["hit_rate_pct"]], textposition="outside", cliponaxis=False,
                hovertemplate="%{x}: %{y:.1f}%<extra></extra>")
    fig.add_bar(x=x, y=frame["throughput_tok_s"], name=text(lang, "serving.f.out_tok_s"), marker_color=FORMULA, row=1, col=2,
                text=[f"{v:,.0f}" for v in frame["throughput_tok_s"]], textposition="outside", cliponaxis=False,
                hovertemplate="%{x}: %{y:,.0f} tokens/s<extra></extra>")
    for key, q, color in (("ttft_p50_s", "p50", CACHED), ("ttft_p95_s", "p95", NAIVE)):
        fig.add_bar(x=x, y=frame[key], name=f"TTFT {q} (s)", marker_color=color, row=1, col=3,
                    text=[f"{v:.3g}" for v in frame[key]], textposition="outside", cliponaxis=False,
                    hovertemplate=f"%{{x}}: {q} %{{y:.3g}} s<extra></extra>")
    fig.update_yaxes(title_text=text(lang, "serving.g.prompt_pct"), range=[0, 110], row=1, col=1)
    fig.update_yaxes(title_text=text(lang, "serving.col.throughput_tok_s"), rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title_text=text(lang, "serving.g.ttft_axis"), rangemode="tozero", row=1, col=3)
    fig.update_layout(barmode="group")
    return _finish(fig, title, text(lang, "serving.g.router_axis"))
