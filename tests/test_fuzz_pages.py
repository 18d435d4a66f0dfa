"""Every page survives whatever a user sets or links: widgets at their extremes and in random valid
combinations, and URL values that are garbage, huge, repeated or Markdown.

Hypothesis draws the widget values (derandomized: the same examples every run). The URL checks
also render every message a page shows with a reference CommonMark renderer and assert that no
user-supplied link or image survives. CommonMark does not autolink bare URLs, and Streamlit's Markdown does
(remark-gfm: `http://…`, `www.…`, `name@host`), so the last check renders the way Streamlit does: every page
opened in Chromium with hostile URL values, failing on any link in the page that the app did not write.
"""

import json
import re
from urllib.parse import quote

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


# --- the same in the browser: Streamlit's own Markdown (remark-gfm autolinks bare URLs) ------------------------

# Bare URLs and addresses as GFM autolinks them, in the two halves of a page's URL values (every value is shown
# shortened to 60 characters, so each stays short), and a link written out.
HOSTILE_URLS = ["go http://127.0.0.1:9/x www.evil.io", "a@evil.io WWW.EVIL.IO HTTPS://127.0.0.1:9/Y",
                "[x](http://127.0.0.1:9/p) mailto:x@evil.io"]
# The two samples, and a pasted config whose refusal quotes a URL inside the red error box.
HOSTILE_LINKS = [
    "/lesson?step=4&text=go%20http%3A%2F%2F127.0.0.1%3A9%2Fx%20www.evil.io",
    "/kv_memory?model=custom&cfg=" + quote(json.dumps({
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 2,
        "layer_types": ["http://127.0.0.1:9/phish", "www.evil.io"], "model_type": "a@evil.io"})),
]
# Every link in the page's main area that leads out of this app to a hostile address (every payload names one:
# 127.0.0.1:9, evil.io, an email address), folded expanders opened first. Links into the app may carry the hostile
# values in their query (a heading's anchor is the page's own URL): they are the app's, and harmless.
FOREIGN_LINKS_JS = """() => {
  document.querySelectorAll('[data-testid="stMain"] details').forEach(d => { d.open = true; });
  return [...document.querySelectorAll('[data-testid="stMain"] a[href]')].map(a => a.href)
    .filter(h => !h.startsWith(location.origin + '/') && /127\\.0\\.0\\.1:9\\/|evil|^mailto:|^xmpp:/i.test(h));
}"""


def hostile_link(slug: str) -> str:
    """The page with every URL value it keeps (and the shared lang= and present=) set to a hostile one."""
    keys = ["lang", "present", *sorted(url_keys(slug) if slug != "home" else {})]
    query = "&".join(f"{k}={quote(HOSTILE_URLS[i % len(HOSTILE_URLS)])}" for i, k in enumerate(keys))
    return f"/{'' if slug == 'home' else slug}?{query}"


@pytest.mark.browser
@pytest.mark.parametrize("link", [p.slug for p in PAGES] + HOSTILE_LINKS,
                         ids=[p.slug for p in PAGES] + ["lesson-text", "kv_memory-cfg"])
def test_no_link_from_user_text_in_the_browser(app_url, browser, link):
    from tests.test_browser import new_page, wait_for_run

    if not link.startswith("/"):
        link = hostile_link(link)
    page = new_page(browser, 1280, 1600)
    try:
        page.goto(app_url + link, wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
        wait_for_run(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.evaluate(FOREIGN_LINKS_JS) == [], link
    finally:
        page.close()
