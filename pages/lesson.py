"""Lesson: the seeds' story in twelve steps, each one claim, one live figure and a link to its full page; then
a recap of the twelve findings with the class's numbers, and a glossary every step links its words to."""

import streamlit as st

from app.i18n import lang, page_title, t
from app.lesson import cost, generation, nav, recap, style, ways_out
from app.present import presenting
from sim.lesson.steps import RECAP, step_at
from sim.words import say

RENDER = {
    "repeat": generation.repeat, "qkv": generation.qkv, "mask": generation.mask, "filling": generation.filling,
    "step_cost": cost.step_cost, "bytes": cost.cache_bytes, "memory_bound": cost.memory_bound,
    "batching": cost.batching, "shrink": ways_out.shrink, "share": ways_out.share, "speculate": ways_out.speculate,
    "layout": ways_out.layout,
}

style.apply(presenting(), lang())
st.title(page_title("lesson"))
if presenting():  # on a projector the step is the content: how to use the lesson is one click away
    with st.expander(t("lesson.about")):
        st.markdown(t("lesson.intro"))
else:
    st.markdown(t("lesson.intro"))
url = nav.register()
k = nav.navigation("top")
if k == RECAP:
    recap.recap()
else:
    step = step_at(k)
    st.header(say(lang(), step.title))
    recap.words(step)
    RENDER[step.slug]()
st.divider()
nav.navigation("bottom")
recap.glossary()
url.sync()
