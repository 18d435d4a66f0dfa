"""AppTest for the Attention masks page."""

import pytest
from streamlit.testing.v1 import AppTest

from sim.attention.masks import VARIANTS, leaked_mass, masked_softmax, sliding_window
from sim.msg import Msg
from sim.words import say
from tests.conftest import run_page


def page(params=None) -> AppTest:
    return run_page("attention_masks", params, timeout=120)


def test_defaults():
    at = page()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics[say("en", Msg("masks.m.causal"))]) <= 1e-5
    assert float(metrics[say("en", Msg("masks.m.none"))]) > 1e-2
    assert len(at.get("plotly_chart")) == 4


def test_widgets_drive_the_numbers_and_the_url(shipped_models):
    at = page()
    at.selectbox(key="kind").set_value("sliding_window").run()
    at.slider(key="w").set_value(3).run()
    at.slider(key="layer").set_value(2).run()
    at.slider(key="head").set_value(1).run()
    assert not at.exception
    assert at.query_params["kind"] == "sliding_window" and at.query_params["w"] == "3"
    table = at.dataframe[0].value.set_index("How the mask is applied")
    # recompute the ×0 leak for the same prompt, layer, head and mask from sim/
    from sim.attention.maps import capture_attention

    ids = list(b"To be, or not to be|that is the question")
    scores = capture_attention(shipped_models["mha"], ids).scores[2, 1]
    mask = sliding_window(len(ids), 3)
    v = VARIANTS[1]
    expected = leaked_mass(masked_softmax(scores, mask, v), mask).mean().item()
    assert table.loc[v.label, "Mean leaked mass per row"] == pytest.approx(expected, rel=1e-6)
    assert table.loc[VARIANTS[0].label, "Mean leaked mass per row"] == 0.0


def test_url_state_and_bad_values():
    at = page({"kind": "prefix_lm", "p": "4", "pad": "2", "variant": "mqa"})
    assert not at.exception and not at.warning
    assert at.selectbox(key="kind").value == "prefix_lm" and at.slider(key="pad").value == 2
    assert "pad row(s) have no key at all" in at.caption[0].value
    at = page({"kind": "diagonal", "layer": "99", "prompt": ""})
    assert not at.exception
    assert any("`diagonal` is not one of" in w.value for w in at.warning)
    assert "The prompt is empty" in at.error[0].value
