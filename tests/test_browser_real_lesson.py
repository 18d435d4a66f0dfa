"""The Lesson's cache-filling step on SmolLM2, on a projector: at 1280×720 and 1024×768 in presenter mode the
claim, the top of the figure and Back / Next stay on the first screen with the model picker added to the step's
one row of controls (the same check as tests/test_browser_lesson.py, on the real model's BPE tokens)."""

import pytest

from tests.test_browser import SHOTS, new_page, wait_for_run
from tests.test_browser_lesson import FIRST_SCREEN_JS, check_first_screen
from tests.test_real_model import _need_wheel

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", [(1280, 720), (1024, 768)], ids=["1280x720", "1024x768"])
def test_the_smollm2_filling_step_fits_the_first_screen(app_url, browser, size):
    _need_wheel()
    SHOTS.mkdir(parents=True, exist_ok=True)
    w, h = size
    page = new_page(browser, w, h)
    try:
        page.goto(f"{app_url}/lesson?present=1&step=4&fill_lm=smollm2", wait_until="domcontentloaded")
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h2', timeout=120_000)
        wait_for_run(page)
        page.wait_for_selector('[data-testid="stMainBlockContainer"] h4', timeout=300_000)  # the decode has run
        wait_for_run(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        view = page.evaluate(FIRST_SCREEN_JS)
        page.screenshot(path=str(SHOTS / f"lesson-{w}-step4-smollm2.png"))
        check_first_screen(view, f"step 4 on SmolLM2 at {w}×{h}")
    finally:
        page.close()
