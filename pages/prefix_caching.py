import time

import pandas as pd
import streamlit as st

from app.claims import render_claims
from app.controls import prefix_caching as controls
from app.controls import real_prefix as real_controls
from app.figures import prefix_cache as figs
from app.i18n import lang, page_title, t
from app.metrics import show_metrics
from app.present import number_formats, show_chart, show_chart_in
from app.resources import live_result
from app.runs import prefix_caching as runs
from app.text import for_plotly, plain
from app.urlstate import UrlState
from sim.alloc import prefix_sweeps as ps
from sim.alloc import workload as wk
from sim.alloc.byte_tokens import show_byte
from sim.cost.vllm_rules import version_label
from sim.readout import Metric
from sim.refusal import Refusal
from sim.words import prefix as ro
from sim.words import prefix_claims as claims
from sim.words import prefix_run as prw
from sim.words import say, why
from sim.words.alloc import requests_frame

L = lang()  # the sentences and figures below are worded in the page language
st.title(page_title("prefix_caching"))
st.markdown(t("prefix.intro"))
url = UrlState("prefix_caching")
controls.register(url)
url.add(*real_controls.CONTROLS)
url.show_problems()

# The page opens on its finding (section 2's hit rate by workload and layout, its chart first); every other
# section is folded under its numbered heading, one click away (the claims name sections by number).


def shown_byte(b: int) -> str:
    """A byte of user text as a chart label: escaped for plotly."""
    return for_plotly(show_byte(b))


# --- 1. Block hashes ------------------------------------------------------------------------------
with st.expander(t("prefix.h.hashes")):
    st.markdown(t("prefix.hashes_intro"))
    choice = controls.demo_prompt()
    demo = None if choice is None else ps.change_one_byte(choice.ids, choice.pos, choice.block_size)
    if demo is not None:
        show_metrics(ro.demo_metrics(demo, L))
        show_chart(figs.block_rows(demo.frame, demo.changed_pos, demo.block_size, ro.demo_chart_title(demo, shown_byte, L),
                                   lang=L), width="stretch")
        st.markdown(ro.demo_summary(demo, L))
        st.markdown(f"**{t('prefix.every_block')}**")
        blocks = ro.demo_block_table(demo, L)  # folded already: shown as it is, also on a projector
        st.dataframe(blocks, hide_index=True, width="stretch", column_config=number_formats(blocks))
        st.caption(t("prefix.hash_caption"))


# --- 2. Workloads -------------------------------------------------------------------------------
def workload_section():
    """Section 2; (cfg, cache, the chosen run, the overview), or None when it cannot run."""
    st.header(t("prefix.h.workloads"))
    finding = st.container()  # the chart first; the settings that move it one click below it
    ss = st.session_state
    with st.expander(t("density.prefix.settings", n=ss["requests"], cap=ss["capacity"], bs=ss["block_size"]),
                     icon=":material/tune:"):
        st.caption(t("engine.prefix_rules", vllm=version_label()))  # the rules the simulated cache follows
        try:
            cfg, cache = controls.workload_and_cache()
            got = runs.workloads(cfg, cache)
        except ValueError as exc:
            finding.error(t("prefix.cannot", why=plain(why(exc, L))))  # above the fold, where the chart would be
            return None
    if got is None:
        return None
    both, view = got
    res, table = both[cfg.layout].result, view.to_frame()
    with finding:
        labels = {w: ro.workload_label(w, L) for w in wk.PREFIX_WORKLOADS}
        show_chart(figs.layout_bars(table, labels, cfg.workload, ro.layout_takeaway(view, cfg.workload, L), lang=L),
                   width="stretch")
    st.caption(ro.workloads_caption(cfg, cache, L))  # under the settings it names ("the sizes above")
    show_metrics(ro.hit_metrics(res, L))

    st.subheader(t("prefix.h.two_layouts"))
    for col, layout in zip(st.columns(2), wk.LAYOUTS, strict=True):
        m = ro.layout_metric(layout, both[layout], L)
        col.metric(m.label, m.value, help=m.help)
        col.caption(ro.last_request_caption(both[layout], L))
    st.markdown(ro.layout_sentence(cfg.workload, both, L))

    frame = res.to_frame()
    show_chart(figs.per_request(frame, ro.per_request_takeaway(cfg.workload, cfg.layout, res, L), lang=L),
               width="stretch")
    c = st.columns(2)
    c[0].download_button(t("prefix.download_requests"), requests_frame(res).to_csv(index=False).encode(),
                         file_name=f"prefix_cache_{cfg.workload}_{cfg.layout}.csv", mime="text/csv")
    c[1].download_button(t("prefix.download_overview"), view.to_csv_frame().to_csv(index=False).encode(),
                         file_name="prefix_cache_workloads.csv", mime="text/csv")

    # --- what the hit rate buys (seed 002's 5×) ----------------------------------------------
    st.subheader(t("prefix.h.buys"))
    w = controls.decode_weight()
    agent = view.get("agent", "fixed_first")
    show_metrics(ro.throughput_metrics(res, agent, w, L))
    st.markdown(claims.agent_paragraph(agent, w, L))
    return cfg, cache, res, view


