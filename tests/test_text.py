"""User text is shown literally: checked against a reference CommonMark renderer (markdown-it)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from app.text import MAX_SHOWN, code, for_plotly, plain, shorten

MD = MarkdownIt("commonmark")
ATTACKS = [
    "[Log in again](http://127.0.0.1:9/phish)",
    "![x](http://127.0.0.1:9/pixel.png)",
    "`code` and ``more`` then [a](b)",
    "<img src=x onerror=alert(1)>",
    ":red[alarm] :material/warning: $x^2$",
    "**bold** _it_ # heading\n- list",
]


def test_shorten_and_code_exact():
    assert shorten("x" * 100) == "x" * (MAX_SHOWN - 1) + "…"
    assert len(shorten("x" * 100)) == MAX_SHOWN
    assert shorten("a\nb\tc") == "a\\nb\\tc"
    assert code("mha") == "`mha`"
    assert code("a`b") == "``a`b``"
    assert code("`x") == "`` `x ``"
    assert code("a``b`") == "``` a``b` ```"
    assert code("") == '`""`'
    assert plain("[a](http://x)") == "\\[a\\]\\(http\\:\u2060//x\\)"  # a word joiner inside "://" (see below)
    assert for_plotly("<a href='x'>") == "&lt;a href=&#x27;x&#x27;&gt;"


@pytest.mark.parametrize("attack", ATTACKS)
def test_attacks_render_as_text(attack):
    for shown in (code(attack, limit=200), plain(attack)):
        html = MD.render(shown)
        assert "<a " not in html and "<img" not in html and "<h1" not in html and "<li" not in html, html


@given(st.text(max_size=120))
def test_code_is_always_one_code_span(text):
    html = MD.render(code(text)).strip()
    assert html.startswith("<p><code>") and html.endswith("</code></p>") and html.count("<code>") == 1, html
    assert "<a " not in html and "<img" not in html


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_plain_never_makes_markup(text):
    html = MD.render(plain(text))
    assert "<a " not in html and "<img" not in html and "<code>" not in html and "<em>" not in html


def test_plain_leaves_no_bare_url_or_address_for_gfm_to_autolink():
    """Streamlit's Markdown autolinks `http(s)://…`, `www.…` and `name@host.tld` after escapes are resolved: plain
    puts an invisible word joiner inside each, and the reader sees the same characters (the browser check is
    tests/test_fuzz_pages.py::test_no_link_from_user_text_in_the_browser)."""
    import re

    from app.text import WORD_JOINER, plain, unlinked

    raw = "go http://127.0.0.1:9/x www.evil.io HTTPS://A.IO WwW.b.io mailto:a@evil.io ftp://f"
    got = plain(raw)
    seen = re.sub(r"\\(.)", r"\1", got)
    assert seen.replace(WORD_JOINER, "") == raw
    for part in ("://", "www.", "WwW.", "a@"):
        assert part not in seen, part
    assert unlinked("http://x") == f"http:{WORD_JOINER}//x" and unlinked("a@b") == f"a{WORD_JOINER}@b"
    assert unlinked("no links: 1.5 www") == "no links: 1.5 www"


def test_an_at_sign_that_starts_no_address_stays_as_it_is():
    """A label such as 'H2O (heavy hitters + window) @ 25.0%' is no email address: no joiner goes in (a page's
    sentence that quotes it reads, and compares, as written)."""
    from app.text import WORD_JOINER, unlinked

    assert unlinked("H2O (heavy hitters + window) @ 25.0%") == "H2O (heavy hitters + window) @ 25.0%"
    assert unlinked("mail x.y+z@evil.io") == f"mail x.y+z{WORD_JOINER}@evil.io"
