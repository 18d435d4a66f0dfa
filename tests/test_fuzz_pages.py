"""Every page survives whatever a user sets or links: widgets at their extremes and in random valid
combinations, and URL values that are garbage, huge, repeated or Markdown.

Hypothesis draws the widget values (derandomized: the same examples every run). The URL checks
also render every message a page shows with a reference CommonMark renderer and assert that no
user-supplied link or image survives.
"""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from app.registry import PAGES
from tests.conftest import PAGES_DIR

SLUGS = [p.slug for p in PAGES if p.slug != "home"]
NUMERIC = ("slider", "number_input")
CHOICE = ("selectbox", "radio", "select_slider")
BOOL = ("toggle", "checkbox")
TEXT = ("text_input", "text_area")
NASTY_TEXT = ["", "a", "가나다라마바사", "[Log in again](http://127.0.0.1:9/phish)", "![x](http://127.0.0.1:9/p.png)",
              "x" * 300, "\n\n\n", "`` ` ``", "<script>alert(1)</script>", "{\"hidden_size\": 1e999}"]
INJECT_LINK = "[Log in again](http://127.0.0.1:9/phish)"
INJECT_IMAGE = "![x](http://127.0.0.1:9/pixel.png)"
HUGE = "9" * 5000
MD = MarkdownIt("commonmark")
FUZZ = settings(max_examples=4, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def real_work_limit(monkeypatch):
    """The app's own limit on work started without a button: extremes must wait for it, not run."""
    from app.work import AUTO_ENV, AUTO_RUN_S

    monkeypatch.setenv(AUTO_ENV, str(AUTO_RUN_S))


def open_page(slug: str, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(PAGES_DIR / f"{slug}.py"), default_timeout=300)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


def no_crash(at: AppTest, what: str) -> None:
    assert not at.exception, f"{what}: {[e.value for e in at.exception]}"
    shown = " ".join(str(getattr(e, "value", "")) for kind in ("markdown", "caption", "error", "warning", "info",
                                                                "success", "code") for e in getattr(at, kind))
    assert "Traceback (most recent call last)" not in shown, what


def widgets(at: AppTest) -> list[tuple[str, object]]:
    out = []
    for kind in NUMERIC + CHOICE + BOOL + TEXT:
        for w in getattr(at, kind):
            if getattr(w, "key", None) and not w.key.startswith("_") and not getattr(w, "disabled", False):
                out.append((kind, w))
    return out


def extreme(kind: str, w, which: str):
    """The widget's min / max (numeric), first / last option, off / on, or a nasty text."""
    if kind in NUMERIC:
        if isinstance(w.value, tuple):
            return None
        return w.min if which == "lo" else w.max
    if kind in BOOL:
        return which == "hi"
    if kind in TEXT:
        return "a" if which == "lo" else "가" * 400  # the shortest prompt, and 1,200 bytes
    return None


def select_index(w, index: int) -> None:
    """Choose option `index` of a selectbox. AppTest knows only the option labels, so this works
    where the label is the value (no format_func); elsewhere the widget keeps its value."""
    before = w.value
    w.select_index(index)
    try:
        ok = str(w.format_func(w.value)) == w.options[index]
    except Exception:
        ok = False
    if not ok:
        w.set_value(before)


def apply(kind: str, w, value) -> None:
    if value is not None and kind in NUMERIC + BOOL + TEXT:
        w.set_value(value)


@pytest.mark.parametrize("which", ["lo", "hi"])
@pytest.mark.parametrize("slug", SLUGS)
def test_every_widget_at_its_extreme(slug, which):
    at = open_page(slug)
    no_crash(at, f"{slug} opened")
    for kind, w in widgets(at):
        if kind == "selectbox" and w.options:
            select_index(w, 0 if which == "lo" else len(w.options) - 1)
        else:
            apply(kind, w, extreme(kind, w, which))
    at.run()
    no_crash(at, f"{slug} with every widget at its {which} end")


@pytest.mark.parametrize("slug", SLUGS)
@FUZZ
@given(data=st.data())
def test_random_valid_combinations(slug, data):
    at = open_page(slug)
    for kind, w in widgets(at):
        if kind in NUMERIC and not isinstance(w.value, tuple):
            lo, hi = w.min, w.max
            if isinstance(lo, int) and isinstance(hi, int):
                w.set_value(data.draw(st.integers(lo, hi), label=w.key))
            elif lo is not None and hi is not None:
                w.set_value(data.draw(st.floats(float(lo), float(hi), allow_nan=False), label=w.key))
        elif kind == "selectbox" and w.options:
            select_index(w, data.draw(st.integers(0, len(w.options) - 1), label=w.key))
        elif kind in BOOL:
            w.set_value(data.draw(st.booleans(), label=w.key))
        elif kind in TEXT:
            w.set_value(data.draw(st.sampled_from(NASTY_TEXT), label=w.key))
    at.run()
    no_crash(at, f"{slug} with random valid widget values")


# --- URL values ----------------------------------------------------------------------------------

def url_keys(slug: str) -> dict[str, str]:
    """The keys a page keeps in its URL, with their default values (what it syncs on opening)."""
    return {k: v for k, v in open_page(slug).query_params.items() if isinstance(v, str)}


def rendered(at: AppTest) -> list[str]:
    return [MD.render(str(e.value)) for kind in ("markdown", "caption", "error", "warning", "info", "success")
            for e in getattr(at, kind)]


def warning_text(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


@pytest.mark.parametrize("slug", SLUGS)
def test_markdown_in_every_url_value_stays_text(slug):
    keys = url_keys(slug)
    assert keys, f"{slug} keeps nothing in its URL"
    for payload in (INJECT_LINK, INJECT_IMAGE):
        at = open_page(slug, {k: payload for k in keys})
        no_crash(at, f"{slug} with Markdown in every URL value")
        for html in rendered(at):
            assert 'href="http://127.0.0.1:9' not in html and 'src="http://127.0.0.1:9' not in html, html
        text = warning_text(at)
        for key in keys:  # every value the page could not use is named in the warning
            assert at.query_params.get(key) == payload or f"`{key}`" in text, (slug, key)


@pytest.mark.parametrize("slug", SLUGS)
def test_huge_and_repeated_url_values_are_named_and_shortened(slug):
    keys = url_keys(slug)
    at = open_page(slug, {k: HUGE for k in keys})
    no_crash(at, f"{slug} with 5,000-digit URL values")
    text = warning_text(at)
    assert "9" * 61 not in text, "a URL value is echoed unshortened"
    for key in keys:
        assert at.query_params.get(key) == HUGE or f"`{key}`" in text, (slug, key)
    first, value = next(iter(keys.items()))
    at = open_page(slug, {first: [value, value]})
    no_crash(at, f"{slug} with a repeated key")
    assert re.search(rf"`{re.escape(first)}` \(.*\) appears 2 times", warning_text(at)), warning_text(at)
