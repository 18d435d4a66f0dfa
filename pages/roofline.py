from dataclasses import replace

import streamlit as st

from app.claims import render_claims
from app.controls import roofline as controls
from app.controls.roofline import BATCHES, CONTEXTS, THIS_MACHINE
from app.figures import CACHED, NAIVE
from app.figures import roofline as figs
from app.i18n import lang, page_title, t
from app.lesson.style import korean_lines
from app.present import show_chart, show_chart_in, show_table
from app.text import plain
from app.work import queued
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import (
    Hardware,
    RooflineConfig,
    batch_sweep,
    decode_step,
    hardware,
    memory_bound_until,
    prefill_step,
    what_helps,
)
from sim.cost.roofline_claims import roofline_claims
from sim.cost.roofline_fit import fit
from sim.cost.roofline_view import machine_figures, prefill_contexts, step_figures
from sim.words import say, why
from sim.words.fit import fit_sentence, turn_fits
from sim.words.roofline import (
    batching_caption,
    bytes_takeaway,
    intensity_takeaway,
    levers_frame,
    phase_name,
    roofline_takeaway,
    steps_frame,
    tiny_takeaway,
    tiny_verdict,
    tokens_takeaway,
    turning_points,
)

korean_lines(lang())
st.title(page_title("roofline"))
st.markdown(t("roofline.intro"))
L = lang()  # the sentences and figures below are worded in the page language

presets, gpus = load_presets(), load_gpus()
TABS = controls.tabs()
url = controls.register(TABS)
controls.draw()


def probe_here():
    """Measured once per server, alone in the queue (no other session's model run shares the machine); the wait
    shows its place and can be left."""
    from app.work import once
    from sim.model.probe import probe_machine

    return once("roofline.probe", (), probe_machine, what=t("roofline.probing"))


# The probe imports torch (seconds): it runs only when this machine is chosen or asked for.
probe, probe_error = None, None
if st.session_state["gpu"] == THIS_MACHINE or st.session_state["probe"]:
    try:
        probe = probe_here()
    except Exception as exc:  # a probe that fails must not take the page down
        probe_error = f"{type(exc).__name__}: {exc}"

arch = presets[st.session_state["model"]]
try:
    if st.session_state["gpu"] == THIS_MACHINE:
        if probe is None:
            raise ValueError(t("roofline.no_probe", error=probe_error))
        hw = Hardware(t("roofline.hw_here", device=probe.device, dtype=probe.dtype), probe.peak_flops, probe.bandwidth,
                      say(L, probe.method))
    else:
        hw = hardware(gpus[st.session_state["gpu"]], st.session_state["compute"])
    cfg = RooflineConfig(arch, st.session_state["batch"], st.session_state["context"], st.session_state["wdtype"],
                         st.session_state["kvdtype"])
except ValueError as exc:
    st.error(plain(why(exc, L)))
    url.sync()
    st.stop()

dec, pre = decode_step(cfg), prefill_step(cfg)
m = st.columns(4)
m[0].metric(t("roofline.m.dec_intensity"), f"{dec.intensity:,.2f} FLOP/B", t(f"roofline.bounded.{dec.bound(hw)}"),
            delta_color="off", delta_arrow="off")
dec_figs = step_figures(dec, hw)
m[1].metric(t("roofline.m.dec_step"), f"{dec_figs.ms:,.2f} ms", t("roofline.m.tok_s", n=f"{dec_figs.tokens_per_s:,.0f}"),
            delta_color="off", delta_arrow="off")
m[2].metric(t("roofline.m.pre_intensity"), f"{pre.intensity:,.0f} FLOP/B", t(f"roofline.bounded.{pre.bound(hw)}"),
            delta_color="off", delta_arrow="off")
m[3].metric(t("roofline.m.ridge"), f"{hw.ridge:,.0f} FLOP/B", help=t("roofline.m.ridge_help"))
if st.session_state["gpu"] != THIS_MACHINE:  # where the example runs: one GPU, n of them, or none the lab counts
    st.caption(fit_sentence(fit(cfg, gpus[st.session_state["gpu"]]), arch.name, L))


def render_roofline() -> None:
    """The step on the roofline, with how decode and prefill move as batch and prompt grow."""
    traces = []
    sweep_b = [decode_step(replace(cfg, batch=b)) for b in BATCHES]
    traces.append({"name": t("roofline.trace.decode"), "x": [s.intensity for s in sweep_b],
                   "y": [s.attainable_flops(hw) for s in sweep_b], "color": CACHED,
                   "labels": [t("roofline.trace.decode_at", b=f"{b}") for b in BATCHES]})
    ctx_range = prefill_contexts(arch, CONTEXTS)
    sweep_p = [prefill_step(replace(cfg, context=s)) for s in ctx_range]
    traces.append({"name": t("roofline.trace.prefill"), "x": [s.intensity for s in sweep_p],
                   "y": [s.attainable_flops(hw) for s in sweep_p], "color": NAIVE,
                   "labels": [t("roofline.trace.prefill_at", n=f"{s:,}") for s in ctx_range]})
    points = [
        {"name": phase_name("decode", L), "intensity": dec.intensity, "flops_per_s": dec.attainable_flops(hw),
         "color": CACHED},
        {"name": phase_name("prefill", L), "intensity": pre.intensity, "flops_per_s": pre.attainable_flops(hw),
         "color": NAIVE},
    ]
    show_chart(figs.roofline(hw.peak_flops, hw.bandwidth, hw.name, points, traces,
                             roofline_takeaway(dec, pre, hw, lang=L), lang=L), width="stretch")


