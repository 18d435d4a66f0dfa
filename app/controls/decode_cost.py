"""Decode cost's choice of how a cached step runs: eager, or one CUDA-graph replay (disabled, with the reason,
on a machine without CUDA)."""

from __future__ import annotations

import streamlit as st

from app.text import plain

STEP_LABELS = {"eager": "eager", "graph": "CUDA graph"}
STEP_HELP = ("Eager: the model's forward, a few hundred small operators launched one by one. CUDA graph: the "
             "same step with fixed shapes (the cache written by position, every slot attended, the unwritten ones "
             "masked), captured once and replayed with one launch per token.")


def graph_unavailable_here() -> str | None:
    """Why this server cannot run a CUDA-graph step (None when it can)."""
    from sim.model.device import pick_device
    from sim.model.graph_step import graph_unavailable

    try:
        return graph_unavailable(pick_device())
    except ValueError as exc:  # KVLAB_DEVICE names a device torch does not have
        return str(exc)


def fall_back_from_graph(reason: str | None) -> None:
    """A link that asks for the graph step on a machine that cannot run it: say so, then use eager."""
    if reason and st.session_state.get("step") == "graph":
        st.warning(f"The link asks for a CUDA-graph cached step, but {plain(reason)}: the cached steps run eagerly.")
        st.session_state["step"] = "eager"


def step_radio(container, reason: str | None) -> None:
    help_text = STEP_HELP + (f"\n\nDisabled here: {reason}." if reason else "")
    container.radio("Cached step", list(STEP_LABELS), key="step", horizontal=True, format_func=STEP_LABELS.get,
                    disabled=reason is not None, help=help_text)
    if reason:
        container.caption(f"CUDA graph unavailable: {plain(reason)}.")
