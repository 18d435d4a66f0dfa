import os
import time
from functools import partial

import pandas as pd
import streamlit as st

from app.claims import render_claims
from app.figures import kernels as figs
from app.text import plain
from app.urlstate import UrlState
from app.work import server
from sim.attention import online_softmax as FL
from sim.attention import readouts as R
from sim.attention import shapes as S
from sim.attention.implementations import impl_statuses
from sim.attention.limits import check_shape, device_limits, eager_peak_estimate, sweep_lengths
from sim.attention.measure import STATS, matmul_rate, matmul_size, run_alone
from sim.attention.seed_claims import kernel_claims
from sim.attention.timing import sweep_attention, time_attention
from sim.model.device import pick_device, pick_num_threads

FLEX_TIMEOUT_S = 120
SHAPE_BUDGET_S = 0.25  # measured seconds per kernel (at least 3 timed calls)
SWEEP_BUDGET_S = 0.15
TRAFFIC_TILES = (16, 32, 64, 128, 256)
locked = partial(run_alone, server().queue)  # timings take their turn in the server's one queue, alone
limits_here = st.cache_resource(show_spinner=False)(device_limits)


@st.cache_resource(show_spinner="Probing the attention backends…")
def statuses(device: str, dtype: str):
    return locked(impl_statuses, device, dtype)


@st.cache_data(max_entries=64, show_spinner=False)
def timed(shape: S.AttentionShape, device: str, threads: int | None, budget_s: float, trial: int):
    result = locked(time_attention, shape, device, limits_here(device), budget_s=budget_s, num_threads=threads)
    return result, time.strftime("%H:%M:%S")


@st.cache_data(max_entries=16, show_spinner=False)
def ceiling_flops(device: str, dtype: str, threads: int | None) -> float:
    return locked(matmul_rate, device, dtype, num_threads=threads)


def measure_again() -> None:
    st.session_state["trial"] = st.session_state.get("trial", 0) + 1
    st.session_state["ak_again"] = True


def load_preset() -> None:
    if (p := S.SHAPE_PRESETS.get(st.session_state.get("preset"))) is not None:
        st.session_state.update(b=p.batch, h=p.heads, n=p.seq_len, d=p.head_dim, causal=p.causal, kind=p.kind)
    st.session_state["preset"] = None


def snap(key: str, allowed) -> None:
    st.session_state[key] = S.nearest(st.session_state[key], allowed)


def metrics(items: list[dict]) -> None:
    for c, m in zip(st.columns(len(items)), items, strict=True):
        c.metric(**m, delta_color="off", delta_arrow="off")


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
limits = limits_here(dev)
dtypes = S.dtypes_for(device.type)
num_cpus = os.cpu_count() or 1

url = UrlState("attention_kernels")
url.int("b", 1, 1, S.MAX_BATCH, label="batch")
url.int("h", 4, 1, S.MAX_HEADS, label="heads")
url.int("n", 1024, 1, S.MAX_SEQ_LEN, label="sequence length")
url.int("d", 32, S.HEAD_DIMS[0], S.HEAD_DIMS[-1], label="head dim")
url.bool("causal", True, label="causal")
url.choice("kind", "prefill", list(S.KINDS), label="shape")
url.choice("dtype", dtypes[0], list(dtypes), label="dtype")
url.int("threads", min(pick_num_threads(), num_cpus), 1, num_cpus, label="CPU threads")
url.bool("flex", False, label="FlexAttention")
url.int("sweep_max", 4096, 128, S.MAX_SEQ_LEN, label="largest N of the sweep")
url.int("sm_keys", 10, 1, FL.MAX_DEMO_KEYS, label="keys")
url.int("sm_tile", 4, 1, FL.MAX_DEMO_KEYS, label="tile size")
url.int("sm_rows", 1, 1, FL.MAX_DEMO_QUERIES, label="query rows")
url.int("sm_row", 0, 0, FL.MAX_DEMO_QUERIES - 1, label="row shown")
url.bool("sm_causal", False, label="causal (stepper)")
url.int("sm_pad", 0, 0, FL.MAX_DEMO_KEYS - 1, label="masked keys")
url.float("sm_scale", 1.0, 0.01, 1000.0, label="score scale")
url.int("sm_seed", 0, 0, 9999, label="seed")
url.choice("sm_dtype", "float32", ["float32", "float64"], label="stepper dtype")
url.int("sm_step", 1, 1, FL.MAX_DEMO_KEYS, label="step")
url.int("tile", 128, TRAFFIC_TILES[0], TRAFFIC_TILES[-1], label="traffic tile")
url.choice("stat", "median", list(STATS), label="sweep statistic")
url.show_problems()
snap("d", S.HEAD_DIMS)
snap("tile", TRAFFIC_TILES)

