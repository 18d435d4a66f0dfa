"""The Serving page's URL values and widgets, turned into the setups it simulates."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.urlstate import UrlState
from app.workload import RateInput, draw_workload, register_workload, workload_config
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.workload import ARRIVALS
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS
from sim.cost.presets import load_presets
from sim.model import speculative as sp
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.serving.schedulers import MAX_BATCH, MAX_REQUESTS

BLOCK_SIZES = (8, 16, 32)
MAX_RATE = 100_000.0
LIVE_MAX_PROMPT = 200
DEFAULT_LIVE_PROMPT = "ROMEO.\nBut soft, what light through yonder window breaks?\n"
BATCH_SWEEP_DRAFT = "llama-3.1-8b"  # drafts the page's model in the batch sweep when c is set by hand


def register(url: UrlState) -> None:
    """The batching and speculative values (the page calls url.show_problems once every tab's are registered)."""
    presets, gpus = load_presets(), load_gpus()
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
    url.choice("live_draft", "first3", sp.available_drafts(), label="draft for the real model")
    url.int("live_k", 4, 1, 8, label="real-model draft length")
    url.int("live_new", 64, 8, 256, label="real-model new tokens")
    url.text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, label="real-model prompt")


def serving_setup() -> cp.ServingSetup:
    """Model and GPU, workload and scheduler; raises ValueError for settings that cannot be simulated."""
    presets, gpus = load_presets(), load_gpus()
    with st.container(border=True):
        st.markdown("**Model and GPU** — each forward pass is timed by the roofline; the KV budget is what the "
                    "weights leave.")
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
        draw_workload(MAX_REQUESTS, RateInput("Rate (requests/s)", 0.1, MAX_RATE, 5.0),
                      {"max_tokens": "The client's cap on output tokens: what a static batch must reserve per row."})
        st.markdown("**Scheduler**")
        c = st.columns(4)
        c[0].number_input("Max batch (static batch size = continuous max_num_seqs)", 1, MAX_BATCH, step=16,
                          key="batch", help="vLLM's default max_num_seqs is 256.")
        c[1].selectbox("Block size", [str(b) for b in BLOCK_SIZES], key="block_size")
        c[2].slider("Watermark (share of blocks kept free at admission)", 0.0, 0.5, step=0.01, key="watermark")
        c[3].number_input("Max prompt tokens per pass", 64, 1 << 20, step=1024, key="max_batched",
                          help="vLLM's max_num_batched_tokens: prompts admitted in one pass share this budget.")
    ss = st.session_state
    dep = cp.DeploymentConfig(ss["model"], ss["gpu"], ss["wdtype"], ss["kvdtype"], ss["util"], ss["kv_limit"])
    return cp.ServingSetup(workload_config(cp.ARRIVAL_TICK_S), dep, ss["batch"], int(ss["block_size"]),
                           ss["watermark"], ss["max_batched"])


def gantt_rows() -> int:
    st.slider("Requests shown", 5, 100, key="gantt_n")
    return st.session_state["gantt_n"]


def sweep_on() -> bool:
    st.toggle("Sweep the max batch (runs both schedulers six more times)", key="sweep")
    return st.session_state["sweep"]


@dataclass(frozen=True)
class SpecChoice:
    setup: sps.SpecSetup
    batch_target: str  # the pair the batch sweep times: the chosen one, or the page's model drafted by an 8B
    batch_draft: str


def speculative() -> SpecChoice:
    presets = load_presets()
    c = st.columns([2, 2, 2, 3, 3])
    c[0].slider("Acceptance rate α", 0.0, 1.0, step=0.05, key="alpha")
    c[1].slider("Draft length k", 1, sps.SPEC_KS[-1], key="k")
    c[2].radio("Draft cost c", ["roofline", "manual"], key="c_mode",
               format_func={"roofline": "from the roofline", "manual": "set by hand"}.get)
    ss = st.session_state
    roofline = ss["c_mode"] == "roofline"
    if roofline:
        c[3].selectbox("Target model", list(presets), key="spec_target", format_func=lambda k: presets[k].name)
        c[4].selectbox("Draft model", list(presets), key="spec_draft", format_func=lambda k: presets[k].name)
    else:
        c[3].slider("c = draft step ÷ target step", 0.0, 1.0, step=0.01, key="c")
    c = st.columns([2, 2, 8])
    c[0].number_input("Monte Carlo passes", 100, 200_000, step=5000, key="mc_passes")
    c[1].number_input("Monte Carlo seed", 0, 2**31 - 1, key="mc_seed")
    setup = sps.SpecSetup(float(ss["alpha"]), int(ss["k"]), None if roofline else float(ss["c"]), ss["spec_target"],
                          ss["spec_draft"], ss["gpu"], ss["mc_passes"], ss["mc_seed"])
    if roofline:
        return SpecChoice(setup, ss["spec_target"], ss["spec_draft"])
    return SpecChoice(setup, ss["model"], BATCH_SWEEP_DRAFT)


@dataclass(frozen=True)
class LiveChoice:
    prompt: str
    max_new_tokens: int
    k: int
    draft: str


def live() -> LiveChoice | None:
    """The real-model run's settings, or None while it is switched off."""
    st.toggle("Speculate on the real model", key="live",
              help="Greedy speculative decoding with the bundled MHA model as the target; the output is compared token "
                   "by token with the target decoding alone.")
    ss = st.session_state
    if not ss["live"]:
        return None
    c = st.columns([5, 3, 1, 1])
    c[0].text_area("Prompt", key="live_prompt", max_chars=LIVE_MAX_PROMPT, height=90)
    c[1].selectbox("Draft", sp.available_drafts(), key="live_draft", format_func=sp.draft_label)
    c[2].number_input("k", 1, 8, key="live_k")
    c[3].number_input("New tokens", 8, 256, key="live_new")
    return LiveChoice(ss["live_prompt"], ss["live_new"], ss["live_k"], ss["live_draft"])
