"""Decode cost: one cached step's time by kind of work, against what its FLOPs alone would need."""

from __future__ import annotations

import plotly.graph_objects as go

from app.figures import CACHED, FORMULA, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline
from sim.words import text

HOVER = "%{y}: %{x:,.1f} µs<extra></extra>"


def step_time_bars(shares_us: dict[str, float], math_us: float, wall_us: float, title: str, overhead: str,
                   lang: str = "en") -> go.Figure:
    """µs per step by category (under the profiler, scaled to the unprofiled step), and the FLOPs' own time.
    shares_us is keyed by each category's name as shown; `overhead` names the one outside every operator (drawn
    in the naive colour)."""
    names = [*shares_us, text(lang, "decode.fig.flops_alone")]
    values = [*shares_us.values(), math_us]
    colors = [NAIVE if n == overhead else CACHED for n in shares_us] + [FORMULA]
    fig = go.Figure(go.Bar(y=names, x=values, orientation="h", marker_color=colors,
                           text=[f"{v:,.1f} µs" for v in values], textposition="outside", hovertemplate=HOVER))
    fig.add_vline(x=wall_us, line=dict(color=FORMULA, dash="dash"),
                  annotation_text=text(lang, "decode.fig.whole_step", us=f"{wall_us:,.0f}"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[0, max([*values, wall_us]) * 1.25])
    base_layout(fig, "", text(lang, "decode.fig.step_time"), text(lang, "decode.fig.where"), height=420)
    return set_headline(fig, title, FULL_WIDTH_CHARS).update_layout(showlegend=False)
