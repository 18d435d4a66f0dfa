"""Serving: static vs continuous batching on a simulated GPU, and speculative decoding (closed form,
Monte Carlo, roofline-timed, and live on the real tiny model)."""

import streamlit as st

from app.claims import render_claims
from app.controls import serving as controls
from app.controls import serving_engine as eng
from app.figures import serving as figs
from app.present import show_chart, show_chart_in, show_table
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
)
from app.text import plain
from app.urlstate import UrlState
from sim.cost.presets import load_presets
from sim.serving import speculative as sps
from sim.serving.serving_claims import seed_claims

st.title("Serving")
st.markdown(
    "A server decodes many requests at once, because one forward pass reads every weight once whatever the batch "
    "(see *Roofline*). **Static batching** takes a batch, pads it to a rectangle and runs it until its *slowest* "
    "request is done; short answers finish early and leave their row idle. **Continuous batching** (Orca, then "
    "vLLM, TensorRT-LLM, SGLang) schedules per forward pass: a finished request leaves at once and a waiting one "
    "takes its place, with the KV cache in paged blocks (see *Paged KV blocks*). Below, the same seeded chat "
    "workload runs through both on a simulated GPU; every forward pass is timed by the roofline model."
)

url = UrlState("serving")
controls.register(url)
eng.register(url)
url.show_problems()