# --- 1. what runs here --------------------------------------------------------------------------
st.header("Which kernels run on this device")
st.dataframe(pd.DataFrame(R.status_rows(statuses(dev, st.session_state["dtype"]))), hide_index=True, width="stretch",
             column_config={"Implementation": st.column_config.TextColumn(width="medium"),
                            "Runs here": st.column_config.TextColumn(width="small"),
                            "Why not": st.column_config.TextColumn(width="large")})
st.caption(f"Device `{dev}`; each SDPA backend was forced with `torch.nn.attention.sdpa_kernel` on a tiny causal "
           "input (`sim/model/device.py`). FlexAttention is compiled with `torch.compile` in a separate process that is "
           f"stopped after {FLEX_TIMEOUT_S} s, so a slow compile can never hang this page.")

# --- 2. one shape ----------------------------------------------------------------------------------
st.header("Time one shape")
st.selectbox("Load a preset", list(S.SHAPE_PRESETS), index=None, key="preset", on_change=load_preset,
             format_func=S.PRESET_LABELS.get, placeholder="Tiny model, Llama-like head, sweep base…")
with st.form("time_form"):
    c = st.columns(4)
    c[0].number_input("Batch B", 1, S.MAX_BATCH, key="b")
    c[1].number_input("Heads H", 1, S.MAX_HEADS, key="h")
    c[2].number_input("Sequence length N", 1, S.MAX_SEQ_LEN, key="n", help="Keys; and queries too when prefill-shaped.")
    c[3].select_slider("Head dim d", list(S.HEAD_DIMS), key="d")
    c = st.columns(4)
    c[0].radio("Shape", list(S.KINDS), key="kind", horizontal=True,
               format_func={"prefill": "prefill (N queries)", "decode": "decode (1 query)"}.get)
    c[1].toggle("Causal mask", key="causal", help="Prefill only: a decode query is the newest token and sees every key.")
    c[2].selectbox("dtype", list(dtypes), key="dtype")
    c[3].number_input("CPU threads", 1, num_cpus, key="threads", disabled=not cpu,
                      help="torch intra-op threads during the timing (restored after).")
    compile_note = ("the first compile of a shape took about 25 s on this lab's 2-core CPU, about 10 s once torch's "
                    "compile cache is warm" if cpu else "its first compile takes tens of seconds")
    st.checkbox(f"Include FlexAttention (compiled in a separate process: {compile_note}; stopped after "
                f"{FLEX_TIMEOUT_S} s)", key="flex")
    submitted = st.form_submit_button("Time these kernels", type="primary")
threads = st.session_state["threads"] if cpu else None
try:
    shape = S.AttentionShape(batch=st.session_state["b"], heads=st.session_state["h"], seq_len=st.session_state["n"],
                             head_dim=st.session_state["d"], causal=st.session_state["causal"],
                             kind=st.session_state["kind"], dtype=st.session_state["dtype"])
    check_shape(shape, limits)
except ValueError as exc:
    st.error(plain(exc))
    shape = None
if shape is not None:
    metrics(R.shape_metrics(shape, eager_peak_estimate(shape)))
st.caption(limits.caps_sentence())

if (submitted or st.session_state.pop("ak_again", False)) and shape is not None:
    with st.spinner(f"Timing {shape.label()}…"):
        try:
            if st.session_state["flex"]:  # a compile of up to FLEX_TIMEOUT_S: live progress, and Stop kills it
                status, stop = st.empty(), st.empty()
                stop.button("Stop", key="_work.stop.flex", help="Kills the FlexAttention compile.")
                result = locked(time_attention, shape, dev, limits, S.IMPLS, SHAPE_BUDGET_S, FLEX_TIMEOUT_S,
                                threads, lambda what: status.caption(f"Timing {what}…"))
                status.empty()
                stop.empty()
                st.session_state["ak_timing"] = (result, time.strftime("%H:%M:%S"))
            else:
                st.session_state["ak_timing"] = timed(shape, dev, threads, SHAPE_BUDGET_S, st.session_state.get("trial", 0))
        except (ValueError, TimeoutError, RuntimeError) as exc:
            st.error(plain(exc))

