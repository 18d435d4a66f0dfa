"""Room at a plot's edge for the labels drawn there: plotly's autorange pads an axis for a marker, never for the
text over it, so a point's label at the top of the data ("prefill" on the roofline's roof) was cut at the plot's top
edge. A builder that labels its points from above calls `room_above_labels` once its traces are in."""

from __future__ import annotations

import math

import plotly.graph_objects as go

LABEL_ROOM = 0.12  # of the data's span, over its highest point: one line of label at a chart's usual height


def _labelled_above(trace) -> bool:
    pos = getattr(trace, "textposition", None)
    return (trace.type == "scatter" and "text" in (trace.mode or "") and isinstance(pos, str)
            and pos.startswith("top") and trace.cliponaxis is not False and trace.text is not None)


def room_above_labels(fig: go.Figure, share: float = LABEL_ROOM) -> go.Figure:
    """Every y axis that carries a point labelled from above gets an explicit range: its data's, with `share` of
    the span added over the top (in decades on a log axis). An axis whose range is already set keeps its bottom
    and grows at the top only where the labels need it."""
    for ref in {t.yaxis or "y" for t in fig.data if _labelled_above(t)}:
        axis = fig.layout["yaxis" + ref[1:]]
        log = axis.type == "log"
        ys = [float(y) for t in fig.data if (t.yaxis or "y") == ref and getattr(t, "y", None) is not None
              for y in t.y if y is not None and (not log or y > 0) and math.isfinite(float(y))]
        # a horizontal line on the axis (add_hline: "no gain" at 1×) stays in view too
        ys += [float(s.y0) for s in fig.layout.shapes if s.yref == ref and s.y0 is not None and s.y0 == s.y1
               and (not log or s.y0 > 0)]
        if not ys:
            continue
        vals = [math.log10(y) for y in ys] if log else ys
        lo, hi = min(vals), max(vals)
        span = (hi - lo) or abs(hi) or 1.0
        bottom = 0.0 if (not log and axis.rangemode == "tozero" and lo >= 0) else lo - 0.05 * span
        top = hi + share * span
        if axis.range is not None:
            bottom, top = axis.range[0], max(axis.range[1], top)
        axis.update(range=[bottom, top])
    return fig
