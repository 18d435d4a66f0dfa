"""Serving: static vs continuous batching on a simulated GPU, and speculative decoding (closed form,
Monte Carlo, roofline-timed, and live on the real tiny model)."""

import streamlit as st

from app.claims import render_claims
from app.controls import serving as controls
from app.controls import serving_engine as eng
from app.figures import serving as figs
from app.i18n import lang, page_title, t
from app.present import show_chart, show_chart_in
from app.resources import live_result
from app.runs import serving as runs
from app.serving_tabs import (
    render_chunked,
    render_disagg,
    render_offload,
    render_preemption,
    render_routing,
    render_steps,
    render_trace,
    show_readable,
)
from app.text import plain
from app.urlstate import UrlState
from sim.cost.presets import load_presets
from sim.serving import speculative as sps
from sim.words import comparison as cmp_words
from sim.words import speculative as spec_words
from sim.words import why
from sim.words.serving_claims import batching_claims, spec_claims
from sim.words.spec_run import spec_summary

st.title(page_title("serving"))
st.markdown(t("density.serving.lead"))  # the first numbers stay on a projector's first screen; the rest one click away
with st.expander(t("density.serving.more")):
    st.markdown(t("serving.intro"))
L = lang()  # the sentences and figures below are worded in the page language

url = UrlState("serving")
controls.register(url)
eng.register(url)
url.show_problems()


def render_batching() -> None:
    """Static vs continuous batching and the seed's claim about it (the page as it opens): the finding and its chart
    first, the settings that move it one click below, then the details."""
    sw = None  # the batch sweep, when it runs
    finding = st.container()
    with st.expander(controls.settings_label(), expanded=False, icon=":material/tune:"):
        try:
            setup = controls.serving_setup()
            cmp = runs.batching(setup)
        except ValueError as exc:
            finding.error(t("serving.cannot_simulate", why=plain(why(exc, L))))  # above the fold, not in it
            cmp = None
    if cmp is None:
        return
    static, cont = cmp.results["static"], cmp.results["continuous"]
    with finding:
        st.caption(cmp_words.budget_caption(cmp, L))
        m = st.columns(4)
        m[0].metric(t("serving.m.static"), f"{static.tokens_per_s:,.0f}")
        m[1].metric(t("serving.m.continuous"), f"{cont.tokens_per_s:,.0f}")
        m[2].metric(t("serving.m.ratio"), f"{cmp.speedup:.2f}×")
        m[3].metric(t("serving.m.preemptions"), f"{cont.num_preemptions:,}", help=t("serving.m.preemptions_help"))
        st.markdown(cmp_words.summary(cmp, L))
        shown = runs.batching_figures(setup, controls.gantt_rows(), L)
        show_chart(shown["gantt"], width="stretch")
        st.caption(t("serving.gantt_caption"))

    st.header(t("serving.h.details"))
    table = cmp.to_frame().round(3)
    show_readable(table, L, cmp.cell_msgs)
    st.download_button(t("serving.download"), table.to_csv(index=False).encode(), file_name="serving.csv",
                       mime="text/csv")
    st.caption(t("serving.table_caption"))
    g = st.columns(2)
    show_chart_in(g[0], shown["occupancy"], width="stretch")
    show_chart_in(g[1], shown["kv"], width="stretch")
    show_chart(shown["latency"], width="stretch")

    if controls.sweep_on():
        try:
            sw = runs.sweep(setup)
        except ValueError as exc:
            st.error(t("serving.sweep_cannot", why=plain(why(exc, L))))
        if sw is not None:
            frame = sw.to_frame()
            show_chart(figs.batch_sweep(frame, setup.max_num_seqs, cmp_words.sweep_takeaway(sw, L), L), width="stretch")
            show_readable(frame.round(2), L)
    st.header(t("serving.h.claims"))
    render_claims(batching_claims(cmp, sw, lang=L), "serving")


