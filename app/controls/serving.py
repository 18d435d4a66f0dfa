"""The Serving page's URL values and widgets, turned into the setups it simulates."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.i18n import lang, t
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
    url.choice("model", "llama-3.1-8b", list(presets), label=t("serving.url.model"))
    url.choice("gpu", "h100-sxm", list(gpus), label=t("serving.url.gpu"))
    url.choice("wdtype", "bf16", list(WEIGHT_DTYPE_BITS), label=t("serving.url.wdtype"))
    url.choice("kvdtype", "fp16", list(KV_DTYPES), label=t("serving.url.kvdtype"))
    url.float("util", 0.9, 0.05, 1.0, label=t("serving.url.util"))
    url.int("kv_limit", 0, 0, MAX_CAPACITY_TOKENS, label=t("serving.url.kv_limit"))
    register_workload(url, MAX_REQUESTS)
    url.choice("arrival", "burst", ARRIVALS, label=t("serving.url.arrival"))
    url.float("rate", 20.0, 0.1, MAX_RATE, label=t("serving.url.rate"))
    url.int("seed", 0, 0, 2**31 - 1, label=t("serving.url.seed"))
    url.int("batch", 256, 1, MAX_BATCH, label=t("serving.url.batch"))
    url.choice("block_size", "16", [str(b) for b in BLOCK_SIZES], label=t("serving.url.block_size"))
    url.float("watermark", 0.01, 0.0, 0.5, label=t("serving.url.watermark"))
    url.int("max_batched", 8192, 64, 1 << 20, label=t("serving.url.max_batched"))
    url.int("gantt_n", 40, 5, 100, label=t("serving.url.gantt_n"))
    url.bool("sweep", False, label=t("serving.url.sweep"))
    url.float("alpha", 0.8, 0.0, 1.0, label=t("serving.url.alpha"))
    url.int("k", 4, 1, sps.SPEC_KS[-1], label=t("serving.url.k"))
    url.choice("c_mode", "roofline", ["roofline", "manual"], label=t("serving.url.c_mode"))
    url.float("c", 0.05, 0.0, 1.0, label=t("serving.url.c"))
    url.choice("spec_target", "llama-3.1-70b", list(presets), label=t("serving.url.spec_target"))
    url.choice("spec_draft", "llama-3.1-8b", list(presets), label=t("serving.url.spec_draft"))
    url.int("mc_passes", 20_000, 100, 200_000, label=t("serving.url.mc_passes"))
    url.int("mc_seed", 0, 0, 2**31 - 1, label=t("serving.url.mc_seed"))
    url.bool("live", True, label=t("serving.url.live"))
    url.choice("live_draft", "first3", sp.available_drafts(), label=t("serving.url.live_draft"))
    url.int("live_k", 4, 1, 8, label=t("serving.url.live_k"))
    url.int("live_new", 64, 8, 256, label=t("serving.url.live_new"))
    url.text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, label=t("serving.url.live_prompt"))


def settings_label() -> str:
    """The settings' fold, named by what they are now: the model, the GPU and the workload's size."""
    ss, presets, gpus = st.session_state, load_presets(), load_gpus()
    return t("serving.c.settings", model=presets[ss["model"]].name, gpu=gpus[ss["gpu"]].name,
             batch=f"{ss['batch']:,}")


def serving_setup() -> cp.ServingSetup:
    """Model and GPU, workload and scheduler; raises ValueError for settings that cannot be simulated."""
    presets, gpus = load_presets(), load_gpus()
    with st.container(border=True):
        st.markdown(t("serving.c.model_gpu"))
        c = st.columns([3, 3, 2, 2, 2, 2])
        c[0].selectbox(t("serving.c.model"), list(presets), key="model", format_func=lambda k: presets[k].name)
        c[1].selectbox(t("serving.c.gpu"), list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
        c[2].selectbox(t("serving.c.weights"), list(WEIGHT_DTYPE_BITS), key="wdtype", format_func=str.upper)
        c[3].selectbox(t("serving.c.kv"), list(KV_DTYPES), key="kvdtype", format_func=lambda k: KV_DTYPES[k].label)
        c[4].slider(t("serving.c.util"), 0.05, 1.0, step=0.01, key="util", help=t("serving.c.util_help"))
        c[5].number_input(t("serving.c.kv_limit"), 0, MAX_CAPACITY_TOKENS, step=4096, key="kv_limit",
                          help=t("serving.c.kv_limit_help"))
        st.markdown(t("serving.c.workload"))
        draw_workload(MAX_REQUESTS, RateInput(t("serving.c.rate"), 0.1, MAX_RATE, 5.0),
                      {"max_tokens": t("serving.c.max_tokens_help")})
        st.markdown(t("serving.c.scheduler"))
        c = st.columns(4)
        c[0].number_input(t("serving.c.batch"), 1, MAX_BATCH, step=16, key="batch", help=t("serving.c.batch_help"))
        c[1].selectbox(t("serving.c.block_size"), [str(b) for b in BLOCK_SIZES], key="block_size")
        c[2].slider(t("serving.c.watermark"), 0.0, 0.5, step=0.01, key="watermark")
        c[3].number_input(t("serving.c.max_batched"), 64, 1 << 20, step=1024, key="max_batched",
                          help=t("serving.c.max_batched_help"))
    ss = st.session_state
    dep = cp.DeploymentConfig(ss["model"], ss["gpu"], ss["wdtype"], ss["kvdtype"], ss["util"], ss["kv_limit"])
    return cp.ServingSetup(workload_config(cp.ARRIVAL_TICK_S), dep, ss["batch"], int(ss["block_size"]),
                           ss["watermark"], ss["max_batched"])


def gantt_rows() -> int:
    st.slider(t("serving.c.gantt_n"), 5, 100, key="gantt_n")
    return st.session_state["gantt_n"]


def sweep_on() -> bool:
    st.toggle(t("serving.c.sweep"), key="sweep")
    return st.session_state["sweep"]


@dataclass(frozen=True)
class SpecChoice:
    setup: sps.SpecSetup
    batch_target: str  # the pair the batch sweep times: the chosen one, or the page's model drafted by an 8B
    batch_draft: str


def speculative() -> SpecChoice:
    presets = load_presets()
    c = st.columns([2, 2, 2, 3, 3])
    c[0].slider(t("serving.c.alpha"), 0.0, 1.0, step=0.05, key="alpha")
    c[1].slider(t("serving.c.k"), 1, sps.SPEC_KS[-1], key="k")
    c[2].radio(t("serving.c.c_mode"), ["roofline", "manual"], key="c_mode",
               format_func=lambda k: t(f"serving.c.c_mode.{k}"))
    ss = st.session_state
    roofline = ss["c_mode"] == "roofline"
    if roofline:
        c[3].selectbox(t("serving.c.target"), list(presets), key="spec_target", format_func=lambda k: presets[k].name)
        c[4].selectbox(t("serving.c.draft"), list(presets), key="spec_draft", format_func=lambda k: presets[k].name)
    else:
        c[3].slider(t("serving.c.c"), 0.0, 1.0, step=0.01, key="c")
    c = st.columns([2, 2, 8])
    c[0].number_input(t("serving.c.mc_passes"), 100, 200_000, step=5000, key="mc_passes")
    c[1].number_input(t("serving.c.mc_seed"), 0, 2**31 - 1, key="mc_seed")
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
    st.toggle(t("serving.c.live"), key="live", help=t("serving.c.live_help"))
    ss = st.session_state
    if not ss["live"]:
        return None
    c = st.columns([5, 3, 1, 1])
    c[0].text_area(t("serving.c.prompt"), key="live_prompt", max_chars=LIVE_MAX_PROMPT, height=90)
    L = lang()  # read while drawing: the label function may run outside the script run
    c[1].selectbox(t("serving.c.live_draft"), sp.available_drafts(), key="live_draft",
                   format_func=lambda key: sp.draft_label(key, L))
    c[2].number_input("k", 1, 8, key="live_k")
    c[3].number_input(t("serving.c.new_tokens"), 8, 256, key="live_new")
    return LiveChoice(ss["live_prompt"], ss["live_new"], ss["live_k"], ss["live_draft"])