def render_bytes() -> None:
    """The step's bytes by kind, and both steps' costs as a table."""
    show_chart(figs.bytes_breakdown([(phase_name("decode", L), dec.bytes_weights, dec.bytes_kv, dec.bytes_activations),
                                     (phase_name("prefill", L), pre.bytes_weights, pre.bytes_kv, pre.bytes_activations)],
                                    bytes_takeaway(dec, L), lang=L), width="stretch")
    table = steps_frame([pre, dec], hw, L)
    show_table(table, hide_index=True, width="stretch")
    st.download_button(t("roofline.download"), table.to_csv(index=False), "roofline.csv", "text/csv")


def render_batching() -> None:
    """Batch sweeps at a few contexts: intensity and tokens/s."""
    st.subheader(t("roofline.h.batching"))
    contexts = sorted({512, 8192, 131072, cfg.context})
    rows = batch_sweep(cfg, hw, BATCHES, contexts)
    g = st.columns(2)
    show_chart_in(g[0], figs.sweep_lines(rows, "intensity", t("roofline.y.intensity"),
                                         intensity_takeaway(rows, hw.ridge, L), hw.ridge, lang=L), width="stretch")
    show_chart_in(g[1], figs.sweep_lines(rows, "tokens_per_s", t("roofline.y.tokens"),
                                         tokens_takeaway(rows, cfg.context, L), lang=L), width="stretch")
    turns = {S: memory_bound_until(replace(cfg, context=S), hw) for S in contexts}
    st.markdown(turning_points(turns, L))
    if st.session_state["gpu"] != THIS_MACHINE and (needs := turn_fits(turns, cfg, gpus[st.session_state["gpu"]], L)):
        st.markdown(t("roofline.fit.turn_head", parts=needs))  # a compute-bound batch, and what it takes to run it
    st.caption(batching_caption(cfg, hw, lang=L))


def render_levers() -> None:
    """What each lever does to the decode step."""
    st.subheader(t("roofline.h.levers"))
    show_table(levers_frame(what_helps(cfg, hw), L), hide_index=True, width="stretch")


def render_machine() -> None:
    """This machine's bandwidth and matmul rate, and the tiny model's decode step on its roofline."""
    controls.draw_probe()
    if probe is None and probe_error is None:
        st.info(t("roofline.probe_info"), icon=":material/play_circle:")
    elif probe is None:
        st.warning(t("roofline.probe_failed", error=plain(probe_error)))
    else:
        k = st.columns(3)
        here = machine_figures(probe.peak_flops, probe.bandwidth)
        k[0].metric(t("roofline.m.copy_bw"), f"{here.gb_per_s:,.1f} GB/s")
        k[1].metric(t("roofline.m.matmul", dtype=probe.dtype), f"{here.gflop_per_s:,.1f} GFLOP/s")
        k[2].metric(t("roofline.m.ridge_short"), f"{here.ridge:,.1f} FLOP/B")
        st.caption(t("roofline.method_caption", method=say(L, probe.method)))
        if st.button(t("roofline.tiny_button")):
            from app.resources import model_or_stop
            from sim.model.probe import measure_tiny_decode

            st.session_state["tiny_point"] = queued(lambda: measure_tiny_decode(model_or_stop("mha"), probe),
                                                    t("roofline.tiny_job"))
        tp = st.session_state.get("tiny_point")
        if tp is not None:
            mhw = Hardware(t("roofline.hw_machine"), probe.peak_flops, probe.bandwidth)
            show_chart(figs.roofline(mhw.peak_flops, mhw.bandwidth, mhw.name, [
                {"name": t("roofline.tiny_measured"), "intensity": tp.intensity, "flops_per_s": tp.achieved_flops,
                 "color": CACHED},
                {"name": t("roofline.tiny_predicted"), "intensity": tp.intensity,
                 "flops_per_s": tp.attainable_flops, "color": NAIVE, "symbol": "diamond"}], [], tiny_takeaway(tp, L),
                lang=L), width="stretch")
            st.markdown(tiny_verdict(tp, L))


def render_claims_tab() -> None:
    """The seeds' roofline figures, recomputed."""
    render_claims(roofline_claims(presets, gpus, L), "roofline")


slug, tab = TABS.open(url)  # only the open tab's body runs
with tab:
    {"roofline": render_roofline, "bytes": render_bytes, "batching": render_batching, "levers": render_levers,
     "machine": render_machine, "claims": render_claims_tab}[slug]()
url.sync()