def render_batching() -> None:
    """Static vs continuous batching, speculative decoding, and the seed's claims (the page as it opens)."""
    sw = None  # the batch sweep, when it runs
    try:
        setup = controls.serving_setup()
        cmp = runs.batching(setup)
    except ValueError as exc:
        st.error(f"These settings cannot be simulated: {plain(exc)}")
        cmp = None

    if cmp is not None:
        static, cont = cmp.results["static"], cmp.results["continuous"]
        st.caption(cmp.budget_caption())
        m = st.columns(4)
        m[0].metric("Static batching (tokens/s)", f"{static.tokens_per_s:,.0f}")
        m[1].metric("Continuous batching (tokens/s)", f"{cont.tokens_per_s:,.0f}")
        m[2].metric("Continuous ÷ static", f"{cmp.speedup:.2f}×")
        m[3].metric("Preemptions (continuous)", f"{cont.num_preemptions:,}",
                    help="Requests evicted when the block pool ran dry, recomputed later from prompt + output so far.")
        st.markdown(cmp.summary())
        table = cmp.to_frame().round(3)
        show_table(table, hide_index=True, width="stretch")
        st.download_button("Download the metrics (CSV)", table.to_csv(index=False).encode(), file_name="serving.csv",
                           mime="text/csv")
        st.caption("TTFT: arrival → first token. TPOT: (last token − first token) ÷ (output − 1), for outputs of 2+ "
                   "tokens. End-to-end: arrival → last token. mean_batch: useful rows per pass, weighted by the pass's "
                   "time; useful_rows_pct: their share of the rows computed; peak_kv_pct: KV slots reserved (static) or "
                   "allocated in blocks (continuous) at the peak.")

        st.header("Who runs when")
        shown = runs.batching_figures(setup, controls.gantt_rows())
        show_chart(shown["gantt"], width="stretch")
        st.caption("Grey: waiting in the queue (and, after a preemption, waiting to be recomputed). Dark: computing. "
                   "Pale red: the request is finished but its row stays in the static batch until the longest request "
                   "of the batch is done. Black tick: the first token.")
        g = st.columns(2)
        show_chart_in(g[0], shown["occupancy"], width="stretch")
        show_chart_in(g[1], shown["kv"], width="stretch")
        show_chart(shown["latency"], width="stretch")

        if controls.sweep_on():
            try:
                sw = runs.sweep(setup)
            except ValueError as exc:
                st.error(f"The sweep cannot run with these settings: {plain(exc)}")
            if sw is not None:
                frame = sw.to_frame()
                show_chart(figs.batch_sweep(frame, setup.max_batch, sw.takeaway()), width="stretch")
                show_table(frame.round(2), hide_index=True, width="stretch")

    # --- Speculative decoding ---------------------------------------------------------------------
    st.header("Speculative decoding")
    st.markdown(
        "A cheap **draft** proposes k tokens one by one; the **target** scores all of them in *one* pass and keeps "
        "the longest prefix it agrees with — plus one token of its own (the correction at the first disagreement, "
        "or a bonus token when all k pass). With a per-token acceptance rate α, one target pass yields "
        "**E = (1 − α^(k+1)) / (1 − α)** tokens, and a round costs k draft steps (c target steps each) plus the pass: "
        "**speedup = E / (k·c + 1)** (Leviathan et al., 2023). The output is exactly the target's: greedy keeps only "
        "tokens the target would have picked; sampling uses a rejection rule that preserves its distribution."
    )
    choice = controls.speculative()
    spec = choice.setup
    try:
        curves = runs.spec_curves(spec)
    except ValueError as exc:
        st.error(f"Cannot compute the speculative curves: {plain(exc)}")
        url.sync()
        st.stop()
    mc, (best_k, best_speedup) = curves.chosen_monte_carlo, curves.best_speedup
    m = st.columns(4)
    m[0].metric("Tokens per target pass (formula)", f"{mc.expected:.3f}")
    m[1].metric("Monte Carlo", f"{mc.mean:.3f} ± {2 * mc.stderr:.3f}",
                help=f"{spec.mc_passes:,} simulated passes, every draft token accepted with probability α; ±2 standard "
                     "errors.")
    m[2].metric("Speedup", f"{curves.chosen_speedup:.2f}×", f"c = {curves.c:.3f}", delta_color="off", delta_arrow="off")
    m[3].metric("Best k here", f"{best_k}", f"{best_speedup:.2f}×", delta_color="off", delta_arrow="off")
    if curves.timing is not None:
        st.caption(curves.timing.caption(spec.k))

    # --- the real model ---------------------------------------------------------------------------
    run = None
    st.subheader("On the real tiny model")
    if (live := controls.live()) is not None:
        run = live_result(lambda: runs.live_run(live), "Cannot speculate")

    run_label = f"real tiny model, {st.session_state['live_draft']} draft (measured)"
    show_chart(runs.speculative_figure(spec, run, run_label), width="stretch")
    st.caption(curves.caption(run is not None))
    if run is not None:
        from sim.model.generate import decode

        c = st.columns(5)
        c[0].metric("Same tokens as target", "yes" if run.identical else "NO",
                    help="Greedy speculative output compared token by token with the target's own greedy decoding.")
        c[1].metric("Measured acceptance rate", f"{run.acceptance_rate:.2f}",
                    help="Drafts accepted ÷ drafts the target judged (a draft after a rejection is never judged).")
        c[2].metric("Tokens per target pass", f"{run.tokens_per_pass:.2f}",
                    f"formula at that α: {run.formula_tokens_per_pass:.2f}", delta_color="off", delta_arrow="off")
        c[3].metric("Measured c", f"{run.c:.2f}", help="Median draft forward ÷ median target decode step, wall time.")
        c[4].metric("Wall-time speedup", f"{run.speedup:.2f}×", f"steps predict {run.predicted_speedup:.2f}×",
                    delta_color="off", delta_arrow="off",
                    help="Prediction: tokens per pass × target step ÷ (k draft steps + one verify pass), all measured. "
                         "The rest of the gap is the loop's own Python work between passes.")
        st.markdown(run.summary())
        with st.expander("The generated text"):
            st.code(decode(run.prompt_ids) + decode(run.new_ids), language=None)

    # --- speculation in a busy server -------------------------------------------------------------
    st.subheader("Speculation inside a big batch")
    try:
        points = sps.spec_batch_sweep(choice.batch_target, choice.batch_draft, spec.gpu, spec.alpha, spec.k)
    except ValueError as exc:
        st.error(f"Cannot sweep the batch: {plain(exc)}")
        points = []
    if points:
        presets = load_presets()
        label = f"{presets[choice.batch_target].name} drafted by {presets[choice.batch_draft].name}"
        show_chart(figs.spec_vs_batch(points, sps.batch_sweep_takeaway(points, label, spec.alpha, spec.k)),
                   width="stretch")
        st.caption(sps.batch_sweep_caption(points))

    st.header("Seed 002's numbers, checked")
    render_claims(seed_claims(cmp, curves.timing, run, sw, points, spec.alpha, spec.k), "serving")


slug, tab = eng.TABS.open(url)  # only the open tab's body runs
with tab:
    {"batching": render_batching, "chunked": render_chunked, "preemption": render_preemption, "steps": render_steps,
     "offload": render_offload, "disagg": render_disagg, "routing": render_routing, "trace": render_trace}[slug]()
url.sync()
