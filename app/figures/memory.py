"""Figures for the KV memory page; each builder takes `lang` ("en", "ko") for its labels (sim/words/catalog.py)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from app.figures import CACHED, FORMULA, LABEL_BG, LEGEND_BELOW, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, column_chars, set_headline
from sim.cost.capacity import Capacity, DtypeRow
from sim.cost.memory import GiB, KvGrid, VariantCurves, fmt_bytes
from sim.words import text

ATTENTION_COLORS = {"MHA": NAIVE, "GQA": CACHED, "MQA": "#2ca02c", "MLA": "#9467bd"}
NARROW_CHARS = column_chars(2 / 5)  # the "Does it fit?" chart sits in the page's narrower column (3 : 2)
PART_COLORS = {"weights": "#4c78a8", "kv": "#e45756", "free": "#54a24b", "aside": "#c7c7c7"}  # capacity.PARTS


def _t(lang: str, key: str, **fields: object) -> str:
    return text(lang, f"kvmem.fig.{key}", **fields)


def _count_label(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return f"{n:,}"


def _log2_ticks(values) -> tuple[list[float], list[str]]:
    lo, hi = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    step = 1 if hi - lo <= 12 else 2
    exps = list(range(lo, hi + 1, step))
    return [float(e) for e in exps], [_count_label(2**e) for e in exps]


def kv_heatmap(grid: KvGrid, kv_budget: int | None, point: tuple[int, int], max_context: int, title: str,
               lang: str = "en") -> go.Figure:
    """Total KV bytes over batch (y) × context (x), both on log2 axes; the GPU's room for the cache
    as an orange contour line; the chosen (context, batch) as a marker. title: the takeaway
    (sim.words.cost.grid_takeaway), any user text in it already escaped."""
    z_bytes = np.array(grid.total_bytes, dtype=float)  # (batches, contexts)
    z = np.log10(z_bytes)
    x = np.log2(np.array(grid.contexts, dtype=float))
    y = np.log2(np.array(grid.batches, dtype=float))
    text = np.array([[fmt_bytes(v) for v in row] for row in grid.total_bytes])
    lo, hi = math.floor(z.min()), math.ceil(z.max())
    ticks = [v for v in (2**10, 2**20, 2**24, 2**27, 2**30, 2**33, 2**36, 2**40, 2**43, 2**46, 2**50, 2**53)
             if lo <= math.log10(v) <= hi]
    fig = go.Figure()
    fig.add_heatmap(
        x=x, y=y, z=z, text=text, colorscale="Viridis", zsmooth=False,
        colorbar=dict(title=_t(lang, "kv_bytes"), tickvals=[math.log10(v) for v in ticks], ticktext=[fmt_bytes(v) for v in ticks]),
        customdata=np.array([[[b, s] for s in grid.contexts] for b in grid.batches]),
        hovertemplate=_t(lang, "heat_hover") + "<extra></extra>",
    )
    if kv_budget is not None and kv_budget > 0 and z.min() < math.log10(kv_budget) < z.max():
        level = math.log10(kv_budget)
        fig.add_contour(
            x=x, y=y, z=z, showscale=False, hoverinfo="skip", name=_t(lang, "room_line", room=fmt_bytes(kv_budget)),
            contours=dict(start=level, end=level, size=1, coloring="none"), line=dict(color="#ff9900", width=5),
            showlegend=True,
        )
    fig.add_scatter(x=[math.log2(point[0])], y=[math.log2(point[1])], mode="markers", name=_t(lang, "your_setting"),
                    marker=dict(symbol="x", size=16, color="#ff2d2d", line=dict(width=2, color="white")),
                    hovertemplate=_t(lang, "setting_hover", b=f"{point[1]:,}", s=f"{point[0]:,}") + "<extra></extra>")
    if grid.contexts[0] <= max_context <= grid.contexts[-1]:
        fig.add_vline(x=math.log2(max_context), line=dict(color="white", dash="dash", width=2),
                      annotation_text=_t(lang, "trained", n=f"{max_context:,}"), annotation_font_color="white",
                      annotation_position="bottom left")
    xt, xl = _log2_ticks(grid.contexts)
    yt, yl = _log2_ticks(grid.batches)
    fig.update_xaxes(tickvals=xt, ticktext=xl, range=[x.min() - 0.25, x.max() + 0.25])
    fig.update_yaxes(tickvals=yt, ticktext=yl, range=[y.min() - 0.25, y.max() + 0.25])
    fig = base_layout(fig, "", _t(lang, "x_context"), _t(lang, "y_batch"), height=480)
    fig.update_layout(legend=dict(bgcolor="rgba(128,128,128,0.15)"))  # readable on either theme
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def _byte_ticks(lo: float, hi: float, max_ticks: int = 8) -> tuple[list[float], list[str]]:
    """Powers of two between lo and hi bytes, at most max_ticks of them, labelled in binary units."""
    a, b = math.floor(math.log2(max(lo, 1))), math.ceil(math.log2(max(hi, 2)))
    step = max(1, math.ceil((b - a + 1) / max_ticks))
    exps = range(b, a - 1, -step)
    return [float(2**e) for e in exps], [fmt_bytes(2**e) for e in exps]


def variant_lines(curves: VariantCurves, kv_budget: int | None, context: int, title: str, lang: str = "en") -> go.Figure:
    """Total KV bytes vs context for MHA / GQA / MQA / MLA of the same model, log-log. title: the takeaway
    (sim.words.cost.variants_takeaway), any user text in it already escaped."""
    fig = go.Figure()
    values_all = [v for vs in curves.name_to_bytes.values() for v in vs]
    x_ends = [curves.contexts[0], curves.contexts[-1]]
    if kv_budget is not None and kv_budget > 0:
        values_all.append(kv_budget)
        fig.add_scatter(x=x_ends, y=[kv_budget, kv_budget], mode="lines", name=_t(lang, "room", room=fmt_bytes(kv_budget)),
                        line=dict(color=FORMULA, dash="dash", width=2), hoverinfo="skip")
    for name, values in curves.name_to_bytes.items():
        arch = curves.name_to_arch[name]
        per_token = curves.name_to_token_bytes[name]
        fig.add_scatter(
            x=list(curves.contexts), y=list(values), mode="lines", name=_t(lang, "per_token", name=name, b=fmt_bytes(per_token)),
            line=dict(color=ATTENTION_COLORS[name], width=3, dash="solid" if name != "MLA" else "dot"),
            customdata=[fmt_bytes(v) for v in values],
            hovertemplate=_t(lang, "var_hover", name=name,
                             heads=arch.n_kv_heads if name != "MLA" else _t(lang, "latent")) + "<extra></extra>",
        )
    fig.add_vline(x=context, line=dict(color="#888", dash="dot"))
    xt, xl = _log2_ticks(curves.contexts)
    yt, yl = _byte_ticks(min(values_all), max(values_all))
    fig.update_xaxes(type="log", tickvals=[2**v for v in xt], ticktext=xl)
    fig.update_yaxes(type="log", tickvals=yt, ticktext=yl)
    base_layout(fig, "", _t(lang, "x_var", n=f"{context:,}"), _t(lang, "y_var", n=f"{curves.batch:,}"), height=440)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


LABEL_ROW_PX = 24  # one row of line labels above the plot (presenter mode's 17-px type)
USABLE_COLOR = "#ff7f0e"  # the usable line: the cache's edge, apart from the GPU's own (FORMULA)


def edge_anchor(x: float, lo: float, hi: float) -> str:
    """How a label at x on an axis from lo to hi is anchored so that it runs toward the middle, never past the
    plot's side: its right end at x on the right half, its left end at x on the left half."""
    return "right" if x > (lo + hi) / 2 else "left"


