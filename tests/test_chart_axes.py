"""Every chart a page draws has a title on every axis it shows (a projector shows no hover text)."""

import json

import pytest

from app.registry import PAGES
from tests.conftest import run_page

NO_AXES = ("pie", "table", "sankey", "indicator")


def untitled_axes(fig: dict) -> list[str]:
    """The x/y axes that some trace uses, that show tick labels, and have no title."""
    layout, used = fig.get("layout", {}), set()
    for trace in fig.get("data", []):
        if trace.get("type", "scatter") in NO_AXES:
            continue
        used.add("xaxis" + trace.get("xaxis", "x")[1:])
        used.add("yaxis" + trace.get("yaxis", "y")[1:])
    missing = []
    for name in sorted(used):
        axis = layout.get(name, {})
        if axis.get("visible") is False or axis.get("showticklabels") is False:
            continue
        title = axis.get("title", {})
        if not (title.get("text") if isinstance(title, dict) else title):
            missing.append(name)
    return missing


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def title_of(fig: dict) -> str:
    t = fig.get("layout", {}).get("title", {})
    return (t.get("text") if isinstance(t, dict) else t) or "(untitled chart)"


def test_untitled_axes_are_found():
    fig = {"data": [{"type": "bar", "x": [1], "y": [2]}, {"type": "scatter", "xaxis": "x2", "yaxis": "y2"}],
           "layout": {"xaxis": {"title": {"text": "tokens"}}, "yaxis2": {"title": {"text": "ms"}},
                      "yaxis": {"showticklabels": False}}}
    assert untitled_axes(fig) == ["xaxis2"]


@pytest.mark.parametrize("slug, params", [
    *[(p.slug, {}) for p in PAGES if p.slug != "home"],
    ("serving", {"sweep": "1"}),
    ("kv_memory", {"measure": "1", "tbatch": "2", "tctx": "64"}),
    *[("kv_memory", {"tab": t}) for t in ("grid", "variants", "dtypes")],  # the tabs a link opens, each drawn alone
    *[("roofline", {"tab": t}) for t in ("bytes", "batching")],
    *[("lesson", {"step": str(k)}) for k in range(2, 13)],
])
def test_every_axis_has_a_title(slug, params):
    at = run_page(slug, params)
    assert not at.exception
    if slug == "attention_kernels":  # the timing charts appear once the kernels are timed
        next(b for b in at.button if b.label == "Time these kernels").click().run()
    figs = charts(at)
    assert figs, f"{slug} draws no chart"
    bad = {title_of(f)[:60]: untitled_axes(f) for f in figs if untitled_axes(f)}
    assert bad == {}, bad
