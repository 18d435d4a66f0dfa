from dataclasses import replace

import streamlit as st

from app.claims import render_claims
from app.controls.roofline import BATCHES, CONTEXTS, TABS, THIS_MACHINE
from app.figures import CACHED, NAIVE
from app.figures import roofline as figs
from app.present import show_chart, show_chart_in, show_table
from app.text import plain
from app.urlstate import UrlState
from app.work import queued
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS
from sim.cost.presets import load_presets
from sim.cost.roofline import (
    COMPUTE_DTYPES,
    Hardware,
    RooflineConfig,
    batch_sweep,
    batching_caption,
    bytes_takeaway,
    decode_step,
    hardware,
    intensity_takeaway,
    levers_frame,
    memory_bound_until,
    prefill_step,
    roofline_takeaway,
    steps_frame,
    tokens_takeaway,
    turning_points,
    what_helps,
)
from sim.cost.roofline_claims import roofline_claims

st.title("Roofline")
st.markdown(
    "A step cannot finish faster than its **FLOPs ÷ peak FLOP/s** nor faster than its **bytes ÷ memory "
    "bandwidth**. Their ratio, FLOPs per byte, is the step's **arithmetic intensity**. Prefill multiplies every "
    "weight by every prompt token at once, so its intensity grows with the prompt; decode multiplies every weight by "
    "one token per request and reads each request's whole KV cache, so at small batches its intensity stays low. The "
    "numbers below say which bound each step hits with your choices."
)

presets, gpus = load_presets(), load_gpus()
url = UrlState("roofline")
url.choice("model", "llama-3.1-70b", list(presets), label="model")
url.choice("gpu", "h100-sxm", [*gpus, THIS_MACHINE], label="hardware")
url.choice("compute", "bf16", list(COMPUTE_DTYPES), label="compute dtype")
url.choice("wdtype", "bf16", list(WEIGHT_DTYPE_BITS), label="weight dtype")
url.choice("kvdtype", "fp16", list(KV_DTYPES), label="KV dtype")
url.int("batch", 1, 1, BATCHES[-1], label="batch")
url.int("context", 4096, CONTEXTS[0], CONTEXTS[-1], label="context")
url.bool("probe", False, label="measure this machine")
TABS.register(url)
url.show_problems()
for key, allowed in (("batch", BATCHES), ("context", CONTEXTS)):  # snap URL integers to the slider's stops
    if st.session_state[key] not in allowed:
        st.session_state[key] = min(allowed, key=lambda v, k=key: abs(v - st.session_state[k]))

c = st.columns(4)
c[0].selectbox("Model", list(presets), key="model", format_func=lambda k: presets[k].name)
c[1].selectbox("Hardware", [*gpus, THIS_MACHINE], key="gpu",
               format_func=lambda k: "This machine (measured)" if k == THIS_MACHINE else gpus[k].name)
c[2].radio("Compute dtype", COMPUTE_DTYPES, key="compute", horizontal=True, format_func=str.upper)
c[3].radio("Weights", list(WEIGHT_DTYPE_BITS), key="wdtype", horizontal=True, format_func=str.upper)
c = st.columns([1, 2, 2])
c[0].selectbox("KV cache dtype", list(KV_DTYPES), key="kvdtype", format_func=lambda k: KV_DTYPES[k].label)
c[1].select_slider("Batch (requests decoded together)", BATCHES, key="batch")
c[2].select_slider("Context (tokens per request)", CONTEXTS, key="context", format_func=lambda v: f"{v:,}")


@st.cache_resource(show_spinner="Measuring this machine (copy bandwidth, matmul FLOP/s)…")
def machine_probe():
    from app.work import server
    from sim.model.probe import probe_machine

    with server().queue.slot(exclusive=True):  # measured alone: no other session's model run shares the machine
        return probe_machine()


# The probe imports torch (seconds): it runs only when this machine is chosen or asked for.
probe, probe_error = None, None
if st.session_state["gpu"] == THIS_MACHINE or st.session_state["probe"]:
    try:
        probe = machine_probe()
    except Exception as exc:  # a probe that fails must not take the page down
        probe_error = f"{type(exc).__name__}: {exc}"

arch = presets[st.session_state["model"]]
try:
    if st.session_state["gpu"] == THIS_MACHINE:
        if probe is None:
            raise ValueError(f"this machine could not be measured ({probe_error}); pick a GPU preset")
        hw = Hardware(f"this machine ({probe.device}, {probe.dtype})", probe.peak_flops, probe.bandwidth, probe.method)
    else:
        hw = hardware(gpus[st.session_state["gpu"]], st.session_state["compute"])
    cfg = RooflineConfig(arch, st.session_state["batch"], st.session_state["context"], st.session_state["wdtype"],
                         st.session_state["kvdtype"])
except ValueError as exc:
    st.error(plain(exc))
    url.sync()
    st.stop()

dec, pre = decode_step(cfg), prefill_step(cfg)
m = st.columns(4)
m[0].metric("Decode intensity", f"{dec.intensity:,.2f} FLOP/B", f"{dec.bound(hw)}-bound", delta_color="off", delta_arrow="off")
m[1].metric("Decode step (predicted)", f"{dec.time(hw) * 1e3:,.2f} ms",
            f"{dec.tokens / dec.time(hw):,.0f} tokens/s", delta_color="off", delta_arrow="off")
m[2].metric("Prefill intensity", f"{pre.intensity:,.0f} FLOP/B", f"{pre.bound(hw)}-bound", delta_color="off", delta_arrow="off")
m[3].metric("Ridge point", f"{hw.ridge:,.0f} FLOP/B", help="peak FLOP/s ÷ bandwidth")