def render_spec() -> None:
    """Speculative decoding: closed form, Monte Carlo and roofline-timed; live on the real model; in a busy
    server; and the seed's claims about it."""
    st.header(t("serving.h.spec"))
    st.markdown(t("serving.spec_intro"))
    choice = controls.speculative()
    spec = choice.setup
    try:
        curves = runs.spec_curves(spec)
    except ValueError as exc:
        st.error(t("serving.spec_cannot", why=plain(why(exc, L))))
        url.sync()
        st.stop()
    mc, (best_k, best_speedup) = curves.chosen_monte_carlo, curves.best_speedup
    m = st.columns(4)
    m[0].metric(t("serving.m.tokens_formula"), f"{mc.expected:.3f}")
    m[1].metric(t("serving.m.monte_carlo"), f"{mc.mean:.3f} ± {mc.two_stderr:.3f}",
                help=t("serving.m.monte_carlo_help", n=f"{spec.mc_passes:,}"))
    m[2].metric(t("serving.m.speedup"), f"{curves.chosen_speedup:.2f}×", f"c = {curves.c:.3f}", delta_color="off",
                delta_arrow="off")
    m[3].metric(t("serving.m.best_k"), f"{best_k}", f"{best_speedup:.2f}×", delta_color="off", delta_arrow="off")
    if curves.timing is not None:
        st.caption(spec_words.timing_caption(curves.timing, spec.k, L))
        st.caption(spec_words.fit_caption(curves.timing, lang=L))

    # --- the real model ---------------------------------------------------------------------------
    run = None
    st.subheader(t("serving.h.real"))
    if (live := controls.live()) is not None:
        run = live_result(lambda: runs.live_run(live), t("serving.live_cannot"))

    run_label = t("serving.run_label", draft=st.session_state["live_draft"])
    show_chart(runs.speculative_figure(spec, run, run_label, L), width="stretch")
    st.caption(spec_words.curves_caption(curves, run is not None, L))
    if run is not None:
        from sim.model.generate import decode

        c = st.columns(5)
        c[0].metric(t("serving.m.same"), t("serving.yes") if run.identical else t("serving.no"),
                    help=t("serving.m.same_help"))
        c[1].metric(t("serving.m.acceptance"), f"{run.acceptance_rate:.2f}", help=t("serving.m.acceptance_help"))
        c[2].metric(t("serving.m.tokens_pass"), f"{run.tokens_per_pass:.2f}",
                    t("serving.m.formula_at", x=f"{run.formula_tokens_per_pass:.2f}"), delta_color="off",
                    delta_arrow="off")
        c[3].metric(t("serving.m.c"), f"{run.c:.2f}", help=t("serving.m.c_help"))
        c[4].metric(t("serving.m.wall"), f"{run.speedup:.2f}×", t("serving.m.predict", x=f"{run.predicted_speedup:.2f}×"),
                    delta_color="off", delta_arrow="off", help=t("serving.m.wall_help"))
        st.markdown(spec_summary(run, L))
        with st.expander(t("serving.generated")):
            st.code(decode(run.prompt_ids) + decode(run.new_ids), language=None)

    # --- speculation in a busy server -------------------------------------------------------------
    st.subheader(t("serving.h.batch"))
    try:
        points = sps.spec_batch_sweep(choice.batch_target, choice.batch_draft, spec.gpu, spec.alpha, spec.k)
    except ValueError as exc:
        st.error(t("serving.batch_cannot", why=plain(why(exc, L))))
        points = []
    if points:
        presets = load_presets()
        label = t("serving.drafted_by", target=presets[choice.batch_target].name, draft=presets[choice.batch_draft].name)
        show_chart(figs.spec_vs_batch(points, spec_words.batch_sweep_takeaway(points, label, spec.alpha, spec.k, L), L),
                   width="stretch")
        st.caption(spec_words.batch_sweep_caption(points, L))

    st.header(t("serving.h.claims"))
    render_claims(spec_claims(curves.timing, run, points, spec.alpha, spec.k, lang=L), "serving")


slug, tab = eng.open_tab(url)  # only the open tab's body runs
with tab:
    {"batching": render_batching, "spec": render_spec, "chunked": render_chunked, "preemption": render_preemption,
     "steps": render_steps, "offload": render_offload, "disagg": render_disagg, "routing": render_routing,
     "trace": render_trace}[slug]()
url.sync()
