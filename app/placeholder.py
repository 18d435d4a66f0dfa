"""A page whose issue has not landed yet: it says "coming" and lists what it will show."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.registry import page


def render_coming(slug: str, planned: list[tuple[str, str]]) -> None:
    info = page(slug)
    st.title(info.title)
    st.info(f"**Coming.** {info.summary} This page is planned and not built yet — no numbers are shown "
            "until they come from the real simulator or model.", icon=":material/construction:")
    st.subheader("What this page will show")
    st.table(pd.DataFrame(planned, columns=["View", "Source"]).assign(Status="coming"))
