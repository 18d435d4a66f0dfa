"""The KV quantization page's URL values and widgets (the panel at the top returns a `QuantSetup`; the
later sections' widgets return what they choose), and the column formats of its tables. Widget keys
are the URL keys."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from app.controls.declared import Choice, Number, Slider, Stops, Text, Toggle
from app.figures.quant import METRICS
from app.i18n import t
from app.urlstate import UrlState
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model import quant_bytes as qb
from sim.model import quant_errors as qe
from sim.model.quant import INT_BITS
from sim.model.quant_cache import CacheScheme
from sim.model.quant_setup import ALL_KINDS, MAX_NEW, MAX_PROMPT, QuantSetup
from sim.model.transformer import PRESETS
from sim.words.quant import title_of

CFG = PRESETS["mha"]  # every variant shares head_dim, layers and context
assert MAX_PROMPT + MAX_NEW <= CFG.max_seq_len  # a free run always fits the trained context
CHUNKS, RESIDUALS = ["8", "16", "32", "64", "128"], ["16", "32", "64", "128", "256", "512"]
CHANNEL_GROUPS = [str(g) for g in (4, 8, 16, 32, 64) if CFG.head_dim % g == 0]
WINDOW_LENS, BINS = ["128", "256", "512", "1024"], ["8", "16", "32", "64"]
CONTEXTS = [2**k for k in range(10, 18)]  # 1,024 … 131,072
# column -> (its label's catalog key under quant.col., number format or None)
TABLE_COLUMNS = {"label": ("scheme", None), "delta_loss": ("delta_loss", "%+.5f"), "delta_loss_se": ("se", "%.5f"),
                 "ppl_ref": ("ppl_ref", "%.4f"), "ppl_q": ("ppl_q", "%.4f"),
                 "top1_agreement": ("agreement", "%.4f"), "kl": ("kl", "%.2e"),
                 "kl_first_quarter": ("kl_first", "%.2e"), "kl_last_quarter": ("kl_last", "%.2e"),
                 "bytes_per_token": ("bytes_token", "%.1f"), "vs_fp16": ("vs_fp16", "%.3f")}
FORMAT_COLUMN = {"format": ("format", None)}
SCALE_COLUMNS = {"scheme": ("scheme", None), "bytes/token": ("bytes_token", "%,.0f"),
                 "per request": ("per_request", "%.3f"), "vs FP16": ("vs_fp16", "%.3f"),
                 "max requests": ("max_requests", None), "decode step (ms)": ("step_ms", "%.1f"),
                 "tokens/s bound": ("rate_bound", "%,.0f")}
RATIO_COLUMNS = {"layer": ("layer", None), "head": ("kv_head", None), "K max ÷ median": ("k_ratio", "%.1f×"),
                 "V max ÷ median": ("v_ratio", "%.1f×"), "K's top channels": ("k_top", None)}


FP8_SCALE_COLUMNS = {"scale": ("scale", None), "k_error": ("k_error", "%.2f%%"), "v_error": ("v_error", "%.2f%%"),
                     "kl": ("kl", "%.2e"), "agreement": ("agreement", "%.4f")}


def fp8_scale_frame(rows: list[dict], lang: str):
    """The FP8 scale table (sim.model.quant_fp8.Fp8ScaleCheck.frame_rows): each row's name worded, errors in %."""
    import pandas as pd

    from sim.words import say

    return pd.DataFrame([{**r, "scale": say(lang, r["scale"]), "k_error": 100 * r["k_error"],
                          "v_error": 100 * r["v_error"]} for r in rows])


def columns_in(prefix: str, spec: dict) -> dict:
    """Like columns(), the labels under another catalog prefix ("fp8.col")."""
    return {k: st.column_config.NumberColumn(t(f"{prefix}.{key}"), format=fmt) if fmt else t(f"{prefix}.{key}")
            for k, (key, fmt) in spec.items()}


def columns(spec: dict) -> dict:
    """column -> (label key, number format or None), as st.dataframe's column_config in the page language."""
    return {k: st.column_config.NumberColumn(t(f"quant.col.{key}"), format=fmt) if fmt else t(f"quant.col.{key}")
            for k, (key, fmt) in spec.items()}


