"""URL state: parsers reject garbage with the numbers; a page round-trips through the URL."""

from streamlit.testing.v1 import AppTest

from app.urlstate import dump, parse_bool, parse_choice, parse_float, parse_int, parse_text
from sim.msg import Msg
from sim.words import say
from sim.words.catalog import PSEUDO


def test_parsers():
    assert parse_int("42", 7, 1, 100) == (42, None)
    assert parse_int(None, 7, 1, 100) == (7, None)
    assert parse_int("4e9", 7, 1, 100) == (7, "`4e9` is not a whole number")
    assert parse_int("101", 7, 1, 100) == (7, "`101` is outside 1..100")
    assert parse_float("0.5", 1.0, 0.0, 2.0) == (0.5, None)
    assert parse_float("nan", 1.0, 0.0, 2.0)[1] == "`nan` is outside 0.0..2.0"
    assert parse_float("inf", 1.0, 0.0, 2.0)[0] == 1.0
    assert parse_choice("gqa", "mha", ["mha", "gqa"]) == ("gqa", None)
    assert parse_choice("<script>", "mha", ["mha", "gqa"], PSEUDO) == ('mha', 'url.not_one_of(value=`<script>`, options=mha, gqa)')
    assert parse_bool("0", True) == (False, None)
    assert parse_bool("maybe", True, PSEUDO) == (True, 'url.not_bool(value=`maybe`)')
    assert parse_text("x" * 11, "d", max_len=10, lang=PSEUDO) == ('d', 'url.too_long(num_bytes=11, max_len=10)')
    assert parse_text("가" * 4, "d", max_len=10, lang=PSEUDO) == ('d', 'url.too_long(num_bytes=12, max_len=10)')  # 3 bytes each
    assert parse_text("가" * 3, "d", max_len=10) == ("가" * 3, None)
    assert [dump(v) for v in (True, 3, 0.25, "a")] == ["1", "3", "0.25", "a"]


def _demo_page():
    import streamlit as st

    from app.urlstate import UrlState

    url = UrlState("demo")
    url.int("n", 100, 1, 1024)
    url.choice("variant", "mha", ["mha", "gqa", "mqa"])
    url.bool("causal", True)
    url.show_problems()
    st.slider("New tokens", 1, 1024, key="n")
    st.selectbox("Variant", ["mha", "gqa", "mqa"], key="variant")
    st.checkbox("Causal", key="causal")
    url.sync()


def test_url_restores_view_and_follows_widgets():
    at = AppTest.from_function(_demo_page)
    at.query_params["n"] = "300"
    at.query_params["variant"] = "mqa"
    at.query_params["causal"] = "0"
    at.run()
    assert not at.exception and not at.warning
    assert (at.slider[0].value, at.selectbox[0].value, at.checkbox[0].value) == (300, "mqa", False)
    at.slider[0].set_value(512)
    at.selectbox[0].set_value("gqa")
    at.run()
    assert at.query_params["n"] == "512"
    assert at.query_params["variant"] == "gqa"
    assert at.query_params["causal"] == "0"


def test_bad_url_values_fall_back_with_a_warning():
    at = AppTest.from_function(_demo_page)
    at.query_params["n"] = "99999"
    at.query_params["variant"] = "gpt5"
    at.run()
    assert not at.exception
    assert at.slider[0].value == 100 and at.selectbox[0].value == "mha"
    text = " ".join(w.value for w in at.warning)
    assert say("en", Msg("url.outside", value="`99999`", lo="1", hi="1024")) in text
    assert say("en", Msg("url.not_one_of", value="`gpt5`", options="mha, gqa, mqa")) in text
    assert at.query_params["n"] == "100"  # the URL is corrected to what is shown
