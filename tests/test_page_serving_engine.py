"""The Serving page's engine tabs (chunked prefill, preemption, step through, your trace): the numbers they show are
sim.serving.studies' for the same inputs, the open tab is in the URL, bad input is a message, never a traceback."""

import json
import re

import pandas as pd

from app.serving_tabs import tables_frame, view_takeaway
from sim.alloc.trace import MAX_MODEL_LEN, parse_trace, write_trace
from sim.msg import Msg
from sim.serving import studies as sd
from sim.serving.comparison import DeploymentConfig
from sim.words import engine_readouts as er
from sim.words import say
from tests.conftest import run_page
from tests.test_chart_axes import charts, untitled_axes
from tests.test_chart_axes import title_of as raw_title


def title_of(fig: dict) -> str:
    return raw_title(fig).replace("<br>", " ")


def open_tab(tab: str, **params):
    at = run_page("serving", {"tab": tab, "live": "0", **params})
    assert not at.exception, at.exception
    return at


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_each_tab_opens_alone_with_titled_axes_and_its_takeaway():
    sweep = sd.sweep_chunk_budget(sd.StudySetup())
    cmp = sd.compare_preemption(sd.PreemptionSetup())
    run = sd.run_scenario("chunked")
    want = {"chunked": er.chunk_sweep_takeaway(sweep), "preemption": er.preemption_comparison_takeaway(cmp), "steps": view_takeaway(run.steps[0], 12)}
    for tab, title in want.items():
        at = open_tab(tab)
        figs = charts(at)
        assert len(figs) == 1, tab  # only the open tab's body ran
        assert untitled_axes(figs[0]) == [], tab
        assert title_of(figs[0]) == title
        assert not at.error and not at.warning


def test_chunked_tab_shows_the_sweep():
    at = open_tab("chunked", ck_requests=40, ck_rate=50.0)
    setup = sd.StudySetup(workload=sd.StudySetup().workload.__class__(
        num_requests=40, prompt_mean=3000, output_mean=100, spread=0.5, max_model_len=8192, max_tokens=1024,
        arrival="poisson", arrival_rate=0.5, seed=0))
    want = sd.sweep_chunk_budget(setup).to_frame().round(3)
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), want)
    assert at.number_input(key="ck_requests").value == 40


def test_preemption_tab_shows_both_modes():
    at = open_tab("preemption", pe_requests=120, pe_kv=16384, pe_link="pcie4")
    study = sd.StudySetup(workload=sd.PreemptionSetup().study.workload.__class__(
        num_requests=120, prompt_mean=600, output_mean=400, max_model_len=8192, max_tokens=2048, seed=0),
        max_num_seqs=128)
    cmp = sd.compare_preemption(sd.PreemptionSetup(study, 16384, 400_000, "pcie4", True))
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), cmp.to_frame().round(3))
    assert cmp.recompute.result.num_preemptions > 0 and cmp.swap.num_swaps > 0
    assert title_of(charts(at)[0]) == er.preemption_comparison_takeaway(cmp)


def test_step_through_shows_the_step_in_the_link():
    at = open_tab("steps", st_scenario="swap", st_step=4)
    view = sd.run_scenario("swap").steps[4]
    shown = metrics(at)
    # after step 4 of the swap scenario: r2 waits on the host, r0 and r1 hold every block
    assert shown["Running"] == "r0, r1" and shown["Swapped to host"] == "r2" and shown["Waiting"] == "—"
    assert shown["Free GPU blocks"] == "0 of 6"
    assert (view.running, view.swapped) == ((0, 1), (2,))
    pd.testing.assert_frame_equal(at.dataframe[1].value.reset_index(drop=True), tables_frame(view, 4))
    assert title_of(charts(at)[0]) == view_takeaway(view, 6)
    at.slider(key="st_step").set_value(0).run()
    assert not at.exception and at.query_params["st_step"] in ("0", ["0"])
    assert metrics(at)["Running"] == "r0, r1, r2"


