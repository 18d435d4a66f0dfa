"""Shrink the cache: discarding (eviction, windows) against blurring (quantization) on the real model,
judged by the lecture's three checks; the lecture's table of methods; offloading as a cost. The page opens on the
recorded SmolLM2 grid's verdict and chart; the lecture's table and offloading are folded."""

import streamlit as st

from app.controls import shrink_cache as controls
from app.controls.shrink_cache import SCOPES
from app.figures.shrink import offload_bars, scores_vs_bytes
from app.i18n import lang, page_title, t
from app.links import page_link
from app.model_picker import model_label
from app.present import show_chart, show_table
from app.registry import PAGES
from app.runs import shrink_cache as runs
from app.text import plain
from sim.claims import SEEDS
from sim.cost.gpus import load_gpus
from sim.cost.memory import MemoryConfig, fmt_bytes, kv_memory
from sim.cost.presets import load_presets
from sim.cost.shrink import ALL_METHODS, EVICT_METHODS, LINKS, METHODS, ShrinkSetup, offload_cost, offloaded_bytes
from sim.model.real_source import MODEL_KEY
from sim.model.shrink_quant import blur_ranking
from sim.words import say
from sim.words.shrink import bytes_what, position_convention, recall_summary, row_score, table_frame
from sim.words.shrink_table import copy_ability_sentence, link_name, method_rows, offload_sentence, verdict

st.title(page_title("shrink_cache"))
L = lang()  # the sentences and figures below are worded in the page language
ko, en = SEEDS["001"]
st.markdown(t("density2.shrink.lead"))
with st.expander(t("density2.shrink.more")):
    st.markdown(t("shrink.intro", title_en=en, title_ko=ko))

models, presets, gpus = runs.available_models(), load_presets(), load_gpus()
model_labels = {k: runs.model_label(k, L) for k in models} | {MODEL_KEY: model_label(MODEL_KEY)}
url = controls.register()
ss = st.session_state

# The page opens on its finding: the three checks on SmolLM2 as recorded (read from the shipped file, shown at once
# with how and where it was recorded); the tiny model's grid, run live, waits for its button below it.
runs.recorded_finding()
st.subheader(t("shrink.h.checks"))
abilities = runs.copy_abilities(L)
st.markdown(copy_ability_sentence(abilities, L))
st.caption(t("shrink.models_caption"))
controls.draw_checks(model_labels)
setup = ShrinkSetup(methods=ALL_METHODS, budgets=SCOPES[ss["scope"]], num_new=ss["long"],
                    num_trials=ss["trials"])
if ss["model"] == MODEL_KEY:
    runs.real_section()
table = runs.run(ss["model"], setup, None) if ss["model"] != MODEL_KEY else None
if table is not None:
    scores = [row_score(r, L) for r in table.rows]
    full = row_score(table.full, L)
    said = verdict(scores, full.quote, L)
    st.markdown(f"**{plain(said, 4000)}**")
    show_chart(scores_vs_bytes(scores, full, said.split(":")[0], L), key="shrink_scores")
    st.caption(t("shrink.scores_caption", quote=plain(recall_summary(table.full.quote, L)),
                 turns=plain(recall_summary(table.full.turns, L))))
    for msg in blur_ranking(scores):
        st.markdown(plain(say(L, msg), 4000))
    if full.quote < 0.5:
        copiers = {a.label for a in abilities if a.copies}
        others = [m for m in models if m != ss["model"] and model_labels[m] in copiers]
        st.warning(t("shrink.no_copy", quote=f"{full.quote:.0%}", turns=f"{full.turns:.0%}")
                   + (t("shrink.choose_other", model=model_labels[others[0]]) if others else ""),
                   icon=":material/warning:")
    df = table_frame(table, L)
    show_table(df, hide_index=True, width="stretch")
    st.download_button(t("shrink.download"), df.to_csv(index=False), "shrink_cache.csv", "text/csv",
                       on_click="ignore", icon=":material/download:")
    with st.expander(t("shrink.h.bytes")):
        for r in table.rows:
            st.markdown(f"- {plain(bytes_what(r.account, L))}")
        for policy in EVICT_METHODS:
            st.markdown(f"- **{policy}**: {position_convention(policy, L)}")
        st.caption(t("shrink.evict_caption"))

with st.expander(t("shrink.h.offload")):
    controls.draw_offload()
    kv = kv_memory(MemoryConfig(presets[ss["omodel"]], batch=1, context=ss["octx"], kv_dtype="fp16")).total_bytes
    moved = offloaded_bytes(kv, ss["opct"])
    hbm = gpus[ss["ogpu"]].bandwidth_bytes_per_s
    costs = {k: offload_cost(moved, k, hbm) for k in LINKS}
    if moved == 0:
        st.info(t("shrink.nothing_offloaded"))
    else:
        pcie = costs["pcie5"]
        show_chart(offload_bars([link_name(c.link, L) for c in costs.values()], [c.transfer_ms for c in costs.values()],
                                pcie.hbm_ms, t("shrink.offload_title", model=presets[ss["omodel"]].name,
                                                    ctx=f"{ss['octx']:,}", pct=f"{ss['opct']}", cache=fmt_bytes(kv)), L),
                   key="shrink_offload")
        st.markdown(offload_sentence(pcie, L))

# the lecture's table of methods: context for the finding above, one click away (the page opens on its checks)
with st.expander(t("shrink.h.table")):
    rows = method_rows(L)
    for row, m in zip(rows, METHODS, strict=True):
        row[t("shrink.col.t_where")] = page_title(m.where) if m.where else t("shrink.this_page")
    st.table(rows)
    link_cols = st.columns(3)
    for i, p in enumerate(p for p in PAGES if p.slug in {m.where for m in METHODS}):
        page_link(p.slug, t("shrink.open", page=page_title(p.slug)), where=link_cols[i % 3])
url.sync()
