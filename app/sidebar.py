"""The sidebar every page shares: the language, presenter mode, where the lab runs, and how to share a view."""

from __future__ import annotations

import os

import streamlit as st

from app.i18n import LANG_KEY, LANG_NAMES, LANGS, read_lang, show_lang, t
from app.present import PRESENT_KEY
from app.share_qr import qr_button
from sim.work.threads import DEVICE_ENV


def render_sidebar() -> None:
    read_lang()  # a new lang= in the link sets the switch before it is drawn
    with st.sidebar:
        # the label names itself in both languages: a reader who cannot read the current one still finds it
        st.radio(t("sidebar.lang"), LANGS, key=LANG_KEY, format_func=LANG_NAMES.get, horizontal=True,
                 help=t("sidebar.lang_help"))
        show_lang()
        st.toggle(t("sidebar.present"), key=PRESENT_KEY, help=t("sidebar.present_help"))
        qr_button()  # presenter mode: the current view's link as a QR code, for the room
        st.caption(t("sidebar.share"))
        # Cheap: no torch import here (pages that need no torch stay fast to open).
        want = os.environ.get(DEVICE_ENV)
        st.caption(t("sidebar.device_env", device=want, env=DEVICE_ENV) if want else t("sidebar.device_auto"))
