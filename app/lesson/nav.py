"""The lesson's state in the link (the step and every step's controls), Back / Next, and the link from a
step to its full page with the same parameters."""

from __future__ import annotations

import streamlit as st

# DEFAULT_PROMPT (the lesson tests), FILL_MODEL, LENGTHS and REAL_LAYER (its steps) are read here too
from app.controls.lesson import CONTROLS, DEFAULT_PROMPT, FILL_MODEL, LENGTHS, REAL_LAYER, STEP  # noqa: F401
from app.i18n import lang, page_title, t
from app.lesson.style import NAV_KEY, OPEN_KEY
from app.links import page_link
from app.urlstate import UrlState
from sim.lesson.steps import RECAP, STEPS
from sim.words.lesson import step_label


def register() -> UrlState:
    """Every value the lesson keeps in its link, validated (n, ctx and alpha snapped to their stops); then the
    link's problems, folded."""
    url = UrlState("lesson")
    url.add(*CONTROLS)
    url.show_problems()
    return url


def _move(by: int) -> None:
    st.session_state["step"] = min(RECAP, max(1, st.session_state["step"] + by))


def navigation(where: str) -> int:
    """Back, the step picker, Next (← / → on the keyboard); the open step (1-based)."""
    ss = st.session_state
    k, L = ss["step"], lang()
    box = st.container(key=f"{NAV_KEY}_{where}")  # one row at any width (app/lesson/style.py)
    c = box.columns([1, 4, 1], vertical_alignment="center")
    # The top pair answers the arrow keys, and Streamlit draws a key's arrow on such a button, so only the
    # bottom pair (no shortcut) draws an arrow icon: one arrow per button, not two.
    top = where == "top"
    c[0].button(t("lesson.back"), key=f"back_{where}", on_click=_move, args=(-1,), disabled=k == 1,
                icon=None if top else ":material/arrow_back:", width="stretch", shortcut="left" if top else None)
    if top:
        labels = {j: step_label(j, L) for j in range(1, RECAP + 1)}  # worded now: format_func runs later too
        STEP.draw(c[1], options=list(labels), format_func=labels.get, label_visibility="collapsed")
    else:
        c[1].progress(min(k, len(STEPS)) / len(STEPS), text=step_label(k, L))
    c[2].button(t("lesson.next"), key=f"next_{where}", on_click=_move, args=(1,), disabled=k == RECAP,
                icon=None if top else ":material/arrow_forward:", icon_position="right", type="primary",
                width="stretch", shortcut="right" if top else None)
    return k


def open_full_page(slug: str, params: dict[str, object], what: str) -> None:
    """A link to the full page with this step's parameters in its URL."""
    page_link(slug, t("lesson.open", title=page_title(slug), what=what), params,
              where=st.container(key=OPEN_KEY))  # opens at the page's top (app/lesson/style.py)