if "ak_timing" in st.session_state:
    result, measured_at = st.session_state["ak_timing"]
    if shape is not None and result.shape != shape:
        st.info(f"The numbers below are for {result.shape.label()}. Press **Time these kernels** to measure the "
                "shape in the form.", icon=":material/info:")
    st.markdown(f"**{result.shape.label()}** — measured at {measured_at} on `{result.device}` with "
                f"{result.num_threads} thread(s). Same shape again gives the cached numbers; "
                "**Measure again** takes fresh ones.")
    metrics(R.timing_metrics(result))
    st.dataframe(pd.DataFrame(R.timing_rows(result)), hide_index=True, width="stretch")
    df = pd.DataFrame(result.to_records())
    st.plotly_chart(figs.kernel_bars(df, result.shape.score_bytes), width="stretch")
    if (note := R.flex_note(result)) is not None:
        (st.info if note[0] else st.warning)(note[1], icon=":material/timer:" if note[0] else ":material/timer_off:")
    st.caption(f"Peak memory: {result.memory_method}. Timing: `torch.utils.benchmark` blocks after a warm-up call; "
               "the spread is the 25th–75th percentile of the blocks. Other work on this machine adds noise; on a "
               "busy 2-core CPU, fewer threads can be faster. TFLOP/s counts only the two matmuls.")
    c = st.columns([1, 1, 3])
    c[0].download_button("Download the timing table (CSV)", df.to_csv(index=False), "attention_kernels_timing.csv",
                         "text/csv")
    c[1].button("Measure again", on_click=measure_again, help="Fresh numbers for the shape in the form.")
else:
    st.info("Press **Time these kernels** to run them live: a second or two for the defaults on an idle 2-core "
            "CPU, more when the machine is busy.", icon=":material/play_circle:")

# --- 3. sweep over N --------------------------------------------------------------------------------
st.header("Sweep over N")
st.markdown("The same B, H, d, mask and dtype as above, N doubling from 128 — eager, MATH and FLASH (and the "
            "other SDPA backends where they run). FlexAttention is left out: every N would compile again.")
lengths = sweep_lengths(shape, limits) if shape is not None else []
if shape is None:
    st.warning("Fix the shape above first.")
elif not lengths:
    st.warning(f"At B·H = {shape.batch * shape.heads} not even N = 128 fits this device's cap; lower B or H.")
else:
    snap("sweep_max", lengths)
    with st.form("sweep_form"):
        if len(lengths) > 1:
            st.select_slider("Largest N", lengths, key="sweep_max", format_func=lambda v: f"{v:,}")
        else:
            st.caption(f"Only N = {lengths[0]:,} fits at this B·H.")
        sweep_go = st.form_submit_button("Run the sweep", type="primary")
    if sweep_go:
        ns = [n for n in lengths if n <= st.session_state["sweep_max"]]
        bar = st.progress(0.0, text="Measuring the matmul ceiling…")
        try:
            trial = st.session_state.get("trial", 0)
            st.session_state["ak_sweep"] = sweep_attention(
                shape, ns, lambda s: timed(s, dev, threads, SWEEP_BUDGET_S, trial)[0],
                ceiling_flops(dev, shape.dtype, threads),
                lambda i, n: bar.progress(i / len(ns), text=f"N = {n:,} ({i + 1} of {len(ns)})"))
        except (ValueError, TimeoutError, RuntimeError) as exc:
            st.error(plain(exc))
        bar.empty()
    if "ak_sweep" in st.session_state:
        sweep = st.session_state["ak_sweep"]
        sdf = sweep.to_frame()
        st.markdown(f"**{sweep.label}** — N = {sweep.lengths[0]:,} … {sweep.lengths[-1]:,}")
        st.radio("Curves and ratios from", list(STATS), key="stat", horizontal=True,
                 help="The median of the timed blocks is the honest typical cost; the fastest block is the cost with "
                      "the least interference from other work on the machine.")
        col = STATS[st.session_state["stat"]]
        metrics(R.sweep_metrics(sweep, st.session_state["stat"], matmul_size(device.type)))
        g = st.columns(2)
        g[0].plotly_chart(figs.sweep_time(sdf, col), width="stretch")
        g[1].plotly_chart(figs.sweep_memory(sdf), width="stretch")
        g[0].plotly_chart(figs.sweep_speedup(sdf, col), width="stretch")
        g[1].plotly_chart(figs.sweep_tflops(sdf, col, sweep.ceiling_flops / 1e12,
                                            f"{matmul_size(device.type):,}³ matmul here"), width="stretch")
        st.caption("Eager and MATH grow like N² in time *and* memory; FLASH grows like N² in time but only like N in "
                   "memory (its output plus a working buffer per thread, so its peak — and the memory ratio — also "
                   "depends on the thread count). Timings here share the CPU with whatever else runs on it, which is "
                   "why small N can look erratic.")
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
keys_now = st.session_state["sm_keys"]
st.session_state.update(sm_tile=min(st.session_state["sm_tile"], keys_now), sm_rows=min(st.session_state["sm_rows"], keys_now))
c = st.columns(5)
c[0].number_input("Keys", 1, FL.MAX_DEMO_KEYS, key="sm_keys")
c[1].number_input("Tile size", 1, keys_now, key="sm_tile", help="The last tile is shorter when it does not divide.")
c[2].number_input("Query rows in the block", 1, min(FL.MAX_DEMO_QUERIES, keys_now), key="sm_rows")
c[3].toggle("Causal", key="sm_causal", help="The rows are the last positions; each sees keys up to its own.")
c[4].selectbox("dtype", ["float32", "float64"], key="sm_dtype")
rows_now = st.session_state["sm_rows"]
max_pad = FL.max_masked_prefix(keys_now, rows_now, st.session_state["sm_causal"])
st.session_state.update(sm_pad=min(st.session_state["sm_pad"], max_pad), sm_row=min(st.session_state["sm_row"], rows_now - 1))
c = st.columns(4)
c[0].number_input("Masked keys at the start (padding)", 0, max_pad, key="sm_pad",
                  help="Hidden from every row. A whole tile of them is a fully masked tile.")
