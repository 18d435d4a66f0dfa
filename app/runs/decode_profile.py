"""Decode cost's profile tab: one cached step of the real model under torch.profiler, on request."""

from __future__ import annotations

import streamlit as st

from app.figures.profile import step_time_bars
from app.i18n import lang, t
from app.present import show_chart
from app.work import queued

RESULT_KEY = "decode_cost.profile"
REPEATS = 20  # steps timed plainly, then as many under the profiler


def profile_step(model, context: int) -> None:
    """A button, then the step's time by kind of work against its FLOPs' own time."""
    from sim.model.step_profile import OUTSIDE, profile_decode_step
    from sim.words.profile import category_label, profile_takeaway

    L = lang()
    key = (model.cfg.name, context)
    st.markdown(t("decode.prof.intro", context=f"{context:,}", n=f"{REPEATS}"))
    button = t("decode.prof.button")
    if st.button(button, key="profile_go", icon=":material/timer:"):
        st.session_state[RESULT_KEY] = (key, queued(lambda: profile_decode_step(model, context, REPEATS),
                                                    t("decode.prof.job")))
    done = st.session_state.get(RESULT_KEY)
    if done is None or done[0] != key:
        st.info(t("decode.prof.press", button=button), icon=":material/play_circle:")
        return
    p = done[1]
    scale = p.wall_s / max(p.profiled_s, p.ops_s)  # the profiler slows every operator: shown at the plain step's time
    shares_us = {category_label(k, L): v * p.wall_s * 1e6 for k, v in p.shares().items()}
    show_chart(step_time_bars(shares_us, p.math_s * 1e6, p.wall_s * 1e6, profile_takeaway(p, L), category_label(OUTSIDE, L), L),
               key="profile_bars")
    st.caption(t("decode.prof.caption", profiled=f"{p.profiled_s * 1e6:,.0f}", wall=f"{p.wall_s * 1e6:,.0f}",
                 scale=f"{scale:.2f}"))