def scale_presets() -> dict:
    """The models the scale section offers (quant_bytes' choice of presets)."""
    return qb.scale_presets(load_presets())


def _first(preferred: str, options) -> str:
    return preferred if preferred in options else next(iter(options))


VARIANT = Choice("variant", "mha", tuple(PRESETS), widget="radio", label="quant.w.model", url_label="quant.url.variant")
BITS = Choice("bits", "4", tuple(str(b) for b in INT_BITS), widget="segmented_control", label="quant.w.bits",
              url_label="quant.url.bits")
CHUNK = Choice("G", "32", tuple(CHUNKS), widget="select_slider", label="quant.w.chunk", url_label="quant.url.chunk")
GROUP = Choice("g", "32", tuple(CHANNEL_GROUPS), widget="select_slider", label="quant.w.group",
               url_label="quant.url.group")
RESIDUAL = Choice("R", "128", tuple(RESIDUALS), widget="select_slider", label="quant.w.residual",
                  url_label="quant.url.residual")
SYM = Toggle("sym", False, label="quant.w.sym", url_label="quant.url.sym")
WIN = Number("win", 4, 1, qe.MAX_WINDOWS, label="quant.w.win", url_label="quant.url.win")
LEN = Choice("len", "256", tuple(WINDOW_LENS), widget="select_slider", label="quant.w.len", url_label="quant.url.len")
ALL = Toggle("all", False, label="quant.w.all", url_label="quant.url.all")
METRIC = Choice("metric", "kl", tuple(METRICS), widget="radio", label="quant.w.show", url_label="quant.url.metric")
BIN = Choice("bin", "16", tuple(BINS), widget="select_slider", label="quant.w.bin", url_label="quant.url.bin")
LOG = Toggle("log", True, label="quant.w.log", url_label="quant.url.log")
PROMPT = Text("prompt", "ROMEO.\n", max_len=MAX_PROMPT, max_chars=MAX_PROMPT, label="quant.w.prompt",
              url_label="quant.url.prompt")
NEW = Slider("n", 120, 16, MAX_NEW, label="quant.w.n", url_label="quant.url.n")
FREE = Choice("free", "token", tuple(ALL_KINDS), label="quant.w.free", url_label="quant.url.free")
LAYER = Slider("layer", 0, 0, CFG.n_layers - 1, label="quant.w.layer", url_label="quant.url.layer")
HEAD = Slider("head", 0, 0, CFG.n_heads - 1, narrows=True, label="quant.w.head", url_label="quant.url.head")
CH = Slider("ch", 5, 0, CFG.head_dim - 1, label="quant.w.ch", url_label="quant.url.ch")
FACTOR = Slider("factor", 8.0, 0.0, 50.0, step=0.5, label="quant.w.factor", url_label="quant.url.factor")
MODEL = Choice("model", lambda: _first("llama-3.1-8b", scale_presets()), lambda: list(scale_presets()),
               label="quant.w.scale_model", url_label="quant.url.model")
GPU = Choice("gpu", lambda: _first("h100-sxm", load_gpus()), lambda: list(load_gpus()), label="quant.url.gpu",
             url_label="quant.url.gpu")
CTX = Stops("ctx", 32768, tuple(CONTEXTS), label="quant.w.ctx", url_label="quant.url.ctx")
UTIL = Number("util", 0.9, 0.05, 1.0, step=0.01, label="quant.w.util", url_label="quant.url.util")
CONTROLS = (VARIANT, BITS, CHUNK, GROUP, RESIDUAL, SYM, WIN, LEN, ALL, METRIC, BIN, LOG, PROMPT, NEW, FREE, LAYER, HEAD,
            CH, FACTOR, MODEL, GPU, CTX, UTIL)


def register() -> UrlState:
    """Every value the page keeps in its link, checked (the context snapped to its stops); the bad ones listed once."""
    url = UrlState("kv_quantization")
    url.add(*CONTROLS)
    from app.model_picker import register as register_model  # `lm`: "model" here is the preset for scale

    register_model(url, key="lm")
    url.show_problems()
    return url


