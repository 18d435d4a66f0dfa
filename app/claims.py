"""The one way every page shows the seeds' claims: a verdict tally, a wrapped table, a CSV download, all in the
page language; each claim quoted in the seed's Korean and in English side by side in both languages."""

from __future__ import annotations

import streamlit as st

from app.i18n import lang
from sim.claims import SEEDS, Claim, verdict_counts
from sim.words import text
from sim.words.claims import claims_frame, verdict_word


def render_claims(claims: tuple[Claim, ...] | list[Claim], key: str) -> None:
    """`key` names the download button (unique per page)."""
    if not claims:
        return
    lg = lang()
    tally = ", ".join(text(lg, "claims.tally_item", n=f"{n:,}", verdict=verdict_word(v, lg))
                      for v, n in verdict_counts(claims).items())
    st.caption(text(lg, "claims.tally", n=f"{len(claims):,}", tally=tally))
    df = claims_frame(claims, lg)
    why = text(lg, "claims.col.why")
    shown = df.drop(columns=[why]) if not df[why].astype(bool).any() else df
    # the English statement is the (hidden) index in both languages, so a test can look a claim up by it;
    # st.table wraps long text: nothing is cut off on a projector
    shown = shown.set_index(df[text(lg, "claims.col.statement")].rename(None))
    st.table(shown, hide_index=True)
    cited = sorted({c.seed for c in claims if c.seed in SEEDS})
    if cited:
        items = "; ".join(text(lg, "claims.source_item", seed=s, ko=SEEDS[s][0], en=SEEDS[s][1]) for s in cited)
        st.caption(text(lg, "claims.sources", items=items))
    st.download_button(text(lg, "claims.download"), df.to_csv(index=False), file_name=f"{key}_claims.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key=f"dl_claims_{key}")
