"""Attention kernels: eager vs the SDPA backends (and FlexAttention) timed live on this device, the sweep
over N, the online softmax stepped tile by tile, and the bytes each moves."""

import os

import pandas as pd
import streamlit as st

from app.claims import render_claims
from app.controls import attention_kernels as ctl
from app.figures import kernels as figs
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.runs import attention_kernels as runs
from app.text import plain
from sim.attention import online_softmax as FL
from sim.attention import readouts as R
from sim.attention import shapes as S
from sim.attention.kernel_claims import kernel_claims
from sim.attention.limits import eager_peak_estimate, sweep_lengths
from sim.attention.measure import STATS, matmul_size
from sim.model.device import pick_device

st.title("Attention kernels")
st.markdown(
    "Every attention kernel computes the same thing: **O = softmax(Q·Kᵀ/√d + mask) · V**. They differ in "
    "**what they write to memory on the way**. *Eager* attention materialises the N×N scores S and the N×N "
    "probabilities P as real tensors — the seed's three round trips to main memory (HBM on a GPU, DRAM here). "
    "*FlashAttention* walks K and V in tiles that fit on chip (SRAM on a GPU, the caches on a CPU), keeps a "
    "running max and a running sum per query row, and never holds an N×N matrix: extra memory O(N), same result "
    "up to rounding. Below, every kernel that runs on this device is timed live on identical inputs."
)
try:
    device = pick_device()
except ValueError as exc:
    st.error(plain(exc))
    st.stop()
dev, cpu = str(device), device.type == "cpu"
limits = runs.limits_here(dev)
dtypes = S.dtypes_for(device.type)
url = ctl.register(dtypes, os.cpu_count() or 1)

# --- 1. what runs here --------------------------------------------------------------------------
st.header("Which kernels run on this device")
show_table(pd.DataFrame(R.status_rows(runs.statuses(dev, st.session_state["dtype"]))), hide_index=True,
             width="stretch", column_config={"Implementation": st.column_config.TextColumn(width="medium"),
                                             "Runs here": st.column_config.TextColumn(width="small"),
                                             "Why not": st.column_config.TextColumn(width="large")})
st.caption(R.backends_caption(dev, ctl.FLEX_TIMEOUT_S))

# --- 2. one shape ----------------------------------------------------------------------------------
st.header("Time one shape")
form = ctl.time_form(dtypes, cpu, os.cpu_count() or 1)
try:
    shape = ctl.chosen_shape(limits)
except ValueError as exc:
    st.error(plain(exc))
    shape = None
if shape is not None:
    show_metrics(R.shape_metrics(shape, eager_peak_estimate(shape)))
st.caption(limits.caps_sentence())
if form.submitted and shape is not None:
    try:
        runs.time_shape(shape, dev, limits, form.threads, form.flex, ctl.trial(), ctl.FLEX_TIMEOUT_S)
    except (ValueError, TimeoutError, RuntimeError) as exc:
        st.error(plain(exc))

if (timing := runs.last_timing()) is not None:
    result, measured_at = timing
    if (stale := R.stale_timing_note(result, shape)) is not None:
        st.info(stale, icon=":material/info:")
    st.markdown(R.timing_heading(result, measured_at))
    show_metrics(R.timing_metrics(result))
    show_table(pd.DataFrame(R.timing_rows(result)), hide_index=True, width="stretch")
    df = pd.DataFrame(result.to_records())
    show_chart(figs.kernel_bars(df, result.shape.score_bytes, R.timing_takeaway(result)), width="stretch")
    if (note := R.flex_note(result)) is not None:
        (st.info if note[0] else st.warning)(note[1], icon=":material/timer:" if note[0] else ":material/timer_off:")
    st.caption(R.timing_caption(result))
    c = st.columns([1, 1, 3])
    c[0].download_button("Download the timing table (CSV)", df.to_csv(index=False), "attention_kernels_timing.csv",
                         "text/csv")
    c[1].button("Measure again", on_click=ctl.measure_again, help="Fresh numbers for the shape in the form.")
else:
    num_kernels = sum(s.runs for s in runs.statuses(dev, st.session_state["dtype"]) if s.impl != "flex")
    st.info(R.time_hint(num_kernels, runs.SHAPE_BUDGET_S), icon=":material/play_circle:")

# --- 3. sweep over N --------------------------------------------------------------------------------
st.header("Sweep over N")
lengths = sweep_lengths(shape, limits) if shape is not None else []
if lengths:
    st.markdown(R.sweep_intro(lengths))
