"""The Lesson on a projector, in a real browser: at 1280×720 and 1024×768 in presenter mode, every step's claim,
the top of its figure and Back / Next are on the first screen (nothing to scroll), and at both sizes Back, the
step picker and Next share one row (in Korean too at 1024×768, its lines the longest). The class moves with Next,
as a teacher does (each click a rerun of the page, the step in the URL). Screenshots:
test-output/screenshots/lesson-<width>[-ko]-step<k>.png."""

import pytest

from sim.lesson.steps import STEPS
from sim.words import say
from tests.test_browser import SHOTS, new_page, wait_for_run

pytestmark = pytest.mark.browser

# At least this much of the figure (its headline and the top of its plot) shows on the first screen.
FIGURE_SHOWN_PX = 150

# The boxes a teacher needs, in px of the window (Streamlit scrolls an inner pane: at load it is at its top).
FIRST_SCREEN_JS = """() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const claim = [...main.querySelectorAll('h4')].find(h => h.innerText.trim());
  const chart = [...main.querySelectorAll('[data-testid="stPlotlyChart"]')].find(c => c.getBoundingClientRect().width > 0);
  const nav = main.querySelector('[class*="st-key-lesson_nav_top"]');
  const button = key => box(main.querySelector(`[class*="st-key-${key}"] button`));
  const scroller = main.closest('[data-testid="stMain"]') || document.scrollingElement;
  return {claim: box(claim), chart: box(chart), back: button('back_top'), next: button('next_top'),
          picker: box(nav && nav.querySelector('[data-testid="stSelectbox"]')), height: window.innerHeight,
          width: window.innerWidth, scrolled: scroller.scrollTop + document.scrollingElement.scrollTop,
          sideways: document.documentElement.scrollWidth - window.innerWidth,
          header: (main.querySelector('h2') || {}).innerText};
}"""


def check_first_screen(view: dict, where: str) -> None:
    h = view["height"]
    assert view["scrolled"] == 0, f"{where}: the page is scrolled ({view['scrolled']} px)"
    assert view["sideways"] <= 0, f"{where}: the page scrolls sideways"
    claim, chart = view["claim"], view["chart"]
    assert claim and 0 <= claim["top"] and claim["bottom"] <= h, f"{where}: the claim {claim} is not on the {h}-px screen"
    assert chart and chart["top"] + FIGURE_SHOWN_PX <= h, f"{where}: the figure starts at {chart} of {h} px"
    for name in ("back", "picker", "next"):
        b = view[name]
        assert b and 0 <= b["top"] and b["bottom"] <= h, f"{where}: {name} {b} is not on the first screen"
    # one row: Back, the picker and Next overlap vertically, left to right
    back, picker, nxt = view["back"], view["picker"], view["next"]
    assert max(b["top"] for b in (back, picker, nxt)) < min(b["bottom"] for b in (back, picker, nxt)), (
        f"{where}: Back, the step picker and Next are not on one row: {back}, {picker}, {nxt}")
    assert back["right"] <= picker["left"] and picker["right"] <= nxt["left"], f"{where}: not in order"


@pytest.mark.parametrize(("size", "lang"), [((1280, 720), "en"), ((1024, 768), "en"), ((1024, 768), "ko")],
                         ids=["1280x720", "1024x768", "1024x768-ko"])
def test_every_step_fits_the_first_screen_in_presenter_mode(app_url, browser, size, lang):
    SHOTS.mkdir(parents=True, exist_ok=True)
    w, h = size
    page = new_page(browser, w, h)
    try:
        page.goto(f"{app_url}/lesson?present=1&step=1&lang={lang}", wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h2', timeout=60_000)
        wait_for_run(page)
        for k in range(1, len(STEPS) + 1):
            if k > 1:
                page.locator('[class*="st-key-next_top"] button').click()
                page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{k}'",
                                       timeout=120_000)
                wait_for_run(page)
            assert page.locator('[data-testid="stException"]').count() == 0
            view = page.evaluate(FIRST_SCREEN_JS)
            assert view["header"] == say(lang, STEPS[k - 1].title), view["header"]
            page.screenshot(path=str(SHOTS / f"lesson-{w}{'' if lang == 'en' else '-' + lang}-step{k}.png"))
            check_first_screen(view, f"step {k} at {w}×{h} ({lang})")
    finally:
        page.close()


@pytest.mark.parametrize("step", [4, 5])
def test_a_steps_link_opens_its_page_at_the_top(app_url, browser, step):
    """The link sits below the figure: the teacher scrolls to it, clicks, and the full page opens at its top
    (Streamlit keeps its pane's scroll across a page switch; it opened Decode cost 400-900 px down) with the step's
    values in its URL."""
    page = new_page(browser, 1280, 720)
    try:
        page.goto(f"{app_url}/lesson?present=1&step={step}", wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h2', timeout=60_000)
        wait_for_run(page)
        link = page.locator('[class*="st-key-lesson_open"] a').first
        href = link.get_attribute("href")
        # the target page once beforehand, in another tab: warm, it draws at full height at once, and a kept
        # scroll position is not cut back to 0 by a page still short while it runs
        warm = new_page(browser, 1280, 720)
        warm.goto(f"{app_url}/{href}", wait_until="domcontentloaded")
        wait_for_run(warm)
        warm.close()
        link.scroll_into_view_if_needed()
        assert page.evaluate(PANE_SCROLL_JS) > 0  # the link is below the first screen: the pane has scrolled
        link.click()
        page.wait_for_function("() => !location.pathname.endsWith('/lesson')", timeout=60_000)
        wait_for_run(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.evaluate(PANE_SCROLL_JS) == 0, f"step {step}: {page.url} opened scrolled down"
        assert href.split("?")[1] in page.url  # the step's values, in the order the link gave them
        page.screenshot(path=str(SHOTS / f"lesson-link-step{step}.png"))
    finally:
        page.close()


PANE_SCROLL_JS = """() => (document.querySelector('[data-testid="stMain"]') || {}).scrollTop
  + document.scrollingElement.scrollTop"""


def test_a_word_links_to_its_glossary_entry(app_url, browser):
    """Step 7's "ridge" link scrolls the pane to the glossary's entry at the foot of the page."""
    page = new_page(browser, 1280, 720)
    try:
        page.goto(f"{app_url}/lesson?present=1&step=7", wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h2', timeout=60_000)
        wait_for_run(page)
        entry = page.locator("#g-ridge")
        assert not entry.is_visible() or entry.bounding_box()["y"] > 720  # below the first screen
        page.locator('a[href="#g-ridge"]').first.click()
        page.wait_for_function("() => { const r = document.getElementById('g-ridge').getBoundingClientRect();"
                               " return r.top >= 0 && r.top < window.innerHeight; }", timeout=10_000)
        assert page.evaluate(PANE_SCROLL_JS) > 0
        page.screenshot(path=str(SHOTS / "lesson-glossary.png"))
    finally:
        page.close()
