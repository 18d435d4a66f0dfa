"""The lesson's state in the link (the step and every step's controls), Back / Next, and the link from a
step to its full page with the same parameters."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice, Stops
from app.i18n import lang, page_title, t
from app.lesson.style import NAV_KEY, OPEN_KEY
from app.links import page_link
from app.urlstate import UrlState
from sim.cost.memory import KV_DTYPES
from sim.cost.presets import load_presets
from sim.lesson.blocks import SCRIPT
from sim.lesson.quiz import LAYOUT_WORKLOADS
from sim.lesson.steps import RECAP, STEPS
from sim.lesson.walk import STAGES
from sim.words.lesson import step_label

LENGTHS = [2**k for k in range(4, 11)]  # 16 … 1,024 tokens generated
CONTEXTS = [2**k for k in range(7, 18)]  # 128 … 131,072
ALPHAS = [round(0.05 * i, 2) for i in range(1, 20)]  # 0.05 … 0.95
MAX_LESSON_PROMPT = 48  # bytes: the real-model steps draw every position
DEFAULT_PROMPT = "To be, or not to be, that is"
REAL_LAYERS = 30  # SmolLM2-135M's layers
# Step 4 on the real model: which model fills its cache (the tiny byte model by default), and SmolLM2's layer shown
FILL_MODEL = Choice("fill_lm", "mha", ("mha", "smollm2"), label="rp.lesson.model", url_label="rp.lesson.model")
REAL_LAYER = Stops("rlayer", 0, tuple(range(REAL_LAYERS)), label="lesson.c.layer", url_label="rp.lesson.url.rlayer")


def register() -> UrlState:
    """Every value the lesson keeps in its link, validated; then the link's problems, folded."""
    presets = load_presets()
    url = UrlState("lesson")
    url.int("step", 1, 1, RECAP, label=t("lesson.url.step"))
    url.int("n", 256, LENGTHS[0], LENGTHS[-1], label=t("lesson.url.n"))
    url.text("text", DEFAULT_PROMPT, max_len=MAX_LESSON_PROMPT, label=t("lesson.url.text"))
    url.int("layer", 0, 0, 3, label=t("lesson.url.layer"))
    url.int("t", 0, 0, 64, label=t("lesson.url.t"))
    url.int("ctx", 4096, CONTEXTS[0], CONTEXTS[-1], label=t("lesson.url.ctx"))
    url.choice("model", "llama-3.1-8b", [k for k in presets if not k.startswith("tiny")], label=t("lesson.url.model"))
    url.choice("kv", "bf16", list(KV_DTYPES), label=t("lesson.url.kv"))
    url.float("alpha", 0.8, ALPHAS[0], ALPHAS[-1], label=t("lesson.url.alpha"))
    url.int("k", 4, 1, 8, label=t("lesson.url.k"))
    url.choice("workload", "system_prompt", list(LAYOUT_WORKLOADS), label=t("lesson.url.workload"))
    url.int("bt", 0, 0, len(SCRIPT), label=t("lesson.url.bt"))
    url.int("walk", 0, 0, STAGES - 1, label=t("lesson.url.walk"))
    url.add(FILL_MODEL, REAL_LAYER)
    url.show_problems()
    ss = st.session_state
    for key, stops in (("n", LENGTHS), ("ctx", CONTEXTS), ("alpha", ALPHAS)):  # snap URL numbers to the stops
        if ss[key] not in stops:
            ss[key] = min(stops, key=lambda v, k=key: abs(v - ss[k]))
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
        c[1].selectbox(t("lesson.step"), list(labels), key="step", format_func=labels.get,
                       label_visibility="collapsed")
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
