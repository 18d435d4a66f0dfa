"""Plotly figure builders, one module per page: data in, go.Figure out, no st calls."""

import math

import plotly.graph_objects as go
import plotly.io as pio

# Streamlit makes its own template plotly's default when its chart module is first imported: import it before
# setting the lab's, so that the lab's stands whichever of the two a process imports first.
import streamlit.elements.plotly_chart  # noqa: F401, I001

# The lab's charts start from plotly_white. As plotly's default, a new figure takes the template plotly holds
# validated; named in each figure's update_layout, plotly validated and deep-copied the whole template every time
# (22 ms of base_layout's 31 ms, and a page draws up to a dozen charts on every rerun).
LAB_TEMPLATE = "plotly_white"
pio.templates.default = LAB_TEMPLATE

# One palette for the whole lab, so "naive" and "cached" look the same on every page.
NAIVE = "#d62728"
CACHED = "#1f77b4"
FORMULA = "#6e6e6e"  # a mid grey: the formula line stays visible on the light and the dark theme
PART_COLORS = {
    "qkv_proj": "#4c78a8",
    "attn_scores": "#e45756",
    "attn_v": "#f58518",
    "out_proj": "#72b7b2",
    "mlp": "#54a24b",
    "lm_head": "#b279a2",
}


# Under the plot, in a band of its own (plotly reserves the room): at half width a legend beside the title
# wrapped over it, and one placed at a negative paper y collided with the x-axis title.
LEGEND_BELOW = dict(orientation="h", yref="container", y=0, yanchor="bottom", xanchor="left", x=0)


def base_layout(fig: go.Figure, title: str, x: str, y: str, height: int = 380) -> go.Figure:
    fig.update_layout(
        title=title, height=height, margin=dict(l=10, r=10, t=50, b=10),
        legend=LEGEND_BELOW, font=dict(size=14),
    )
    if pio.templates.default != LAB_TEMPLATE:  # something reset plotly's default: name it (the slow way)
        fig.update_layout(template=LAB_TEMPLATE)
    # an empty x or y leaves the axis titles a builder set earlier (per subplot) alone: never wipe them
    if x:
        fig.update_layout(xaxis_title=x)
    if y:
        fig.update_layout(yaxis_title=y)
    return fig


# Decimal prefixes, as the sentences beside the charts quote FLOP and FLOP/s ("17.2 GFLOP"). Plotly's default
# labels write a billion as "B" (read as bytes on a FLOP axis) and switch to 10^15 past "100T".
SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si_label(v: float) -> str:
    """1e9 -> '1G', 2.5e13 -> '25T', 500 -> '500', 0.1 -> '0.1'."""
    for scale, prefix in SI_PREFIXES:
        if abs(v) >= scale:
            return f"{v / scale:.3g}{prefix}"
    return f"{v:.3g}"


def si_log_ticks(values) -> dict:
    """tickvals / ticktext for a log axis over `values`, in decimal prefixes: a label at every power of ten
    spanning the positive ones (every other past 8 decades), and at 2× and 5× too when they span 3 or fewer
    (1.95M to 170M would otherwise carry only "10M" and "100M")."""
    pos = [float(v) for v in values if v and v > 0]
    if not pos:
        return {}
    lo, hi = math.floor(math.log10(min(pos)) + 1e-9), math.ceil(math.log10(max(pos)) - 1e-9)
    every = 1 if hi - lo <= 8 else 2
    steps = (1, 2, 5) if hi - lo <= 3 else (1,)
    ticks = [m * 10.0**k for k in range(lo, hi + 1, every) for m in steps if m * 10.0**k <= 10.0**hi]
    return dict(tickvals=ticks, ticktext=[si_label(v) for v in ticks])


LABEL_BG = "rgba(255, 255, 255, 0.85)"  # a line's label stays legible where it crosses bars or lines


def log_line(fig: go.Figure, axis: str, value: float, label: str, line: dict) -> None:
    """A dotted/dashed line across the plot at `value` on a log x ("x": vertical) or y ("y": horizontal) axis,
    labelled at its start. add_vline/add_hline's own label would be placed at `value` read as log10 (a ridge
    at 295 puts the label at 10^295 and stretches the axis to reach it): the label goes in log10 units here."""
    if axis == "x":
        fig.add_vline(x=value, line=line)
        fig.add_annotation(x=math.log10(value), y=0, yref="paper", text=label, showarrow=False, bgcolor=LABEL_BG,
                           xanchor="left", yanchor="bottom")
    else:
        fig.add_hline(y=value, line=line)
        fig.add_annotation(x=0, xref="paper", y=math.log10(value), text=label, showarrow=False, bgcolor=LABEL_BG,
                           xanchor="left", yanchor="bottom")