def test_step_through_changes_and_refusals():
    at = open_tab("steps", st_scenario="recompute", st_blocks=12)  # room for all three: nobody is preempted
    from dataclasses import replace

    run = sd.run_scenario("recompute", replace(sd.STEP_SCENARIOS["recompute"].config, capacity_tokens=48))
    assert sd.run_scenario("recompute").num_recomputes > 0 and run.num_recomputes == 0
    assert at.slider(key="st_step").max == len(run.steps) - 1
    assert metrics(at)["Free GPU blocks"].endswith("of 12")
    at = open_tab("steps", st_scenario="chunked", st_budget=2)  # below the 4 running requests' decode tokens
    assert at.error and say("en", Msg("serving.err.budget_decode", budget=2, seqs=4, per=1, need=4)) in unescaped(
        at.error[0].value)


def test_bad_url_values_fall_back_with_a_warning():
    at = open_tab("steps", st_scenario="<script>", st_step="-5", ck_rate="nan")
    warnings = " ".join(w.value for w in at.warning)
    for key in ("st_scenario", "st_step", "ck_rate"):
        assert f"`{key}`" in warnings
    assert "<script>" not in warnings.replace("`<script>`", "")  # shown as code, never as markup
    assert metrics(at)["Running"] == "r0"  # the chunked scenario's step 0


def paste(at, text: str):
    at.text_area(key="tr_text").set_value(text).run()
    assert not at.exception, at.exception
    return at


def test_a_pasted_trace_runs_every_simulator():
    lines = [{"arrival": 0.01 * i, "prompt_len": 300 + 10 * i, "prefix_group": "sys", "prefix_len": 256,
              "output_len": 20, "id": f"**q{i}**"} for i in range(6)]
    text = write_trace(lines)
    at = paste(open_tab("trace"), text)
    res = sd.run_trace(parse_trace(text), DeploymentConfig())
    assert any(er.trace_run_summary(res) == m.value for m in at.markdown)
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), res.to_frame().round(4))
    assert res.prefix.hit_tokens.tolist() == [0, 256, 256, 256, 256, 256]
    fig = charts(at)[0]
    assert title_of(fig) == er.trace_run_hits_takeaway(res) and untitled_axes(fig) == []
    assert fig["data"][0]["x"][0] == "**q0**"  # the id as text (html-escaped; no markdown)


def unescaped(text: str) -> str:
    """A message as the reader sees it (app.text.plain backslash-escapes Markdown)."""
    return re.sub(r"\\(.)", r"\1", text)


def test_bad_traces_are_messages_naming_the_line_and_field():
    at = paste(open_tab("trace"), '{"prompt": [1, 2], "output_len": 3}\n{"prompt": [1], "output_len": -1}\n')
    assert at.error and say("en", Msg("serving.trace.at_field", where=Msg("serving.trace.line", n=2), field="output_len",
                                      message=Msg("serving.trace.out_of_range", lo="1", hi="32,767", got="-1"))) \
        in unescaped(at.error[0].value)
    at = paste(open_tab("trace"), '{"prompt": [1], "output_len": 1, "<b>x</b>": 1}')
    assert at.error and "unknown field" in at.error[0].value
    assert "\\<b\\>" in at.error[0].value  # the field's name escaped, never markup
    at = paste(open_tab("trace"), json.dumps({"prompt_len": 32000, "output_len": 1000}))
    assert at.error and say("en", Msg("serving.trace.at_field", where=Msg("serving.trace.line", n=1), field="output_len",
                                      message=Msg("serving.trace.too_long", p="32,000", out="1,000", max=f"{MAX_MODEL_LEN:,}"))) \
        in unescaped(at.error[0].value)


def test_the_example_trace_button():
    at = open_tab("trace")
    assert at.info and "Upload a trace or paste one" in at.info[0].value
    at.button(key="tr_example").click().run()
    assert not at.exception and not at.error
    assert at.text_area(key="tr_text").value.count("\n") == 24
    assert at.dataframe and len(at.dataframe[0].value) == 4


def test_the_disagg_study_stops_at_a_short_models_context_instead_of_refusing_every_run():
    """The study's lengths are capped at the model's trained context, as a server caps max_model_len: Llama 2 7B
    (4,096) used to be refused on every link, its 8,192-token study length past its context."""
    from app.controls.serving_engine import STUDY_MAX_LEN
    from sim.cost.presets import load_presets

    ctx = load_presets()["llama-2-7b"].max_position_embeddings
    assert ctx < STUDY_MAX_LEN
    at = open_tab("disagg", model="llama-2-7b")
    assert [e.value for e in at.error] == [] and len(at.get("plotly_chart")) >= 1
    rows = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    assert rows  # the colocated and disaggregated runs were drawn
