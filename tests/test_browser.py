"""Real browser: `streamlit run` on 127.0.0.1, Debian's Chromium driven by Playwright.

Locally the tests skip when /usr/bin/chromium is absent; with CI=true that is a failure.
Screenshots land in test-output/screenshots/.
"""

from pathlib import Path

import pytest

from app.registry import PAGES
from benchmarks.browser import DONE, VISUAL
from tests.conftest import _need_browser  # noqa: F401  (tests/test_i18n.py takes it from here)

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "test-output" / "screenshots"

pytestmark = pytest.mark.browser


# Metric values wider than their column run into the next metric ("57.04 GiB14"): list them.
OVERFLOWING_METRICS_JS = """() => [...document.querySelectorAll('[data-testid="stMetric"]')].filter(m => {
  const box = m.getBoundingClientRect();
  return [...m.querySelectorAll('[data-testid="stMetricValue"] *')].some(e => e.getBoundingClientRect().right > box.right + 1);
}).map(m => m.innerText.replace(/\\s+/g, ' ').slice(0, 60))"""

# A button that both draws an arrow icon and answers an arrow key shows two arrows ("← Back ←"): Streamlit
# prints the key's glyph beside the label. List such buttons (the icon's ligature name is its text).
DOUBLE_ARROW_BUTTONS_JS = """() => [...document.querySelectorAll('button')].map(b => b.innerText.replace(/\\s+/g, ' ').trim())
  .filter(s => (s.match(/arrow_back|←/g) || []).length > 1 || (s.match(/arrow_forward|→/g) || []).length > 1)"""


def new_page(browser, width: int, height: int):
    """A tab for one test, its window `width` × `height`, with reduced motion: otherwise Streamlit's running
    indicator and loading skeletons redraw 60 times a second while the script runs, about a CPU-second of
    Chromium's compositor per page load here (Serving: 1.2-2.0 s, 0.3 s with reduced motion). Nothing a test
    checks moves."""
    return browser.new_page(viewport={"width": width, "height": height}, reduced_motion="reduce")


def open_page(browser, url: str, width: int = 1400, height: int = 1800):
    page = new_page(browser, width, height)
    page.requested = []  # every URL the tab asks for, from the first request on (see outside_requests)
    page.on("request", lambda r: page.requested.append(r.url))
    page.goto(url, wait_until="domcontentloaded")
    # Streamlit renders after its websocket connects: wait for the app, then for the run to end.
    page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    wait_for_run(page)
    return page


# Every chart on view has been drawn and laid out by plotly at the width its box has now. Until plotly's bundle
# has loaded (it can be after the run ends) a chart is a loading skeleton with no chart element; a chart in a
# folded expander or an unopened tab has no box and is left out.
CHARTS_LAID_OUT_JS = """() => !document.querySelector('[data-testid="stSkeleton"]')
  && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(box => {
  if (box.getBoundingClientRect().width === 0 || !box.checkVisibility()) return true;
  const el = box.querySelector('.js-plotly-plot');
  return !!(el && el._fullLayout && Math.abs(el._fullLayout.width - el.getBoundingClientRect().width) <= 1);
})"""


def wait_for_run(page) -> None:
    """Until the script run has ended (the app root carries its state) and every chart is drawn."""
    page.wait_for_selector(DONE, timeout=180_000)
    wait_for_charts(page)


def wait_for_charts(page) -> None:
    """Until plotly has drawn every chart at its box's width: after a load, a rerun or a resize, before a
    screenshot or a check that reads plotly's layout. (A fixed pause did this before: 0.5-0.7 s each time,
    three or four times a page, while the charts were in place once the skeletons had gone or the resize had
    returned.)"""
    page.wait_for_function(CHARTS_LAID_OUT_JS, timeout=60_000)


