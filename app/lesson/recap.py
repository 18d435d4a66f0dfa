"""The glossary every step links its words to, and the recap after the last step: the twelve findings, each
computed again by the function its step states it with, from the settings in the link (the numbers the class saw)."""

from __future__ import annotations

import streamlit as st

from app.i18n import lang, t
from app.lesson import cost, generation, ways_out
from sim.lesson.steps import GLOSSARY, STEPS, Step
from sim.words import say


def anchor(term: str) -> str:
    return f"g-{term.replace('_', '-')}"


def words(step: Step) -> None:
    """The step's idea, then its glossary words, each a link to its entry at the foot of the page."""
    links = " · ".join(f"[{t(f'lesson.g.{w}.term')}](#{anchor(w)})" for w in step.terms)
    st.caption(say(lang(), step.idea) + (f"\u00a0\u00a0 {t('lesson.g.words')} {links}" if links else ""))


def glossary() -> None:
    st.subheader(t("lesson.g.title"), anchor="glossary")
    for w in GLOSSARY:  # an empty anchor before each entry: the links above land on it
        st.markdown(f'<span id="{anchor(w)}"></span>**{t(f"lesson.g.{w}.term")}** — {t(f"lesson.g.{w}.def")}',
                    unsafe_allow_html=True)


def findings(L: str) -> list[str]:
    """Each step's claim, by the function its step states it with, at the link's settings."""
    ss = st.session_state
    prompt_ok = len(ss["text"].encode("utf-8")) >= generation.MIN_PROMPT
    short = t("lesson.recap.short", min=f"{generation.MIN_PROMPT}")
    by_slug = {
        "repeat": lambda: generation.repeat_finding(ss["n"], L),
        "qkv": lambda: generation.qkv_finding(ss["text"], L) if prompt_ok else short,
        "mask": lambda: generation.mask_finding(ss["text"], L) if prompt_ok else short,
        "filling": lambda: generation.filling_finding(ss["text"], ss["t"], L) if prompt_ok else short,
        "step_cost": lambda: cost.step_cost_finding(ss["ctx"], L),
        "bytes": lambda: cost.bytes_finding(ss["model"], ss["kv"], L),
        "memory_bound": lambda: cost.memory_bound_finding(L),
        "batching": lambda: cost.batching_finding(ss["ctx"], L),
        "shrink": lambda: ways_out.shrink_finding(ss["model"], L),
        "share": lambda: ways_out.share_finding(L),
        "speculate": lambda: ways_out.speculate_finding(ss["alpha"], ss["k"], L),
        "layout": lambda: ways_out.layout_finding(ss["workload"], L),
    }
    assert list(by_slug) == [s.slug for s in STEPS]
    return [by_slug[s.slug]() for s in STEPS]


def recap() -> None:
    L = lang()
    st.header(t("lesson.recap.title"))
    st.caption(t("lesson.recap.idea"))
    lines = findings(L)
    st.markdown("\n".join(t("lesson.recap.item", k=f"{k}", title=say(L, step.title), finding=finding)
                          for k, (step, finding) in enumerate(zip(STEPS, lines, strict=True), start=1)))
