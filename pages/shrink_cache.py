"""Shrink the cache: discarding (eviction, windows) against blurring (quantization) on the real model,
judged by the lecture's three checks; the lecture's table of methods; offloading as a cost."""

import streamlit as st

from app.figures.shrink import offload_bars, scores_vs_bytes
from app.links import page_link
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
    offload_cost,
    verdict,
)

SCOPES = {"all": ("every cache at 12.5%, 25% and 50% of the positions", (0.125, 0.25, 0.5)),
          "quarter": ("every cache at 25% of the positions", (0.25,))}
LONG_LENGTHS = (128, 256, 512, 900)
CONTEXTS = [2**k for k in range(10, 18)]

st.title("Shrink the cache")
ko, en = SEEDS["001"]
st.markdown(
    "The lecture on KV-cache quantization lists every way to make the cache smaller and draws one sharp line: "
    "*quantization blurs every token a little; eviction and sliding windows throw tokens away — so a task that must "
    "quote the document exactly is hurt far more by discarding* (“양자화는 정보를 흐리게 만들고, 축출과 슬라이딩 "
    "윈도우는 정보를 버린다”). This page tests that on the real model, with the lecture's three checks, each against "
    f"the full cache. Source: seed 001, “{en}” (“{ko}”).")

models, presets, gpus = runs.available_models(), load_presets(), load_gpus()
url = UrlState("shrink_cache")
url.choice("model", next(iter(models)), list(models), label="model")
url.choice("scope", "all", list(SCOPES), label="caches to run")
url.int("long", 900, LONG_LENGTHS[0], LONG_LENGTHS[-1], label="long generation tokens")
url.int("trials", 4, 1, 8, label="trials per check")
url.choice("omodel", "llama-3.1-8b", [k for k in presets if not k.startswith("tiny")], label="offload model")
url.int("octx", 32768, CONTEXTS[0], CONTEXTS[-1], label="offload context")
url.int("opct", 50, 0, 100, label="share offloaded (%)")
url.choice("ogpu", "h100-sxm", list(gpus), label="GPU")
url.show_problems()
ss = st.session_state
for key, stops in (("long", LONG_LENGTHS), ("octx", CONTEXTS)):
    if ss[key] not in stops:
        ss[key] = min(stops, key=lambda v, k=key: abs(v - ss[k]))

st.subheader("The lecture's table of ways out")
rows = []
for m in METHODS:
    page = next((p for p in PAGES if p.slug == m.where), None)
    rows.append({"Method": m.name, "What it shrinks": m.shrinks, "With quantization?": m.stacks,
                 "In the lecture": f"{m.shrinks_ko} / {m.stacks_ko}",
                 "Shown in the lab": page.title if page else "this page"})
st.table(rows)
link_cols = st.columns(3)
for i, p in enumerate(p for p in PAGES if p.slug in {m.where for m in METHODS}):
    page_link(p.slug, f"Open {p.title}", where=link_cols[i % 3])

st.subheader("Discard or blur: the three checks on the real model")
abilities = runs.copy_abilities()
st.markdown(copy_ability_sentence(abilities))
st.caption("A quote or a fact can only be lost by the cache if the model can copy it in the first place, so each "
           "model's full-cache scores (recorded with its checkpoint, seed 0) come first. The second model is the "
           "shipped one trained on with a copy and recall task in half of its sequences "
           "(`python -m sim.model.train --preset mha_copy`); the byte accounting, the long generation and the "
           "offload costs below hold whichever model runs.")
c = st.columns([2, 2, 1, 1])
c[0].selectbox("Model", list(models), key="model", format_func=models.get)
c[1].selectbox("Caches", list(SCOPES), key="scope", format_func=lambda k: SCOPES[k][0])
c[2].select_slider("Long generation", LONG_LENGTHS, key="long", help="New tokens; the models were trained at "
                   "1,024 positions, so 900 is as long as a generation can be checked (the lecture uses 2,000).")
c[3].number_input("Trials", 1, 8, key="trials", help="Passages quoted and facts recalled, each from a seeded spot.")
setup = ShrinkSetup(methods=EVICT_METHODS + QUANT_METHODS, budgets=SCOPES[ss["scope"]][1], num_new=ss["long"], num_trials=ss["trials"])
table = runs.run(ss["model"], setup, None)
if table is not None:
    scores = [r.score() for r in table.rows]
    full = table.full.score()
    said = verdict(scores, full.quote)
    st.markdown(f"**{plain(said, 4000)}**")
    show_chart(scores_vs_bytes(scores, full, said.split(":")[0]), key="shrink_scores")
    st.caption("Dotted lines and crosses discard tokens (eviction, windows) at a budget of positions; solid lines "
               "and circles blur them (quantization), whose bytes the format fixes. The dashed line is the full "
               f"cache's own score. Full cache: {plain(table.full.quote.summary)} {plain(table.full.turns.summary)}")
    if full.quote < 0.5:
        copiers = {a.label for a in abilities if a.copies}
        others = [m for m in models if m != ss["model"] and models[m] in copiers]
        st.warning(f"This model quotes only {full.quote:.0%} of the passage and recalls {full.turns:.0%} of the fact "
                   "even with the full cache: it does not copy from ~800 bytes back, so the quote and recall checks "
                   "cannot separate the caches here, and the verdict above says what this model showed, no more."
                   + (f" Choose {models[others[0]]} to see the checks on a model that copies." if others else ""),
                   icon=":material/warning:")
    df = table.frame()
    show_table(df, hide_index=True, width="stretch")
    st.download_button("Download the scores (CSV)", df.to_csv(index=False), "shrink_cache.csv", "text/csv",
                       on_click="ignore", icon=":material/download:")
    with st.expander("Where every byte goes, and how each policy handles positions"):
        for r in table.rows:
            st.markdown(f"- {plain(r.bytes_what)}")
        from sim.model.evict_cache import POSITION_CONVENTION

        for policy, why in POSITION_CONVENTION.items():
            st.markdown(f"- **{policy}**: {why}")
        st.caption("An evicting cache holds its budget of tokens between steps; a step attends to them and to the "
                   "token it feeds, then drops back to the budget.")

st.subheader("Offloading: moving the cache out costs time every step")
c = st.columns(4)
c[0].selectbox("Model", [k for k in presets if not k.startswith("tiny")], key="omodel",
               format_func=lambda k: presets[k].name)
c[1].select_slider("Context", CONTEXTS, key="octx", format_func=lambda v: f"{v:,}")
c[2].slider("Share of the cache offloaded (%)", 0, 100, key="opct")
c[3].selectbox("GPU", list(gpus), key="ogpu", format_func=lambda k: gpus[k].name)
kv = kv_memory(MemoryConfig(presets[ss["omodel"]], batch=1, context=ss["octx"], kv_dtype="fp16")).total_bytes
moved = kv * ss["opct"] // 100
hbm = gpus[ss["ogpu"]].bandwidth_bytes_per_s
costs = {k: offload_cost(moved, k, hbm) for k in LINKS}
if moved == 0:
    st.info("Nothing is offloaded: the whole cache stays in GPU memory and no step waits on a link.")
else:
    pcie = costs["pcie5"]
    show_chart(offload_bars([c.link.name for c in costs.values()], [c.transfer_s * 1e3 for c in costs.values()],
                            pcie.hbm_s * 1e3, f"{presets[ss['omodel']].name}, {ss['octx']:,} tokens: {ss['opct']}% of "
                            f"its {fmt_bytes(kv)} FP16 cache back to the GPU at every decode step"),
               key="shrink_offload")
    st.markdown(pcie.sentence)
url.sync()
