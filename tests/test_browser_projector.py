"""On a projector: every page at 1024×768 (sidebar open; checked by tests/test_browser.py on the page it has
loaded, narrowed to that size) and in presenter mode at 1280×720.

Every plotly chart's every visible axis has a title (read from plotly's own full layout in the page, so a
title wiped after the figure was built is caught); every headline lies inside its chart (top and right edge);
nothing scrolls sideways; presenter mode really enlarges the tick labels. Presenter-mode screenshots (the page's
top and its first chart) go to test-output/screenshots/present-<page>.png and present-<page>-chart.png.
"""

from pathlib import Path

import pytest

from app.present import PRESENTER, PRESENTER_MAX_HEIGHT
from app.registry import PAGES
from tests.test_browser import OVERFLOWING_METRICS_JS, SHOTS, new_page, wait_for_run

pytestmark = pytest.mark.browser

# For each chart on the page: the axes plotly shows with an empty title, and the smallest tick font.
AXES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(el => {
  const fl = el._fullLayout || {};
  const untitled = [];
  let minTick = 1e9;
  for (const [name, ax] of Object.entries(fl)) {
    if (!/^[xyz]axis\\d*$/.test(name) || !ax || ax.visible === false) continue;
    if (ax.showticklabels === false && !(ax.title && ax.title.text)) continue;  // a bare axis (heat strip)
    if (!(ax.title && String(ax.title.text || '').trim())) untitled.push(name);
    if (ax.tickfont && ax.tickfont.size) minTick = Math.min(minTick, ax.tickfont.size);
  }
  // the headline: px from the chart's top edge to its first line (a chart in an unopened tab has no box: skipped)
  const head = el.querySelector('.g-gtitle text'), box = el.getBoundingClientRect();
  const shown = head && head.textContent.trim() && box.width > 0;
  const titleTop = shown ? Math.round(head.getBoundingClientRect().top - box.top) : null;
  // px by which the headline's longest line runs past the chart's right edge (plotly cuts it off there)
  const titleOver = shown ? Math.round(Math.max(...[...head.querySelectorAll('tspan.line'), head]
    .map(l => l.getBoundingClientRect().right)) - box.right) : null;
  return {title: (fl.title && fl.title.text) || '', untitled, minTick, height: fl.height || 0, titleTop, titleOver};
})"""
# A headline's first line starts this far inside its chart at least (13 px at the normal type, 9 px in presenter
# mode): a title placed as a fraction of a height that presenter mode then scaled sat 2-4 px from the edge or was cut.
TITLE_TOP_MIN_PX = 6


def _open(chromium, url: str, width: int, height: int):
    page = new_page(chromium, width, height)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    wait_for_run(page)
    return page


def check_projector_view(page, slug: str) -> list[dict]:
    assert page.locator('[data-testid="stException"]').count() == 0
    charts = page.evaluate(AXES_JS)
    bad = [c for c in charts if c["untitled"]]
    assert bad == [], f"{slug}: charts with untitled axes: {bad}"
    cut = [(c["title"][:50], c["titleTop"]) for c in charts
           if c["titleTop"] is not None and c["titleTop"] < TITLE_TOP_MIN_PX]
    assert cut == [], f"{slug}: chart titles at or past the chart's top edge: {cut}"
    wide = [(c["title"][:50], c["titleOver"]) for c in charts if c["titleOver"] is not None and c["titleOver"] > 0]
    assert wide == [], f"{slug}: chart titles cut at the chart's right edge (px past it): {wide}"
    assert page.evaluate(OVERFLOWING_METRICS_JS) == [], f"{slug}: metric values run past their column"
    sw, iw = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert sw <= iw, f"{slug}: the page scrolls sideways ({sw} px of content in a {iw} px window)"
    return charts


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_presenter_mode(app_url, browser, slug):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = _open(browser, f"{app_url}/{'' if slug == 'home' else slug}?present=1", 1280, 720)
    try:
        charts = check_projector_view(page, slug)
        assert all(c["minTick"] >= PRESENTER["tick"] for c in charts if c["minTick"] < 1e9), charts
        tall = [(c["title"][:60], c["height"]) for c in charts if c["height"] > PRESENTER_MAX_HEIGHT]
        assert tall == [], f"{slug}: charts taller than a 720-px projector shows at once: {tall}"
        # the setting stays in the URL (a copied link keeps it) and the sidebar starts collapsed
        assert "present=1" in page.url
        # Streamlit marks the sidebar data-collapsed (it has no aria-expanded): an attribute that is never there
        # would make this pass whatever the page did
        assert page.locator('[data-testid="stSidebar"][data-collapsed="true"]').count() == 1
        page.screenshot(path=str(Path(SHOTS) / f"present-{slug}.png"))
        charts_on_page = page.locator(".js-plotly-plot >> visible=true")  # not one in a folded section
        if charts_on_page.count():  # the first chart too: Streamlit scrolls an inner pane, not the document
            charts_on_page.first.scroll_into_view_if_needed()
            charts_on_page.first.screenshot(path=str(Path(SHOTS) / f"present-{slug}-chart.png"))
    finally:
        page.close()
