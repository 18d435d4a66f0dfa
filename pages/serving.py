"""Serving: static vs continuous batching on a simulated GPU, and speculative decoding (closed form,
Monte Carlo, roofline-timed, and live on the real tiny model)."""

from pathlib import Path

import streamlit as st

from app.claims import render_claims
from app.figures import serving as figs
from app.text import plain
from app.urlstate import UrlState
from app.work import AUTO_RUN_S, job_seconds, run_job
from app.workload import register_workload
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.workload import ARRIVALS, LENGTH_DISTS, MAX_MODEL_LEN, LengthWorkloadConfig
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS
from sim.cost.presets import load_presets, tiny_model_configs
from sim.model import speculative as sp
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.serving.claims import seed_claims
from sim.serving.schedulers import MAX_BATCH, MAX_REQUESTS

BLOCK_SIZES = (8, 16, 32)
MAX_RATE = 100_000.0
LIVE_MAX_PROMPT = 200
DEFAULT_LIVE_PROMPT = "ROMEO.\nBut soft, what light through yonder window breaks?\n"
CHECKPOINTS = Path(__file__).resolve().parent.parent / "assets" / "models"  # sim.model.transformer's folder (no torch import)
TINY_LAYERS = int(tiny_model_configs()["mha"].get("n_layers", 4))
LIVE_DRAFTS = [f"first{n}" for n in range(1, TINY_LAYERS)] + [
    name for name in tiny_model_configs() if name != "mha" and (CHECKPOINTS / f"{name}.safetensors").is_file()]


def draft_label(key: str) -> str:
    if key.startswith("first"):
        n = int(key.removeprefix("first"))
        return f"the target's first {n} of {TINY_LAYERS} layers (early exit)"
    return f"the separately trained {key.upper()} model"


presets, gpus = load_presets(), load_gpus()
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
url.choice("model", "llama-3.1-8b", list(presets), label="model")
url.choice("gpu", "h100-sxm", list(gpus), label="GPU")
url.choice("wdtype", "bf16", list(WEIGHT_DTYPE_BITS), label="weight dtype")
url.choice("kvdtype", "fp16", list(KV_DTYPES), label="KV dtype")
url.float("util", 0.9, 0.05, 1.0, label="memory utilization")
url.int("kv_limit", 0, 0, MAX_CAPACITY_TOKENS, label="KV slots cap")
register_workload(url, MAX_REQUESTS)
url.choice("arrival", "burst", ARRIVALS, label="arrivals")
url.float("rate", 20.0, 0.1, MAX_RATE, label="arrival rate (requests/s)")
url.int("seed", 0, 0, 2**31 - 1, label="seed")
url.int("batch", 256, 1, MAX_BATCH, label="max batch")
url.choice("block_size", "16", [str(b) for b in BLOCK_SIZES], label="block size")
url.float("watermark", 0.01, 0.0, 0.5, label="watermark")
url.int("max_batched", 8192, 64, 1 << 20, label="max batched tokens")
url.int("gantt_n", 40, 5, 100, label="requests in the timeline")
url.bool("sweep", False, label="batch-size sweep")
url.float("alpha", 0.8, 0.0, 1.0, label="acceptance rate α")
url.int("k", 4, 1, sps.SPEC_KS[-1], label="draft length k")
url.choice("c_mode", "roofline", ["roofline", "manual"], label="where c comes from")
url.float("c", 0.05, 0.0, 1.0, label="draft cost ratio c")
url.choice("spec_target", "llama-3.1-70b", list(presets), label="target model")
url.choice("spec_draft", "llama-3.1-8b", list(presets), label="draft model")
url.int("mc_passes", 20_000, 100, 200_000, label="Monte Carlo passes")
url.int("mc_seed", 0, 0, 2**31 - 1, label="Monte Carlo seed")
url.bool("live", True, label="run on the real model")
url.choice("live_draft", "first3", LIVE_DRAFTS, label="draft for the real model")
url.int("live_k", 4, 1, 8, label="real-model draft length")
url.int("live_new", 64, 8, 256, label="real-model new tokens")
url.text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, label="real-model prompt")
url.show_problems()
ss = st.session_state


@st.cache_data(max_entries=8, show_spinner="Simulating both schedulers…")
def serve(setup: cp.ServingSetup) -> cp.ServingComparison:
    return cp.run_serving(setup)


@st.cache_resource(max_entries=8, show_spinner=False)
def batching_figures(setup: cp.ServingSetup, gantt_n: int) -> dict:
    """Built once per input and only read afterwards (plotly figures take tens of ms to build)."""
    cmp = serve(setup)
    series = cmp.series()
    return {"gantt": figs.gantt(cmp.results, gantt_n), "occupancy": figs.occupancy(series, setup.max_batch),
            "kv": figs.kv_memory(series, cmp.capacity_tokens),
            "latency": figs.latency_percentiles(cmp.to_frame().round(3))}


