"""Decode cost: one cached step's time by kind of work, against what its FLOPs alone would need."""

from __future__ import annotations

import plotly.graph_objects as go

from app.figures import CACHED, FORMULA, NAIVE, base_layout
from app.figures.headline import FULL_WIDTH_CHARS, set_headline


def step_time_bars(shares_us: dict[str, float], math_us: float, wall_us: float, title: str) -> go.Figure:
    """µs per step by category (under the profiler, scaled to the unprofiled step), and the FLOPs' own time."""
    names = [*shares_us, "the FLOPs alone, at the matmul rate"]
    values = [*shares_us.values(), math_us]
    colors = [NAIVE if "outside" in n else CACHED for n in shares_us] + [FORMULA]
    fig = go.Figure(go.Bar(y=names, x=values, orientation="h", marker_color=colors,
                           text=[f"{v:,.1f} µs" for v in values], textposition="outside",
                           hovertemplate="%{y}: %{x:,.1f} µs<extra></extra>"))
    fig.add_vline(x=wall_us, line=dict(color=FORMULA, dash="dash"), annotation_text=f"whole step {wall_us:,.0f} µs")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[0, max([*values, wall_us]) * 1.25])
    base_layout(fig, "", "time per decode step (µs)", "where it goes", height=420)
    return set_headline(fig, title, FULL_WIDTH_CHARS).update_layout(showlegend=False)
