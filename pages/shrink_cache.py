"""Shrink the cache: discarding (eviction, windows) against blurring (quantization) on the real model,
judged by the lecture's three checks; the lecture's table of methods; offloading as a cost."""

import streamlit as st

from app.figures.shrink import offload_bars, scores_vs_bytes
from app.i18n import lang, page_title, t
from app.links import page_link
from app.model_picker import model_label
from app.present import show_chart, show_table
from app.registry import PAGES
from app.runs import shrink_cache as runs
from app.text import plain
from app.urlstate import UrlState
from sim.claims import SEEDS
from sim.cost.gpus import load_gpus
from sim.cost.memory import MemoryConfig, fmt_bytes, kv_memory
from sim.cost.presets import load_presets
from sim.cost.shrink import (
    EVICT_METHODS,
    LINKS,
    METHODS,
    QUANT_METHODS,
    ShrinkSetup,
    copy_ability_sentence,
    method_rows,
    offload_cost,
    verdict,
)
from sim.model.real_source import MODEL_KEY
from sim.model.shrink_quant import blur_ranking
from sim.words import say

SCOPES = {"all": (0.125, 0.25, 0.5), "quarter": (0.25,)}  # budgets; each named by shrink.scope.<key>
LONG_LENGTHS = (128, 256, 512, 900)
CONTEXTS = [2**k for k in range(10, 18)]

st.title(page_title("shrink_cache"))
L = lang()  # the sentences and figures below are worded in the page language
ko, en = SEEDS["001"]
st.markdown(t("shrink.intro", title_en=en, title_ko=ko))

models, presets, gpus = runs.available_models(), load_presets(), load_gpus()
model_labels = {k: runs.model_label(k, L) for k in models} | {MODEL_KEY: model_label(MODEL_KEY)}
url = UrlState("shrink_cache")
url.choice("model", next(iter(models)), [*models, MODEL_KEY], label=t("shrink.url.model"))
url.choice("cell", "full", runs.real_cells(), label=t("real.rerun.pick"))
url.choice("scope", "all", list(SCOPES), label=t("shrink.url.scope"))
url.int("long", 900, LONG_LENGTHS[0], LONG_LENGTHS[-1], label=t("shrink.url.long"))
url.int("trials", 4, 1, 8, label=t("shrink.url.trials"))
url.choice("omodel", "llama-3.1-8b", [k for k in presets if not k.startswith("tiny")], label=t("shrink.url.omodel"))
url.int("octx", 32768, CONTEXTS[0], CONTEXTS[-1], label=t("shrink.url.octx"))
url.int("opct", 50, 0, 100, label=t("shrink.url.opct"))
url.choice("ogpu", "h100-sxm", list(gpus), label=t("shrink.url.ogpu"))
url.show_problems()
ss = st.session_state
for key, stops in (("long", LONG_LENGTHS), ("octx", CONTEXTS)):
    if ss[key] not in stops:
        ss[key] = min(stops, key=lambda v, k=key: abs(v - ss[k]))

st.subheader(t("shrink.h.checks"))
abilities = runs.copy_abilities(L)
st.markdown(copy_ability_sentence(abilities, L))
st.caption(t("shrink.models_caption"))
c = st.columns([2, 2, 1, 1])
scope_labels = {k: t(f"shrink.scope.{k}") for k in SCOPES}  # worded now: Streamlit calls format_func later too
c[0].selectbox(t("shrink.w.model"), list(model_labels), key="model", format_func=model_labels.get,
               help=t("real.w.model_help"))
c[1].selectbox(t("shrink.w.scope"), list(SCOPES), key="scope", format_func=scope_labels.get)
c[2].select_slider(t("shrink.w.long"), LONG_LENGTHS, key="long", help=t("shrink.w.long_help"))
c[3].number_input(t("shrink.w.trials"), 1, 8, key="trials", help=t("shrink.w.trials_help"))
setup = ShrinkSetup(methods=EVICT_METHODS + QUANT_METHODS, budgets=SCOPES[ss["scope"]], num_new=ss["long"],
                    num_trials=ss["trials"])
if ss["model"] == MODEL_KEY:
    runs.real_section()
table = runs.run(ss["model"], setup, None) if ss["model"] != MODEL_KEY else None
if table is not None:
    scores = [r.score(L) for r in table.rows]
    full = table.full.score(L)
    said = verdict(scores, full.quote, L)
    st.markdown(f"**{plain(said, 4000)}**")
    show_chart(scores_vs_bytes(scores, full, said.split(":")[0], L), key="shrink_scores")
    st.caption(t("shrink.scores_caption", quote=plain(table.full.quote.summary_in(L)),
                 turns=plain(table.full.turns.summary_in(L))))
    for msg in blur_ranking(scores):
        st.markdown(plain(say(L, msg), 4000))
    if full.quote < 0.5:
        copiers = {a.label for a in abilities if a.copies}
        others = [m for m in models if m != ss["model"] and model_labels[m] in copiers]
        st.warning(t("shrink.no_copy", quote=f"{full.quote:.0%}", turns=f"{full.turns:.0%}")
                   + (t("shrink.choose_other", model=model_labels[others[0]]) if others else ""),
                   icon=":material/warning:")
    df = table.frame(L)
    show_table(df, hide_index=True, width="stretch")
    st.download_button(t("shrink.download"), df.to_csv(index=False), "shrink_cache.csv", "text/csv",
                       on_click="ignore", icon=":material/download:")
    with st.expander(t("shrink.h.bytes")):
        for r in table.rows:
            st.markdown(f"- {plain(r.account.what_in(L))}")
        from sim.model.evict_cache import position_convention  # torch: only once a run has shown its table

        for policy in EVICT_METHODS:
            st.markdown(f"- **{policy}**: {position_convention(policy, L)}")
        st.caption(t("shrink.evict_caption"))

st.subheader(t("shrink.h.offload"))
c = st.columns(4)
c[0].selectbox(t("shrink.w.omodel"), [k for k in presets if not k.startswith("tiny")], key="omodel",
               format_func=lambda k: presets[k].name)
c[1].select_slider(t("shrink.w.octx"), CONTEXTS, key="octx", format_func=lambda v: f"{v:,}")
c[2].slider(t("shrink.w.opct"), 0, 100, key="opct")
c[3].selectbox(t("shrink.url.ogpu"), list(gpus), key="ogpu", format_func=lambda k: gpus[k].name)
kv = kv_memory(MemoryConfig(presets[ss["omodel"]], batch=1, context=ss["octx"], kv_dtype="fp16")).total_bytes
moved = kv * ss["opct"] // 100
hbm = gpus[ss["ogpu"]].bandwidth_bytes_per_s
costs = {k: offload_cost(moved, k, hbm) for k in LINKS}
if moved == 0:
    st.info(t("shrink.nothing_offloaded"))
else:
    pcie = costs["pcie5"]
    show_chart(offload_bars([c.link.name_in(L) for c in costs.values()], [c.transfer_s * 1e3 for c in costs.values()],
                            pcie.hbm_s * 1e3, t("shrink.offload_title", model=presets[ss["omodel"]].name,
                                                ctx=f"{ss['octx']:,}", pct=f"{ss['opct']}", cache=fmt_bytes(kv)), L),
               key="shrink_offload")
    st.markdown(pcie.sentence_in(L))

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
