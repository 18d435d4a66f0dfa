import streamlit as st

from app.claims import render_claims
from app.controls import prefix_caching as controls
from app.figures import prefix_cache as figs
from app.i18n import lang, page_title, t
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.resources import live_result
from app.runs import prefix_caching as runs
from app.text import for_plotly, plain
from app.urlstate import UrlState
from sim.alloc import prefix_claims as claims
from sim.alloc import prefix_sweeps as ps
from sim.alloc import workload as wk
from sim.alloc.byte_tokens import show_byte
from sim.cost.vllm_rules import version_label
from sim.words import prefix as ro
from sim.words.alloc import requests_frame

L = lang()  # the sentences and figures below are worded in the page language
st.title(page_title("prefix_caching"))
st.markdown(t("prefix.intro"))
st.caption(t("engine.prefix_rules", vllm=version_label()))
url = UrlState("prefix_caching")
controls.register(url)
url.show_problems()

# --- 1. Block hashes ------------------------------------------------------------------------------
st.header(t("prefix.h.hashes"))
st.markdown(t("prefix.hashes_intro"))
def shown_byte(b: int) -> str:
    """A byte of user text as a chart label: escaped for plotly."""
    return for_plotly(show_byte(b))


choice = controls.demo_prompt()
demo = None if choice is None else ps.change_one_byte(choice.ids, choice.pos, choice.block_size)
if demo is not None:
    show_metrics(demo.metrics(L))
    show_chart(figs.block_rows(demo.frame, demo.changed_pos, demo.block_size, demo.chart_title(shown_byte, L),
                               lang=L), width="stretch")
    st.markdown(demo.summary(L))
    with st.expander(t("prefix.every_block")):
        show_table(demo.block_table(L), hide_index=True, width="stretch")
        st.caption(t("prefix.hash_caption"))


# --- 2. Workloads -------------------------------------------------------------------------------
def workload_section():
    """Section 2; (cfg, cache, the chosen run, the overview), or None when it cannot run."""
    st.header(t("prefix.h.workloads"))
    try:
        cfg, cache = controls.workload_and_cache()
        got = runs.workloads(cfg, cache)
    except ValueError as exc:
        st.error(t("prefix.cannot", why=plain(exc)))
        return None
    if got is None:
        return None
    both, view = got
    res, table = both[cfg.layout].result, view.to_frame()
    show_metrics(ro.hit_metrics(res, L))

    st.subheader(t("prefix.h.two_layouts"))
    for col, layout in zip(st.columns(2), wk.LAYOUTS, strict=True):
        m = ro.layout_metric(layout, both[layout], L)
        col.metric(m.label, m.value, help=m.help)
        col.caption(both[layout].last_request_caption(L))
    st.markdown(ro.layout_sentence(cfg.workload, both, L))
    labels = {w: ro.workload_label(w, L) for w in wk.PREFIX_WORKLOADS}
    show_chart(figs.layout_bars(table, labels, cfg.workload, view.layout_takeaway(cfg.workload, L), lang=L),
               width="stretch")
    st.caption(ro.workloads_caption(cfg, cache, L))

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
    st.header(t("prefix.h.sweeps"))
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

    # --- 4. tree ------------------------------------------------------------------------------
    st.header(t("prefix.h.tree"))
    n = ro.num_tree_requests(cfg, controls.tree_requests())
    grown = runs.radix_tree(cfg, cache.block_size, n)
    if grown is None:
        return
    show_chart(figs.radix_tree(grown.segments, cache.block_size, list(grown.labels),
                               ro.tree_takeaway(cfg, n, grown.segments, L), lang=L), width="stretch")
    st.markdown(t("prefix.tree_text") + ro.tree_branching_sentence(grown.segments, n, L))
    agreement = grown.agreement(cache.capacity_tokens, res.num_hit_tokens, L)
    if agreement:
        st.caption(agreement)


section2 = workload_section()
if section2 is not None:
    sweep_and_tree_sections(*section2[:3])

# --- 5. Real model ------------------------------------------------------------------------------
st.header(t("prefix.h.live"))
st.markdown(t("prefix.live_intro"))
inputs = controls.branch_inputs()
real_finding = kv_finding = run = None
if inputs is None:
    st.info(t("prefix.live_off"))
elif inputs.problem:
    st.error(inputs.problem)
else:
    run = live_result(lambda: runs.branch(inputs), t("prefix.cannot_run"))
if run is not None:
    show_metrics(run.metrics(L))
    if run.mismatch_warning(L):
        st.warning(run.mismatch_warning(L))
    show_chart(figs.prefill_times(run, run.chart_title(L), lang=L), width="stretch")
    st.markdown(run.report(L))
    show_table(run.to_frame(inputs.continuations, L), hide_index=True, width="stretch")
    real_finding = claims.branch_finding(run, L)

    st.subheader(t("prefix.h.kv"))
    if inputs.kv_problem:
        st.info(inputs.kv_problem)
    else:
        kc = runs.kv_change(inputs.kv_ids, controls.kv_position(len(inputs.kv_ids)))
        show_chart(figs.kv_difference(kc, kc.position_labels(), kc.chart_title(shown_byte, L), lang=L),
                   width="stretch")
        st.markdown(kc.summary(L))
        kv_finding = kc.finding(L)

# --- 6. Seeds ---------------------------------------------------------------------------------------
st.header(t("prefix.h.claims"))
render_claims(claims.prefix_claims(demo, None if section2 is None else section2[3], controls.decode_weight_value(),
                                   real_finding, kv_finding, L), "prefix_caching")
url.sync()
