"""Figures for the Prefix caching page: block hashes, hit rates by workload and layout, sweeps,
the tree of cached blocks, and the real model's prefill times and K/V differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, LEGEND_BELOW, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, HALF_WIDTH_CHARS, set_headline
from sim.alloc.byte_tokens import printable
from sim.alloc.prefix_sweeps import FATE_KEYS, BlockFate
from sim.i18n import text
from sim.words import say
from sim.words.prefix import fate_label

HIT = CACHED
COMPUTED = "#ff7f0e"
RECOMPUTED = NAIVE
PARTIAL = "#c7c7c7"
LAYOUT_COLORS = {"fixed_first": CACHED, "variable_first": NAIVE}
FATE_COLORS = {BlockFate.HIT: HIT, BlockFate.CACHED: COMPUTED, BlockFate.RECOMPUTED: RECOMPUTED,
               BlockFate.PARTIAL: PARTIAL}
FATE_SHORT = {f: text("en", f"prefix.fate_short.{k}") for f, k in FATE_KEYS.items()}  # the English legend


PER_REQUEST = {"x": "%{x}", "label": "%{customdata}", "y": "%{y:,}"}  # plotly's fields in the per-request hovers


def _layout_name(layout: str, lang: str) -> str:
    return text(lang, f"prefix.layout.{layout}")


def block_rows(frame: pd.DataFrame, changed_pos: int, block_size: int, title: str, lang: str = "en") -> go.Figure:
    """Prompt A and prompt B as rows of blocks coloured by what the cache did with them."""
    fates = list(FATE_COLORS)
    names = ["A", "B"]
    nb = int(frame["block"].max()) + 1
    z = np.full((2, nb), np.nan)
    cells = np.full((2, nb), "", dtype=object)
    hover = np.full((2, nb), "", dtype=object)
    for row in frame.to_dict("records"):
        r, b = names.index(row["request"]), row["block"]
        z[r, b] = fates.index(row["fate"])
        h = row["hash"][:6] if row["hash"] != "—" else text(lang, "prefix.fig.no_hash")
        body = printable(row["ids"])
        width = max(4, (len(body) + 1) // 2) if len(body) > 8 else len(body)
        lines = [body[i:i + width] for i in range(0, len(body), width)][:4]
        cells[r, b] = f"<b>{h}</b><br>" + "<br>".join(lines)
        parent = text(lang, "prefix.table.root") if row["parent hash"] == "root" else row["parent hash"]
        hover[r, b] = text(lang, "prefix.fig.hover_block", request=row["request"], b=f"{b}", tokens=row["tokens"],
                           hash=row["hash"], parent=parent, fate=fate_label(row["fate"], lang))
    m = len(fates)
    colorscale = []
    for i, f in enumerate(fates):
        colorscale += [[i / m, FATE_COLORS[f]], [(i + 1) / m, FATE_COLORS[f]]]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(nb)), y=[text(lang, "prefix.fig.prompt", name=n) for n in names], zmin=-0.5, zmax=m - 0.5,
        colorscale=colorscale, showscale=False, xgap=3, ygap=6, text=cells, texttemplate="%{text}",
        textfont=dict(size=13 if block_size <= 16 else 11, color="#000000"), customdata=hover,
        hovertemplate="%{customdata}<extra></extra>",
    ))
    for f in fates:  # legend entries
        fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(size=14, color=FATE_COLORS[f], symbol="square"),
                        name=text(lang, f"prefix.fate_short.{FATE_KEYS[f]}"))
    b = changed_pos // block_size
    fig.add_shape(type="rect", x0=b - 0.5, x1=b + 0.5, y0=0.5, y1=1.5, line=dict(color="#000000", width=4))
    fig.add_annotation(x=b, y=1.5, yanchor="top", text=text(lang, "prefix.fig.changed", pos=f"{changed_pos}"), showarrow=False,
                       font=dict(size=13, color="#000000"), bgcolor="#ffffff", yshift=-2)
    block_axis = text(lang, "prefix.fig.block_axis", bs=f"{block_size}")
    fig.update_xaxes(title_text=block_axis, tickmode="array", tickvals=list(range(nb)), showgrid=False, zeroline=False)
    fig.update_yaxes(autorange="reversed", showgrid=False)
    base_layout(fig, "", block_axis, text(lang, "prefix.fig.prompt_axis"), height=380)
    fig.update_layout(legend=LEGEND_BELOW,
                      margin=dict(t=60, b=10))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def layout_bars(frame: pd.DataFrame, labels: dict[str, str], selected: str, title: str, lang: str = "en") -> go.Figure:
    """Token hit rate of every workload, fixed content first vs variable content first; title: the takeaway
    (sim.words.prefix.layout_takeaway)."""
    fig = go.Figure()
    order = list(dict.fromkeys(frame["workload"]))
    ylab = [("▶ " if w == selected else "") + labels[w] for w in order]
    for layout in ("fixed_first", "variable_first"):
        name = _layout_name(layout, lang)
        df = frame[frame["layout"] == layout].set_index("workload").loc[order]
        vals = 100 * df["hit_rate"].to_numpy()
        fig.add_bar(y=ylab, x=vals, orientation="h", name=name, marker_color=LAYOUT_COLORS[layout],
                    text=[f"{v:.1f}%" for v in vals], textposition="outside",
                    customdata=np.stack([df["hit_tokens"], df["prompt_tokens"]], axis=1),
                    hovertemplate=text(lang, "prefix.fig.hover_layout", y="%{y}", x="%{x:.1f}", hit="%{customdata[0]:,}",
                                       total="%{customdata[1]:,}", name=name) + "<extra></extra>")
    fig.update_xaxes(range=[0, 112], ticksuffix="%")
    base_layout(fig, "", text(lang, "prefix.fig.hit_axis"), text(lang, "prefix.fig.workload_axis"), height=470)
    fig.update_layout(barmode="group", yaxis=dict(autorange="reversed"), bargap=0.25)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def per_request(frame: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """Each request's prompt tokens, hit vs computed; title: the takeaway (sim.words.prefix.per_request_takeaway)."""
    fig = go.Figure()
    labels = [say(lang, x) for x in frame["label"]]
    fig.add_bar(x=frame["request"], y=frame["hit_tokens"], name=text(lang, "prefix.fig.hit_name"), marker_color=HIT,
                customdata=labels, hovertemplate=text(lang, "prefix.fig.hover_hit", **PER_REQUEST) + "<extra></extra>")
    fig.add_bar(x=frame["request"], y=frame["computed_tokens"], name=text(lang, "prefix.fig.computed_name"),
                marker_color=NAIVE, customdata=labels,
                hovertemplate=text(lang, "prefix.fig.hover_computed", **PER_REQUEST) + "<extra></extra>")
    base_layout(fig, "", text(lang, "prefix.fig.request_axis"), text(lang, "prefix.fig.tokens_axis"), height=380)
    fig.update_layout(barmode="stack", bargap=0.05)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def sweep(frames: dict[str, pd.DataFrame], x: str, chosen: int, title: str, x_title: str,
          lang: str = "en") -> go.Figure:
    """Hit rate against capacity or block size, one line per layout; the chosen value marked. Drawn in half the
    page; title: the takeaway (sim.words.prefix.capacity_takeaway, block_size_takeaway)."""
    fig = go.Figure()
    for layout, df in frames.items():
        name = _layout_name(layout, lang)
        fig.add_scatter(x=df[x], y=100 * df["hit_rate"], mode="lines+markers", name=name,
                        line=dict(color=LAYOUT_COLORS[layout], width=3), marker=dict(size=9),
                        customdata=df["evictions"],
                        hovertemplate=text(lang, "prefix.fig.hover_sweep", x="%{x:,}", y="%{y:.1f}", ev="%{customdata:,}") + "<extra>" + name + "</extra>")
    fig.add_vline(x=chosen, line=dict(color=FORMULA, dash="dot", width=2))
    ticks = sorted(set().union(*(set(df[x].tolist()) for df in frames.values()))) if frames else []
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{v:,}" if v < 1024 else f"{v // 1024:,}k" for v in ticks])
    fig.update_yaxes(range=[-3, 103], ticksuffix="%")
    base_layout(fig, "", x_title, text(lang, "prefix.fig.hit_rate_axis"), height=380)
    return set_headline(fig, title, HALF_WIDTH_CHARS)


def radix_tree(segments: pd.DataFrame, block_size: int, labels: list[str], title: str,
               lang: str = "en") -> go.Figure:
    """The cached blocks as a tree: each horizontal bar is a run of blocks; requests are paths from the
    left. Blue runs are shared by several requests (×n), orange ones belong to one request."""
    fig = go.Figure()
    if segments.empty:
        return set_headline(base_layout(fig, "", text(lang, "prefix.fig.position_axis"), "", height=200), title,
                            FULL_WIDTH_CHARS)
    by_id = segments.set_index("segment")
    for seg in segments.itertuples(index=False):
        x0, x1 = seg.start_block * block_size, seg.end_block * block_size
        n = len(seg.requests)
        color = HIT if n > 1 else COMPUTED
        reqs = ", ".join(str(r) for r in seg.requests[:12]) + (" …" if n > 12 else "")
        hover = text(lang, f"prefix.fig.hover_tree.{'other' if n > 1 else 'one'}", lo=f"{seg.start_block}",
                     hi=f"{seg.end_block - 1}", t0=f"{x0:,}", t1=f"{x1 - 1:,}", by=f"{seg.created_by}",
                     label=say(lang, labels[seg.created_by]), n=f"{n}", reqs=reqs)
        fig.add_scatter(x=[x0, x1], y=[seg.lane, seg.lane], mode="lines+markers", line=dict(color=color, width=14),
                        marker=dict(symbol="line-ns", size=[18, 0], line=dict(width=3, color="#ffffff")),
                        showlegend=False, hoverinfo="text", text=[hover, hover])
        if not pd.isna(seg.parent):
            p = by_id.loc[int(seg.parent)]
            fig.add_scatter(x=[x0, x0], y=[p["lane"], seg.lane], mode="lines", showlegend=False, hoverinfo="skip",
                            line=dict(color="#555555", width=2))
        label = f"×{n}" if n > 1 else f"r{seg.requests[0]}"
        fig.add_annotation(x=(x0 + x1) / 2, y=seg.lane, text=label, showarrow=False, yshift=16,
                           font=dict(size=12, color="#000000"))
    for name, color in ((text(lang, "prefix.fig.tree_shared"), HIT), (text(lang, "prefix.fig.tree_one"), COMPUTED)):
        fig.add_scatter(x=[None], y=[None], mode="lines", line=dict(color=color, width=10), name=name)
    lanes = int(segments["lane"].max()) + 1
    fig.update_yaxes(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False,
                     range=[lanes - 0.4, -0.8])
    base_layout(fig, "", text(lang, "prefix.fig.tree_axis"), "", height=int(150 + 42 * lanes))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def prefill_times(run, title: str, lang: str = "en") -> go.Figure:
    """Prefill time of every branch, from scratch vs on top of the prefix prefilled once."""
    fig = go.Figure()
    rows = [text(lang, "prefix.fig.row_scratch"), text(lang, "prefix.fig.row_branched")]
    base = 0.0
    for b, t in enumerate(run.scratch_prefill_s):
        fig.add_bar(y=[rows[0]], x=[1e3 * t], base=[base], orientation="h", marker_color=NAIVE,
                    marker_line=dict(color="#ffffff", width=2), showlegend=b == 0,
                    name=text(lang, "prefix.fig.whole_name"), text=[f"#{b + 1}"], textposition="inside",
                    hovertemplate=text(lang, "prefix.fig.hover_branch", b=f"{b + 1}",
                                       n=f"{len(run.prefix_ids) + len(run.suffix_ids[b])}", x="%{x:.2f}") + "<extra></extra>")
        base += 1e3 * t
    fig.add_bar(y=[rows[1]], x=[1e3 * run.shared_prefill_s], base=[0], orientation="h", marker_color=CACHED,
                name=text(lang, "prefix.fig.once_name"), text=[text(lang, "prefix.fig.prefix_label")],
                textposition="inside",
                hovertemplate=text(lang, "prefix.fig.hover_prefix", n=f"{len(run.prefix_ids)}", x="%{x:.2f}") + "<extra></extra>")
    base = 1e3 * run.shared_prefill_s
    for b, t in enumerate(run.suffix_prefill_s):
        fig.add_bar(y=[rows[1]], x=[1e3 * t], base=[base], orientation="h", marker_color="#9ecae1",
                    marker_line=dict(color="#ffffff", width=2), showlegend=b == 0,
                    name=text(lang, "prefix.fig.continuation_name"),
                    hovertemplate=text(lang, "prefix.fig.hover_branch", b=f"{b + 1}", n=f"{len(run.suffix_ids[b])}", x="%{x:.2f}")
                    + "<extra></extra>")
        base += 1e3 * t
    base_layout(fig, "", text(lang, "prefix.fig.time_axis"), text(lang, "prefix.fig.way_axis"), height=300)
    fig.update_layout(barmode="overlay", yaxis=dict(autorange="reversed"))
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def kv_difference(kc, labels: list[str], title: str, lang: str = "en") -> go.Figure:
    """max |ΔK| and max |ΔV| by layer and position (log colour; exactly zero is left white)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=[text(lang, "prefix.fig.keys_panel"), text(lang, "prefix.fig.values_panel")])
    layers = [text(lang, "prefix.fig.layer", i=f"{i}") for i in range(kc.num_layers)]
    zero = text(lang, "prefix.fig.exactly_zero")
    T = kc.k_diff.shape[1]
    for row, diff in ((1, kc.k_diff), (2, kc.v_diff)):
        with np.errstate(divide="ignore"):
            z = np.where(diff > 0, np.log10(np.maximum(diff, 1e-30)), np.nan)
        hover = np.array([[text(lang, "prefix.fig.hover_kv", layer=layers[i], j=f"{j}", label=repr(labels[j]),
                                value=zero if diff[i, j] == 0 else f"{diff[i, j]:.2e}")
                           for j in range(T)] for i in range(kc.num_layers)])
        fig.add_trace(go.Heatmap(z=z, x=list(range(T)), y=layers, zmin=-6, zmax=1, colorscale="Viridis",
                                 showscale=row == 1, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
                                 colorbar=dict(title="log10 |Δ|", len=0.9, y=0.5)), row=row, col=1)
        fig.add_vline(x=kc.position, line=dict(color="#d62728", width=2, dash="dot"), row=row, col=1)
    fig.update_yaxes(autorange="reversed", title_text=text(lang, "prefix.fig.layer_axis"))
    base_layout(fig, "", "", "", height=430)
    fig.update_xaxes(title_text=text(lang, "prefix.fig.kv_axis"), row=2, col=1)
    fig.update_layout(plot_bgcolor="#ffffff")
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=24)  # below it: the keys panel's title


def real_prefill_bars(rows: list[dict], title: str, lang: str = "en") -> go.Figure:
    """The real model's prefill of each request, from scratch and from its cached prefix (medians, ms); each
    request's label says how many of its tokens the cache held."""
    x = [text(lang, "rp.prefix.fig.request", i=r["request"], hit=r["hit"], n=r["tokens"]) for r in rows]
    fig = go.Figure()
    for key, name_key, color in (("scratch_ms", "rp.prefix.fig.scratch", NAIVE), ("cached_ms", "rp.prefix.fig.cached",
                                                                                     CACHED)):
        fig.add_bar(x=x, y=[r[key] for r in rows], name=text(lang, name_key), marker_color=color,
                    text=[f"{r[key]:,.0f}" for r in rows], textposition="outside",
                    hovertemplate="%{x}: %{y:,.1f} ms<extra></extra>")
    base_layout(fig, "", text(lang, "rp.prefix.fig.x"), text(lang, "rp.prefix.fig.y"), height=340)
    fig.update_layout(barmode="group")
    return set_headline(fig, title, FULL_WIDTH_CHARS)
