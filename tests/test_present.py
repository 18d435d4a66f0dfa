"""Presenter mode: from the link, kept across pages, turned off by the toggle, enlarging charts' type."""

import json
import subprocess
import sys

import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly.subplots import make_subplots

from app.figures import LAB_TEMPLATE, base_layout
from app.present import NORMAL, PRESENTER, PRESENTER_MAX_HEIGHT, styled
from tests.conftest import ROOT, run_in_app


def _toggle(at):
    return next(t for t in at.toggle if t.key == "present")


def test_present_from_the_link_stays_across_pages_and_the_toggle_turns_it_off():
    at = run_in_app("roofline", {"present": "1"})
    assert not at.exception
    assert _toggle(at).value is True and at.query_params["present"] == "1"
    at.query_params.clear()  # a sidebar click: the next page opens with a bare URL
    at.switch_page(str(ROOT / "pages" / "kv_memory.py")).run()
    assert _toggle(at).value is True and at.query_params["present"] == "1"  # written back for the link
    _toggle(at).set_value(False).run()
    assert _toggle(at).value is False and "present" not in at.query_params


def test_a_bad_present_value_is_ignored_and_named_like_any_bad_url_value():
    at = run_in_app("home", {"present": "banana"})
    assert not at.exception and _toggle(at).value is False
    warned = [w.value for w in at.warning if "`present`" in w.value]
    assert len(warned) == 1 and "`banana`" in warned[0] and "presenter mode stays off" in warned[0], \
        [w.value for w in at.warning]
    at = run_in_app("home", {"present": "banana", "lang": "ko"})
    assert any("`present` (발표자 모드)" in w.value and "`banana`" in w.value for w in at.warning)


def test_styled_sets_type_sizes_and_keeps_axis_titles():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    fig.update_layout(height=400, xaxis_title="context (tokens)", yaxis_title="KV cache (GiB)")
    fig = styled(fig, True)
    assert fig.layout.xaxis.tickfont.size == PRESENTER["tick"] == fig.layout.yaxis.tickfont.size
    assert fig.layout.height == 460
    # on a 720-px projector a tall figure is drawn no taller than the screen shows at once
    assert styled(go.Figure(layout=dict(height=900)), True).layout.height == PRESENTER_MAX_HEIGHT == 600
    assert styled(go.Figure(layout=dict(height=900)), False).layout.height == 900
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == ("context (tokens)", "KV cache (GiB)")
    assert styled(go.Figure(), False).layout.font.size == NORMAL["font"]


def test_a_headline_keeps_its_place_in_px_when_presenter_mode_resizes_the_chart():
    """The headline hangs a fixed number of px below the figure's top, whatever height presenter mode gives it:
    placed as a fraction of the builder's height (0.968 of 940 px: 30 px), a chart capped to 600 px put it
    19 px down, where its first line at presenter type ran past the top edge."""
    from app.figures.headline import PAD_PX, set_headline

    for height in (300, 940):
        fig = set_headline(go.Figure(layout=dict(height=height)), "A takeaway long enough to wrap onto a second line "
                           "of the chart's title", 44)
        before = (fig.layout.title.y, fig.layout.title.yanchor, fig.layout.title.pad.t)
        fig = styled(fig, True)
        assert fig.layout.height != height  # presenter mode changed the height (×1.15, or capped)
        assert (fig.layout.title.y, fig.layout.title.yref, fig.layout.title.yanchor) == (1, "container", "top")
        assert (fig.layout.title.y, fig.layout.title.yanchor, fig.layout.title.pad.t) == before
        assert fig.layout.title.pad.t == PAD_PX + 20


def _styled_by_plotly_updates(fig: go.Figure, present: bool) -> go.Figure:
    """The reference: the same type sizes set through plotly's own update API, axis by axis."""
    sizes = PRESENTER if present else NORMAL
    fig.update_layout(font=dict(size=sizes["font"]), title_font=dict(size=sizes["title"]))
    fig.update_xaxes(tickfont=dict(size=sizes["tick"]), title_font=dict(size=sizes["font"]))
    fig.update_yaxes(tickfont=dict(size=sizes["tick"]), title_font=dict(size=sizes["font"]))
    if present and fig.layout.height:
        fig.update_layout(height=min(round(fig.layout.height * 1.15), PRESENTER_MAX_HEIGHT))
    return fig


def _panels() -> go.Figure:
    fig = make_subplots(rows=1, cols=3, subplot_titles=("a", "b", "c"))
    for col in (1, 2, 3):
        fig.add_trace(go.Scatter(x=[1, 2, 3], y=[col, 2, 1]), row=1, col=col)
        fig.update_xaxes(title_text=f"x{col} (tokens)", type="log", row=1, col=col)
    fig.add_annotation(x=0, y=1, text="ridge")
    return base_layout(fig, "Three panels", "", "time (ms)", height=420)