def memory_breakdown(cap: Capacity, gpu_label: str, title: str, lang: str = "en") -> go.Figure:
    """One bar: weights, KV cache and the room left for more KV, from 0; behind it the part kept aside (1 −
    utilization) from the usable line to the GPU's end. Both lines drawn and labelled above the plot, so a bar
    that ends past the usable line is seen not to fit (the title says it) even when it ends before the GPU's end;
    the stretch past the usable line is marked "over by" under the bar. title: whether it fits
    (Capacity.takeaway), wrapped for the narrow column the page gives it."""
    fig = go.Figure()
    demand = cap.weight_bytes + cap.kv_bytes
    hi = max(cap.total_bytes, demand) * 1.04 / GiB
    parts = dict(cap.breakdown())
    bases = {"weights": 0, "kv": cap.weight_bytes, "free": demand, "aside": cap.usable_bytes}
    for key in ("aside", "weights", "kv", "free"):  # the kept-aside band first: a cache over the line covers it
        b = parts.get(key, 0)
        if b <= 0:
            continue
        part = text(lang, f"kvmem.part.{key}")
        fig.add_bar(y=[""], x=[b / GiB], base=[bases[key] / GiB], orientation="h", name=f"{part}: {fmt_bytes(b)}",
                    marker_color=PART_COLORS[key], width=0.6, legendrank=2000 if key == "aside" else 1000,
                    text=[f"{part}<br>{fmt_bytes(b)}" if key != "aside" else ""],
                    textposition="inside", insidetextanchor="middle",
                    hovertemplate=f"{part}: {fmt_bytes(b)}<extra></extra>")
    lines = ((cap.total_bytes, dict(color=FORMULA, width=3), f"{gpu_label}: {fmt_bytes(cap.total_bytes)}", 1),
             (cap.usable_bytes, dict(color=USABLE_COLOR, width=3, dash="dash"),
              text(lang, "density.fit.usable_line", pct=f"{100 * cap.usable_bytes / cap.total_bytes:.3g}",
                   b=fmt_bytes(cap.usable_bytes)), 0))
    for at, line, label, row in lines:  # the GPU's label on the upper row, the usable one under it
        x = at / GiB
        fig.add_vline(x=x, line=line)
        fig.add_annotation(x=x, xref="x", y=1, yref="paper", yanchor="bottom", xanchor=edge_anchor(x, 0, hi),
                           yshift=2 + row * LABEL_ROW_PX, text=label, showarrow=False,
                           font=dict(color=line["color"]))
    over = demand - cap.usable_bytes
    if over > 0:  # the stretch past the usable line, under the bar
        x0, x1 = cap.usable_bytes / GiB, demand / GiB
        fig.add_shape(type="line", x0=x0, x1=x1, y0=-0.45, y1=-0.45, xref="x", yref="y",
                      line=dict(color=NAIVE, width=4))
        x = x1 if edge_anchor(x1, 0, hi) == "right" else x0
        fig.add_annotation(x=x, y=-0.5, xref="x", yref="y", yanchor="top", xanchor=edge_anchor(x1, 0, hi),
                           text=_t(lang, "over", b=fmt_bytes(over)), showarrow=False, font=dict(color=NAIVE),
                           bgcolor=LABEL_BG)
    fig.update_layout(barmode="overlay", uniformtext=dict(minsize=11, mode="hide"))
    fig.update_xaxes(range=[0, hi])
    fig.update_yaxes(showticklabels=False, range=[-0.9, 0.45])  # one bar: the GPU; under it the "over by" mark
    fig = base_layout(fig, "", _t(lang, "x_gpu"), "", height=260)
    fig.update_layout(legend=dict(LEGEND_BELOW, traceorder="normal"),
                      margin=dict(b=60))
    return set_headline(fig, title, NARROW_CHARS, below_px=2 * LABEL_ROW_PX + 4)  # below it: the lines' labels


