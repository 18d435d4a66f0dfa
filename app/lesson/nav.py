"""The lesson's state in the link (the step and every step's controls), Back / Next, and the link from a
step to its full page with the same parameters."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Among, Choice, Slider, Stops, Text
from app.i18n import lang, page_title, t
from app.lesson.style import NAV_KEY, OPEN_KEY
from app.links import page_link
from app.urlstate import UrlState
from sim.cost.memory import KV_DTYPES
from sim.cost.presets import load_presets
from sim.lesson.blocks import SCRIPT
from sim.lesson.quiz import LAYOUT_WORKLOADS
from sim.lesson.steps import RECAP, STEPS, step_label
from sim.lesson.walk import STAGES

LENGTHS = [2**k for k in range(4, 11)]  # 16 … 1,024 tokens generated
CONTEXTS = [2**k for k in range(7, 18)]  # 128 … 131,072
ALPHAS = [round(0.05 * i, 2) for i in range(1, 20)]  # 0.05 … 0.95
MAX_LESSON_PROMPT = 48  # bytes: the real-model steps draw every position
DEFAULT_PROMPT = "To be, or not to be, that is"


REAL_LAYERS = 30  # SmolLM2-135M's layers: the filling step's layer choice on it
TINY_LAYERS = (0, 1, 2, 3)  # the tiny model's layers


def lesson_models() -> dict:
    """The presets the lesson's cost and shrink steps offer: the real architectures (not the tiny ones)."""
    return {k: a for k, a in load_presets().items() if not k.startswith("tiny")}


STEP = Among("step", 1, 1, RECAP, label="lesson.step", url_label="lesson.url.step")
LENGTH = Stops("n", 256, tuple(LENGTHS), label="lesson.c.n", url_label="lesson.url.n")
TEXT = Text("text", DEFAULT_PROMPT, max_len=MAX_LESSON_PROMPT, max_chars=MAX_LESSON_PROMPT, label="lesson.c.prompt",
            url_label="lesson.url.text")
LAYER = Stops("layer", 0, TINY_LAYERS, label="lesson.c.layer", url_label="lesson.url.layer")
POSITION = Slider("t", 0, 0, 64, narrows=True, label="lesson.c.t", url_label="lesson.url.t")
CONTEXT = Stops("ctx", 4096, tuple(CONTEXTS), label="lesson.c.ctx", url_label="lesson.url.ctx",
                other_labels=("lesson.c.ctx_each",))
MODEL = Choice("model", "llama-3.1-8b", lambda: list(lesson_models()), label="lesson.c.model",
               url_label="lesson.url.model")
KV = Choice("kv", "bf16", tuple(KV_DTYPES), label="lesson.c.kv", url_label="lesson.url.kv")
ALPHA = Stops("alpha", 0.8, tuple(ALPHAS), label="lesson.c.alpha", url_label="lesson.url.alpha")
DRAFT_K = Slider("k", 4, 1, 8, label="lesson.c.k", url_label="lesson.url.k")
WORKLOAD = Choice("workload", "system_prompt", tuple(LAYOUT_WORKLOADS), label="lesson.c.workload",
                  url_label="lesson.url.workload")
BLOCK_STEP = Among("bt", 0, 0, len(SCRIPT), widget="select_slider", label="lesson.bt.c", url_label="lesson.url.bt")
WALK = Among("walk", 0, 0, STAGES - 1, widget="segmented_control", label="lesson.walk.c", url_label="lesson.url.walk")
FILL_LM = Choice("fill_lm", "mha", ("mha", "smollm2"), label="rp.lesson.model", url_label="rp.lesson.model")
REAL_LAYER = Stops("rlayer", 0, tuple(range(REAL_LAYERS)), label="lesson.c.layer", url_label="rp.lesson.url.rlayer")
CONTROLS = (STEP, LENGTH, TEXT, LAYER, POSITION, CONTEXT, MODEL, KV, ALPHA, DRAFT_K, WORKLOAD, BLOCK_STEP, WALK, FILL_LM,
            REAL_LAYER)


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
