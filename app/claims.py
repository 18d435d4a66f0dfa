"""The one way every page shows the seeds' claims: a verdict tally, a wrapped table, a CSV download."""

from __future__ import annotations

import streamlit as st

from sim.claims import SEEDS, Claim, claims_frame, verdict_counts


def render_claims(claims: tuple[Claim, ...] | list[Claim], key: str) -> None:
    """`key` names the download button (unique per page)."""
    if not claims:
        return
    tally = ", ".join(f"{n} {v}" for v, n in verdict_counts(claims).items())
    st.caption(f"{len(claims)} claims checked: {tally}.")
    df = claims_frame(claims)
    shown = df.drop(columns=[c for c in ("As written", "Why") if not df[c].astype(bool).any()])
    st.table(shown.set_index("Claim"))  # st.table wraps long text: nothing is cut off on a projector
    cited = sorted({c.seed for c in claims if c.seed in SEEDS})
    if cited:
        st.caption("Sources: " + "; ".join(f"seed {s} — {SEEDS[s][1]} ({SEEDS[s][0]})" for s in cited)
                   + ". The seeds are the Korean articles this lab is built from.")
    st.download_button("Download the claims (CSV)", df.to_csv(index=False), file_name=f"{key}_claims.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key=f"dl_claims_{key}")