def render_roofline() -> None:
    """The step on the roofline, with how decode and prefill move as batch and prompt grow."""
    traces = []
    sweep_b = [decode_step(replace(cfg, batch=b)) for b in BATCHES]
    traces.append({"name": "decode as batch grows", "x": [s.intensity for s in sweep_b],
                   "y": [s.attainable_flops(hw) for s in sweep_b], "color": CACHED,
                   "labels": [f"decode, batch {b}" for b in BATCHES]})
    ctx_range = [x for x in CONTEXTS if x <= max(arch.max_position_embeddings, 128)]
    sweep_p = [prefill_step(replace(cfg, context=s)) for s in ctx_range]
    traces.append({"name": "prefill as the prompt grows", "x": [s.intensity for s in sweep_p],
                   "y": [s.attainable_flops(hw) for s in sweep_p], "color": NAIVE,
                   "labels": [f"prefill, {s:,} tokens" for s in ctx_range]})
    points = [
        {"name": "decode", "intensity": dec.intensity, "flops_per_s": dec.attainable_flops(hw), "color": CACHED},
        {"name": "prefill", "intensity": pre.intensity, "flops_per_s": pre.attainable_flops(hw), "color": NAIVE},
    ]
    show_chart(figs.roofline(hw.peak_flops, hw.bandwidth, hw.name, points, traces, roofline_takeaway(dec, pre, hw)),
               width="stretch")


def render_bytes() -> None:
    """The step's bytes by kind, and both steps' costs as a table."""
    show_chart(figs.bytes_breakdown([("decode", dec.bytes_weights, dec.bytes_kv, dec.bytes_activations),
                                          ("prefill", pre.bytes_weights, pre.bytes_kv, pre.bytes_activations)],
                                         bytes_takeaway(dec)),
                    width="stretch")
    table = steps_frame([pre, dec], hw)
    show_table(table, hide_index=True, width="stretch")
    st.download_button("Download this table (CSV)", table.to_csv(index=False), "roofline.csv", "text/csv")


def render_batching() -> None:
    """Batch sweeps at a few contexts: intensity and tokens/s."""
    st.subheader('Batching: shared weights, private caches')
    contexts = sorted({512, 8192, 131072, cfg.context})
    rows = batch_sweep(cfg, hw, BATCHES, contexts)
    g = st.columns(2)
    show_chart_in(g[0], figs.sweep_lines(rows, "intensity", "FLOPs per byte (FLOP/B)",
                                         intensity_takeaway(rows, hw.ridge), hw.ridge), width="stretch")
    show_chart_in(g[1], figs.sweep_lines(rows, "tokens_per_s", "decode throughput (tokens/s)",
                                         tokens_takeaway(rows, cfg.context)), width="stretch")
    turns = {S: memory_bound_until(replace(cfg, context=S), hw) for S in contexts}
    st.markdown(turning_points(turns))
    st.caption(batching_caption(cfg, hw))


def render_levers() -> None:
    """What each lever does to the decode step."""
    st.subheader('What helps a decode step')
    show_table(levers_frame(what_helps(cfg, hw)), hide_index=True, width="stretch")


def render_machine() -> None:
    """This machine's bandwidth and matmul rate, and the tiny model's decode step on its roofline."""
    st.toggle("Measure this machine", key="probe", disabled=st.session_state["gpu"] == THIS_MACHINE,
              help="A copy-bandwidth and a matmul test (loads torch, so it is off until asked for).")
    if probe is None and probe_error is None:
        st.info("Switch on **Measure this machine** (or choose it as the hardware) to time its bandwidth and matmuls.",
                icon=":material/play_circle:")
    elif probe is None:
        st.warning(f"This machine could not be measured: {probe_error}. The presets above still work.")
    else:
        k = st.columns(3)
        k[0].metric("Copy bandwidth", f"{probe.bandwidth / 1e9:,.1f} GB/s")
        k[1].metric(f"Matmul ({probe.dtype})", f"{probe.peak_flops / 1e9:,.1f} GFLOP/s")
        k[2].metric("Ridge", f"{probe.peak_flops / probe.bandwidth:,.1f} FLOP/B")
        st.caption(f"Method: {probe.method}. Measured once per server process.")
        if st.button("Measure the tiny model's decode step here"):
            from app.resources import model_or_stop
            from sim.model.probe import measure_tiny_decode

            st.session_state["tiny_point"] = queued(lambda: measure_tiny_decode(model_or_stop("mha"), probe),
                                                    "Timing the tiny model's decode step")
        tp = st.session_state.get("tiny_point")
        if tp is not None:
            mhw = Hardware("this machine", probe.peak_flops, probe.bandwidth)
            show_chart(figs.roofline(mhw.peak_flops, mhw.bandwidth, mhw.name, [
                {"name": "tiny model, decode (measured)", "intensity": tp.intensity, "flops_per_s": tp.achieved_flops,
                 "color": CACHED},
                {"name": "tiny model, decode (roofline prediction)", "intensity": tp.intensity,
                 "flops_per_s": tp.attainable_flops, "color": NAIVE, "symbol": "diamond"}], [], tp.takeaway),
                width="stretch")
            st.markdown(tp.verdict)


def render_claims_tab() -> None:
    """The seeds' roofline figures, recomputed."""
    render_claims(roofline_claims(presets, gpus), "roofline")


slug, tab = TABS.open(url)  # only the open tab's body runs
with tab:
    {"roofline": render_roofline, "bytes": render_bytes, "batching": render_batching, "levers": render_levers,
     "machine": render_machine, "claims": render_claims_tab}[slug]()
url.sync()
