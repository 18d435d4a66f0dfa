"""What a chart says is what it draws, and no label is cut at a plot's edge.

KV memory's fit bar: its title said "does not fit" while the bar ended before the GPU's line, because the line the
cache must stay under (the usable memory, total × gpu_memory_utilization) was not drawn. Both lines are drawn now,
where the result puts them, with labels.

The class of a label cut at the plot's edge (the roofline's "prefill" over a point on the roof; a line's label
above the plot pushed into the title): checked on every figure the pages draw, from the figure's own layout."""

from __future__ import annotations

import math

import pytest

from app.figures.headline import GAP_PX, LINE_PX, PAD_PX
from app.figures.memory import edge_anchor, memory_breakdown
from app.registry import PAGES
from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import load_gpus
from sim.cost.memory import GiB, MemoryConfig, fmt_bytes
from sim.cost.presets import load_presets
from sim.words.capacity import fit_takeaway
from tests.conftest import run_page
from tests.test_chart_axes import _numbers, charts, title_of

# --- the fit bar ---------------------------------------------------------------------------------


def fit(batch: int, context: int, utilization: float = 0.9):
    cfg = MemoryConfig(load_presets()["llama-3.1-8b"], batch=batch, context=context)
    return capacity(cfg, GpuConfig(load_gpus()["h100-sxm"], utilization=utilization))


def vlines(fig) -> list[float]:
    return sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1 and s.yref.endswith("domain"))


def bar_end(fig, name_start: str) -> float:
    bar = next(b for b in fig.data if b.name.startswith(name_start))
    return bar.base[0] + bar.x[0]


def test_the_fit_bar_draws_the_usable_line_where_the_result_puts_it():
    cap = fit(16, 32768)  # the page's defaults: weights + KV past the usable memory, short of the GPU's end
    assert not cap.fits and cap.usable_bytes < cap.weight_bytes + cap.kv_bytes < cap.total_bytes
    fig = memory_breakdown(cap, "NVIDIA H100 SXM 80GB", fit_takeaway(cap, "NVIDIA H100 SXM 80GB"))
    assert fig.layout.title.text.startswith("Does not fit")
    usable, total = cap.usable_bytes / GiB, cap.total_bytes / GiB
    assert vlines(fig) == [usable, total]
    labels = {a.text: a for a in fig.layout.annotations}
    pct = f"{100 * cap.usable_bytes / cap.total_bytes:.3g}"
    assert pct == "90"
    on_usable = labels[f"usable at {pct}%: {fmt_bytes(cap.usable_bytes)}"]
    assert on_usable.x == usable and labels[f"NVIDIA H100 SXM 80GB: {fmt_bytes(cap.total_bytes)}"].x == total
    # what the title says shows: the cache's bar ends past the usable line (and before the GPU's end)
    assert usable < bar_end(fig, "KV cache") == (cap.weight_bytes + cap.kv_bytes) / GiB < total
    over = labels[f"over by {fmt_bytes(cap.weight_bytes + cap.kv_bytes - cap.usable_bytes)}"]
    assert over.yref == "y" and over.y < -0.3  # under the bar, inside the plot
    # the kept-aside band runs from the usable line to the GPU's end
    aside = next(b for b in fig.data if b.name.startswith("Kept aside"))
    assert (aside.base[0], aside.base[0] + aside.x[0]) == (usable, total)


def test_a_cache_that_fits_fills_up_to_the_usable_line():
    cap = fit(1, 4096, utilization=0.75)
    assert cap.fits
    fig = memory_breakdown(cap, "H100", fit_takeaway(cap, "H100"))
    assert vlines(fig) == [cap.usable_bytes / GiB, cap.total_bytes / GiB]
    assert math.isclose(bar_end(fig, "Free for more KV"), cap.usable_bytes / GiB, rel_tol=1e-12)
    assert any(a.text == f"usable at 75%: {fmt_bytes(cap.usable_bytes)}" for a in fig.layout.annotations)
    assert not any(a.text.startswith("over by") for a in fig.layout.annotations)


def test_a_label_runs_toward_the_middle():
    assert edge_anchor(80, 0, 100) == "right" and edge_anchor(20, 0, 100) == "left"


# --- every figure the pages draw -------------------------------------------------------------------

HEADROOM = 0.04  # of the axis span: room above a point for the label over it (one line of text at 400-600 px)


def _axis(layout: dict, ref: str) -> tuple[str, dict]:
    name = "yaxis" + ref[1:] if ref.startswith("y") else "xaxis" + ref[1:]
    return name, layout.get(name, {})


