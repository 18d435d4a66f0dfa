"""Figures for the Attention masks page; each builder takes `lang` ("en", "ko") for its labels (sim/i18n.py)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline
from sim.i18n import text

SUBPLOT_TITLES_PX = 24  # room for the subplot titles between the headline and the maps


def token_labels(ids: list[int]) -> list[str]:
    """One short printable label per byte, made unique by position for the axis."""
    out = []
    for i, t in enumerate(ids):
        ch = chr(t) if 33 <= t < 127 else {32: "␣", 10: "⏎"}.get(t, "·")
        out.append(f"{ch}<sub>{i}</sub>")
    return out


def padded_labels(labels: list[str], pad: int) -> list[str]:
    """The prompt's labels with `pad` pad tokens in front, each numbered by its position."""
    return [f"pad<sub>{i}</sub>" for i in range(pad)] + labels


def _hover(lang: str, fmt: str) -> str:
    return (f"{text(lang, 'masks.fig.query')} %{{y}} → {text(lang, 'masks.fig.key')} %{{x}}: %{{z{fmt}}}"
            "<extra></extra>")


def mask_heatmap(mask: np.ndarray, labels: list[str], title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.masks.mask_takeaway); the colours are named in the page's caption.
    The key labels sit on top, under the title: they take the room a subplot title would."""
    z = mask.astype(float)
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        colorscale=[[0, "#eeeeee"], [1, CACHED]],
        hovertemplate=_hover(lang, ""),
    ))
    fig.update_yaxes(autorange="reversed", title_text=text(lang, "masks.fig.query_row"))
    fig.update_xaxes(title_text=text(lang, "masks.fig.key_column"), side="top", tickangle=0)
    n = len(labels)
    base_layout(fig, "", "", "", height=max(360, min(720, 18 * n + 120)))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=48)  # below it: the key labels and their title


def attention_pair(a: np.ndarray, b: np.ndarray, labels: list[str], titles: tuple[str, str], title: str,
                   lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.masks.window_takeaway)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    for col, z in ((1, a), (2, b)):
        fig.add_heatmap(z=z, x=labels, y=labels, zmin=0, zmax=1, colorscale="Blues", showscale=col == 2,
                        colorbar=dict(title=dict(text=text(lang, "masks.fig.weight_bar"))),
                        hovertemplate=_hover(lang, ":.3f"), row=1, col=col)
    fig.update_yaxes(autorange="reversed", title_text=text(lang, "masks.fig.query_token"), tickfont=dict(size=9))
    fig.update_xaxes(tickangle=0, tickfont=dict(size=9), title_text=text(lang, "masks.fig.key_token"))
    base_layout(fig, "", "", "", height=520)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLES_PX)


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """(first, last) index of each run of True."""
    out: list[tuple[int, int]] = []
    for i, f in enumerate(flags):
        if f and out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        elif f:
            out.append((i, i))
    return out


def row_weights(variant_to_weights: dict[str, np.ndarray], allowed: np.ndarray, labels: list[str],
                title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.masks.row_takeaway). Each run of masked keys is shaded."""
    fig = go.Figure()
    for name, w in variant_to_weights.items():
        fig.add_bar(x=labels, y=w, name=name)
    for k, (first, last) in enumerate(_runs([not ok for ok in allowed])):
        fig.add_vrect(x0=first - 0.5, x1=last + 0.5, fillcolor=NAIVE, opacity=0.08, line_width=0,
                      **(dict(annotation_text=text(lang, "masks.fig.masked_keys"), annotation_position="top left") if k == 0 else {}))
    fig.update_layout(barmode="group")
    base_layout(fig, "", text(lang, "masks.fig.key_token"), text(lang, "masks.fig.softmax_weight"), height=400)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def row_diffs(causal: list[float], full: list[float], title: str, lang: str = "en") -> go.Figure:
    """title: the takeaway (sim.words.maps.append_takeaway)."""
    fig = go.Figure()
    x = list(range(len(causal)))
    fig.add_bar(x=x, y=full, name=text(lang, "masks.fig.no_mask"), marker_color=NAIVE)
    fig.add_bar(x=x, y=causal, name=text(lang, "masks.fig.causal_mask"), marker_color=CACHED)
    fig.update_layout(barmode="group")
    base_layout(fig, "", text(lang, "masks.fig.position"), text(lang, "masks.fig.logit_change"), height=360)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def sink_bars(share: np.ndarray, uniform: float, title: str, lang: str = "en") -> go.Figure:
    """The real model's attention on token 0 per layer (%), against the even spread's share as a dashed line."""
    fig = go.Figure()
    fig.add_bar(x=list(range(len(share))), y=[100 * s for s in share], marker_color=CACHED,
                hovertemplate=text(lang, "real.sink.hover"), showlegend=False)
    fig.add_hline(y=100 * uniform, line=dict(color=NAIVE, dash="dash"))
    base_layout(fig, "", text(lang, "real.sink.x"), text(lang, "real.sink.y"))
    fig.update_yaxes(range=[0, 100])
    return set_headline(fig, title, FULL_WIDTH_CHARS)
