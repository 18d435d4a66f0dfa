"""Lesson: the seeds' story in twelve steps, each one claim, one live figure and a link to its full page."""

import streamlit as st

from app.lesson import cost, generation, nav, ways_out
from sim.lesson.steps import STEPS

RENDER = {
    "repeat": generation.repeat, "qkv": generation.qkv, "mask": generation.mask, "filling": generation.filling,
    "step_cost": cost.step_cost, "bytes": cost.cache_bytes, "memory_bound": cost.memory_bound,
    "batching": cost.batching, "shrink": ways_out.shrink, "share": ways_out.share, "speculate": ways_out.speculate,
    "layout": ways_out.layout,
}

st.title("Lesson")
st.markdown("How a language model uses its KV cache, one idea per step: each step states one finding, computed "
            "right here on the bundled model or a simulator, and links to the page that goes deeper. "
            "Use **Back** / **Next** (or ← / →) to move; the step is in the link, so a class can follow one URL.")
url = nav.register()
k = nav.navigation("top")
step = STEPS[k - 1]
st.header(step.title)
st.caption(step.idea)
RENDER[step.slug]()
st.divider()
nav.navigation("bottom")
url.sync()
