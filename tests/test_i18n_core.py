"""The shared modules in Korean: URL problems, the work queue's messages, presenter tables and model errors say in
the page language what they say in English, with the same values in them."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.urlstate import parse_bool, parse_choice, parse_float, parse_int, parse_text
from app.work import AUTO_ENV, AUTO_RUN_S, fmt_seconds
from sim.msg import Msg
from sim.words import say
from sim.words.catalog import PSEUDO


def test_parsers_in_korean_name_the_same_values():
    assert parse_int("4e9", 7, 1, 100, "ko") == (7, "`4e9`은(는) 정수가 아닙니다")
    assert parse_int("101", 7, 1, 100, "ko") == (7, "`101`은(는) 1..100 범위를 벗어납니다")
    assert parse_float("x", 1.0, 0.0, 2.0, "ko")[1] == "`x`은(는) 숫자가 아닙니다"
    assert parse_float("nan", 1.0, 0.0, 2.0, "ko")[1] == "`nan`은(는) 0.0..2.0 범위를 벗어납니다"
    assert parse_choice("gpt5", "mha", ["mha", "gqa"], "ko") == ("mha", "`gpt5`은(는) mha, gqa 가운데 하나가 아닙니다")
    many = [f"o{i}" for i in range(15)]
    assert parse_choice("z", "o0", many)[1].endswith("o11 (and 3 more)")  # English as it was
    assert parse_choice("z", "o0", many, "ko")[1] == f"`z`은(는) {', '.join(many[:12])} (외 3개) 가운데 하나가 아닙니다"
    assert parse_bool("maybe", True, "ko") == (True, "`maybe`은(는) true/false (1/0)가 아닙니다")
    assert parse_text("x" * 1001, "d", 1000, "ko") == ("d", "1,001바이트(UTF-8) 텍스트는 최대 1,000바이트보다 깁니다")
    assert parse_text("x" * 1001, "d", 1000, PSEUDO) == ('d', 'url.too_long(num_bytes=1,001, max_len=1,000)')


def _demo_page():
    import streamlit as st

    from app.urlstate import UrlState

    url = UrlState("demo")
    url.int("n", 100, 1, 1024, label="새 토큰 수")  # the page's own label, already in its language
    url.choice("variant", "mha", ["mha", "gqa", "mqa"])
    url.show_problems()
    st.slider("n", 1, 1024, key="n")
    st.selectbox("variant", ["mha", "gqa", "mqa"], key="variant")
    url.sync()


def _bad_link(lang: str | None) -> AppTest:
    at = AppTest.from_function(_demo_page)
    at.query_params["n"] = "abc"
    at.query_params["variant"] = "gpt5"
    if lang:
        at.query_params["lang"] = lang
    return at.run()


def test_bad_url_values_are_listed_in_korean():
    at = _bad_link("ko")
    assert not at.exception
    assert at.expander[0].label == "이 링크에는 페이지가 쓸 수 없는 값이 2개 있습니다. 대신 기본값을 보여 줍니다"
    assert at.warning[0].value == (
        "이 링크에는 페이지가 쓸 수 없는 값이 2개 있습니다. 대신 기본값을 보여 줍니다:\n"
        "- `n` (새 토큰 수): `abc`은(는) 정수가 아닙니다. 기본값 `100`을(를) 씁니다.\n"
        "- `variant` (variant): `gpt5`은(는) mha, gqa, mqa 가운데 하나가 아닙니다. 기본값 `mha`을(를) 씁니다.")
    assert (at.slider[0].value, at.selectbox[0].value) == (100, "mha")


def test_bad_url_values_in_english_are_as_before():
    at = _bad_link(None)
    assert at.expander[0].label == say("en", Msg("url.summary.many", n=2))
    assert at.warning[0].value == (
        "This link has 2 values the page cannot use: it shows the defaults instead:\n"
        "- `n` (새 토큰 수): `abc` is not a whole number; using the default `100`.\n"
        "- `variant` (variant): `gpt5` is not one of mha, gqa, mqa; using the default `mha`.")


def test_a_repeated_url_value_in_korean():
    at = AppTest.from_function(_demo_page)
    at.query_params["n"] = ["5", "7"]
    at.query_params["lang"] = "ko"
    at.run()
    assert at.expander[0].label == "이 링크에는 페이지가 쓸 수 없는 값이 1개 있습니다. 대신 기본값을 보여 줍니다"
    assert "- `n` (새 토큰 수)이(가) 링크에 2번 나옵니다. 마지막 값 `7`을(를) 씁니다." in at.warning[0].value
    assert at.slider[0].value == 7


# --- the work queue -----------------------------------------------------------------------------------------------

def test_seconds_read_the_same_in_both():
    assert [fmt_seconds(s) for s in (0.4, 13, 300)] == ["under a second", "about 13 s", "about 5.0 min"]
    assert [fmt_seconds(s, "ko") for s in (0.4, 13, 300)] == ["1초 미만", "약 13초", "약 5.0분"]


@pytest.fixture
def real_limit(monkeypatch):
    monkeypatch.setenv(AUTO_ENV, str(AUTO_RUN_S))


def _job_page():
    import streamlit as st

    from app.work import run_job

    # a kind of its own per test: a run teaches the server its rate, and the next estimate would follow
    got = run_job(f"test.i18n_core.{st.session_state['tag']}", 0, 13.0, lambda progress: "done", what="데모 작업",
                  real_model=False)
    st.markdown(f"result: {got}")


def test_a_long_job_waits_for_its_button_in_korean(real_limit):
    at = AppTest.from_function(_job_page)
    at.session_state["tag"] = "ko"
    at.session_state["lang"] = "ko"
    at.run()
    assert at.info[0].value == ("이 머신에서 약 13초 걸리므로, 버튼을 누를 때까지 기다립니다. 데모 작업 — **실행** 버튼을 "
                                "누르면 시작합니다. 진행 상황이 표시되고 도중에 멈출 수 있습니다. 페이지의 비용 모델이 "
                                "추정했다 (약 13초); 이 서버에서 이런 실행이 끝난 적은 아직 없다.")
    assert at.button[0].label == "실행"
    at.button[0].click().run()
    assert at.markdown[-1].value == "result: done"


def test_a_long_job_in_english_is_as_before(real_limit):
    at = AppTest.from_function(_job_page)
    at.session_state["tag"] = "en"
    at.run()
    assert at.info[0].value == ("This would take about 13 s on this machine, so it waits for you. 데모 작업 — press "
                                "**Run** to start it; it shows its progress and can be stopped. Estimated by the page's "
                                "cost model (about 13 s); no run of this kind has finished on this server yet.")
    assert at.button[0].label == "Run"


def _table_page():
    import pandas as pd
    import streamlit as st

    from app.present import show_table

    st.session_state["present"] = True
    show_table(pd.DataFrame({"x": range(9)}))  # nine rows: dense, folded away in presenter mode


def test_a_folded_table_is_labelled_in_the_page_language():
    at = AppTest.from_function(_table_page)
    at.session_state["lang"] = "ko"
    at.run()
    assert at.expander[0].label == "표 보기"


@pytest.mark.parametrize("slug, tab", [("roofline", "bytes"), ("kv_memory", "engine"), ("serving", "preemption")])
def test_the_open_tab_stays_open_across_a_language_switch(slug, tab):
    """Tab labels are worded in the page language, the link's values are not: after a switch the label left in
    the session is the other language's, and the link's `tab=` picks the same tab again (no exception)."""
    from tests.conftest import run_in_app

    at = run_in_app(slug, {"tab": tab})
    assert not at.exception and at.query_params["tab"] == tab
    at.radio(key="lang").set_value("ko").run()
    assert not at.exception, at.exception
    assert at.query_params["tab"] == tab and at.query_params["lang"] == "ko"
    at.radio(key="lang").set_value("en").run()
    assert not at.exception and at.query_params["tab"] == tab and "lang" not in at.query_params
