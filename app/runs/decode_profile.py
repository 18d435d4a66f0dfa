"""Decode cost's profile tab: one cached step of the real model under torch.profiler, on request."""

from __future__ import annotations

import streamlit as st

from app.figures.profile import step_time_bars
from app.present import show_chart
from app.work import queued

RESULT_KEY = "decode_cost.profile"


def profile_step(model, context: int) -> None:
    """A button, then the step's time by kind of work against its FLOPs' own time."""
    from sim.model.step_profile import profile_decode_step

    key = (model.cfg.name, context)
    st.markdown(f"One cached decode step of this model with {context:,} tokens in its cache, run 20 times plainly "
                "and 20 times under `torch.profiler`: where the time goes.")
    if st.button("Profile one cached step", key="profile_go", icon=":material/timer:"):
        st.session_state[RESULT_KEY] = (key, queued(lambda: profile_decode_step(model, context),
                                                    "Profiling a decode step"))
    done = st.session_state.get(RESULT_KEY)
    if done is None or done[0] != key:
        st.info("Press **Profile one cached step** (about a second).", icon=":material/play_circle:")
        return
    p = done[1]
    scale = p.wall_s / max(p.profiled_s, p.ops_s)  # the profiler slows every operator: shown at the plain step's time
    shares_us = {k: v * p.wall_s * 1e6 for k, v in p.shares().items()}
    show_chart(step_time_bars(shares_us, p.math_s * 1e6, p.wall_s * 1e6, p.takeaway), key="profile_bars")
    st.caption(f"Shares from the profiled run ({p.profiled_s * 1e6:,.0f} µs a step under the profiler), applied to "
               f"the plain step ({p.wall_s * 1e6:,.0f} µs; scale {scale:.2f}). 'Outside operators' is the step's time "
               "not inside any aten operator: Python, module calls and dispatch. A large model's step reads gigabytes "
               "of weights and is bandwidth-bound instead: see the Roofline page.")
