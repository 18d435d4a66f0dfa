"""Decode cost's choice of how a cached step runs: eager, or one CUDA-graph replay (disabled, with the reason,
on a machine without CUDA)."""

from __future__ import annotations

import streamlit as st

from app.i18n import lang, t
from app.text import plain
from sim.i18n import text

STEP_KINDS = ("eager", "graph")  # URL values
STEP_LABELS = {k: text("en", f"decode.step.{k}") for k in STEP_KINDS}  # English names ('CUDA graph')


def step_label(step: str, lg: str = "en") -> str:
    """A step kind as the radio and the run's description name it."""
    return text(lg, f"decode.step.{step}")


def graph_unavailable_here() -> str | None:
    """Why this server cannot run a CUDA-graph step (None when it can), in the page language."""
    from sim.model.device import pick_device
    from sim.model.graph_step import graph_unavailable

    try:
        return graph_unavailable(pick_device(), lang())
    except ValueError as exc:  # KVLAB_DEVICE names a device torch does not have
        return str(exc)


def fall_back_from_graph(reason: str | None) -> None:
    """A link that asks for the graph step on a machine that cannot run it: say so, then use eager."""
    if reason and st.session_state.get("step") == "graph":
        st.warning(t("decode.step.fallback", reason=plain(reason)))
        st.session_state["step"] = "eager"


def step_radio(container, reason: str | None) -> None:
    lg = lang()  # bound now: a format_func may be called outside the script run (AppTest calls it)
    help_text = t("decode.step.help") + ("\n\n" + t("decode.step.disabled", reason=reason) if reason else "")
    container.radio(t("decode.step.label"), list(STEP_KINDS), key="step", horizontal=True,
                    format_func=lambda v: step_label(v, lg), disabled=reason is not None, help=help_text)
    if reason:
        container.caption(t("decode.step.unavailable", reason=plain(reason)))
