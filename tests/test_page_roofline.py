"""AppTest for the Roofline page: the numbers shown are sim/'s numbers."""

from streamlit.testing.v1 import AppTest

from app.controls.roofline import TABS
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware, prefill_step
from sim.msg import Msg
from sim.words import say
from tests.conftest import run_page


def page(params=None) -> AppTest:
    return run_page("roofline", params, timeout=120)


def metric(at, label):
    return next(m for m in at.metric if m.label == label)


def test_defaults_llama_70b_on_h100():
    at = page()
    assert not at.exception and not at.error
    dec = decode_step(RooflineConfig(load_presets()["llama-3.1-70b"], 1, 4096))
    assert metric(at, "Decode intensity").value == f"{dec.intensity:,.2f} FLOP/B" == "1.05 FLOP/B"
    assert metric(at, "Decode intensity").delta == "memory-bound"
    assert metric(at, "Ridge point").value == "295 FLOP/B"
    assert at.query_params["tab"] == "roofline" and len(at.get("plotly_chart")) == 1  # only the open tab ran


def test_each_tab_opens_from_the_link_and_draws_its_section():
    charts = {slug: len(page({"tab": slug}).get("plotly_chart")) for slug in TABS.tabs}
    assert charts == {"roofline": 1, "bytes": 1, "batching": 2, "levers": 0, "machine": 0, "claims": 0}
    at = page({"tab": "levers"})
    assert not at.exception and at.query_params["tab"] == "levers" and len(at.dataframe) == 1
    at.session_state[TABS.widget_key] = TABS.tabs["batching"]  # what a click on the tab sends
    at.run()
    assert at.query_params["tab"] == "batching" and len(at.get("plotly_chart")) == 2
    at = page({"tab": "nope"})
    assert not at.exception and at.query_params["tab"] == "roofline"
    assert "`nope` is not one of" in " ".join(w.value for w in at.warning)


def test_widgets_change_the_numbers_and_url():
    at = page()
    at.selectbox(key="model").set_value("llama-3.1-8b").run()
    at.select_slider(key="batch").set_value(64).run()
    at.select_slider(key="context").set_value(32768).run()
    at.radio(key="compute").set_value("fp8").run()
    assert not at.exception
    cfg = RooflineConfig(load_presets()["llama-3.1-8b"], 64, 32768)
    hw = hardware(load_gpus()["h100-sxm"], "fp8")
    dec, pre = decode_step(cfg), prefill_step(cfg)
    assert metric(at, "Decode intensity").value == f"{dec.intensity:,.2f} FLOP/B"
    assert metric(at, "Decode step (predicted)").value == f"{dec.time(hw) * 1e3:,.2f} ms"
    assert metric(at, "Prefill intensity").value == f"{pre.intensity:,.0f} FLOP/B"
    assert at.query_params["batch"] == "64" and at.query_params["compute"] == "fp8"


def test_bad_choices_explained():
    at = page({"gpu": "a100-80gb", "compute": "fp8"})
    assert not at.exception
    assert say("en", Msg("roofline.s.no_dtype", gpu=load_gpus()["a100-80gb"].name, dtype="FP8")) in at.error[0].value
    at = page({"batch": "0", "model": "gpt-7"})
    assert not at.exception
    text = " ".join(w.value for w in at.warning)
    assert "`0` is outside 1..4096" in text and "`gpt-7` is not one of" in text


def test_this_machine_and_the_tiny_model_point():
    at = page({"gpu": "this-machine", "model": "tiny-mha", "context": "128", "tab": "machine"})
    assert not at.exception and not at.error
    at.button[0].click().run()
    assert not at.exception
    tp = at.session_state["tiny_point"]
    assert tp.num_ops > 50 and tp.bytes_per_step > 0 and tp.measured_s > 0
    assert any("it took" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 1  # the tiny model's step on this machine's roofline
