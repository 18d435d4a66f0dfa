"""The KV quantization page's URL values and widgets (the panel at the top returns a `QuantSetup`; the
later sections' widgets return what they choose), and the column formats of its tables. Widget keys
are the URL keys."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from app.figures.quant import METRIC_LABELS
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
TABLE_COLUMNS = {"label": ("scheme", None), "delta_loss": ("Δ loss", "%+.5f"), "delta_loss_se": ("± SE", "%.5f"),
                 "ppl_ref": ("ppl full", "%.4f"), "ppl_q": ("ppl quantized", "%.4f"),
                 "top1_agreement": ("top-1 agreement", "%.4f"), "kl": ("KL", "%.2e"),
                 "kl_first_quarter": ("KL, first ¼", "%.2e"), "kl_last_quarter": ("KL, last ¼", "%.2e"),
                 "bytes_per_token": ("bytes/token", "%.1f"), "vs_fp16": ("vs FP16", "%.3f")}
SCALE_COLUMNS = {"bytes/token": (None, "%,.0f"), "per request": ("per request (GiB)", "%.3f"),
                 "vs FP16": (None, "%.3f"), "decode step (ms)": (None, "%.1f"), "tokens/s bound": (None, "%,.0f")}
RATIO_COLUMNS = {"K max ÷ median": (None, "%.1f×"), "V max ÷ median": (None, "%.1f×")}


def columns(spec: dict) -> dict:
    """column -> (label or None, number format or None), as st.dataframe's column_config."""
    return {k: st.column_config.NumberColumn(label, format=fmt) if fmt else label for k, (label, fmt) in spec.items()}


def register(presets: Mapping, gpus: Mapping) -> UrlState:
    """Every value the page keeps in its link, checked (bad ones fall back with one warning)."""
    url = UrlState("kv_quantization")
    url.choice("variant", "mha", list(PRESETS), label="model variant")
    url.choice("bits", "4", [str(b) for b in INT_BITS], label="bits")
    url.choice("G", "32", CHUNKS, label="K chunk G (tokens)")
    url.choice("g", "32", CHANNEL_GROUPS, label="V group g (channels)")
    url.choice("R", "128", RESIDUALS, label="residual window R")
    url.bool("sym", False, label="symmetric")
    url.int("win", 4, 1, qe.MAX_WINDOWS, label="held-out windows")
    url.choice("len", "256", WINDOW_LENS, label="window length")
    url.bool("all", False, label="every scheme at every bit width")
    url.choice("metric", "kl", list(METRIC_LABELS), label="error metric")
    url.choice("bin", "16", BINS, label="positions per point")
    url.bool("log", True, label="log scale")
    url.text("prompt", "ROMEO.\n", max_len=MAX_PROMPT, label="prompt")
    url.int("n", 120, 16, MAX_NEW, label="new tokens")
    url.choice("free", "token", list(ALL_KINDS), label="scheme for the free-running texts")
    url.int("layer", 0, 0, CFG.n_layers - 1, label="layer")
    url.int("head", 0, 0, CFG.n_heads - 1, label="KV head")
    url.int("ch", 5, 0, CFG.head_dim - 1, label="outlier channel")
    url.float("factor", 8.0, 0.0, 50.0, label="outlier size")
    url.choice("model", "llama-3.1-8b" if "llama-3.1-8b" in presets else next(iter(presets)), list(presets),
               label="model at scale")
    url.choice("gpu", "h100-sxm" if "h100-sxm" in gpus else next(iter(gpus)), list(gpus), label="GPU")
    url.int("ctx", 32768, CONTEXTS[0], CONTEXTS[-1], label="context at scale")
    url.float("util", 0.9, 0.05, 1.0, label="memory utilization")
    url.show_problems()
    if st.session_state["ctx"] not in CONTEXTS:  # a URL may carry any in-range integer
        st.session_state["ctx"] = min(CONTEXTS, key=lambda v: abs(v - st.session_state["ctx"]))
    return url