def setup_panel() -> QuantSetup:
    """The bordered panel at the top: model, bits, symmetric, G, g, R and the held-out text."""
    with st.container(border=True):
        c = st.columns([1.6, 2.2, 1.2, 2.6])
        VARIANT.draw(c[0], horizontal=True, format_func=str.upper)
        BITS.draw(c[1], format_func=lambda b: f"INT{b}", required=True)
        SYM.draw(c[2], help=t("quant.w.sym_help"))
        ALL.draw(c[3], help=t("quant.w.all_help"))
        c = st.columns(5)
        CHUNK.draw(c[0], help=t("quant.w.chunk_help"))
        GROUP.draw(c[1], help=t("quant.w.group_help", D=f"{CFG.head_dim}"))
        RESIDUAL.draw(c[2], help=t("quant.w.residual_help"))
        WIN.draw(c[3], help=t("quant.w.win_help"))
        LEN.draw(c[4])
    ss = st.session_state
    return QuantSetup(variant=ss["variant"], bits=int(ss["bits"]), chunk=int(ss["G"]), channel_group=int(ss["g"]), residual=int(ss["R"]), symmetric=ss["sym"],
                      eval=qe.EvalConfig(ss["win"], int(ss["len"])))


def every_scheme() -> bool:
    """The panel's "every scheme at every bit width" toggle."""
    return st.session_state["all"]


def position_controls() -> tuple[str, int, bool]:
    """(metric, positions per point, log scale) for the error-by-position chart."""
    c = st.columns([2, 1, 1])
    names = {k: t(f"quant.w.metric.{k}") for k in METRICS}  # worded now: Streamlit calls format_func later too
    METRIC.draw(c[0], horizontal=True, format_func=names.get)
    BIN.draw(c[1])
    LOG.draw(c[2], disabled=st.session_state["metric"] != "kl")
    metric = st.session_state["metric"]
    return metric, int(st.session_state["bin"]), st.session_state["log"] and metric == "kl"


def scale_controls() -> tuple:
    """(model preset, GPU preset, context per request, memory utilization) at real-model scale."""
    presets, gpus = scale_presets(), load_gpus()
    c = st.columns([2, 2, 2, 1.4])
    MODEL.draw(c[0], format_func=lambda k: presets[k].name)
    GPU.draw(c[1], format_func=lambda k: gpus[k].name)
    CTX.draw(c[2], format_func=lambda v: f"{v:,}")
    UTIL.draw(c[3])
    ss = st.session_state
    return presets[ss["model"]], gpus[ss["gpu"]], ss["ctx"], ss["util"]


def free_controls(schemes: Mapping[str, CacheScheme], lang: str = "en") -> tuple[list[int], int, str]:
    """(prompt as UTF-8 bytes, new tokens, scheme kind) for the free-running texts."""
    c = st.columns([3, 2, 3])
    PROMPT.draw(c[0], help=t("quant.w.prompt_help", max=f"{MAX_PROMPT}"))
    NEW.draw(c[1])
    titles = {k: title_of(schemes[k], lang) for k in ALL_KINDS}
    FREE.draw(c[2], format_func=titles.get)
    ss = st.session_state
    return list(ss["prompt"].encode("utf-8")), ss["n"], ss["free"]


def channel_controls(num_kv_heads: int) -> tuple[int, int]:
    """(layer, KV head) of the channel heatmaps; the head is cut to this variant's KV heads."""
    last = num_kv_heads - 1
    HEAD.clamp(last)
    c = st.columns(2)
    LAYER.draw(c[0])
    if num_kv_heads > 1:
        HEAD.draw(c[1], hi=last)
    else:
        c[1].markdown(t("quant.w.one_head"))
    return st.session_state["layer"], st.session_state["head"]


def outlier_controls() -> tuple[int, float]:
    """(channel made an outlier, its size in the head's mean |K|)."""
    c = st.columns(2)
    CH.draw(c[0])
    FACTOR.draw(c[1])
    return st.session_state["ch"], st.session_state["factor"]
