"""Figures for the Paged KV blocks page: block grids, memory breakdowns, concurrency, block-size trade-off."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, LEGEND_BELOW, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, column_chars, set_headline
from sim.words import text

POLICY_COLORS = {
    "paged": CACHED,
    "reserve_max_len": NAIVE,
    "reserve_max_tokens": "#ff7f0e",
    "first_fit": "#9467bd",
}
POLICY_SHORT = {p: text("en", f"paged.short.{p}") for p in POLICY_COLORS}  # the English; policy_short words it
KIND_COLORS = {
    "tokens": "#2ca02c",
    "last_block": "#98df8a",
    "future": "#ffbb78",
    "never_used": "#d62728",
    "external": "#7f7f7f",
}
KIND_LABELS = {k: text("en", f"paged.kind.{k}") for k in KIND_COLORS}  # the English; kind_label words it
FREE_COLOR = "#ececec"
COLUMN_CHARS = column_chars(3 / 4)  # a chart in three quarters of the page
# Distinct, projector-friendly colours for owners (free blocks are light grey).
OWNER_COLORS = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#393b79", "#e6550d", "#31a354", "#843c39", "#7b4173", "#3182bd", "#a55194",
]


def policy_short(policy: str, lang: str = "en") -> str:
    """An allocator's short name in charts and metrics ('paged (vLLM)')."""
    return text(lang, f"paged.short.{policy}")


def kind_label(kind: str, lang: str = "en") -> str:
    """What a slot holds, as the breakdown charts' legend names it."""
    return text(lang, f"paged.kind.{kind}")


def owner_color(req: int) -> str:
    return OWNER_COLORS[req % len(OWNER_COLORS)]


def breakdown_bars(frame: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """Horizontal 100% bars: where each policy's claimed KV memory went (from Comparison.to_frame);
    title: the takeaway (sim.words.paging.memory_takeaway)."""
    fig = go.Figure()
    labels = [policy_short(p, lang) for p in frame["policy"]]
    for kind in KIND_LABELS:
        col = "real_tokens_pct" if kind == "tokens" else f"{kind}_pct"
        values = frame[col].to_numpy()
        fig.add_bar(y=labels, x=values, orientation="h", name=kind_label(kind, lang), marker_color=KIND_COLORS[kind],
                    text=[f"{v:.1f}%" if v >= 4 else "" for v in values], textposition="inside",
                    insidetextanchor="middle",
                    hovertemplate="%{y}: %{x:.2f}% " + kind_label(kind, lang) + "<extra></extra>")
    fig.add_vrect(x0=20.4, x1=38.2, fillcolor=FORMULA, opacity=0.15, line_width=0, layer="above")
    fig.add_annotation(x=29.3, y=1.0, yref="paper", yanchor="bottom", showarrow=False, font=dict(size=12),
                       text=text(lang, "paged.fig.paper_band"))
    fig.add_vline(x=96.3, line=dict(color=FORMULA, width=2, dash="dot"))
    fig.add_annotation(x=96.3, y=-0.02, yref="paper", yanchor="top", xanchor="right", showarrow=False,
                       font=dict(size=12), text=text(lang, "paged.fig.paper_paged"))
    fig.update_xaxes(range=[0, 100], ticksuffix="%")
    base_layout(fig, "", text(lang, "paged.fig.share_axis"), text(lang, "paged.fig.policy_axis"), height=470)
    fig.update_layout(barmode="stack", yaxis=dict(autorange="reversed"), margin=dict(t=80),
                      legend=LEGEND_BELOW)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=20)  # below it: the paper's band label