@st.cache_data(max_entries=16, show_spinner=False)
def spec_curves(spec: sps.SpecSetup) -> sps.SpecCurves:
    return sps.run_speculative(spec)


@st.cache_resource(max_entries=16, show_spinner=False)
def speculative_figure(spec: sps.SpecSetup, run: sp.SpecRun | None, label: str) -> object:
    return figs.speculative(spec_curves(spec), run, label)


def sweep(setup: cp.ServingSetup):
    """Both schedulers at six more batch sizes; about six times the main run, so it may wait for a button."""
    main_s = job_seconds("serving.batching", setup)
    estimate = len(cp.SWEEP_BATCHES) * (main_s if main_s is not None else AUTO_RUN_S)
    return run_job("serving.sweep", setup, estimate, lambda progress: cp.sweep_max_batch(setup, progress=progress),
                   real_model=False, what=f"Simulating both schedulers at {len(cp.SWEEP_BATCHES)} batch sizes")


def live_run(prompt: str, n_new: int, k: int, draft_key: str) -> sp.SpecRun | None:
    from app.resources import model, model_rates
    from sim.model.generate import encode
    from sim.work.run_cost import cached_work

    ids = encode(prompt)
    if len(ids) > LIVE_MAX_PROMPT:
        raise ValueError(f"the prompt is {len(ids):,} bytes of UTF-8; the limit is {LIVE_MAX_PROMPT}")

    def run(progress):
        target = model("mha")
        draft = sp.truncated_draft(target, int(draft_key.removeprefix("first"))) if draft_key.startswith("first") \
            else model(draft_key)
        return sp.speculative_generate(target, draft, ids, n_new, k)

    # the target alone, then rounds of k draft steps and one verify pass: at most (k + 2) steps per token
    estimate = (k + 2) * model_rates("mha", "eager").seconds(cached_work(len(ids), n_new))
    return run_job("serving.live", (tuple(ids), n_new, k, draft_key), estimate, run,
                   what=f"Speculating {n_new} tokens on the real model (k = {k})")