if shape is None:
    st.warning("Fix the shape above first.")
elif not lengths:
    st.warning(R.no_sweep_warning(shape))
else:
    if (ns := ctl.sweep_form(lengths)) is not None:
        try:
            runs.sweep(shape, ns, dev, form.threads, ctl.trial())
        except (ValueError, TimeoutError, RuntimeError) as exc:
            st.error(plain(exc))
    if (sweep := runs.last_sweep()) is not None:
        sdf = sweep.to_frame()
        st.markdown(R.sweep_heading(sweep))
        stat = ctl.sweep_stat()
        col = STATS[stat]
        show_metrics(R.sweep_metrics(sweep, stat, matmul_size(device.type)))
        g = st.columns(2)
        ceiling = f"{matmul_size(device.type):,}³ matmul here"
        show_chart_in(g[0], figs.sweep_time(sdf, col, R.sweep_time_takeaway(sweep, stat)), width="stretch")
        show_chart_in(g[1], figs.sweep_memory(sdf, R.sweep_memory_takeaway(sweep)), width="stretch")
        show_chart_in(g[0], figs.sweep_speedup(sdf, col, R.sweep_speedup_takeaway(sweep, stat)), width="stretch")
        show_chart_in(g[1], figs.sweep_tflops(sdf, col, sweep.ceiling_flops / 1e12, ceiling,
                                            R.sweep_tflops_takeaway(sweep, stat, ceiling)), width="stretch")
        st.caption(R.sweep_caption(sweep, stat))
        st.download_button("Download the sweep table (CSV)", sdf.to_csv(index=False), "attention_kernels_sweep.csv",
                           "text/csv", key="sweep_csv")

# --- 4. online softmax stepper -------------------------------------------------------------------
st.header("The online softmax, one tile at a time")
st.markdown(
    "FlashAttention's trick, for one query row: read the keys a **tile** at a time and keep three things — the "
    "running max **m**, the running sum **l** of e^(s−m), and an accumulator **acc** of e^(s−m)·v. When a tile "
    "brings a larger max, the old l and acc are multiplied by **e^(m_old − m_new)** so that every term is again "
    "relative to the current max. After the last tile, **acc / l** is exactly softmax(s)·V. Scores are "
    "q·k/√d (× the scale below) from seeded random vectors; computed in numpy by `sim/attention/online_softmax.py`."
)
try:
    demo = ctl.stepper()
except ValueError as exc:
    st.error(plain(exc))
    demo = None
if demo is not None:
    trace = FL.run_softmax_demo(demo)
    step, row = ctl.step_and_row(len(trace.steps))
    show_metrics(R.tile_metrics(trace, step, row))
    show_chart(figs.softmax_step(trace, row, step, R.stepper_takeaway(trace, row, step)), width="stretch")
    st.markdown(R.tile_updates(trace, step, row))
    show_chart(figs.softmax_trace_table(trace, row, step, R.trace_table_takeaway(trace, row)), width="stretch")
    st.caption("rescale α = e^(m before − m after): 1 when the tile did not raise the max, below 1 when it did, 0 "
               "while nothing has been seen. Orange: this step; blue: steps done. — means undefined (l is still 0).")
    st.markdown(R.final_outputs(trace, row))
    show_metrics(R.parity_metrics(trace, demo))
    st.caption(R.parity_caption(trace, demo))
    if (warning := R.masked_tile_warning(demo, row)) is not None:
        st.warning(warning, icon=":material/warning:")

# --- 5. HBM traffic ----------------------------------------------------------------------------------
st.header("Bytes moved: standard vs tiled")
if shape is None:
    st.warning("Fix the shape above first.")
else:
    tile = ctl.traffic_tile()
    traffic = R.shape_traffic(shape, tile)
    show_metrics(R.traffic_metrics(traffic))
    show_chart(figs.traffic_bars(traffic, R.traffic_takeaway(traffic, shape.label())), width="stretch")
    st.caption(R.traffic_caption(shape, tile))
    got = runs.last_timing()
    if got and got[0].shape == shape and (rows := R.memory_model_rows(got[0], traffic)):
        st.markdown("**Next to the measured memory** (the timing above, same shape):")
        show_table(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption(R.held_caption(got[0], traffic))

# --- 6. the seed's numbers ---------------------------------------------------------------------------
st.header("The seed's numbers, in context")
render_claims(kernel_claims(runs.last_sweep(), st.session_state["stat"]), "attention_kernels")
url.sync()