def setup_panel() -> QuantSetup:
    """The bordered panel at the top: model, bits, symmetric, G, g, R and the held-out text."""
    with st.container(border=True):
        c = st.columns([1.6, 2.2, 1.2, 2.6])
        c[0].radio("Model", list(PRESETS), key="variant", horizontal=True, format_func=str.upper)
        c[1].segmented_control("Bits per value", [str(b) for b in INT_BITS], key="bits",
                               format_func=lambda b: f"INT{b}", required=True)
        c[2].toggle("Symmetric", key="sym", help="Off: asymmetric, a scale and a zero point per group (as KIVI "
                    "does). On: a scale only, codes in ±(2^(b−1) − 1).")
        c[3].toggle("Every scheme at every bit width", key="all",
                    help="Fills the bits × scheme table: 12 more teacher-forced runs, cached for later visits.")
        c = st.columns(5)
        c[0].select_slider("K chunk G (tokens)", CHUNKS, key="G",
                           help="KIVI's K: one scale and zero point per channel for every G tokens.")
        c[1].select_slider("V group g (channels)", CHANNEL_GROUPS, key="g",
                           help=f"Per-token: one scale and zero point per token for every g of the {CFG.head_dim} "
                                "channels of a head.")
        c[2].select_slider("Residual window R (tokens)", RESIDUALS, key="R",
                           help="Recent tokens kept in full precision. K is quantized R tokens at a time, so R must "
                                "be a multiple of G.")
        c[3].number_input("Held-out windows", 1, qe.MAX_WINDOWS, key="win",
                          help="Passages of the validation split (the last 10% of the corpus, never trained on).")
        c[4].select_slider("Window length (tokens)", WINDOW_LENS, key="len")
    ss = st.session_state
    return QuantSetup(ss["variant"], int(ss["bits"]), int(ss["G"]), int(ss["g"]), int(ss["R"]), ss["sym"],
                      qe.EvalConfig(ss["win"], int(ss["len"])))


def every_scheme() -> bool:
    """The panel's "every scheme at every bit width" toggle."""
    return st.session_state["all"]


def position_controls() -> tuple[str, int, bool]:
    """(metric, positions per point, log scale) for the error-by-position chart."""
    c = st.columns([2, 1, 1])
    c[0].radio("Show", list(METRIC_LABELS), key="metric", horizontal=True,
               format_func=lambda k: {"kl": "KL divergence", "delta_loss": "Δ loss", "agreement": "top-1 agreement"}[k])
    c[1].select_slider("Positions per point", BINS, key="bin")
    c[2].toggle("Log scale", key="log", disabled=st.session_state["metric"] != "kl")
    metric = st.session_state["metric"]
    return metric, int(st.session_state["bin"]), st.session_state["log"] and metric == "kl"


def scale_controls(presets: Mapping, gpus: Mapping) -> tuple:
    """(model preset, GPU preset, context per request, memory utilization) at real-model scale."""
    c = st.columns([2, 2, 2, 1.4])
    c[0].selectbox("Model", list(presets), key="model", format_func=lambda k: presets[k].name)
    c[1].selectbox("GPU", list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
    c[2].select_slider("Context per request (tokens)", CONTEXTS, key="ctx", format_func=lambda v: f"{v:,}")
    c[3].number_input("Memory utilization", 0.05, 1.0, step=0.01, key="util")
    ss = st.session_state
    return presets[ss["model"]], gpus[ss["gpu"]], ss["ctx"], ss["util"]


def free_controls(schemes: Mapping[str, CacheScheme]) -> tuple[list[int], int, str]:
    """(prompt as UTF-8 bytes, new tokens, scheme kind) for the free-running texts."""
    c = st.columns([3, 2, 3])
    c[0].text_input("Prompt", key="prompt", max_chars=MAX_PROMPT, help=f"At most {MAX_PROMPT} bytes of UTF-8.")
    c[1].slider("New tokens", 16, MAX_NEW, key="n")
    c[2].selectbox("Scheme for the texts", list(ALL_KINDS), key="free", format_func=lambda k: schemes[k].title)
    ss = st.session_state
    return list(ss["prompt"].encode("utf-8")), ss["n"], ss["free"]


def channel_controls(num_kv_heads: int) -> tuple[int, int]:
    """(layer, KV head) of the channel heatmaps; the head is cut to this variant's KV heads."""
    if st.session_state["head"] > num_kv_heads - 1:
        st.session_state["head"] = num_kv_heads - 1
    c = st.columns(2)
    c[0].slider("Layer", 0, CFG.n_layers - 1, key="layer")
    if num_kv_heads > 1:
        c[1].slider("KV head", 0, num_kv_heads - 1, key="head")
    else:
        c[1].markdown("**KV head 0** — MQA has one K/V head, shared by every query head.")
    return st.session_state["layer"], st.session_state["head"]


def outlier_controls() -> tuple[int, float]:
    """(channel made an outlier, its size in the head's mean |K|)."""
    c = st.columns(2)
    c[0].slider("Channel to make an outlier", 0, CFG.head_dim - 1, key="ch")
    c[1].slider("Outlier size (× the head's mean |K|, added at every token)", 0.0, 50.0, step=0.5, key="factor")
    return st.session_state["ch"], st.session_state["factor"]