# --- Controls ---------------------------------------------------------------------------------
with st.container(border=True):
    st.markdown("**Model and GPU** — each forward pass is timed by the roofline; the KV budget is what the weights "
                "leave.")
    c = st.columns([3, 3, 2, 2, 2, 2])
    c[0].selectbox("Model", list(presets), key="model", format_func=lambda k: presets[k].name)
    c[1].selectbox("GPU", list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
    c[2].selectbox("Weights", list(WEIGHT_DTYPE_BITS), key="wdtype", format_func=str.upper)
    c[3].selectbox("KV cache", list(KV_DTYPES), key="kvdtype", format_func=lambda k: KV_DTYPES[k].label)
    c[4].slider("Memory utilization", 0.05, 1.0, step=0.01, key="util",
                help="vLLM's --gpu-memory-utilization: the share of GPU memory the server may use.")
    c[5].number_input("Cap KV slots (0 = none)", 0, MAX_CAPACITY_TOKENS, step=4096, key="kv_limit",
                      help="Shrink the KV budget to watch continuous batching run out of blocks and preempt.")
    st.markdown("**Workload** — the paging page's seeded generator: the same requests go to both schedulers.")
    c = st.columns(6)
    c[0].number_input("Requests", 1, MAX_REQUESTS, step=100, key="requests")
    c[1].selectbox("Lengths", LENGTH_DISTS, key="lengths",
                   format_func={"chat": "chat (log-normal)", "uniform": "uniform", "fixed": "all equal"}.get)
    c[2].number_input("Mean prompt", 1, MAX_MODEL_LEN - 1, step=16, key="prompt_mean")
    c[3].number_input("Mean output", 1, MAX_MODEL_LEN - 1, step=16, key="output_mean")
    c[4].slider("Spread (σ)", 0.05, 3.0, step=0.05, key="spread", help="Log-normal sigma: larger, longer tail.")
    c[5].number_input("Seed", 0, 2**31 - 1, key="seed")
    c = st.columns(6)
    c[0].number_input("Max model length", 64, MAX_MODEL_LEN, step=256, key="max_len")
    c[1].number_input("max_tokens", 1, MAX_MODEL_LEN - 1, step=128, key="max_tokens",
                      help="The client's cap on output tokens: what a static batch must reserve per row.")
    c[2].radio("Arrivals", ARRIVALS, key="arrival", horizontal=True,
               format_func={"burst": "all at once", "poisson": "Poisson"}.get)
    c[3].number_input("Rate (requests/s)", 0.1, MAX_RATE, step=5.0, key="rate",
                      disabled=ss["arrival"] != "poisson")
    st.markdown("**Scheduler**")
    c = st.columns(4)
    c[0].number_input("Max batch (static batch size = continuous max_num_seqs)", 1, MAX_BATCH, step=16,
                      key="batch", help="vLLM's default max_num_seqs is 256.")
    c[1].selectbox("Block size", [str(b) for b in BLOCK_SIZES], key="block_size")
    c[2].slider("Watermark (share of blocks kept free at admission)", 0.0, 0.5, step=0.01, key="watermark")
    c[3].number_input("Max prompt tokens per pass", 64, 1 << 20, step=1024, key="max_batched",
                      help="vLLM's max_num_batched_tokens: prompts admitted in one pass share this budget.")

try:
    wcfg = LengthWorkloadConfig(
        num_requests=ss["requests"], length_dist=ss["lengths"], prompt_mean=ss["prompt_mean"],
        output_mean=ss["output_mean"], spread=ss["spread"], max_model_len=ss["max_len"], max_tokens=ss["max_tokens"],
        arrival=ss["arrival"], arrival_rate=ss["rate"] * cp.ARRIVAL_TICK_S, seed=ss["seed"])
    dep = cp.DeploymentConfig(ss["model"], ss["gpu"], ss["wdtype"], ss["kvdtype"], ss["util"], ss["kv_limit"])
    setup = cp.ServingSetup(wcfg, dep, ss["batch"], int(ss["block_size"]), ss["watermark"], ss["max_batched"])
    # bounded in sim/serving (requests, iterations): about a second at the page's limits
    cmp = run_job("serving.batching", setup, 1.0, lambda progress: serve(setup), real_model=False,
                  what="Simulating both schedulers")
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
    st.dataframe(table, hide_index=True, width="stretch")
    st.download_button("Download the metrics (CSV)", table.to_csv(index=False).encode(), file_name="serving.csv",
                       mime="text/csv")
    st.caption("TTFT: arrival → first token. TPOT: (last token − first token) ÷ (output − 1), for outputs of 2+ "
               "tokens. End-to-end: arrival → last token. mean_batch: useful rows per pass, weighted by the pass's "
               "time; useful_rows_pct: their share of the rows computed; peak_kv_pct: KV slots reserved (static) or "
               "allocated in blocks (continuous) at the peak.")

    st.header("Who runs when")
    st.slider("Requests shown", 5, 100, key="gantt_n")
    shown = batching_figures(setup, ss["gantt_n"])
    st.plotly_chart(shown["gantt"], width="stretch")
    st.caption("Grey: waiting in the queue (and, after a preemption, waiting to be recomputed). Dark: computing. "
               "Pale red: the request is finished but its row stays in the static batch until the longest request "
               "of the batch is done. Black tick: the first token.")
    g = st.columns(2)
    g[0].plotly_chart(shown["occupancy"], width="stretch")
    g[1].plotly_chart(shown["kv"], width="stretch")
    st.plotly_chart(shown["latency"], width="stretch")

    st.toggle("Sweep the max batch (runs both schedulers six more times)", key="sweep")
    sw = None
    if ss["sweep"]:
        try:
            sw = sweep(setup)
        except ValueError as exc:
            st.error(f"The sweep cannot run with these settings: {plain(exc)}")
        if sw is not None:
            frame = sw.to_frame()
            st.plotly_chart(figs.batch_sweep(frame, ss["batch"]), width="stretch")
            st.dataframe(frame.round(2), hide_index=True, width="stretch")

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
c = st.columns([2, 2, 2, 3, 3])
c[0].slider("Acceptance rate α", 0.0, 1.0, step=0.05, key="alpha")
c[1].slider("Draft length k", 1, sps.SPEC_KS[-1], key="k")
c[2].radio("Draft cost c", ["roofline", "manual"], key="c_mode",
           format_func={"roofline": "from the roofline", "manual": "set by hand"}.get)
if ss["c_mode"] == "manual":
    c[3].slider("c = draft step ÷ target step", 0.0, 1.0, step=0.01, key="c")
else:
    c[3].selectbox("Target model", list(presets), key="spec_target", format_func=lambda k: presets[k].name)
    c[4].selectbox("Draft model", list(presets), key="spec_draft", format_func=lambda k: presets[k].name)
c = st.columns([2, 2, 8])
c[0].number_input("Monte Carlo passes", 100, 200_000, step=5000, key="mc_passes")
c[1].number_input("Monte Carlo seed", 0, 2**31 - 1, key="mc_seed")

alpha, k = float(ss["alpha"]), int(ss["k"])
spec = sps.SpecSetup(alpha, k, None if ss["c_mode"] == "roofline" else float(ss["c"]), ss["spec_target"],
                 ss["spec_draft"], ss["gpu"], ss["mc_passes"], ss["mc_seed"])
try:
    curves = spec_curves(spec)
except ValueError as exc:
    st.error(f"Cannot compute the speculative curves: {plain(exc)}")
    url.sync()
    st.stop()
mc, c_ratio, best_k = curves.chosen_monte_carlo, curves.c, curves.best_k(alpha)
m = st.columns(4)
m[0].metric("Tokens per target pass (formula)", f"{mc.expected:.3f}")
m[1].metric("Monte Carlo", f"{mc.mean:.3f} ± {2 * mc.stderr:.3f}",
            help=f"{ss['mc_passes']:,} simulated passes, every draft token accepted with probability α; ±2 standard "
                 "errors.")
m[2].metric("Speedup", f"{sps.speculative_speedup(alpha, k, c_ratio):.2f}×", f"c = {c_ratio:.3f}", delta_color="off",
            delta_arrow="off")
m[3].metric("Best k here", f"{best_k}", f"{sps.speculative_speedup(alpha, best_k, c_ratio):.2f}×", delta_color="off",
            delta_arrow="off")
if curves.timing is not None:
    st.caption(curves.timing.caption(k))

# --- the real model ---------------------------------------------------------------------------
run = None
st.subheader("On the real tiny model")
st.toggle("Speculate on the real model", key="live",
          help="Greedy speculative decoding with the bundled MHA model as the target; the output is compared token "
               "by token with the target decoding alone.")
if ss["live"]:
    c = st.columns([5, 3, 1, 1])
    c[0].text_area("Prompt", key="live_prompt", max_chars=LIVE_MAX_PROMPT, height=90)
    c[1].selectbox("Draft", LIVE_DRAFTS, key="live_draft", format_func=draft_label)
    c[2].number_input("k", 1, 8, key="live_k")
    c[3].number_input("New tokens", 8, 256, key="live_new")
    from sim.model.errors import CheckpointError

    try:
        run = live_run(ss["live_prompt"], ss["live_new"], ss["live_k"], ss["live_draft"])
    except CheckpointError as exc:
        st.warning(f"The tiny model is not available: {plain(exc)}")
    except ValueError as exc:
        st.error(f"Cannot speculate: {plain(exc)}")

run_label = f"real tiny model, {ss['live_draft']} draft (measured)"
st.plotly_chart(speculative_figure(spec, run, run_label), width="stretch")
st.caption("Diamonds: the best k for each α. Crosses: the Monte Carlo means at the chosen α, which sit on the formula. "
           + ("Dotted: the chosen α with the verify pass timed by the roofline instead of assumed to cost one step. "
              if curves.timing is not None else "")
           + ("Star: the real model's measured tokens per pass and wall-time speedup." if run is not None else ""))
if run is not None:
    from sim.model.generate import decode

    c = st.columns(5)
    c[0].metric("Same tokens as target", "yes" if run.identical else "NO",
                help="Greedy speculative output compared token by token with the target's own greedy decoding.")
    c[1].metric("Measured acceptance rate", f"{run.acceptance_rate:.2f}",
                help="Drafts accepted ÷ drafts the target judged (a draft after a rejection is never judged).")
    c[2].metric("Tokens per target pass", f"{run.tokens_per_pass:.2f}",
                f"formula at that α: {sps.expected_tokens_per_pass(run.acceptance_rate, run.k):.2f}",
                delta_color="off", delta_arrow="off")
    c[3].metric("Measured c", f"{run.c:.2f}", help="Median draft forward ÷ median target decode step, wall time.")
    c[4].metric("Wall-time speedup", f"{run.speedup:.2f}×", f"steps predict {run.predicted_speedup:.2f}×",
                delta_color="off", delta_arrow="off",
                help="Prediction: tokens per pass × target step ÷ (k draft steps + one verify pass), all measured. "
                     "The rest of the gap is the loop's own Python work between passes.")
    st.markdown(sps.real_run_summary(run, TINY_LAYERS))
    with st.expander("The generated text"):
        st.code(decode(run.prompt_ids) + decode(run.new_ids), language=None)

# --- speculation in a busy server -------------------------------------------------------------
st.subheader("Speculation inside a big batch")
sp_target = ss["spec_target"] if ss["c_mode"] == "roofline" else ss["model"]
sp_draft = ss["spec_draft"] if ss["c_mode"] == "roofline" else "llama-3.1-8b"
try:
    points = sps.spec_batch_sweep(sp_target, sp_draft, ss["gpu"], alpha, k)
except ValueError as exc:
    st.error(f"Cannot sweep the batch: {plain(exc)}")
    points = []
if points:
    label = f"{presets[sp_target].name} drafted by {presets[sp_draft].name}"
    st.plotly_chart(figs.spec_vs_batch(points, alpha, k, label), width="stretch")
    st.caption(sps.batch_sweep_caption(points))

st.header("Seed 002's numbers, checked")
render_claims(seed_claims(cmp, curves.timing, run), "serving")
url.sync()
