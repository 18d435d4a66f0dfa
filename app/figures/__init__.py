"""Plotly figure builders, one module per page: data in, go.Figure out, no st calls."""

import plotly.graph_objects as go

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
        legend=LEGEND_BELOW,
        template="plotly_white", font=dict(size=14),
    )
    # an empty x or y leaves the axis titles a builder set earlier (per subplot) alone: never wipe them
    if x:
        fig.update_layout(xaxis_title=x)
    if y:
        fig.update_layout(yaxis_title=y)
    return fig
