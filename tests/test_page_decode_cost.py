"""AppTest for the Decode cost page: the numbers shown are the numbers sim/ returns."""

import pytest
from streamlit.testing.v1 import AppTest

from app.text import plain
from app.work import SHOWN_KEY
from sim.cost.opcount import generation_flops
from sim.model.generate import encode
from sim.model.transformer import PRESETS
from sim.words import text
from tests.conftest import metric_value as metric
from tests.conftest import run_page


def page(params=None) -> AppTest:
    at = run_page("decode_cost", params, timeout=180)
    if any("waits for you" in i.value for i in at.info):  # a run estimated over the auto-start budget
        at.button[0].click().run()
    return at


def expected_flop_ratio(variant, prompt, n):
    f = {mode: sum(sum(s.values()) for s in generation_flops(PRESETS[variant], len(encode(prompt)), n, mode))
         for mode in ("naive", "cached")}
    return f"{f['naive'] / f['cached']:,.1f}×"


def test_defaults_show_identical_tokens_and_exact_flops():
    at = page()
    assert not at.exception
    assert at.success[0].value == text("en", "decode.same_all", k="64")
    assert metric(at, "FLOPs naive / cached") == expected_flop_ratio("mha", "HAMLET.\nTo be, or not to be", 64)
    res = at.session_state[SHOWN_KEY]["decode_cost.compare"]
    assert res.naive_complete and res.compared == 64
    t_naive = sum(r.wall_s for r in res.naive)
    t_cached = sum(r.wall_s for r in res.cached)
    assert metric(at, "Measured speedup") == f"{t_naive / t_cached:,.1f}×"
    assert metric(at, "Cached tokens/s") == f"{64 / t_cached:,.1f}"
    # the open tab's chart (per step, the default) and the two at Llama scale: the other tabs send nothing
    assert len(at.get("plotly_chart")) == 3 and at.query_params["tab"] == "per_step"
    assert at.get("download_button")


@pytest.mark.parametrize(("tab", "charts"), [("cumulative", 3), ("wall", 3), ("parts", 3), ("grid", 3),
                                             ("profile", 2)])
def test_every_result_tab_opens_from_its_link(tab, charts):
    """A shared link opens on its tab (tab=), and only that tab's body runs."""
    at = page({"n": "8", "tab": tab})
    assert not at.exception and not at.warning
    assert len(at.get("plotly_chart")) == charts  # the profile tab waits for its button
    assert at.query_params["tab"] == tab
    if tab == "profile":
        assert any(b.label == "Profile one cached step" for b in at.button)


def test_change_n_and_variant_then_run():
    at = page()
    at.slider(key="n").set_value(40)
    at.radio(key="variant").set_value("gqa")
    at.text_area(key="prompt").set_value("ROMEO.\n")
    at.button[0].click().run()
    assert not at.exception
    assert at.success[0].value == text("en", "decode.same_all", k="40")
    assert metric(at, "FLOPs naive / cached") == expected_flop_ratio("gqa", "ROMEO.\n", 40)
    res = at.session_state[SHOWN_KEY]["decode_cost.compare"]
    assert [r.num_new for r in res.cached] == [7] + [1] * 39
    assert [r.num_new for r in res.naive] == list(range(7, 47))
    assert at.query_params["n"] == "40" and at.query_params["variant"] == "gqa"


def test_url_restores_the_view():
    at = page({"n": "12", "variant": "mqa", "attn": "eager", "scale_n": "65536"})
    assert not at.exception and not at.warning
    assert at.success[0].value == text("en", "decode.same_all", k="12")
    assert at.radio(key="variant").value == "mqa" and at.select_slider(key="scale_n").value == 65536
    claims = at.table[0].value  # the seeds' numbers, drawn by app.claims.render_claims
    assert claims.loc[text("en", "decode.claim.5050.statement"), "We compute"] == text(
        "en", "decode.claim.counted", what=text("en", "decode.claim.5050.what"), naive="5,050", cached="100")
    assert claims.loc[text("en", "decode.claim.4k.statement"), "Verdict"] == "close"
    from sim.claims import Verdict
    from sim.words.claims import verdict_word

    tally = ", ".join(text("en", "claims.tally_item", n=f"{n}", verdict=verdict_word(v, "en"))
                      for v, n in ((Verdict.RIGHT, 4), (Verdict.CLOSE, 1), (Verdict.NEEDS_CONTEXT, 1)))
    assert text("en", "claims.tally", n="6", tally=tally) in [c.value for c in at.caption]


def test_bad_input_is_explained():
    at = page({"n": "5000", "variant": "gpt-9"})
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "`5000` is outside 1..1024" in warnings and \
        text("en", "url.not_one_of", value="`gpt-9`", options="mha, gqa, mqa") in warnings
    at = page({"prompt": "x" * 300})
    assert text("en", "url.too_long", num_bytes="300", max_len="256") in at.warning[0].value
    at.text_area(key="prompt").set_value("가" * 100)  # 100 characters, 300 bytes: the limit counts bytes
    at.button[0].click().run()
    assert text("en", "decode.too_long", n="300", max="256") in at.error[0].value
    at = page({"prompt": "y" * 250, "n": "1024", "budget": "1"})
    assert "generating 775 instead" in at.warning[0].value
    res = at.session_state[SHOWN_KEY]["decode_cost.compare"]
    assert len(res.cached) == 775 and not res.naive_complete  # naive is O(N²): the 1 s budget stops it
    assert at.success[0].value == text("en", "decode.same_first", k=f"{res.compared}", budget="1", n="775")
    assert f"Naive decoding stopped after {res.compared} of 775 tokens" in at.info[0].value


def test_cached_step_choice_without_cuda_is_disabled_with_the_reason():
    import torch

    if torch.cuda.is_available():
        import pytest

        pytest.skip("checks the page on a machine without CUDA")
    at = page({"n": "8", "step": "graph"})
    assert not at.exception
    reason = "this machine has no CUDA device (torch.cuda.is_available() is False)"
    assert at.warning[0].value == text("en", "decode.step.fallback", reason=plain(reason))
    radio = at.radio(key="step")
    assert radio.value == "eager" and radio.disabled and radio.options == ["eager", "CUDA graph"]
    assert text("en", "decode.step.unavailable", reason=plain(reason)) in [c.value for c in at.caption]
    assert at.session_state[SHOWN_KEY]["decode_cost.compare"].step == "eager"
    assert at.query_params["step"] == "eager"