def outside_requests(page, app_url: str) -> list[str]:
    """What the tab fetched from anywhere but the app's own server (fonts, icons, a favicon from a CDN)."""
    return sorted({u for u in page.requested if not u.startswith((app_url, "data:", "blob:", "about:"))})


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_page_in_browser(app_url, browser, slug):
    """A laptop (1280 px, sidebar open), then the same page narrowed to a 1024×768 projector, then switched to
    Korean in the sidebar. One load for the three: a load costs Chromium 6-8 CPU-s here (its scripts, the app's
    start, the page), a rerun in Korean about 3. Narrowing re-lays out exactly what a load at that size draws (CSS
    and plotly's responsive resize); a Korean link opened fresh is tests/test_i18n.py's."""
    from tests.test_browser_projector import check_projector_view

    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, f"{app_url}/{'' if slug == 'home' else slug}", 1280, 1600)  # a laptop, sidebar open
    try:
        page.wait_for_selector(VISUAL, state="visible", timeout=60_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.evaluate(OVERFLOWING_METRICS_JS) == [], f"{slug}: metric values run past their column"
        assert page.evaluate(DOUBLE_ARROW_BUTTONS_JS) == [], f"{slug}: a button shows its arrow twice"
        title = "KV Cache Lab" if slug == "home" else next(p.title for p in PAGES if p.slug == slug)
        assert page.locator("h1").first.inner_text().strip() == title
        page.screenshot(path=str(SHOTS / f"{slug}.png"), full_page=True)
        page.set_viewport_size({"width": 1024, "height": 768})
        wait_for_charts(page)  # plotly's resize handler redraws each chart at the new width
        assert page.evaluate("() => window.innerWidth") == 1024
        assert page.locator('[data-testid="stSidebar"][data-collapsed="false"]').count() == 1  # still open
        check_projector_view(page, slug)
        page.screenshot(path=str(SHOTS / f"{slug}-1024.png"))
        check_korean_after_switch(page, slug)
        # favicon, fonts, icons, plotly's bundle: the page, loaded, drawn and redrawn narrower (about two seconds
        # since its script finished), has asked nothing of any other server
        assert page.requested and outside_requests(page, app_url) == [], outside_requests(page, app_url)
    except Exception:
        page.screenshot(path=str(SHOTS / f"{slug}.png"), full_page=True)
        raise
    finally:
        page.close()


def test_an_interaction_updates_the_page_and_the_url(app_url, browser):
    """Type a new batch on the KV memory page: the total and the address bar follow."""
    page = open_page(browser, f"{app_url}/kv_memory")
    try:
        total = page.locator('[data-testid="stMetric"]', has_text="All requests")
        assert "64 GiB" in total.inner_text()  # Llama 3.1 8B, 16 × 32k tokens × 128 KiB
        box = page.get_by_label("Batch B (requests)")
        box.fill("17")
        box.press("Enter")
        page.wait_for_function("() => location.search.includes('batch=17')", timeout=60_000)
        page.wait_for_selector(DONE, timeout=120_000)
        assert "68 GiB" in total.inner_text()
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.screenshot(path=str(SHOTS / "kv_memory_batch17.png"), full_page=True)
        page.close()


# Two Hangul syllables and an unassigned code point drawn on a canvas: with no CJK font (fonts-noto-cjk) Chromium
# draws each as the same empty box, so the images agree; with one they all differ.
HANGUL_DRAWN_JS = """() => {
  const draw = ch => { const cv = document.createElement('canvas'); cv.width = 48; cv.height = 48;
    const c = cv.getContext('2d'); c.font = '36px sans-serif'; c.fillText(ch, 4, 38); return cv.toDataURL(); };
  return {ga_vs_na: draw('\\uac00') !== draw('\\ub098'), ga_vs_box: draw('\\uac00') !== draw('\\u0378')};
}"""


KEEP_ALL_JS = """() => [...document.querySelectorAll(
  '[data-testid="stMainBlockContainer"] :is(p, li, td, th, h1, h2, h3)')]
  .filter(el => /[\uac00-\ud7a3]/.test(el.textContent) && getComputedStyle(el).wordBreak !== 'keep-all')
  .map(el => el.tagName + ': ' + el.textContent.slice(0, 40))"""


def check_korean(page, slug: str) -> None:
    """The page in Korean: its Korean title, no exception, a chart or table drawn, Hangul drawn by a font."""
    from sim.i18n import text

    page.wait_for_selector(VISUAL, state="visible", timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator("h1").first.inner_text().strip() == text("ko", "home.title" if slug == "home"
                                                                  else f"page.{slug}.title")
    assert "lang=ko" in page.url
    assert page.evaluate(HANGUL_DRAWN_JS) == {"ga_vs_na": True, "ga_vs_box": True}, \
        "Hangul is drawn as boxes: install fonts-noto-cjk"
    # Korean breaks lines between words (keep-all), never inside one, in every paragraph, list item and table cell
    assert page.evaluate(KEEP_ALL_JS) == [], "Korean text that may break inside a word"


def check_korean_after_switch(page, slug: str) -> None:
    """A class switching the open page to Korean in the sidebar (still 1024×768): the page reruns in Korean,
    the link follows, the page passes the Korean checks and the projector's (Korean words run longer or shorter
    than English in metrics, legends and tables). Screenshot: <slug>_ko.png, at the laptop's 1280×1600."""
    from tests.test_browser_projector import check_projector_view

    page.locator('[data-testid="stSidebar"] label', has_text="한국어").click()
    page.wait_for_function("() => location.search.includes('lang=ko')", timeout=60_000)
    wait_for_run(page)
    check_korean(page, slug)
    check_projector_view(page, slug)
    page.set_viewport_size({"width": 1280, "height": 1600})  # the screenshot at a laptop's size, as the English one
    wait_for_charts(page)
    page.screenshot(path=str(SHOTS / f"{slug}_ko.png"), full_page=True)


INJECTION = ("/decode_cost?variant=%5BLog%20in%20again%5D(http%3A%2F%2F127.0.0.1%3A9%2Fphish)"
             "&top_k=!%5Bx%5D(http%3A%2F%2F127.0.0.1%3A9%2Fpixel.png)&n=abc&attn=%3Cscript%3E")


def test_a_bad_or_hostile_link_shows_text_and_still_draws(app_url, browser):
    """Garbage and Markdown/HTML in the link's values: the page still draws its charts, with no exception, and the
    values are shown as text in its warning: no anchor, no image fetched, no element made."""
    page = open_page(browser, app_url + INJECTION)
    try:
        page.wait_for_selector(VISUAL, state="visible", timeout=60_000)
        # several bad values: one folded box whose label counts them; a click opens the list
        page.locator('[data-testid="stExpander"] summary', has_text="values the page cannot use").first.click()
        warning = page.locator('[data-testid="stAlert"]', has_text="Log in again")
        warning.first.wait_for(timeout=60_000)
        assert "<script>" in page.locator('[data-testid="stExpander"]').first.inner_text()  # shown, not parsed
        assert page.locator('a[href*="127.0.0.1:9"]').count() == 0
        assert page.locator('img[src*="127.0.0.1:9"]').count() == 0
        assert outside_requests(page, app_url) == []
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.screenshot(path=str(SHOTS / "injection.png"), full_page=True)
        page.close()


def test_sidebar_navigation_keeps_each_page_its_own_values(app_url, browser):
    """Serving sets block_size to '32' (a string option); Paged KV blocks has an integer slider of
    the same key. Moving between them through the sidebar shows each page its own value."""
    page = open_page(browser, f"{app_url}/serving?block_size=32&requests=7")
    try:
        page.locator('[data-testid="stSidebarNav"] a', has_text="Paged KV blocks").click()
        page.wait_for_function("() => location.pathname.endsWith('/paged_blocks')", timeout=60_000)
        page.wait_for_selector(DONE, timeout=180_000)
        page.wait_for_function("() => location.search.includes('block_size=')", timeout=60_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        params = page.evaluate("() => Object.fromEntries(new URLSearchParams(location.search))")
        assert params["block_size"] == "16" and params["requests"] == "1000", params  # the page's defaults
        page.locator('[data-testid="stSidebarNav"] a', has_text="Serving").click()
        page.wait_for_function("() => location.pathname.endsWith('/serving')", timeout=60_000)
        page.wait_for_selector(DONE, timeout=180_000)
        page.wait_for_function("() => location.search.includes('block_size=')", timeout=60_000)
        params = page.evaluate("() => Object.fromEntries(new URLSearchParams(location.search))")
        assert params["block_size"] == "32" and params["requests"] == "7", params  # what was set there
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.screenshot(path=str(SHOTS / "navigation.png"), full_page=True)
        page.close()


def test_nothing_leaves_the_machine_from_the_server_start_on(browser):
    """The server started as the README starts it (no flags: .streamlit/config.toml decides), its process watched
    from its first line by an audit hook: no name lookup or connection off this machine, at start or while a
    page with the real model is served (headless Streamlit on every interface asks an outside service for its
    external IP; a model hub or telemetry would show here too), and nothing fetched from outside by the tab."""
    from benchmarks.browser import AppServer

    out = ROOT / "test-output"
    server = AppServer(out / "streamlit_readme.log", as_readme=True, net_log=out / "streamlit_readme_net.log")
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        page = open_page(browser, f"{server.url}/decode_cost?n=4", 1280, 900)
        assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1  # the model ran
        assert outside_requests(page, server.url) == []
        page.close()
    finally:
        server.stop()
    assert (out / "streamlit_readme_net.log").read_text() == ""
    log = (out / "streamlit_readme.log").read_text()
    assert f"URL: http://127.0.0.1:{server.port}" in log and "External URL" not in log  # loopback unless opted in
