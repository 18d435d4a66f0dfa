"""Entry point: `streamlit run app/main.py`."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app.work import import_shared_libraries  # noqa: E402

import_shared_libraries()  # before anything draws a figure: thirty sessions may start at once
from app.i18n import page_title, read_lang, section_title, t  # noqa: E402
from app.present import apply_page_style, read_present  # noqa: E402
from app.registry import PAGES, SECTIONS  # noqa: E402
from app.sidebar import render_sidebar  # noqa: E402

# A bundled image, not a ":material/...:" icon: Streamlit fetches those favicons from an outside
# font host, and the lab must work with no network at all.
# Presenter mode (?present=1) starts with the sidebar folded away: the projector gets the full width.
present = read_present()
read_lang()  # before the navigation: its titles are in the page language
st.set_page_config(page_title=t("home.title"), page_icon=str(ROOT / "assets" / "favicon.png"), layout="wide",
                   initial_sidebar_state="collapsed" if present else "auto")

nav = {
    section_title(section): [
        st.Page(p.path, title=page_title(p.slug), icon=p.icon, url_path=p.slug, default=(p.slug == "home"))
        for p in PAGES
        if p.section == section
    ]
    for section in SECTIONS
}
pg = st.navigation(nav)
render_sidebar()
apply_page_style(st.session_state.get("present", False))
pg.run()
