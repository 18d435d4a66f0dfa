"""The sidebar every page shares: where the lab runs, and how to share a view."""

from __future__ import annotations

import os

import streamlit as st

from app.present import PRESENT_KEY
from sim.work.threads import DEVICE_ENV


def render_sidebar() -> None:
    with st.sidebar:
        st.toggle("Presenter mode", key=PRESENT_KEY,
                  help="Larger type and charts, full-contrast text, dense tables folded away, sidebar closed on "
                       "open; stays on from page to page and is kept in the link (present=1).")
        st.caption(
            "Every control's value lives in the address bar: copy the URL to share this exact view."
        )
        # Cheap: no torch import here (pages that need no torch stay fast to open).
        want = os.environ.get(DEVICE_ENV)
        st.caption(f"Device: {'`' + want + '` (from ' + DEVICE_ENV + ')' if want else 'auto (CUDA if present, else CPU)'} — details on Home.")
