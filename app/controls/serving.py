"""The Serving page's URL values and widgets, turned into the setups it simulates."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.controls.declared import Choice, Number, Slider, Text, Toggle
from app.i18n import lang, t
from app.urlstate import UrlState
from app.workload import draw_workload, register_workload, workload_config
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.workload import ARRIVALS
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS
from sim.cost.presets import load_presets
from sim.model import speculative as sp
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.serving.schedulers import MAX_BATCH, MAX_REQUESTS
from sim.words.spec_run import draft_label

BLOCK_SIZES = (8, 16, 32)
MAX_RATE = 100_000.0
LIVE_MAX_PROMPT = 200
DEFAULT_LIVE_PROMPT = "ROMEO.\nBut soft, what light through yonder window breaks?\n"
BATCH_SWEEP_DRAFT = "llama-3.1-8b"  # drafts the page's model in the batch sweep when c is set by hand


MAX_SEED = 2**31 - 1
MODEL = Choice("model", "llama-3.1-8b", lambda: list(load_presets()), label="serving.c.model",
               url_label="serving.url.model", other_labels=("serving.e.model",))  # the engine tabs' row
GPU = Choice("gpu", "h100-sxm", lambda: list(load_gpus()), label="serving.c.gpu", url_label="serving.url.gpu",
             other_labels=("serving.e.gpu",))
WDTYPE = Choice("wdtype", "bf16", tuple(WEIGHT_DTYPE_BITS), label="serving.c.weights", url_label="serving.url.wdtype")
KVDTYPE = Choice("kvdtype", "fp16", tuple(KV_DTYPES), label="serving.c.kv", url_label="serving.url.kvdtype")
UTIL = Slider("util", 0.9, 0.05, 1.0, step=0.01, label="serving.c.util", url_label="serving.url.util")
KV_LIMIT = Number("kv_limit", 0, 0, MAX_CAPACITY_TOKENS, step=4096, label="serving.c.kv_limit",
                  url_label="serving.url.kv_limit")
ARRIVAL = Choice("arrival", "burst", ARRIVALS, widget="radio", label="wl.arrivals", url_label="serving.url.arrival")
RATE = Number("rate", 20.0, 0.1, MAX_RATE, step=5.0, label="serving.c.rate", url_label="serving.url.rate")
SEED = Number("seed", 0, 0, MAX_SEED, label="wl.seed", url_label="serving.url.seed")
BATCH = Number("batch", 256, 1, MAX_BATCH, step=16, label="serving.c.batch", url_label="serving.url.batch")
BLOCK_SIZE = Choice("block_size", "16", tuple(str(b) for b in BLOCK_SIZES), label="serving.c.block_size",
                    url_label="serving.url.block_size")
WATERMARK = Slider("watermark", 0.01, 0.0, 0.5, step=0.01, label="serving.c.watermark",
                   url_label="serving.url.watermark")
MAX_BATCHED = Number("max_batched", 8192, 64, 1 << 20, step=1024, label="serving.c.max_batched",
                     url_label="serving.url.max_batched")
GANTT_N = Slider("gantt_n", 40, 5, 100, label="serving.c.gantt_n", url_label="serving.url.gantt_n")
SWEEP = Toggle("sweep", False, label="serving.c.sweep", url_label="serving.url.sweep")
ALPHA = Slider("alpha", 0.8, 0.0, 1.0, step=0.05, label="serving.c.alpha", url_label="serving.url.alpha")
K = Slider("k", 4, 1, sps.SPEC_KS[-1], label="serving.c.k", url_label="serving.url.k")
C_MODE = Choice("c_mode", "roofline", ("roofline", "manual"), widget="radio", label="serving.c.c_mode",
                url_label="serving.url.c_mode")
C = Slider("c", 0.05, 0.0, 1.0, step=0.01, label="serving.c.c", url_label="serving.url.c")
SPEC_TARGET = Choice("spec_target", "llama-3.1-70b", lambda: list(load_presets()), label="serving.c.target",
                     url_label="serving.url.spec_target")
SPEC_DRAFT = Choice("spec_draft", "llama-3.1-8b", lambda: list(load_presets()), label="serving.c.draft",
                    url_label="serving.url.spec_draft")
MC_PASSES = Number("mc_passes", 20_000, 100, 200_000, step=5000, label="serving.c.mc_passes",
                   url_label="serving.url.mc_passes")
MC_SEED = Number("mc_seed", 0, 0, MAX_SEED, label="serving.c.mc_seed", url_label="serving.url.mc_seed")
LIVE = Toggle("live", True, label="serving.c.live", url_label="serving.url.live")
LIVE_DRAFT = Choice("live_draft", "first3", sp.available_drafts, label="serving.c.live_draft",
                    url_label="serving.url.live_draft")
LIVE_K = Number("live_k", 4, 1, 8, label="k", verbatim=True, url_label="serving.url.live_k")
LIVE_NEW = Number("live_new", 64, 8, 256, label="serving.c.new_tokens", url_label="serving.url.live_new")
LIVE_PROMPT = Text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, max_chars=LIVE_MAX_PROMPT,
                   widget="text_area", label="serving.c.prompt", url_label="serving.url.live_prompt")
BEFORE_WORKLOAD = (MODEL, GPU, WDTYPE, KVDTYPE, UTIL, KV_LIMIT)
AFTER_WORKLOAD = (ARRIVAL, RATE, SEED, BATCH, BLOCK_SIZE, WATERMARK, MAX_BATCHED, GANTT_N, SWEEP, ALPHA, K, C_MODE, C,
                  SPEC_TARGET, SPEC_DRAFT, MC_PASSES, MC_SEED, LIVE, LIVE_DRAFT, LIVE_K, LIVE_NEW, LIVE_PROMPT)


def register(url: UrlState) -> None:
    """The batching and speculative values (the page calls url.show_problems once every tab's are registered)."""
    url.add(*BEFORE_WORKLOAD)
    register_workload(url, MAX_REQUESTS)
    url.add(*AFTER_WORKLOAD)


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
        MODEL.draw(c[0], format_func=lambda k: presets[k].name)
        GPU.draw(c[1], format_func=lambda k: gpus[k].name)
        WDTYPE.draw(c[2], format_func=str.upper)
        KVDTYPE.draw(c[3], format_func=lambda k: KV_DTYPES[k].label)
        UTIL.draw(c[4], help=t("serving.c.util_help"))
        KV_LIMIT.draw(c[5], help=t("serving.c.kv_limit_help"))
        st.markdown(t("serving.c.workload"))
        draw_workload(MAX_REQUESTS, SEED, ARRIVAL, RATE, helps={"max_tokens": t("serving.c.max_tokens_help")})
        st.markdown(t("serving.c.scheduler"))
        c = st.columns(4)
        BATCH.draw(c[0], help=t("serving.c.batch_help"))
        BLOCK_SIZE.draw(c[1])
        WATERMARK.draw(c[2])
        MAX_BATCHED.draw(c[3], help=t("serving.c.max_batched_help"))
    ss = st.session_state
    dep = cp.DeploymentConfig(ss["model"], ss["gpu"], ss["wdtype"], ss["kvdtype"], ss["util"], ss["kv_limit"])
    return cp.ServingSetup(workload_config(cp.ARRIVAL_TICK_S), dep, max_num_seqs=ss["batch"],
                           block_size=int(ss["block_size"]), watermark=ss["watermark"],
                           max_num_batched_tokens=ss["max_batched"])


def gantt_rows() -> int:
    return GANTT_N.draw()


def sweep_on() -> bool:
    return SWEEP.draw()


@dataclass(frozen=True)
class SpecChoice:
    setup: sps.SpecSetup
    batch_target: str  # the pair the batch sweep times: the chosen one, or the page's model drafted by an 8B
    batch_draft: str


def speculative() -> SpecChoice:
    presets = load_presets()
    c = st.columns([2, 2, 2, 3, 3])
    ALPHA.draw(c[0])
    K.draw(c[1])
    C_MODE.draw(c[2], format_func=lambda k: t(f"serving.c.c_mode.{k}"))
    ss = st.session_state
    roofline = ss["c_mode"] == "roofline"
    if roofline:
        SPEC_TARGET.draw(c[3], format_func=lambda k: presets[k].name)
        SPEC_DRAFT.draw(c[4], format_func=lambda k: presets[k].name)
    else:
        C.draw(c[3])
    c = st.columns([2, 2, 8])
    MC_PASSES.draw(c[0])
    MC_SEED.draw(c[1])
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
    LIVE.draw(help=t("serving.c.live_help"))
    ss = st.session_state
    if not ss["live"]:
        return None
    c = st.columns([5, 3, 1, 1])
    LIVE_PROMPT.draw(c[0], height=90)
    L = lang()  # read while drawing: the label function may run outside the script run
    LIVE_DRAFT.draw(c[1], format_func=lambda key: draft_label(key, L))
    LIVE_K.draw(c[2])
    LIVE_NEW.draw(c[3])
    return LiveChoice(ss["live_prompt"], ss["live_new"], ss["live_k"], ss["live_draft"])
