"""A page opens on its finding: on a projector (1024×768, presenter mode, the sidebar folded) the first chart of
Attention kernels and of Prefix caching and Serving's four headline numbers are on the first screen, with nothing
scrolled. (Attention kernels opened on a table of backends and a form: its first chart was 3,500 px down, the page
8,250 px long; Prefix caching's hit-rate chart was 1,275 px down under a byte-level demo, the page 11,861 px long;
Serving's six-line introduction pushed its second row of numbers below the screen.) So are the first charts of KV
quantization (2,125 px down under its intro, a real-model section and a settings panel; the page 13,647 px long),
Decode cost (2,139 px down under its intro and run form) and Shrink the cache (which opened on the lecture's table,
its first chart the offload one 2,171 px down, the tiny model's grid waiting for its button)."""

import pytest

from tests.test_browser import new_page, wait_for_run
from tests.test_browser_lesson import FIGURE_SHOWN_PX

pytestmark = pytest.mark.browser

# In px of the window (Streamlit scrolls an inner pane: at load it is at its top), the first chart and the first
# metric on view (a chart in an unopened tab has no box), and how far the pane is scrolled.
FIRST_SCREEN_JS = """() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  // on view: laid out (an unopened tab's has no box) and not inside a folded expander (whose has one)
  const shown = c => c.getBoundingClientRect().width > 0 && !c.closest('details:not([open])');
  const first = sel => { const e = [...main.querySelectorAll(sel)].find(shown);
    return e ? e.getBoundingClientRect().top : null; };
  const scroller = main.closest('[data-testid="stMain"]') || document.scrollingElement;
  const metrics = [...main.querySelectorAll('[data-testid="stMetric"]')].filter(shown);
  return {chart: first('[data-testid="stPlotlyChart"]'), metric: first('[data-testid="stMetric"]'),
          metrics: metrics.slice(0, 4).map(m => m.getBoundingClientRect().bottom),
          height: window.innerHeight, scrolled: scroller.scrollTop, page: scroller.scrollHeight};
}"""


@pytest.mark.parametrize(("slug", "what"), [("attention_kernels", "chart"), ("prefix_caching", "chart"),
                                            ("serving", "metric"), ("kv_quantization", "chart"),
                                            ("decode_cost", "chart"), ("shrink_cache", "chart")])
def test_the_finding_is_on_the_first_screen_of_a_projector(app_url, browser, slug, what):
    page = new_page(browser, 1024, 768)
    try:
        page.goto(f"{app_url}/{slug}?present=1", wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
        wait_for_run(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        view = page.evaluate(FIRST_SCREEN_JS)
        assert view["scrolled"] == 0, view
        top = view[what]
        # at least the headline and the top of the plot show (a metric: its label and value)
        shown = FIGURE_SHOWN_PX if what == "chart" else 100
        assert top is not None and 0 <= top and top + shown <= view["height"], (
            f"{slug}: the first {what} starts at {top} px of a {view['height']}-px screen ({view})")
        if what == "metric":  # the whole headline: static, continuous, their ratio, the preemptions
            assert len(view["metrics"]) == 4 and max(view["metrics"]) <= view["height"], view
    finally:
        page.close()