FIGURES = {
    "bare": go.Figure,
    "line": lambda: base_layout(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])), "A line", "context (tokens)", "GiB"),
    "panels": _panels,
    "heatmap": lambda: base_layout(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], coloraxis="coloraxis")).update_layout(
        coloraxis=dict(colorscale="Blues"), yaxis2=dict(overlaying="y", title_text="share (%)")), "Cells", "key", ""),
    "table": lambda: go.Figure(go.Table(header=dict(values=["a"]), cells=dict(values=[[1]]))).update_layout(
        template="streamlit", height=200),
    "own template": lambda: go.Figure(go.Bar(x=[1], y=[2])).update_layout(template="ggplot2", height=900),
}


@pytest.mark.parametrize("present", [False, True], ids=["normal", "present"])
@pytest.mark.parametrize("name", list(FIGURES))
def test_styled_gives_the_figure_plotlys_own_updates_give(name, present):
    """styled edits the layout as data, in one step: the same figure, JSON for JSON, template included."""
    ours, reference = styled(FIGURES[name](), present), _styled_by_plotly_updates(FIGURES[name](), present)
    assert json.loads(ours.to_json()) == json.loads(reference.to_json())


def test_the_lab_template_stands_whichever_is_imported_first(monkeypatch):
    """Streamlit sets its own template as plotly's default when its chart module loads; the lab's stays."""
    for first, then in (("app.figures", "streamlit"), ("streamlit", "app.figures")):
        code = f"import {first}, {then}, plotly.io as pio; print(pio.templates.default)"
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        assert out.stdout.split()[-1] == LAB_TEMPLATE == "plotly_white", (first, then)
    white = pio.templates[LAB_TEMPLATE].to_plotly_json()
    assert base_layout(go.Figure(), "t", "x", "y").layout.template.to_plotly_json() == white
    monkeypatch.setattr(pio.templates, "default", "streamlit")  # reset by something: named, the slow way
    assert base_layout(go.Figure(), "t", "x", "y").layout.template.to_plotly_json() == white


def test_every_chart_goes_through_the_lab_style():
    """A page that calls plotly_chart itself would stay small on a projector."""
    offenders = [f"{p.relative_to(ROOT)}:{i}" for d in ("pages", "app") for p in sorted((ROOT / d).rglob("*.py"))
                 if p.name != "present.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if ".plotly_chart(" in line]
    assert offenders == []


def test_number_formats_give_big_numbers_separators_and_round_the_rest():
    import pandas as pd

    from app.present import number_formats

    df = pd.DataFrame({"Step": ["prefill", "decode"], "FLOPs": [582748632776704, 149740847104],
                       "Intensity (FLOP/B)": [2507.8174, 1.051], "Bytes: KV": [1.3e9, 1.3e9], "ok": [True, False]})
    f = number_formats(df)
    assert sorted(f) == ["Bytes: KV", "FLOPs", "Intensity (FLOP/B)"]  # text and booleans keep their look
    assert f["FLOPs"]["type_config"]["format"] == "localized" == f["Bytes: KV"]["type_config"]["format"]
    assert f["Intensity (FLOP/B)"]["type_config"]["format"] == "%.4g"


def test_dense_tables_fold_and_short_word_tables_stay():
    import pandas as pd

    from app.present import is_dense

    assert not is_dense(pd.DataFrame({"Lever": ["GQA", "FP8 KV"], "What it does": ["fewer heads", "half bytes"]}))
    assert is_dense(pd.DataFrame({c: [1.0, 2.0] for c in "abcde"}))  # five numeric columns
    assert is_dense(pd.DataFrame({"x": range(9)}))  # nine rows


def _chart_heights(at) -> list:
    return [json.loads(c.proto.spec)["layout"].get("height") for c in at.get("plotly_chart")]


def test_a_presenter_view_does_not_change_what_other_sessions_see():
    """Issue 39: Serving's timeline comes from a server-wide cache; presenter mode restyled it in place, so after
    one presenter view every viewer's timeline was 600 px tall instead of 940. Normal, presenter, normal again
    (three sessions, one server process): the two normal views agree."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import PAGES_DIR, run_page

    before = _chart_heights(run_page("serving"))
    assert 940 in before, before  # the timeline, at its builder's height
    at = AppTest.from_file(str(PAGES_DIR / "serving.py"), default_timeout=300)
    at.session_state["present"] = True  # a session in presenter mode (set from its link or the toggle)
    presenting = _chart_heights(at.run())
    assert not at.exception and PRESENTER_MAX_HEIGHT in presenting and 940 not in presenting, presenting
    after = _chart_heights(run_page("serving"))
    assert after == before
