"""The sidebar every page shares: where the lab runs, and how to share a view."""

from __future__ import annotations

import os

import streamlit as st

from sim.work.threads import DEVICE_ENV


def render_sidebar() -> None:
    with st.sidebar:
        st.caption(
            "Every control's value lives in the address bar: copy the URL to share this exact view."
        )
        # Cheap: no torch import here (pages that need no torch stay fast to open).
        want = os.environ.get(DEVICE_ENV)
        st.caption(f"Device: {'`' + want + '` (from ' + DEVICE_ENV + ')' if want else 'auto (CUDA if present, else CPU)'} — details on Home.")
