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


def _numbers(values) -> list[float]:
    """A trace's x or y as floats: a list, or plotly's packed {"dtype", "bdata"} array; text is skipped."""
    if isinstance(values, dict) and "bdata" in values:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).astype(float).ravel().tolist()
    out: list[float] = []
    for v in values if isinstance(values, list) else []:
        if isinstance(v, list):
            out += _numbers(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    return out


def billions_axes(fig: dict) -> list[str]:
    """Axes whose data reaches 1e9 and whose tick labels plotly writes in its default style, "B" for billion
    ("10B" FLOP reads as ten bytes; past 1e12 it switches to 10^15): such an axis needs the app's own labels."""
    layout, reach = fig.get("layout", {}), {}
    for trace in fig.get("data", []):
        if trace.get("type", "scatter") in NO_AXES:
            continue
        for letter in ("x", "y"):
            name = letter + "axis" + trace.get(letter + "axis", letter)[1:]
            reach[name] = max([reach.get(name, 0.0)] + [abs(v) for v in _numbers(trace.get(letter, []))])
    bad = []
    for name, top in sorted(reach.items()):
        axis = layout.get(name, {})
        if top >= 1e9 and not axis.get("ticktext") and axis.get("exponentformat", "B") == "B" \
                and axis.get("type") != "category" and not axis.get("tickformat"):
            bad.append(name)
    return bad


def _axis_data(fig: dict) -> dict[str, list[float]]:
    """Every axis's numbers (layout name -> the values its traces plot on it)."""
    out: dict[str, list[float]] = {}
    for trace in fig.get("data", []):
        if trace.get("type", "scatter") in NO_AXES:
            continue
        for letter in ("x", "y"):
            name = letter + "axis" + trace.get(letter + "axis", letter)[1:]
            out.setdefault(name, []).extend(_numbers(trace.get(letter, [])))
    return out


def misplaced_log_annotations(fig: dict) -> list[str]:
    """Annotations on a log axis placed in data units: plotly reads an annotation's x/y there as log10 (a label
    at x=295 lands at 10^295 and the axis stretches to reach it), while shapes take data units."""
    import math

    layout, data, bad = fig.get("layout", {}), _axis_data(fig), []
    # where add_hline / add_vline drew their lines, in data units: a label put at the same number is misplaced
    lines = {(letter + "axis" + s.get(letter + "ref", letter)[1:], float(s[letter + "0"]))
             for s in layout.get("shapes", []) for letter in ("x", "y")
             if s.get(letter + "0") is not None and s.get(letter + "0") == s.get(letter + "1")
             and not s.get(letter + "ref", letter).endswith(("domain", "paper"))}
    for ann in layout.get("annotations", []):
        for letter in ("x", "y"):
            ref = ann.get(letter + "ref", letter)
            if ref == "paper" or ref.endswith("domain") or letter not in ann:
                continue
            name = letter + "axis" + ref[1:]
            pos = [v for v in data.get(name, []) if v > 0]
            if layout.get(name, {}).get("type") != "log" or not pos:
                continue
            lo, hi, at = math.log10(min(pos)), math.log10(max(pos)), float(ann[letter])
            if not lo - 2 <= at <= hi + 2 or (name, at) in lines:
                bad.append(f"{str(ann.get('text'))[:30]!r} at {letter}={at:g} on {name} ({lo:.1f}..{hi:.1f} in log10)")
    return bad


def test_misplaced_log_annotations_are_found():
    fig = {"data": [{"x": [0.1, 1e5], "y": [1, 1e3]}],
           "layout": {"xaxis": {"type": "log"}, "yaxis": {"type": "log"},
                      "annotations": [{"x": 295, "y": 1, "yref": "y domain", "text": "ridge"},
                                      {"x": 2.47, "y": 0, "yref": "paper", "text": "ridge, placed right"}]}}
    assert misplaced_log_annotations(fig) == ["'ridge' at x=295 on xaxis (-1.0..5.0 in log10)"]
    # a label on its own line's data value, inside the range read as log10: 3 means 10^3, not the line at 3
    fig["layout"]["annotations"] = [{"x": 0, "xref": "x domain", "y": 3, "text": "HBM"}]
    fig["layout"]["shapes"] = [{"type": "line", "x0": 0, "x1": 1, "xref": "x domain", "y0": 3, "y1": 3}]
    assert misplaced_log_annotations(fig) == ["'HBM' at y=3 on yaxis (0.0..3.0 in log10)"]


def test_billions_axes_are_found():
    fig = {"data": [{"type": "scatter", "x": [1, 2], "y": {"dtype": "f8", "bdata": "AAAAAGXNzUEAAACilBptQg=="}},
                    {"type": "bar", "x": [1], "y": [3e9], "xaxis": "x2", "yaxis": "y2"}],
           "layout": {"yaxis2": {"tickvals": [1e9], "ticktext": ["1 G"]}}}
    assert billions_axes(fig) == ["yaxis"]


def test_si_ticks_label_every_decade_in_decimal_prefixes():
    from app.figures import si_label, si_log_ticks

    assert [si_label(v) for v in (0.1, 500, 1e3, 2.5e13, 1e15, 3e18)] == ["0.1", "500", "1k", "25T", "1P", "3E"]
    assert si_log_ticks([1.5e8, 7e11]) == {"tickvals": [1e8, 1e9, 1e10, 1e11, 1e12],
                                           "ticktext": ["100M", "1G", "10G", "100G", "1T"]}
    assert si_log_ticks([1.95e6, 1.7e8])["ticktext"] == ["1M", "2M", "5M", "10M", "20M", "50M", "100M", "200M",
                                                         "500M", "1G"]  # 3 decades: 2× and 5× labelled too
    assert si_log_ticks([2e3, 5e14])["ticktext"] == ["1k", "100k", "10M", "1G", "100G", "10T", "1P"]  # 12 decades
    assert si_log_ticks([0, -1]) == {}


def overlong_titles(at) -> dict[str, int]:
    """Chart titles with a line longer than the chart's share of the page holds (plotly never wraps a title: the
    rest is cut off at the chart's edge): {first words: the most characters that fit}. A chart in a column of
    weight w gets column_chars(w) (the room on a 1024-px projector with the sidebar open)."""
    import re

    from app.figures.headline import FULL_WIDTH_CHARS, _width, column_chars

    room: dict[int, int] = {}  # id of the chart's proto -> characters its width holds
    for col in at.columns:
        for chart in col.get("plotly_chart"):
            room[id(chart.proto)] = min(room.get(id(chart.proto), FULL_WIDTH_CHARS), column_chars(col.weight))
    bad = {}
    for chart in at.get("plotly_chart"):
        lines = re.sub(r"<(?!br>)[^>]*>", "", title_of(json.loads(chart.proto.spec))).split("<br>")
        fits = room.get(id(chart.proto), FULL_WIDTH_CHARS)
        if max(_width(line) for line in lines) > fits:
            bad[lines[0][:40]] = fits
    return bad


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def title_of(fig: dict) -> str:
    t = fig.get("layout", {}).get("title", {})
    return (t.get("text") if isinstance(t, dict) else t) or "(untitled chart)"


def inkless_tables(fig: dict) -> list[str]:
    """Table parts (header / cells) that fix their fill colour and leave the text's to the theme: Streamlit's dark
    theme writes light text, unreadable on the light fills a chart picks."""
    return [f"{i}.{part}" for i, trace in enumerate(fig.get("data", [])) if trace.get("type") == "table"
            for part in ("header", "cells")
            if trace.get(part, {}).get("fill", {}).get("color") is not None
            and trace.get(part, {}).get("font", {}).get("color") is None]


def digit_labelled_log_axes(fig: dict) -> list[str]:
    """Log axes left to plotly's automatic ticks: over a few decades plotly labels the 2s and 5s between powers of
    ten with a bare "2" or "5", which a class reads as values on the axis. Each log axis of the lab's sets its own
    ticks (tickvals, as si_log_ticks gives them) or one label a decade (dtick=1)."""
    layout, bad = fig.get("layout", {}), []
    for name, axis in sorted(layout.items()):
        if (name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("type") == "log"
                and axis.get("visible") is not False and axis.get("showticklabels") is not False
                and "tickvals" not in axis and axis.get("dtick") not in (1, "1")):
            bad.append(name)
    return bad


def test_digit_labelled_log_axes_are_found():
    assert digit_labelled_log_axes({"layout": {"xaxis": {"type": "log"}, "yaxis": {"type": "log", "dtick": 1},
                                               "xaxis2": {"type": "log", "tickvals": [1, 10]}}}) == ["xaxis"]


def test_inkless_tables_are_found():
    fig = {"data": [{"type": "table", "header": {"fill": {"color": "#eee"}, "font": {"color": "#333"}},
                     "cells": {"fill": {"color": [["white"]]}, "font": {"size": 14}}}]}
    assert inkless_tables(fig) == ["0.cells"]


def test_untitled_axes_are_found():
    fig = {"data": [{"type": "bar", "x": [1], "y": [2]}, {"type": "scatter", "xaxis": "x2", "yaxis": "y2"}],
           "layout": {"xaxis": {"title": {"text": "tokens"}}, "yaxis2": {"title": {"text": "ms"}},
                      "yaxis": {"showticklabels": False}}}
    assert untitled_axes(fig) == ["xaxis2"]


@pytest.mark.parametrize("slug, params", [
    *[(p.slug, {}) for p in PAGES if p.slug != "home"],
    ("serving", {"sweep": "1"}),
    ("serving", {"tab": "spec"}),
    ("kv_memory", {"measure": "1", "tbatch": "2", "tctx": "64"}),
    *[("kv_memory", {"tab": t}) for t in ("grid", "variants", "dtypes")],  # the tabs a link opens, each drawn alone
    *[("roofline", {"tab": t}) for t in ("bytes", "batching")],
    *[("decode_cost", {"tab": t, "n": "8"}) for t in ("cumulative", "wall", "parts", "grid")],
    ("attention_kernels", {"tab": "stepper"}),
    *[("lesson", {"step": str(k)}) for k in range(2, 13)],
])
def test_every_axis_has_a_title(slug, params):
    at = run_page(slug, params)
    assert not at.exception
    if slug == "attention_kernels" and "tab" not in params:  # the timing charts appear once the kernels are timed
        next(b for b in at.button if b.label == "Time these kernels").click().run()
    figs = charts(at)
    assert figs, f"{slug} draws no chart"
    bad = {title_of(f)[:60]: untitled_axes(f) for f in figs if untitled_axes(f)}
    assert bad == {}, bad
    billions = {title_of(f)[:60]: billions_axes(f) for f in figs if billions_axes(f)}
    assert billions == {}, billions
    misplaced = {title_of(f)[:60]: misplaced_log_annotations(f) for f in figs if misplaced_log_annotations(f)}
    assert misplaced == {}, misplaced
    inkless = {title_of(f)[:60]: inkless_tables(f) for f in figs if inkless_tables(f)}
    assert inkless == {}, inkless
    digits = {title_of(f)[:60]: digit_labelled_log_axes(f) for f in figs if digit_labelled_log_axes(f)}
    assert digits == {}, digits
    assert overlong_titles(at) == {}


def test_a_headline_never_parts_a_number_from_its_unit():
    from app.figures.headline import _wrap

    title = "At step 63, a naive step did 87.0× the FLOPs of a cached one: 170 MFLOP vs 1.95 MFLOP"
    lines = _wrap(title, 60)  # plain word wrapping ends the first line after "170"
    assert lines == ["At step 63, a naive step did 87.0× the FLOPs of a cached", "one: 170 MFLOP vs 1.95 MFLOP"]
    assert " ".join(lines) == title
    ko = _wrap("캐시는 토큰마다 4 KiB씩 자란다: 단계 1 뒤 116 KiB", 16)  # a unit with a Korean particle after it
    assert any(line.startswith("4 KiB씩") for line in ko) and " ".join(ko) == "캐시는 토큰마다 4 KiB씩 자란다: 단계 1 뒤 116 KiB"
    assert _wrap("from 2,048 tokens on and more words", 12) == ["from", "2,048 tokens", "on and more", "words"]
