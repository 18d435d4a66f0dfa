"""sim/words: message values worded in both languages, numbers formatted by the catalog entry's own spec."""

import pytest

from sim.msg import Compare, Items, Msg
from sim.refusal import Refusal
from sim.words import catalog, say, why


def test_msg_is_a_value():
    a, b = Msg("list.and"), Msg("list.and")
    assert a == b and hash(a) == hash(b) and Msg("x", n=1) != Msg("x", n=2)
    with pytest.raises(TypeError):
        a.fields["n"] = 3  # fields are read-only: a cached result's message cannot be changed by a page


def test_compare_words_and_order():
    assert Compare.of(2, 1) is Compare.MORE and Compare.of(1, 2) is Compare.LESS and Compare.of(1, 1) is Compare.SAME
    for lang in ("en", "ko"):
        assert {say(lang, c) for c in Compare} == {catalog(lang)[f"cmp.{c.value}"] for c in Compare}


def test_items_join_in_each_language():
    assert say("en", Items(["a", "b", "c"])) == "a, b" + catalog("en")["list.and"] + "c"
    assert say("ko", Items(["a"])) == "a"


def test_refusal_words_in_both_languages_and_english_str():
    key = next(k for k, v in catalog("en").items() if ".err" in k and "{" not in v)
    exc = Refusal(key)
    assert str(exc) == catalog("en")[key] and why(exc, "ko") == catalog("ko")[key]
    assert exc.msg == Msg(key)


def test_a_message_survives_pickling():
    """Results holding messages go through st.cache_data and the result cache, which pickle them."""
    import pickle

    from sim.msg import Compare, Items, Msg

    m = Msg("kvf.math.token_all", body=Msg("kvf.math.layers", b=4096, layers=32), b=131_072, readable="128 KiB",
            share="", cmp=Compare.MORE, parts=Items([Msg("list.and"), "x"]))
    back = pickle.loads(pickle.dumps(m))
    assert back == m and hash(back) == hash(m) and back.fields["cmp"] is Compare.MORE