def dtype_bars(rows: tuple[DtypeRow, ...], chosen: str, title: str, lang: str = "en") -> go.Figure:
    """Max concurrent requests at the chosen context for every KV dtype; title: the takeaway
    (sim.words.cost.dtypes_takeaway)."""
    fig = go.Figure()
    fig.add_bar(
        x=[r.kv_dtype.upper() for r in rows], y=[r.max_requests for r in rows],
        marker_color=[NAIVE if r.kv_dtype == chosen else CACHED for r in rows],
        text=[_t(lang, "dt_bar", n=f"{r.max_requests:,}", x=f"{r.vs_fp16:.3g}") for r in rows], textposition="outside",
        customdata=[fmt_bytes(r.per_request_bytes) for r in rows],
        hovertemplate=_t(lang, "dt_hover") + "<extra></extra>",
    )
    top = max([r.max_requests for r in rows] + [1])
    fig.update_yaxes(range=[0, top * 1.25])
    base_layout(fig, "", _t(lang, "x_dtype"), _t(lang, "y_requests"), height=400)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def engine_bars(rows: list[dict], title: str, lang: str = "en") -> go.Figure:
    """Per layer group, bytes per request by the exact formula next to what a vLLM-style allocator reserves
    (rows: sim.words.cost.group_rows), log axis; title: the takeaway (sim.words.cost.engine_takeaway)."""
    fig = go.Figure()
    groups = [r["Group"] for r in rows]
    values = []
    for key, col, color in (("exact", "Per request (B)", CACHED), ("blocks", "vLLM reserves (B)", NAIVE)):
        name = _t(lang, key)
        ys = [max(r[col], 1) for r in rows]
        values += ys
        fig.add_bar(x=groups, y=ys, name=name, marker_color=color, text=[fmt_bytes(v) for v in ys],
                    textposition="outside", hovertemplate=f"%{{x}}, {name}: %{{text}}<extra></extra>")
    yt, yl = _byte_ticks(min(values) / 2, max(values) * 4)
    fig.update_yaxes(type="log", tickvals=yt, ticktext=yl)
    fig.update_layout(barmode="group")
    base_layout(fig, "", _t(lang, "x_group"), _t(lang, "y_bytes"), height=420)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def prefix_staircase(lengths, rates, prompt_len: int, prompt_rate: float, block_size: int, title: str,
                     lang: str = "en") -> go.Figure:
    """The share of a prompt sent twice that comes from the prefix cache, against its length: 0 up to one block,
    then a sawtooth that jumps at every block boundary (sim.cost.prefix_hit). The chosen prompt marked; the block
    boundaries as dotted lines. title: the takeaway (its user text already escaped)."""
    fig = go.Figure()
    fig.add_scatter(x=list(lengths), y=[100 * r for r in rates], mode="lines", line=dict(color=CACHED, width=2),
                    name=text(lang, "engine.fig.hit_rate"), hovertemplate=text(lang, "engine.fig.hover") + "<extra></extra>")
    top = max(lengths)
    for k in range(1, min(top // block_size, 40) + 1):
        fig.add_vline(x=k * block_size, line=dict(color="#bbbbbb", width=1, dash="dot"))
    fig.add_scatter(x=[prompt_len], y=[100 * prompt_rate], mode="markers", marker=dict(color=NAIVE, size=12),
                    name=text(lang, "engine.fig.your_prompt", n=f"{prompt_len:,}"),
                    hovertemplate=text(lang, "engine.fig.hover") + "<extra></extra>")
    base_layout(fig, "", text(lang, "engine.fig.x"), text(lang, "engine.fig.y"))
    fig.update_yaxes(range=[0, 100])
    fig.update_xaxes(range=[0, top])
    return set_headline(fig, title, FULL_WIDTH_CHARS)
