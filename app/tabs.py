"""Tabs that draw only the open one, with the open tab in the link (`tab=<slug>`).

A page with several sections sends the browser one section, not all of them: switching tabs reruns the
page and only the open tab's body runs. So the first chart draws as fast as on a page with one chart, and
a shared link opens on the tab it was sent from.
"""

from __future__ import annotations

import streamlit as st

from app.i18n import t
from app.urlstate import UrlState


class LazyTabs:
    """`register` with the other URL values (before `show_problems`); `open` where the tabs go."""

    def __init__(self, page: str, tabs: dict[str, str], url_key: str = "tab") -> None:
        self.tabs = tabs  # the link's value -> the tab's label, in display order
        self.url_key = url_key
        self.widget_key = f"{page}_{url_key}_widget"  # the st.tabs key: holds the open tab's label

    def register(self, url: UrlState) -> str:
        return url.choice(self.url_key, next(iter(self.tabs)), list(self.tabs), label=t("tabs.url_label"))

    def open(self, url: UrlState):
        """(the open tab's slug, its container)."""
        ss = st.session_state
        # the link (or this page's memory) picks the tab; so does a label from the other language, left in the
        # session by a language switch (the labels are worded in the page language, the link's values are not)
        if url.entering or ss.get(self.widget_key) not in self.tabs.values():
            ss[self.widget_key] = self.tabs[ss[self.url_key]]
        containers = st.tabs(list(self.tabs.values()), key=self.widget_key, on_change="rerun")
        slug = next(k for k, label in self.tabs.items() if label == ss[self.widget_key])
        ss[self.url_key] = slug  # written to the link by url.sync()
        return slug, containers[list(self.tabs).index(slug)]
