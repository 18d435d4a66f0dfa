"""Prefix caching's section on SmolLM2: its system prompt and user questions, each declared once (the URL's limit
is the widget's), drawn in one form whose button starts the run."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Text
from app.i18n import t
from sim.model import real_prefix as rp

SYSTEM = Text("rsys", rp.DEFAULT_SYSTEM, max_len=rp.MAX_SYSTEM_BYTES, max_chars=rp.MAX_SYSTEM_BYTES,
              widget="text_area", label="rp.prefix.system", url_label="rp.prefix.system")
TURNS = Text("rturns", "\n".join(rp.DEFAULT_TURNS), max_len=rp.MAX_TURNS_BYTES, max_chars=rp.MAX_TURNS_BYTES,
             widget="text_area", label="rp.prefix.turns", url_label="rp.prefix.turns")
CONTROLS = (SYSTEM, TURNS)


def draw_form() -> tuple[rp.RealChat, bool]:
    """The system prompt and the questions side by side in one form: the chat as typed, and whether its button
    was pressed this run."""
    with st.form("real_chat"):
        left, right = st.columns(2)
        SYSTEM.draw(left, height=150)
        TURNS.draw(right, height=150, help=t("rp.prefix.turns_help", max=f"{rp.MAX_TURNS}", bytes=f"{rp.MAX_TURN_BYTES}"))
        go = st.form_submit_button(t("rp.prefix.run"), type="primary")
    return rp.RealChat(SYSTEM.value(), rp.chat_turns(TURNS.value())), go