def sweep_and_tree_sections(cfg: wk.PrefixWorkloadConfig, cache, res) -> None:
    # --- 3. sweeps ------------------------------------------------------------------------------
    with st.expander(t("prefix.h.sweeps")):
        sweep_section(cfg, cache)
    with st.expander(t("prefix.h.tree")):
        tree_section(cfg, cache, res)


def sweep_section(cfg: wk.PrefixWorkloadConfig, cache) -> None:
    swept = runs.capacity_and_block_size(cfg, cache)
    if swept is None:
        return
    cap, bsz = swept
    c = st.columns(2)
    show_chart_in(c[0], figs.sweep(cap, "capacity_tokens", cache.capacity_tokens,
                                   ro.capacity_takeaway(cap, cache.capacity_tokens, L), t("prefix.fig.capacity_axis"),
                                   lang=L), width="stretch")
    show_chart_in(c[1], figs.sweep(bsz, "block_size", cache.block_size,
                                   ro.block_size_takeaway(bsz, cache.block_size, L), t("prefix.fig.bs_axis"), lang=L),
                  width="stretch")
    st.caption(ro.sweep_caption(cache, L))



def tree_section(cfg: wk.PrefixWorkloadConfig, cache, res) -> None:
    # --- 4. tree ------------------------------------------------------------------------------
    n = ro.num_tree_requests(cfg, controls.tree_requests())
    grown = runs.radix_tree(cfg, cache.block_size, n)
    if grown is None:
        return
    show_chart(figs.radix_tree(grown.segments, cache.block_size, list(grown.labels),
                               ro.tree_takeaway(cfg, n, grown.segments, L), lang=L), width="stretch")
    st.markdown(t("prefix.tree_text") + ro.tree_branching_sentence(grown.segments, n, L))
    agreement = ro.tree_agreement(grown, cache.capacity_tokens, res.num_hit_tokens, L)
    if agreement:
        st.caption(agreement)


section2 = workload_section()
if section2 is not None:
    sweep_and_tree_sections(*section2[:3])

# --- 5. Real model ------------------------------------------------------------------------------
real_finding = kv_finding = None
with st.expander(t("prefix.h.live")):
    st.markdown(t("prefix.live_intro"))
    inputs = controls.branch_inputs()
    run = None
    if inputs is None:
        st.info(t("prefix.live_off"))
    elif inputs.problem:
        st.error(say(L, inputs.problem))
    else:
        run = live_result(lambda: runs.branch(inputs), t("prefix.cannot_run"))
    if run is not None:
        show_metrics(prw.branch_metrics(run, L))
        if prw.mismatch_warning(run, L):
            st.warning(prw.mismatch_warning(run, L))
        show_chart(figs.prefill_times(run, prw.branch_chart_title(run, L), lang=L), width="stretch")
        st.markdown(prw.branch_report(run, L))
        branches = prw.branch_frame(run, inputs.continuations, L)  # folded already: shown as it is, also on a projector
        st.dataframe(branches, hide_index=True, width="stretch", column_config=number_formats(branches))
        real_finding = claims.branch_finding(run, L)

        st.subheader(t("prefix.h.kv"))
        if inputs.kv_problem:
            st.info(say(L, inputs.kv_problem))
        else:
            kc = runs.kv_change(inputs.kv_ids, controls.kv_position(len(inputs.kv_ids)))
            show_chart(figs.kv_difference(kc, kc.position_labels(), prw.kv_chart_title(kc, shown_byte, L), lang=L),
                       width="stretch")
            st.markdown(prw.kv_summary(kc, L))
            kv_finding = prw.kv_finding(kc, L)

# --- 5b. The real model: one system prompt, many users ----------------------------------------------
def real_chat_section() -> None:
    from app.model_picker import real_unavailable

    st.markdown(t("rp.prefix.intro"))
    if (missing := real_unavailable()) is not None:
        st.info(missing, icon=":material/download:")
        return
    chat, go = real_controls.draw_form()
    if (problem := chat.problem()) is not None:
        st.error(plain(say(L, problem)))
        return
    try:
        run = runs.real_chat(chat, int(st.session_state["block_size"]), go=go)
    except Refusal as exc:
        st.error(t("rp.prefix.cannot", why=plain(why(exc, L))))
        return
    if run is None:
        return
    show_metrics([Metric(t(label), say(L, value)) for label, value in run.metrics()])
    st.markdown(plain(say(L, run.hits_sentence())))
    rows = run.rows()
    show_chart(figs.real_prefill_bars(rows, say(L, run.title()), lang=L), width="stretch")
    st.markdown(plain(say(L, run.time_sentence())))
    st.caption(plain(say(L, run.measured(time.time()))))
    (st.success if run.same_next_tokens else st.warning)(plain(say(L, run.check_sentence())))
    table = pd.DataFrame(rows).rename(columns={k: t(f"rp.prefix.col.{k}") for k in rows[0]})
    st.dataframe(table, hide_index=True, width="stretch", column_config=number_formats(table))  # folded already
    st.caption(t("rp.prefix.first"))
    st.code(run.first_text, language=None, wrap_lines=True)


with st.expander(t("rp.prefix.h")):
    real_chat_section()

# --- 6. Seeds ---------------------------------------------------------------------------------------
with st.expander(t("prefix.h.claims")):
    render_claims(claims.prefix_claims(demo, None if section2 is None else section2[3],
                                       controls.decode_weight_value(), real_finding, kv_finding, L),
                  "prefix_caching")
url.sync()