c[1].number_input("Score scale", 0.01, 1000.0, key="sm_scale", step=10.0, format="%.2f",
                  help="Multiplies every score: 100 or 1000 gives scores in the hundreds or thousands. e^s would "
                       "overflow float32 past s ≈ 88; the running max keeps every exponent ≤ 0.")
c[2].number_input("Seed", 0, 9999, key="sm_seed")
c[3].number_input("Query row shown", 0, rows_now - 1, key="sm_row")
try:
    demo = FL.SoftmaxDemo(num_keys=keys_now, tile=st.session_state["sm_tile"], num_queries=rows_now,
                         causal=st.session_state["sm_causal"], masked_prefix=st.session_state["sm_pad"],
                         score_scale=float(st.session_state["sm_scale"]), seed=st.session_state["sm_seed"],
                         dtype=st.session_state["sm_dtype"])
except ValueError as exc:
    st.error(plain(exc))
    demo = None
if demo is not None:
    trace = FL.run_softmax_demo(demo)
    st.session_state["sm_step"] = max(1, min(st.session_state["sm_step"], len(trace.steps)))
    if len(trace.steps) > 1:
        st.slider("Step: tiles processed", 1, len(trace.steps), key="sm_step")
    else:
        st.caption("One tile holds every key: a single step.")
    step, row = st.session_state["sm_step"], st.session_state["sm_row"]
    metrics(R.tile_metrics(trace, step, row))
    st.plotly_chart(figs.softmax_step(trace, row, step), width="stretch")
    st.markdown(R.tile_updates(trace, step, row))
    st.plotly_chart(figs.softmax_trace_table(trace, row, step), width="stretch")
    st.caption("rescale α = e^(m before − m after): 1 when the tile did not raise the max, below 1 when it did, 0 "
               "while nothing has been seen. Orange: this step; blue: steps done. — means undefined (l is still 0).")
    st.markdown(R.final_outputs(trace, row))
    metrics(R.parity_metrics(trace, demo))
    st.caption(
        "Exact, not approximate — but not bit-for-bit. Both compute Σ e^(s−m)·v / Σ e^(s−m); the tiled one adds "
        "the terms tile by tile and rounds once more at every rescale. Floating-point addition is not associative "
        "((a+b)+c and a+(b+c) can differ in the last bit), so the two agree to about float32's 1e-7 (1e-16 in "
        "float64), and each is as close to the float64 truth as the other. The seed's 'bitwise identical' "
        "overstates it; its 'exact' is right."
    )
    if (warning := R.masked_tile_warning(demo, row)) is not None:
        st.warning(warning, icon=":material/warning:")

# --- 5. HBM traffic ----------------------------------------------------------------------------------
st.header("Bytes moved: standard vs tiled")
if shape is None:
    st.warning("Fix the shape above first.")
else:
    st.select_slider("Tile size (rows of Q, and of K/V, per tile)", list(TRAFFIC_TILES), key="tile")
    traffic = R.shape_traffic(shape, st.session_state["tile"])
    metrics(R.traffic_metrics(traffic))
    st.plotly_chart(figs.traffic_bars(traffic, shape.label()), width="stretch")
    st.caption(R.traffic_caption(shape, st.session_state["tile"]))
    got = st.session_state.get("ak_timing")
    if got and got[0].shape == shape and (rows := R.memory_model_rows(got[0], traffic)):
        st.markdown("**Next to the measured memory** (the timing above, same shape):")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption("Eager holds several N² tensors at once (scores, their scaled and masked copies, "
                   "probabilities), so its measured peak is a small multiple of one matrix. FLASH holds the "
                   "output plus working buffers per thread: it does not grow with N².")

# --- 6. the seed's numbers ---------------------------------------------------------------------------
st.header("The seed's numbers, in context")
render_claims(kernel_claims(st.session_state.get("ak_sweep"), st.session_state["stat"]), "attention_kernels")
url.sync()
