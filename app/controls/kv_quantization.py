"""The KV quantization page's URL values and widgets (the panel at the top returns a `QuantSetup`; the
later sections' widgets return what they choose), and the column formats of its tables. Widget keys
are the URL keys."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from app.figures.quant import METRICS
from app.i18n import t
from app.urlstate import UrlState
from sim.model import quant_errors as qe
from sim.model.quant import INT_BITS
from sim.model.quant_cache import CacheScheme
from sim.model.quant_setup import ALL_KINDS, MAX_NEW, MAX_PROMPT, QuantSetup
from sim.model.transformer import PRESETS

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


def register(presets: Mapping, gpus: Mapping) -> UrlState:
    """Every value the page keeps in its link, checked (bad ones fall back with one warning)."""
    url = UrlState("kv_quantization")
    url.choice("variant", "mha", list(PRESETS), label=t("quant.url.variant"))
    url.choice("bits", "4", [str(b) for b in INT_BITS], label=t("quant.url.bits"))
    url.choice("G", "32", CHUNKS, label=t("quant.url.chunk"))
    url.choice("g", "32", CHANNEL_GROUPS, label=t("quant.url.group"))
    url.choice("R", "128", RESIDUALS, label=t("quant.url.residual"))
    url.bool("sym", False, label=t("quant.url.sym"))
    url.int("win", 4, 1, qe.MAX_WINDOWS, label=t("quant.url.win"))
    url.choice("len", "256", WINDOW_LENS, label=t("quant.url.len"))
    url.bool("all", False, label=t("quant.url.all"))
    url.choice("metric", "kl", list(METRICS), label=t("quant.url.metric"))
    url.choice("bin", "16", BINS, label=t("quant.url.bin"))
    url.bool("log", True, label=t("quant.url.log"))
    url.text("prompt", "ROMEO.\n", max_len=MAX_PROMPT, label=t("quant.url.prompt"))
    url.int("n", 120, 16, MAX_NEW, label=t("quant.url.n"))
    url.choice("free", "token", list(ALL_KINDS), label=t("quant.url.free"))
    url.int("layer", 0, 0, CFG.n_layers - 1, label=t("quant.url.layer"))
    url.int("head", 0, 0, CFG.n_heads - 1, label=t("quant.url.head"))
    url.int("ch", 5, 0, CFG.head_dim - 1, label=t("quant.url.ch"))
    url.float("factor", 8.0, 0.0, 50.0, label=t("quant.url.factor"))
    url.choice("model", "llama-3.1-8b" if "llama-3.1-8b" in presets else next(iter(presets)), list(presets),
               label=t("quant.url.model"))
    url.choice("gpu", "h100-sxm" if "h100-sxm" in gpus else next(iter(gpus)), list(gpus), label=t("quant.url.gpu"))
    url.int("ctx", 32768, CONTEXTS[0], CONTEXTS[-1], label=t("quant.url.ctx"))
    url.float("util", 0.9, 0.05, 1.0, label=t("quant.url.util"))
    from app.model_picker import register as register_model  # `lm`: "model" here is the preset for scale

    register_model(url, key="lm")
    url.show_problems()
    if st.session_state["ctx"] not in CONTEXTS:  # a URL may carry any in-range integer
        st.session_state["ctx"] = min(CONTEXTS, key=lambda v: abs(v - st.session_state["ctx"]))
    return url


def setup_panel() -> QuantSetup:
    """The bordered panel at the top: model, bits, symmetric, G, g, R and the held-out text."""
    with st.container(border=True):
        c = st.columns([1.6, 2.2, 1.2, 2.6])
        c[0].radio(t("quant.w.model"), list(PRESETS), key="variant", horizontal=True, format_func=str.upper)
        c[1].segmented_control(t("quant.w.bits"), [str(b) for b in INT_BITS], key="bits",
                               format_func=lambda b: f"INT{b}", required=True)
        c[2].toggle(t("quant.w.sym"), key="sym", help=t("quant.w.sym_help"))
        c[3].toggle(t("quant.w.all"), key="all", help=t("quant.w.all_help"))
        c = st.columns(5)
        c[0].select_slider(t("quant.w.chunk"), CHUNKS, key="G", help=t("quant.w.chunk_help"))
        c[1].select_slider(t("quant.w.group"), CHANNEL_GROUPS, key="g", help=t("quant.w.group_help", D=f"{CFG.head_dim}"))
        c[2].select_slider(t("quant.w.residual"), RESIDUALS, key="R", help=t("quant.w.residual_help"))
        c[3].number_input(t("quant.w.win"), 1, qe.MAX_WINDOWS, key="win", help=t("quant.w.win_help"))
        c[4].select_slider(t("quant.w.len"), WINDOW_LENS, key="len")
    ss = st.session_state
    return QuantSetup(ss["variant"], int(ss["bits"]), int(ss["G"]), int(ss["g"]), int(ss["R"]), ss["sym"],
                      qe.EvalConfig(ss["win"], int(ss["len"])))


def every_scheme() -> bool:
    """The panel's "every scheme at every bit width" toggle."""
    return st.session_state["all"]


