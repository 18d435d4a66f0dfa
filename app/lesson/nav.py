"""The lesson's state in the link (the step and every step's controls), Back / Next, and the link from a
step to its full page with the same parameters."""

from __future__ import annotations

import streamlit as st

from app.links import page_link
from app.registry import PAGES
from app.urlstate import UrlState
from sim.cost.memory import KV_DTYPES
from sim.cost.presets import load_presets
from sim.lesson.steps import STEPS, step_label

LENGTHS = [2**k for k in range(4, 11)]  # 16 … 1,024 tokens generated
CONTEXTS = [2**k for k in range(7, 18)]  # 128 … 131,072
ALPHAS = [round(0.05 * i, 2) for i in range(1, 20)]  # 0.05 … 0.95
MAX_LESSON_PROMPT = 48  # bytes: the real-model steps draw every position
DEFAULT_PROMPT = "To be, or not to be, that is"
LAYOUT_WORKLOADS = ("system_prompt", "few_shot", "chat", "rag")


def register() -> UrlState:
    """Every value the lesson keeps in its link, validated; then the link's problems, folded."""
    presets = load_presets()
    url = UrlState("lesson")
    url.int("step", 1, 1, len(STEPS), label="lesson step")
    url.int("n", 256, LENGTHS[0], LENGTHS[-1], label="tokens generated")
    url.text("text", DEFAULT_PROMPT, max_len=MAX_LESSON_PROMPT, label="prompt")
    url.int("layer", 0, 0, 3, label="layer")
    url.int("t", 0, 0, 64, label="animation step")
    url.int("ctx", 4096, CONTEXTS[0], CONTEXTS[-1], label="context")
    url.choice("model", "llama-3.1-8b", [k for k in presets if not k.startswith("tiny")], label="model")
    url.choice("kv", "bf16", list(KV_DTYPES), label="KV dtype")
    url.float("alpha", 0.8, ALPHAS[0], ALPHAS[-1], label="acceptance rate")
    url.int("k", 4, 1, 8, label="draft tokens")
    url.choice("workload", "system_prompt", list(LAYOUT_WORKLOADS), label="workload")
    url.show_problems()
    ss = st.session_state
    for key, stops in (("n", LENGTHS), ("ctx", CONTEXTS), ("alpha", ALPHAS)):  # snap URL numbers to the stops
        if ss[key] not in stops:
            ss[key] = min(stops, key=lambda v, k=key: abs(v - ss[k]))
    return url


def _move(by: int) -> None:
    st.session_state["step"] = min(len(STEPS), max(1, st.session_state["step"] + by))


def navigation(where: str) -> int:
    """Back, the step picker, Next (← / → on the keyboard); the open step (1-based)."""
    ss = st.session_state
    k = ss["step"]
    c = st.columns([1, 4, 1], vertical_alignment="center")
    c[0].button("Back", key=f"back_{where}", on_click=_move, args=(-1,), disabled=k == 1, icon=":material/arrow_back:",
                width="stretch", shortcut="left" if where == "top" else None)
    if where == "top":
        c[1].selectbox("Step", list(range(1, len(STEPS) + 1)), key="step", format_func=step_label,
                       label_visibility="collapsed")
    else:
        c[1].progress(k / len(STEPS), text=step_label(k))
    c[2].button("Next", key=f"next_{where}", on_click=_move, args=(1,), disabled=k == len(STEPS),
                icon=":material/arrow_forward:", icon_position="right", type="primary", width="stretch",
                shortcut="right" if where == "top" else None)
    return k


def open_full_page(slug: str, params: dict[str, object], what: str) -> None:
    """A link to the full page with this step's parameters in its URL."""
    page = next(p for p in PAGES if p.slug == slug)
    page_link(slug, f"Open {page.title} with these settings: {what}", params)
