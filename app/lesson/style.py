"""How the Lesson sits on a projector: one step's claim, the top of its figure and Back / Next on the first
screen at 1280×720 and 1024×768 in presenter mode (tests/test_browser_lesson.py measures it).

The lab's narrow-screen rule (app/present.py) wraps columns two to a row below 1180 px; the Lesson's
navigation row is exempt (Back, the picker and Next stay on one row). In presenter mode the Lesson's own
title, the step header and the space above them are smaller: on a projector the step is the content."""

from __future__ import annotations

import streamlit as st

NAV_KEY = "lesson_nav"  # the container of the top navigation row (Streamlit gives it the class st-key-<key>)
ROW_KEY = "lesson_row"  # containers whose columns stay side by side (controls beside each other)

ALWAYS = f"""<style>
div[class*="st-key-{NAV_KEY}"] div[data-testid="stHorizontalBlock"],
div[class*="st-key-{ROW_KEY}"] div[data-testid="stHorizontalBlock"] {{ flex-wrap: nowrap !important; }}
div[class*="st-key-{NAV_KEY}"] div[data-testid="stColumn"],
div[class*="st-key-{ROW_KEY}"] div[data-testid="stColumn"] {{ min-width: 0 !important; }}
</style>"""

# 3.4rem clears Streamlit's fixed header (60 px at 19 px per rem); the page's h1 and the step's h2 shrink.
PRESENTER = """<style>
div[data-testid="stMainBlockContainer"] { padding-top: 3.4rem !important; padding-bottom: 2rem !important; }
div[data-testid="stMainBlockContainer"] h1 { font-size: 1.7rem !important; padding: 0 0 0.2rem 0 !important; }
div[data-testid="stMainBlockContainer"] h2 { font-size: 1.45rem !important; padding: 0.3rem 0 0 0 !important; }
div[data-testid="stMainBlockContainer"] h4 { font-size: 1.2rem !important; padding: 0.2rem 0 0.6rem 0 !important; }
div[data-testid="stMainBlockContainer"] div[data-testid="stVerticalBlock"] { gap: 0.55rem; }
</style>"""


# Korean breaks lines between words (eojeol), not inside one: "캐시를" never splits into "캐" / "시를".
KOREAN = """<style>
div[data-testid="stMainBlockContainer"] :is(p, li, h1, h2, h3, h4, label, td, th, span) { word-break: keep-all; }
</style>"""


OPEN_KEY = "lesson_open"  # the container of a step's "open with these settings" link

# Streamlit keeps the scroll position of its main pane when a page link switches pages: a link at the foot of
# a step opened its page 400-900 px down. A click on a step's link first returns the pane to its top, so the
# full page opens at its top (added once per tab; a rerun finds the flag).
TOP_ON_OPEN = f"""<script>
if (!window.kvlabLessonOpenTop) {{
  window.kvlabLessonOpenTop = true;
  document.addEventListener("click", (e) => {{
    if (!(e.target instanceof Element) || !e.target.closest('div[class*="st-key-{OPEN_KEY}"] a')) return;
    const pane = document.querySelector('[data-testid="stMain"]');
    if (pane) pane.scrollTop = 0;
    window.scrollTo(0, 0);
  }}, true);
}}
</script>"""


def apply(present: bool, lang: str) -> None:
    st.html(ALWAYS + (PRESENTER if present else "") + (KOREAN if lang == "ko" else "") + TOP_ON_OPEN,
            unsafe_allow_javascript=True)


def korean_lines(lang: str) -> None:
    """Word-keeping line breaks on a page shown in Korean (the Roofline page uses it too)."""
    if lang == "ko":
        st.html(KOREAN)