def cut_labels(fig: dict) -> list[str]:
    """Labels a plot's edge cuts off, read from the figure's layout:
    - a point's text above it (textposition "top ...") on an axis left to autorange (plotly pads for the marker,
      not its label) or with less than HEADROOM of the span over the point;
    - an annotation in data units outside its axis's set range;
    - a label above the plot (y ≥ 1 of the plot, anchored at its bottom) with no room under the title for it."""
    layout, bad = fig.get("layout", {}), []
    for i, trace in enumerate(fig.get("data", [])):
        pos = trace.get("textposition")
        if (trace.get("type", "scatter") != "scatter" or "text" not in trace.get("mode", "")
                or not isinstance(pos, str) or not pos.startswith("top") or trace.get("cliponaxis") is False):
            continue
        name, axis = _axis(layout, trace.get("yaxis", "y"))
        texts = trace.get("text") or []
        ys = [y for y, s in zip(_numbers(trace.get("y") or []), texts if isinstance(texts, list) else [],
                                strict=False) if s and math.isfinite(y)]
        if not ys:
            continue
        if not axis.get("range"):
            bad.append(f"trace {i} ({trace.get('name')}): a label over its points on {name}, left to autorange")
            continue
        lo, hi = axis["range"]
        top = max(math.log10(y) if axis.get("type") == "log" else y for y in ys if y > 0 or axis.get("type") != "log")
        if top > hi - HEADROOM * (hi - lo):
            bad.append(f"trace {i} ({trace.get('name')}): a label over y={top:.3g}, {name} ends at {hi:.3g}")
    title = layout.get("title", {})
    lines = (title.get("text") or "").count("<br>") + 1 if (title.get("text") or "") else 0
    under_title = layout.get("margin", {}).get("t", 100) - (PAD_PX + LINE_PX * lines + GAP_PX if lines else 0)
    for ann in layout.get("annotations", []):
        yref, y = ann.get("yref", "y"), ann.get("y")
        if y is None:
            continue
        if yref == "paper" or yref.endswith("domain"):
            if y >= 1 and ann.get("yanchor") == "bottom" and under_title < ann.get("yshift", 0) + 18:
                bad.append(f"{ann.get('text', '')[:40]!r}: above the plot, {under_title} px under the title")
            continue
        for letter in ("x", "y"):
            ref = ann.get(letter + "ref", letter)
            if ref == "paper" or ref.endswith("domain") or ann.get(letter) is None:
                continue
            _, axis = _axis(layout, ref)
            rng = axis.get("range")
            if rng and not isinstance(ann[letter], str) and not min(rng) <= ann[letter] <= max(rng):
                bad.append(f"{ann.get('text', '')[:40]!r}: at {letter}={ann[letter]:.3g}, outside {rng}")
    return bad


def test_the_scan_finds_a_cut_label():
    fig = {"data": [{"type": "scatter", "mode": "markers+text", "y": [1, 10], "text": ["", "prefill"],
                     "textposition": "top center"}], "layout": {"yaxis": {"type": "log"}}}
    assert len(cut_labels(fig)) == 1  # autorange: plotly pads for the marker only
    fig["layout"]["yaxis"]["range"] = [0, 1.02]
    assert len(cut_labels(fig)) == 1  # the point at the top, no room above it
    fig["layout"]["yaxis"]["range"] = [0, 1.3]
    assert cut_labels(fig) == []
    fig["layout"].update(title={"text": "one<br>two"}, margin={"t": PAD_PX + 2 * LINE_PX + GAP_PX},
                         annotations=[{"yref": "paper", "y": 1, "yanchor": "bottom", "text": "H100: 80 GiB"}])
    assert len(cut_labels(fig)) == 1  # a line's label above the plot, no room left under the title
    fig["layout"]["margin"]["t"] += 24
    assert cut_labels(fig) == []


@pytest.mark.parametrize("slug, params", [
    *[(p.slug, {}) for p in PAGES if p.slug not in ("home", "lesson")],
    ("attention_kernels", {"tab": "stepper", "sm_pad": "3"}),
    *[("roofline", {"tab": t}) for t in ("bytes", "batching")],
    ("serving", {"tab": "spec"}),
    ("serving", {"sweep": "1"}),
])
def test_no_label_is_cut_at_a_plot_edge(slug, params):
    at = run_page(slug, params)
    assert not at.exception
    figs = charts(at)
    bad = {title_of(f)[:60]: cut_labels(f) for f in figs if cut_labels(f)}
    assert bad == {}, bad
