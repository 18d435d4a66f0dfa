"""Attention kernels: the bytes eager and tiled attention move at one shape, and eager vs the SDPA backends (and
FlexAttention) timed live on this device; one click away, the sweep over N, the online softmax stepped tile by
tile and the seed's numbers."""

import os

import pandas as pd
import streamlit as st

from app.claims import render_claims
from app.controls import attention_kernels as ctl
from app.figures import kernels as figs
from app.i18n import lang, page_title, t
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.runs import attention_kernels as runs
from app.text import plain
from sim.attention import online_softmax as FL
from sim.attention import shapes as S
from sim.attention.limits import eager_peak_estimate, sweep_lengths
from sim.attention.measure import STATS, matmul_size
from sim.model.device import pick_device
from sim.words import attention as R
from sim.words import why
from sim.words.kernel_claims import kernel_claims

st.title(page_title("attention_kernels"))
st.markdown(t("density.kernels.lead"))
with st.expander(t("density.kernels.more")):
    st.markdown(t("kernels.intro"))
L = lang()  # the sentences, tables and figures below are worded in the page language
try:
    device = pick_device()
except ValueError as exc:
    st.error(plain(why(exc, L)))
    st.stop()
dev, cpu = str(device), device.type == "cpu"
limits = runs.limits_here(dev)
dtypes = S.dtypes_for(device.type)
url = ctl.register(dtypes, os.cpu_count() or 1)


def current_shape() -> S.AttentionShape | None:
    """The form's shape, or None with its error shown (over this device's caps, or not a shape)."""
    try:
        return ctl.chosen_shape(limits)
    except ValueError as exc:
        st.error(plain(why(exc, L)))
        return None


def render_shape() -> None:
    """The page as it opens: the bytes each way moves at the chosen shape (its chart first), the shape's controls
    right under it, then what timing them measured here."""
    shape = current_shape()
    if shape is not None:
        tile = ctl.traffic_tile_now()
        traffic = R.shape_traffic(shape, tile)
        show_chart(figs.traffic_bars(traffic, R.traffic_takeaway(traffic, R.shape_label(shape, L), L), L),
                   width="stretch")
        st.caption(R.traffic_caption(shape, tile, L))
        ctl.traffic_tile()
    form = ctl.time_form(dtypes, cpu, os.cpu_count() or 1)
    with st.expander(t("kernels.h.which")):
        widths = {"impl": "medium", "runs": "small", "why_not": "large"}
        show_table(pd.DataFrame(R.status_rows(runs.statuses(dev, st.session_state["dtype"]), L)), hide_index=True,
                   width="stretch", column_config={t(f"kernels.col.{k}"): st.column_config.TextColumn(width=w)
                                                   for k, w in widths.items()})
        st.caption(R.backends_caption(dev, ctl.FLEX_TIMEOUT_S, L))
    if shape is not None:
        show_metrics(R.shape_metrics(shape, eager_peak_estimate(shape), L))
    st.caption(R.caps_sentence(limits, L))
    if form.submitted and shape is not None:
        try:
            runs.time_shape(shape, dev, limits, form.threads, form.flex, ctl.trial(), ctl.FLEX_TIMEOUT_S)
        except (ValueError, TimeoutError, RuntimeError) as exc:
            st.error(plain(exc))

    if (timing := runs.last_timing()) is not None:
        result, measured_at = timing
        if (stale := R.stale_timing_note(result, shape, L)) is not None:
            st.info(stale, icon=":material/info:")
        st.markdown(R.timing_heading(result, measured_at, L))
        show_metrics(R.timing_metrics(result, L))
        show_table(pd.DataFrame(R.timing_rows(result, L)), hide_index=True, width="stretch")
        df = R.timing_frame(result)
        show_chart(figs.kernel_bars(df, result.shape.score_bytes, R.timing_takeaway(result, lang=L), L),
                   width="stretch")
        if (note := R.flex_note(result, L)) is not None:
            (st.info if note[0] else st.warning)(note[1], icon=":material/timer:" if note[0] else ":material/timer_off:")
        st.caption(R.timing_caption(result, L))
        c = st.columns([1, 1, 3])
        c[0].download_button(t("kernels.w.download_timing"), df.to_csv(index=False), "attention_kernels_timing.csv",
                             "text/csv")
        c[1].button(t("kernels.w.again"), on_click=ctl.measure_again, help=t("kernels.w.again_help"))
    else:
        st.info(R.time_hint(runs.num_timed_runs(dev, st.session_state["dtype"]), runs.SHAPE_BUDGET_S, L), icon=":material/play_circle:")

    if shape is not None:
        st.subheader(t("kernels.h.traffic"))
        show_metrics(R.traffic_metrics(traffic, L))
        got = runs.last_timing()
        if got and got[0].shape == shape and (rows := R.memory_model_rows(got[0], traffic, L)):
            st.markdown(t("kernels.next_to_measured"))
            show_table(pd.DataFrame(rows), hide_index=True, width="stretch")
            st.caption(R.held_caption(got[0], traffic, L))


