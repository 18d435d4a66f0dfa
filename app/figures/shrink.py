"""Shrink the cache: every method's three scores against the bytes it keeps, and offloading's cost per step."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import FORMULA, NAIVE, base_layout, log_line
from app.figures.headline import FULL_WIDTH_CHARS, set_headline
from sim.words import text

CHECKS = ("long_agreement", "quote", "turns")  # the Score fields, one panel each, titled by shrink.fig.check.<field>
KIND_SYMBOL = {"discard": "x", "blur": "circle", "full": "star"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def scores_vs_bytes(scores, full, title: str, lang: str = "en", *, score_title: str | None = None) -> go.Figure:
    """One panel per check: each method's score (%) against the share of the full cache's bytes it keeps;
    the full cache's own score as a dashed line (the model's ceiling on that check). Labels in `lang`."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=[text(lang, f"shrink.fig.check.{c}") for c in CHECKS],
                        horizontal_spacing=0.07)
    hover = text(lang, "shrink.fig.hover")
    families = sorted({s.method.split("@")[0] for s in scores})
    colors = {f: PALETTE[i % len(PALETTE)] for i, f in enumerate(families)}
    for col, field in enumerate(CHECKS, start=1):
        for fam in families:
            pts = sorted((s for s in scores if s.method.split("@")[0] == fam), key=lambda s: s.byte_fraction)
            fig.add_scatter(
                x=[100 * s.byte_fraction for s in pts], y=[100 * getattr(s, field) for s in pts],
                mode="lines+markers", name=pts[0].label.split(" @")[0], legendgroup=fam, showlegend=col == 1,
                marker=dict(symbol=KIND_SYMBOL.get(pts[0].kind, "circle"), size=11, color=colors[fam]),
                line=dict(color=colors[fam], dash="dot" if pts[0].kind == "discard" else "solid"),
                customdata=[s.label for s in pts],
                hovertemplate=hover, row=1, col=col)
        fig.add_hline(y=100 * getattr(full, field), line=dict(color=FORMULA, dash="dash"), row=1, col=col,
                      annotation_text=text(lang, "shrink.fig.full_cache"), annotation_position="bottom right")
        fig.update_xaxes(title_text=text(lang, "shrink.fig.bytes_kept"), range=[0, 105], row=1, col=col)
        fig.update_yaxes(title_text=(score_title or text(lang, "shrink.fig.score")) if col == 1 else "",
                         range=[-3, 105], row=1, col=col,
                         showticklabels=col == 1)
    base_layout(fig, "", "", "", height=520)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=30)


def offload_bars(names: list[str], link_ms: list[float], hbm_ms: float, title: str, lang: str = "en") -> go.Figure:
    fig = go.Figure()
    fig.add_bar(x=names, y=link_ms, name=text(lang, "shrink.fig.bring_back"), marker_color=NAIVE,
                text=[f"{v:,.1f} ms" for v in link_ms], textposition="outside")
    log_line(fig, "y", hbm_ms, text(lang, "shrink.fig.hbm", ms=f"{hbm_ms:,.2f}"), dict(color=FORMULA, dash="dash"))
    # room under the GPU-memory line for its label, and over the tallest bar for its value
    lo, hi = math.log10(min([hbm_ms, *link_ms])) - 0.6, math.log10(max([hbm_ms, *link_ms])) + 0.3
    fig.update_yaxes(type="log", range=[lo, hi], dtick=1)  # a label a decade: no bare 2s and 5s between them
    base_layout(fig, "", text(lang, "shrink.fig.link"), text(lang, "shrink.fig.step_time"))
    return set_headline(fig, title, FULL_WIDTH_CHARS)
