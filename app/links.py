"""Links to the lab's pages with values for their URL: `st.page_link` inside the lab's navigation, a plain
Markdown link (values percent-encoded) when a page runs on its own (a test, `streamlit run pages/x.py`)."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from app.i18n import LANG_KEY, lang
from app.registry import PAGES
from sim.words import DEFAULT_LANG


def page_link(slug: str, label: str, params: dict[str, object] | None = None, where=None) -> None:
    page = next(p for p in PAGES if p.slug == slug)
    target = where if where is not None else st
    query = {k: str(v) for k, v in (params or {}).items()}
    if lang() != DEFAULT_LANG:
        query.setdefault(LANG_KEY, lang())  # the page opens in the language it was linked from
    try:
        target.page_link(page.path, label=label, icon=page.icon, query_params=query or None)
    except StreamlitPageNotFoundError:
        target.markdown(f"[{label}](/{slug}{'?' + urlencode(query) if query else ''})")