def render_sweep() -> None:
    shape = current_shape()
    lengths = sweep_lengths(shape, limits) if shape is not None else []
    if lengths:
        st.markdown(R.sweep_intro(lengths, L))
    if shape is None:
        st.warning(t("density.kernels.fix_shape", tab=t("density.kernels.tab.shape")))
        return
    if not lengths:
        st.warning(R.no_sweep_warning(shape, L))
        return
    if (ns := ctl.sweep_form(lengths)) is not None:
        try:
            runs.sweep(shape, ns, dev, ctl.chosen_threads(cpu), ctl.trial())
        except (ValueError, TimeoutError, RuntimeError) as exc:
            st.error(plain(exc))
    if (sweep := runs.last_sweep()) is None:
        return
    sdf = R.sweep_frame(sweep)
    st.markdown(R.sweep_heading(sweep, L))
    stat = ctl.sweep_stat()
    col = STATS[stat]
    show_metrics(R.sweep_metrics(sweep, stat, matmul_size(device.type), L))
    g = st.columns(2)
    ceiling = R.ceiling_label(matmul_size(device.type), L)
    show_chart_in(g[0], figs.sweep_time(sdf, col, R.sweep_time_takeaway(sweep, stat, L), L), width="stretch")
    show_chart_in(g[1], figs.sweep_memory(sdf, R.sweep_memory_takeaway(sweep, L), L), width="stretch")
    show_chart_in(g[0], figs.sweep_speedup(sdf, col, R.sweep_speedup_takeaway(sweep, stat, L), L), width="stretch")
    show_chart_in(g[1], figs.sweep_tflops(sdf, col, sweep.ceiling_tflops, ceiling,
                                          R.sweep_tflops_takeaway(sweep, stat, ceiling, L), L), width="stretch")
    st.caption(R.sweep_caption(sweep, stat, L))
    st.download_button(t("kernels.w.download_sweep"), sdf.to_csv(index=False), "attention_kernels_sweep.csv",
                       "text/csv", key="sweep_csv")


def render_stepper() -> None:
    st.markdown(t("kernels.stepper_intro"))
    try:
        demo = ctl.stepper()
    except ValueError as exc:
        st.error(plain(exc))
        return
    trace = FL.run_softmax_demo(demo)
    step, row = ctl.step_and_row(len(trace.steps))
    show_metrics(R.tile_metrics(trace, step, row, L))
    show_chart(figs.softmax_step(trace, row, step, R.stepper_takeaway(trace, row, step, L), L), width="stretch")
    st.markdown(R.tile_updates(trace, step, row, L))
    show_chart(figs.softmax_trace_table(trace, row, step, R.trace_table_takeaway(trace, row, L), L), width="stretch")
    st.caption(t("kernels.rescale_caption"))
    st.markdown(R.final_outputs(trace, row, L))
    show_metrics(R.parity_metrics(trace, demo, L))
    st.caption(R.parity_caption(trace, demo, L))
    if (warning := R.masked_tile_warning(demo, row, L)) is not None:
        st.warning(warning, icon=":material/warning:")


def render_claims_tab() -> None:
    render_claims(kernel_claims(runs.last_sweep(), st.session_state["stat"], L), "attention_kernels")


tab, box = ctl.page_tabs().open(url)  # only the open section runs
with box:
    {"shape": render_shape, "sweep": render_sweep, "stepper": render_stepper, "claims": render_claims_tab}[tab]()
url.sync()