def position_controls() -> tuple[str, int, bool]:
    """(metric, positions per point, log scale) for the error-by-position chart."""
    c = st.columns([2, 1, 1])
    names = {k: t(f"quant.w.metric.{k}") for k in METRICS}  # worded now: Streamlit calls format_func later too
    c[0].radio(t("quant.w.show"), list(METRICS), key="metric", horizontal=True, format_func=names.get)
    c[1].select_slider(t("quant.w.bin"), BINS, key="bin")
    c[2].toggle(t("quant.w.log"), key="log", disabled=st.session_state["metric"] != "kl")
    metric = st.session_state["metric"]
    return metric, int(st.session_state["bin"]), st.session_state["log"] and metric == "kl"


def scale_controls(presets: Mapping, gpus: Mapping) -> tuple:
    """(model preset, GPU preset, context per request, memory utilization) at real-model scale."""
    c = st.columns([2, 2, 2, 1.4])
    c[0].selectbox(t("quant.w.scale_model"), list(presets), key="model", format_func=lambda k: presets[k].name)
    c[1].selectbox(t("quant.url.gpu"), list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
    c[2].select_slider(t("quant.w.ctx"), CONTEXTS, key="ctx", format_func=lambda v: f"{v:,}")
    c[3].number_input(t("quant.w.util"), 0.05, 1.0, step=0.01, key="util")
    ss = st.session_state
    return presets[ss["model"]], gpus[ss["gpu"]], ss["ctx"], ss["util"]


def free_controls(schemes: Mapping[str, CacheScheme], lang: str = "en") -> tuple[list[int], int, str]:
    """(prompt as UTF-8 bytes, new tokens, scheme kind) for the free-running texts."""
    c = st.columns([3, 2, 3])
    c[0].text_input(t("quant.w.prompt"), key="prompt", max_chars=MAX_PROMPT,
                    help=t("quant.w.prompt_help", max=f"{MAX_PROMPT}"))
    c[1].slider(t("quant.w.n"), 16, MAX_NEW, key="n")
    titles = {k: schemes[k].title_in(lang) for k in ALL_KINDS}
    c[2].selectbox(t("quant.w.free"), list(ALL_KINDS), key="free", format_func=titles.get)
    ss = st.session_state
    return list(ss["prompt"].encode("utf-8")), ss["n"], ss["free"]


def channel_controls(num_kv_heads: int) -> tuple[int, int]:
    """(layer, KV head) of the channel heatmaps; the head is cut to this variant's KV heads."""
    if st.session_state["head"] > num_kv_heads - 1:
        st.session_state["head"] = num_kv_heads - 1
    c = st.columns(2)
    c[0].slider(t("quant.w.layer"), 0, CFG.n_layers - 1, key="layer")
    if num_kv_heads > 1:
        c[1].slider(t("quant.w.head"), 0, num_kv_heads - 1, key="head")
    else:
        c[1].markdown(t("quant.w.one_head"))
    return st.session_state["layer"], st.session_state["head"]


def outlier_controls() -> tuple[int, float]:
    """(channel made an outlier, its size in the head's mean |K|)."""
    c = st.columns(2)
    c[0].slider(t("quant.w.ch"), 0, CFG.head_dim - 1, key="ch")
    c[1].slider(t("quant.w.factor"), 0.0, 50.0, step=0.5, key="factor")
    return st.session_state["ch"], st.session_state["factor"]