def concurrency_over_time(series: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.paging.concurrency_takeaway)."""
    fig = go.Figure()
    for policy, df in series.groupby("policy", sort=False):
        fig.add_scatter(x=df["step"], y=df["running"], name=policy_short(policy, lang), mode="lines",
                        line=dict(color=POLICY_COLORS[policy], width=2.5, shape="hv"))
    base_layout(fig, "", text(lang, "paged.fig.step_axis"), text(lang, "paged.fig.running_axis"), height=380)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def memory_over_time(series: pd.DataFrame, capacity: int, title: str, lang: str = "en") -> go.Figure:
    """2×2 small multiples: each policy's KV memory by kind over time, against the capacity (a dashed line,
    labelled in each panel); title: the takeaway (sim.words.paging.capacity_takeaway)."""
    policies = list(dict.fromkeys(series["policy"]))
    fig = make_subplots(rows=2, cols=2, shared_yaxes=True, shared_xaxes="all", vertical_spacing=0.1,
                        horizontal_spacing=0.04,
                        subplot_titles=[policy_short(p, lang) for p in policies])
    for i, policy in enumerate(policies):
        df = series[series["policy"] == policy]
        row, col = i // 2 + 1, i % 2 + 1
        for kind in KIND_LABELS:
            fig.add_scatter(x=df["step"], y=df[kind], name=kind_label(kind, lang), stackgroup=f"g{i}", mode="lines",
                            line=dict(width=0.5, color=KIND_COLORS[kind]), fillcolor=KIND_COLORS[kind],
                            legendgroup=kind, showlegend=i == 0, row=row, col=col)
        fig.add_hline(y=capacity, line=dict(color=FORMULA, dash="dash", width=1), row=row, col=col,
                      annotation_text=text(lang, "paged.fig.capacity", n=f"{capacity:,}"), annotation_position="top left",
                      annotation_font=dict(size=11, color=FORMULA))
    fig.update_yaxes(title_text=text(lang, "paged.fig.slots_axis"), col=1)
    fig.update_xaxes(title_text=text(lang, "paged.fig.step_axis"), row=2)
    base_layout(fig, "", "", "", height=680)
    fig.update_layout(legend=LEGEND_BELOW)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=24)  # below it: the first panels' titles


def block_grid(owner: np.ndarray, ref_cnt: np.ndarray, fill: np.ndarray, logical: np.ndarray, block_size: int,
               title: str, highlight_blocks: list[int] | None = None, cols: int | None = None,
               label_all: bool | None = None, width_px: int = 560, share: float = 1.0,
               lang: str = "en") -> go.Figure:
    """Physical blocks as a grid of square cells, coloured by owning request (grey = free).

    Shared blocks (ref_cnt > 1) get a dotted outline and the label ×ref_cnt; `highlight_blocks`
    (one request's table) get a thick outline and, when the cells are large enough, their logical
    index L0, L1, …  Hover shows block id, owner, logical index, ref count and filled slots.
    width_px sizes the cells; share is the chart's share of the page's width (its title is wrapped to fit it).
    """
    n = len(owner)
    if cols is None:
        cols = 8 if n <= 64 else 16 if n <= 256 else 32
    rows = max(1, -(-n // cols))
    cell = min(70, width_px / cols)
    pad = rows * cols - n
    own = np.concatenate([owner, np.full(pad, -2)])
    k = len(OWNER_COLORS)
    z = np.where(own >= 0, 1 + own % k, np.where(own == -1, 0, k + 1)).reshape(rows, cols)  # 0 free, k+1 padding
    palette = [FREE_COLOR] + OWNER_COLORS + ["#ffffff"]
    m = len(palette)
    colorscale = []
    for i, c in enumerate(palette):
        colorscale += [[i / m, c], [(i + 1) / m, c]]
    hl = set(highlight_blocks or [])
    big = cell >= 28
    label_all = big if label_all is None else label_all and big
    hover, cells = [], []
    for b in range(rows * cols):
        if b >= n:
            hover.append("")
            cells.append("")
            continue
        if owner[b] < 0:
            hover.append(text(lang, "paged.fig.hover_free", b=f"{b}"))
            cells.append("")
            continue
        shared = text(lang, "paged.fig.hover_shared", n=f"{ref_cnt[b]}") if ref_cnt[b] > 1 else ""
        hover.append(text(lang, "paged.fig.hover_block", b=f"{b}", req=f"{owner[b]}", logical=f"{logical[b]}",
                          shared=shared, fill=f"{fill[b]}", bs=f"{block_size}"))
        times = f"×{ref_cnt[b]}" if ref_cnt[b] > 1 else ""
        if b in hl and big:
            cells.append(f"L{logical[b]}{' ' + times if times else ''}")
        elif times:
            cells.append(times)
        elif label_all:
            cells.append(f"r{owner[b]}")
        else:
            cells.append("")
    fig = go.Figure(go.Heatmap(
        z=z, zmin=-0.5, zmax=m - 0.5, colorscale=colorscale, showscale=False, xgap=2, ygap=2,
        text=np.array(cells).reshape(rows, cols), texttemplate="%{text}",
        textfont=dict(size=14 if cell >= 40 else 11, color="#ffffff"),
        customdata=np.array(hover).reshape(rows, cols), hovertemplate="%{customdata}<extra></extra>",
    ))
    shapes = []
    for b in sorted(hl)[:400]:
        x, y = b % cols, b // cols
        shapes.append(dict(type="rect", x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5,
                           line=dict(color="#000000", width=3)))
    for b in [b for b in range(n) if ref_cnt[b] > 1 and b not in hl][:400]:
        x, y = b % cols, b // cols
        shapes.append(dict(type="rect", x0=x - 0.42, x1=x + 0.42, y0=y - 0.42, y1=y + 0.42,
                           line=dict(color="#000000", width=2, dash="dot")))
    fig.update_layout(shapes=shapes, plot_bgcolor="#ffffff")
    fig.update_xaxes(showgrid=False, zeroline=False, tickmode="array", tickvals=list(range(cols)), side="top",
                     ticktext=[f"+{c}" if cols <= 16 or c % 4 == 0 else "" for c in range(cols)],
                     range=[-0.5, cols - 0.5], constrain="domain", title_text=text(lang, "paged.fig.offset_axis"))
    fig.update_yaxes(showgrid=False, zeroline=False, autorange="reversed", tickmode="array",
                     tickvals=list(range(rows)), ticktext=[str(r * cols) for r in range(rows)],
                     scaleanchor="x", constrain="domain", title_text=text(lang, "paged.fig.row_axis"))
    base_layout(fig, "", "", "", height=int(110 + rows * cell))
    fig.update_layout(margin=dict(l=10, r=10, t=80, b=10))
    return set_headline(fig, title, column_chars(share), below_px=40)  # below it: the top axis


def heap_map(offsets: np.ndarray, sizes: np.ndarray, stored: np.ndarray, reqs: np.ndarray, capacity: int,
             title: str, lang: str = "en") -> go.Figure:
    """The contiguous first-fit heap as one address line: each extent's stored tokens (dark) and the
    rest of its reservation (light); gaps are free holes."""
    fig = go.Figure()
    for off, size, tok, r in zip(offsets, sizes, stored, reqs, strict=True):
        c = owner_color(int(r))
        fig.add_bar(y=["heap"], x=[tok], base=[off], orientation="h", marker=dict(color=c, line=dict(width=0)),
                    showlegend=False,
                    hovertemplate=text(lang, "paged.fig.hover_stored", r=f"{r}", n=f"{tok}") + "<extra></extra>")
        fig.add_bar(y=["heap"], x=[size - tok], base=[off + tok], orientation="h",
                    marker=dict(color=c, opacity=0.3, line=dict(width=0)), showlegend=False,
                    hovertemplate=text(lang, "paged.fig.hover_empty", r=f"{r}", n=f"{size - tok}")
                    + "<extra></extra>")
    fig.update_layout(barmode="overlay", bargap=0.2)
    fig.update_xaxes(range=[0, capacity])
    fig.update_yaxes(showticklabels=False)
    base_layout(fig, "", text(lang, "paged.fig.address_axis"), "", height=200)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def block_size_tradeoff(frame: pd.DataFrame, chosen: int, chosen_waste: float, chosen_table: float,
                        title: str, lang: str = "en") -> go.Figure:
    """Last-block waste and block-table length by block size, the chosen size starred; title: the takeaway
    (sim.words.paging.block_size_takeaway)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(x=frame["block_size"], y=100 * frame["last_block_waste"], name=text(lang, "paged.fig.waste_name"),
                    mode="lines+markers", line=dict(color=KIND_COLORS["never_used"], width=3))
    fig.add_scatter(x=frame["block_size"], y=frame["mean_table_len"], name=text(lang, "paged.fig.table_name"),
                    mode="lines+markers", line=dict(color=CACHED, width=3, dash="dot"), secondary_y=True)
    fig.add_scatter(x=[chosen], y=[100 * chosen_waste], mode="markers+text", text=[f"{100 * chosen_waste:.2f}%"],
                    textposition="top right", marker=dict(size=16, color=KIND_COLORS["never_used"], symbol="star"),
                    showlegend=False)
    fig.add_scatter(x=[chosen], y=[chosen_table], mode="markers+text", text=[text(lang, "paged.fig.entries", n=f"{chosen_table:.1f}")],
                    textposition="bottom left", marker=dict(size=16, color=CACHED, symbol="star"),
                    secondary_y=True, showlegend=False)
    base_layout(fig, "", text(lang, "paged.fig.bs_axis"), "", height=420)
    fig.update_xaxes(type="log", tickvals=frame["block_size"].tolist())
    fig.update_yaxes(title_text=text(lang, "paged.fig.waste_axis"), rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text=text(lang, "paged.fig.table_axis"), type="log", tickvals=[1, 10, 100, 1000, 10000],
                     showgrid=False, secondary_y=True)
    return set_headline(fig, title, COLUMN_CHARS)
