"""The Lesson's mechanics as a class meets them: a check-yourself question never has its answer printed above
it (it asks what the step does not show), the slider of steps 1 and 5 moves a marker on the chart, and every
"open with these settings" link carries the values the step used (step 9 keeps BF16; step 11's speedup is the
one its Serving tab shows)."""

import json
from urllib.parse import parse_qs

import pytest

from app.lesson import cost, ways_out
from sim.alloc.prefix_cache import CacheConfig
from sim.alloc.prefix_sweeps import run_both_layouts
from sim.alloc.workload import PrefixWorkloadConfig
from sim.cost.decode import flop_shape
from sim.cost.opcount import generation_totals, step_flops
from sim.cost.presets import load_presets
from sim.lesson import quiz
from sim.words import say
from tests.conftest import run_in_app
from tests.test_i18n import rendered_text


def lesson(params):
    return run_in_app("lesson", params, timeout=300)


def layout_hit_rates(workload: str) -> list[str]:
    runs = run_both_layouts(PrefixWorkloadConfig(workload=workload, num_requests=100), CacheConfig())
    return [f"{r.result.hit_rate:.1%}" for r in runs.values()]


def link_params(at) -> dict[str, str]:
    (link,) = at.get("page_link")
    return {k: v[0] for k, v in parse_qs(link.proto.query_string).items()}


def figure(at, i: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[i].proto.spec)


@pytest.mark.parametrize(("step", "question", "secret"), [
    # 6: KiB per token of the model the step does not show (70B: 320 KiB)
    ("6", lambda: quiz.kib_per_token(quiz.other_model("llama-3.1-8b")), lambda q: [f"{q.answer:,.4g}"]),
    # 7: FLOP/B with FP8 weights (the step shows BF16)
    ("7", lambda: quiz.decode_intensity(cost.ROOFLINE_MODEL, cost.ROOFLINE_CONTEXT), lambda q: [f"{q.answer:.2f}"]),
    # 9: GQA against MHA for the model the bars do not show (70B: 64 query heads over 8 K/V heads)
    ("9", lambda: quiz.mqa_vs_mha(quiz.other_model("llama-3.1-8b")), lambda q: [f"{q.answer:.1f}×", f"{q.answer:g}×"]),
    # 12: the better layout in the workload after the one shown (its hit rates are nowhere on the page)
    ("12", lambda: quiz.better_layout(quiz.other_workload("system_prompt")), lambda q: [r for r in layout_hit_rates("few_shot")
                                                                                    if r not in layout_hit_rates("system_prompt")]),
])
def test_no_step_prints_the_answer_to_its_question(step, question, secret):
    at = lesson({"step": step})
    assert not at.exception
    q = question()
    page = " ".join(rendered_text(at))
    assert say("en", q.prompt).split("?")[0][:30] in page.replace("\\", "")  # the question is on the page
    hidden = secret(q)
    assert hidden
    for s in hidden:
        assert s not in page, (step, s)
    # asked for, the answer comes (and only then)
    at.toggle(key=f"quiz_{q.key}_show").set_value(True).run()
    assert any(i.value.replace("\\", "").startswith(say("en", q.reveal())[:40]) for i in at.info)


@pytest.mark.parametrize(("step", "key", "value", "curve"), [("1", "n", 64, "repeat"), ("5", "ctx", 16384, "step")])
def test_the_slider_moves_a_marker_on_the_chart(step, key, value, curve):
    at = lesson({"step": step, key: str(value)})
    fig = figure(at)
    marked = [tr for tr in fig["data"] if tr.get("x") == [value, value]]
    assert len(marked) == 1, [tr.get("x") for tr in fig["data"]]
    shape = flop_shape(load_presets()["tiny-mha" if curve == "repeat" else cost.COST_MODEL])
    if curve == "repeat":
        expect = [sum(generation_totals(shape, 16, value, m).values()) for m in ("naive", "cached")]
    else:
        expect = [sum(step_flops(shape, value, value).values()), sum(step_flops(shape, 1, value).values())]
    assert marked[0]["y"] == expect
    assert any(s.get("x0") == value for s in fig["layout"]["shapes"])  # the dotted line at the chosen value
    other = 256 if value != 256 else 512
    assert figure(lesson({"step": step, key: str(other)}))["data"][-1]["x"] == [other, other]


def test_each_link_carries_the_steps_values():
    assert link_params(lesson({"step": "9", "model": "llama-3.1-70b"})) == {
        "model": "llama-3.1-70b", "kv": "bf16", "tab": "variants"}
    assert link_params(lesson({"step": "5", "ctx": "16384"})) == {"scale_model": cost.COST_MODEL, "scale_n": "16384"}
    assert link_params(lesson({"step": "4"}))["n"] == "24"


def test_step_11_states_the_speedup_its_serving_tab_shows():
    at = lesson({"step": "11", "alpha": "0.7", "k": "3"})
    params = link_params(at)
    claim = next(m.value for m in at.markdown if m.value.startswith("#### "))
    serving = run_in_app("serving", params, timeout=300)
    assert not serving.exception
    shown = next(m.value for m in serving.metric if m.label == "Speedup")
    assert shown.endswith("×") and f"{shown} faster" in claim, (shown, claim)
    assert params["alpha"] == "0.7" and params["k"] == "3" and params["c_mode"] == "roofline"
    assert params["spec_target"] == ways_out.SPEC.target and params["spec_draft"] == ways_out.SPEC.draft
