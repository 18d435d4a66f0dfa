"""KV quantization: KIVI-style K per channel, V per token, a full-precision residual window — what it
saves in bytes and what it costs in quality, position by position, on the real tiny model."""

import pandas as pd
import streamlit as st

from app.figures import quant as figs
from app.resources import model as cached_model
from app.resources import model_or_stop, model_rates
from app.text import plain
from app.urlstate import UrlState
from app.work import queued, run_job
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model.quant import INT_BITS, fp8_backend
from sim.model.quant_cache import FP8_KINDS, FULL, SCHEME_KINDS, make_scheme, scheme_bytes
from sim.model.quant_experiments import (
    MAX_WINDOWS,
    EvalConfig,
    channel_stats,
    divergence_positions,
    evaluate_scheme,
    free_run,
    heldout_windows,
    outlier_demo,
    queries_and_keys,
    reference_logits,
    results_frame,
    scale_rows,
    seed_claims,
    tiny_bytes_rows,
)
from sim.model.transformer import PRESETS
from sim.work.run_cost import cached_work, prefill_work

CFG = PRESETS["mha"]  # every variant shares head_dim, layers and context
CHUNKS = ["8", "16", "32", "64", "128"]
CHANNEL_GROUPS = [str(g) for g in (4, 8, 16, 32, 64) if CFG.head_dim % g == 0]
RESIDUALS = ["16", "32", "64", "128", "256", "512"]
WINDOW_LENS = ["128", "256", "512", "1024"]
BINS = ["8", "16", "32", "64"]
INT_KINDS = list(SCHEME_KINDS)
ALL_KINDS = [*SCHEME_KINDS, *FP8_KINDS]
MAX_PROMPT = 128
MAX_NEW = 512
assert MAX_PROMPT + MAX_NEW <= CFG.max_seq_len  # a free run always fits the trained context
CONTEXTS = [2**k for k in range(10, 18)]  # 1,024 … 131,072
# Measured here: a teacher-forced pass through a quantized cache costs about twice an eager prefill,
# greedy decoding through one about four times a plain cached decode.
QUANT_EVAL_FACTOR, QUANT_DECODE_FACTOR = 2.0, 4.0
OUTLIER_RATIO = 5.0  # a channel this many times the median one counts as a strong outlier

st.title("KV quantization")
st.markdown(
    "A quantized cache stores each key and value in a few bits plus a **scale** (and a **zero point**) per "
    "group of values. It is done **live, at every token, with no calibration** — and an error stored for token 3 "
    "is read again by every later token. Keys have **outlier channels** (a few channels large whatever the "
    "token), so KIVI groups **K per channel** and **V per token**; a channel's scale needs a group of tokens, so "
    "the newest tokens wait in **full precision** (the residual window) until a chunk fills. Below, every scheme "
    "runs inside the real tiny model's cache on held-out text and is compared with full precision."
)


@st.cache_data(max_entries=8, show_spinner=False)
def windows_for(num_windows: int, window_len: int):
    return heldout_windows(EvalConfig(num_windows, window_len))


@st.cache_data(max_entries=4, show_spinner=False)
def reference_for(variant: str, num_windows: int, window_len: int):
    return reference_logits(cached_model(variant), windows_for(num_windows, window_len))


@st.cache_data(max_entries=256, show_spinner=False)
def evaluate(variant: str, num_windows: int, window_len: int, kind: str, bits: int, G: int, g: int, R: int,
             sym: bool):
    return evaluate_scheme(cached_model(variant), windows_for(num_windows, window_len),
                           make_scheme(kind, bits, G, g, R, sym), reference_for(variant, num_windows, window_len))


@st.cache_data(max_entries=32, show_spinner=False)
def free_for(variant: str, prompt: tuple, n: int, kind: str, bits: int, G: int, g: int, R: int, sym: bool):
    return free_run(cached_model(variant), list(prompt), n, make_scheme(kind, bits, G, g, R, sym))


@st.cache_data(max_entries=32, show_spinner=False)
def divergence_for(variant: str, prompt: tuple, ref: tuple, bits: int, G: int, g: int, R: int, sym: bool):
    return divergence_positions(cached_model(variant), list(prompt), list(ref),
                                [make_scheme(k, bits, G, g, R, sym) for k in ALL_KINDS])


@st.cache_data(max_entries=8, show_spinner=False)
def stats_for(variant: str, window_len: int):
    return channel_stats(cached_model(variant), windows_for(1, window_len)[:, :-1])


@st.cache_data(max_entries=16, show_spinner=False)
def demo_for(variant: str, window_len: int, num_tokens: int, layer: int, head: int, bits: int, G: int, g: int,
             ch: int, factor: float):
    q, k = queries_and_keys(cached_model(variant), windows_for(1, window_len)[:, :-1], layer, head)
    return outlier_demo(k[:num_tokens], q[:num_tokens], bits, G, g, ch, factor)[1]


presets = {k: p for k, p in load_presets().items()
           if p.attention != "MLA" and not p.sliding_window and p.v_dim == p.head_dim}
gpus = load_gpus()
url = UrlState("kv_quantization")
url.choice("variant", "mha", list(PRESETS), label="model variant")
url.choice("bits", "4", [str(b) for b in INT_BITS], label="bits")
url.choice("G", "32", CHUNKS, label="K chunk G (tokens)")
url.choice("g", "32", CHANNEL_GROUPS, label="V group g (channels)")
url.choice("R", "128", RESIDUALS, label="residual window R")
url.bool("sym", False, label="symmetric")
url.int("win", 4, 1, MAX_WINDOWS, label="held-out windows")
url.choice("len", "256", WINDOW_LENS, label="window length")
url.bool("all", False, label="every scheme at every bit width")
url.choice("metric", "kl", list(figs.METRIC_LABELS), label="error metric")
url.choice("bin", "16", BINS, label="positions per point")
url.bool("log", True, label="log scale")
url.text("prompt", "ROMEO.\n", max_len=MAX_PROMPT, label="prompt")
url.int("n", 120, 16, MAX_NEW, label="new tokens")
url.choice("free", "token", ALL_KINDS, label="scheme for the free-running texts")
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

with st.container(border=True):
    c = st.columns([1.6, 2.2, 1.2, 2.6])
    c[0].radio("Model", list(PRESETS), key="variant", horizontal=True, format_func=str.upper)
    c[1].segmented_control("Bits per value", [str(b) for b in INT_BITS], key="bits", format_func=lambda b: f"INT{b}",
                           required=True)
    c[2].toggle("Symmetric", key="sym", help="Off: asymmetric, a scale and a zero point per group (as KIVI does). "
                "On: a scale only, codes in ±(2^(b−1) − 1).")
    c[3].toggle("Every scheme at every bit width", key="all",
                help="Fills the bits × scheme table: 12 more teacher-forced runs, cached for later visits.")
    c = st.columns(5)
    c[0].select_slider("K chunk G (tokens)", CHUNKS, key="G",
                       help="KIVI's K: one scale and zero point per channel for every G tokens.")
    c[1].select_slider("V group g (channels)", CHANNEL_GROUPS, key="g",
                       help=f"Per-token: one scale and zero point per token for every g of the {CFG.head_dim} channels "
                            "of a head.")
    c[2].select_slider("Residual window R (tokens)", RESIDUALS, key="R",
                       help="Recent tokens kept in full precision. K is quantized R tokens at a time, so R must be "
                            "a multiple of G.")
    c[3].number_input("Held-out windows", 1, MAX_WINDOWS, key="win",
                      help="Passages of the validation split (the last 10% of the corpus, never trained on).")
    c[4].select_slider("Window length (tokens)", WINDOW_LENS, key="len")

variant, bits = st.session_state["variant"], int(st.session_state["bits"])
G, g, R, sym = (int(st.session_state["G"]), int(st.session_state["g"]), int(st.session_state["R"]),
                st.session_state["sym"])
ecfg = EvalConfig(st.session_state["win"], int(st.session_state["len"]))
model = model_or_stop(variant)
try:
    schemes = {kind: make_scheme(kind, bits, G, g, R, sym) for kind in ALL_KINDS}
    ecfg.check(model.cfg.max_seq_len)
except ValueError as exc:
    st.error(plain(exc))
    url.sync()
    st.stop()
eval_s = QUANT_EVAL_FACTOR * model_rates(variant, "eager").seconds(prefill_work(ecfg.window_len, ecfg.num_windows))


# --- run what this view needs, the chosen bit width first, with progress ---------------------------------
results = {}


def run_jobs(jobs: list[tuple[str, int]], what: str, name: str) -> bool:
    """Measure the schemes not measured yet this run, as one job of the server's queue; False while
    it waits for its button."""
    todo = [j for j in jobs if j not in results]
    if not todo:
        return True

    def measure(progress):
        out = {}
        for i, (kind, b) in enumerate(todo):
            label = make_scheme(kind, b, G, g, R, sym).label
            progress(i / len(todo), f"run {i + 1} of {len(todo)}: " + (f"INT{b} {label}" if kind in SCHEME_KINDS else label))
            out[(kind, b)] = evaluate(variant, ecfg.num_windows, ecfg.window_len, kind, b, G, g, R, sym)
        return out

    got = run_job(f"kv_quantization.{name}", (variant, ecfg, G, g, R, sym, tuple(todo)), eval_s * len(todo), measure,
                  what=f"{what}: {len(todo)} teacher-forced runs over {ecfg.num_windows} × {ecfg.window_len} tokens")
    if got is None:
        return False
    results.update(got)
    return True


if not run_jobs([(kind, bits) for kind in INT_KINDS] + [(k, 8) for k in FP8_KINDS],
                f"Comparing every INT{bits} scheme and FP8 with full precision", "chosen"):
    st.caption("Everything below is measured by this run. Fewer or shorter held-out windows start at once.")
    url.sync()
    st.stop()
chosen = {kind: results[(kind, bits if kind in SCHEME_KINDS else 8)] for kind in ALL_KINDS}
kivi, naive = chosen["kivi"], chosen["token"]
S = ecfg.window_len
fp16_bpt = scheme_bytes(FULL, S, CFG.n_layers, model.cfg.n_kv_heads, CFG.head_dim)["total"] / S

# --- 1. headline ------------------------------------------------------------------------------------
st.header(f"INT{bits}: what it saves and what it costs")
m = st.columns(4)
m[0].metric("FP16 cache, bytes per token", f"{fp16_bpt:,.0f}",
            help=f"2 × {CFG.n_layers} layers × {model.cfg.n_kv_heads} KV heads × {CFG.head_dim} channels × 2 B")
m[1].metric(f"KIVI INT{bits}, bytes per token", f"{kivi.bytes_per_token:,.1f}",
            f"{kivi.bytes_per_token / fp16_bpt:.1%} of FP16", delta_color="off", delta_arrow="off",
            help=f"At {S} tokens, with scales, zero points and the R={R} full-precision tokens counted.")
m[2].metric(f"Naive per-token INT{bits}, bytes per token", f"{naive.bytes_per_token:,.1f}",
            f"{naive.bytes_per_token / fp16_bpt:.1%} of FP16", delta_color="off", delta_arrow="off")
m[3].metric("Perplexity per byte, full precision", f"{kivi.ppl_ref:.4f}",
            help="exp(mean cross-entropy) over every position of every held-out window.")
m = st.columns(4)
m[0].metric(f"KIVI INT{bits}: KL per prediction", f"{kivi.mean_kl:.2e}",
            help="Mean KL(full ‖ quantized) of the next-byte distribution, nats, over every position and window.")
m[1].metric(f"KIVI INT{bits}: top-1 agreement", f"{kivi.mean_agreement:.2%}",
            help="How often the most likely next byte is the same as with the full-precision cache.")
m[2].metric(f"Naive INT{bits}: KL per prediction", f"{naive.mean_kl:.2e}")
m[3].metric(f"Naive INT{bits}: top-1 agreement", f"{naive.mean_agreement:.2%}")


def loss_text(r) -> str:
    se = "" if r.delta_loss_se != r.delta_loss_se else f" ± {r.delta_loss_se:.5f}"  # NaN: one window
    return f"{r.ppl_q:.4f} (Δ loss {r.mean_delta_loss:+.5f}{se} nats/byte)"


st.markdown(f"Perplexity per byte — full precision **{kivi.ppl_ref:.4f}**, KIVI **{loss_text(kivi)}**, naive "
            f"per-token **{loss_text(naive)}**.")
st.caption(f"± is the standard error over the {ecfg.num_windows} windows. Δ loss is the noisiest of the three "
           "measures: on a given passage a blurred cache can be luckier than the exact one. KL and top-1 agreement "
           "compare the two next-byte distributions directly and stay steady.")

# --- 2. error by position -----------------------------------------------------------------------------
st.subheader("Error by token position")
c = st.columns([2, 1, 1])
c[0].radio("Show", list(figs.METRIC_LABELS), key="metric", horizontal=True,
           format_func=lambda k: {"kl": "KL divergence", "delta_loss": "Δ loss", "agreement": "top-1 agreement"}[k])
c[1].select_slider("Positions per point", BINS, key="bin")
c[2].toggle("Log scale", key="log", disabled=st.session_state["metric"] != "kl")
frame = pd.concat([r.binned(int(st.session_state["bin"])).assign(key=k) for k, r in chosen.items()])
st.plotly_chart(figs.error_by_position(frame, st.session_state["metric"],
                                       st.session_state["log"] and st.session_state["metric"] == "kl",
                                       [k for k in ALL_KINDS if k not in FP8_KINDS] + ["fp8_e4m3"]),
                width="stretch")
quarters = {k: r.kl_by_quarter() for k, r in chosen.items()}
st.caption(
    f"{ecfg.num_windows} held-out window(s) of {S} tokens, fed one token at a time through each cache (computed in "
    f"one pass that a test proves equal to the token-by-token cache). Mean KL in the first vs last quarter of the "
    f"window — naive per-token: {quarters['token'][0]:.2e} → {quarters['token'][-1]:.2e}; KIVI: "
    f"{quarters['kivi'][0]:.2e} → {quarters['kivi'][-1]:.2e}. KIVI's first R={R} positions read only "
    "full-precision keys and values, which is why its curve starts at zero.")

# --- 3. bits × scheme ----------------------------------------------------------------------------------
st.subheader("Bits × scheme")
if st.session_state["all"]:
    run_jobs([(kind, b) for b in INT_BITS for kind in INT_KINDS], "Measuring every scheme at the other bit widths", "all")
else:
    run_jobs([(kind, b) for b in INT_BITS for kind in ("kivi", "token")], "Measuring KIVI and naive at 8, 4, 3, 2 bits",
             "bits")
table = results_frame(list(results.values()))
table.insert(1, "format", [f"FP8 {k.split('_')[1]}" if k in FP8_KINDS else f"INT{b}"
                           for k, b in zip(table["scheme"], table["bits"], strict=True)])
table["label"] = [r.label for r in results.values()]
table["vs_fp16"] = table["bytes_per_token"] / fp16_bpt
metric_col = {"kl": "kl", "delta_loss": "delta_loss", "agreement": "top1_agreement"}[st.session_state["metric"]]
short = {k: schemes[k].short for k in ALL_KINDS}
grid = pd.DataFrame(index=[short[k] for k in ALL_KINDS], columns=[f"{b} bits" for b in INT_BITS], dtype=float)
for (kind, b), r in results.items():
    grid.loc[short[kind], f"{b} bits"] = {"kl": r.mean_kl, "delta_loss": r.mean_delta_loss,
                                          "top1_agreement": r.mean_agreement}[metric_col]
st.plotly_chart(figs.bits_heatmap(grid, st.session_state["metric"]), width="stretch")
st.caption(f"The metric chosen above for the position chart. FP8 is 8 bits only (each value cast on its own, one "
           f"per-tensor scale of 1; {'torch float8 dtypes' if fp8_backend('e4m3') == 'torch' else 'emulated, this torch has no float8'})"
           f". Bytes per token at {S} tokens are in the table below.")
shown = table[["format", "label", "delta_loss", "delta_loss_se", "ppl_ref", "ppl_q", "top1_agreement", "kl", "kl_first_quarter",
               "kl_last_quarter", "bytes_per_token", "vs_fp16"]]
st.dataframe(shown, hide_index=True, width="stretch", column_config={
    "label": "scheme", "delta_loss": st.column_config.NumberColumn("Δ loss", format="%+.5f"),
    "delta_loss_se": st.column_config.NumberColumn("± SE", format="%.5f"),
    "ppl_ref": st.column_config.NumberColumn("ppl full", format="%.4f"),
    "ppl_q": st.column_config.NumberColumn("ppl quantized", format="%.4f"),
    "top1_agreement": st.column_config.NumberColumn("top-1 agreement", format="%.4f"),
    "kl": st.column_config.NumberColumn("KL", format="%.2e"),
    "kl_first_quarter": st.column_config.NumberColumn("KL, first ¼", format="%.2e"),
    "kl_last_quarter": st.column_config.NumberColumn("KL, last ¼", format="%.2e"),
    "bytes_per_token": st.column_config.NumberColumn("bytes/token", format="%.1f"),
    "vs_fp16": st.column_config.NumberColumn("vs FP16", format="%.3f")})
st.download_button("Download the bits × scheme table (CSV)", shown.to_csv(index=False),
                   f"kv_quantization_{variant}_G{G}_g{g}_R{R}.csv", "text/csv")
if not st.session_state["all"]:
    st.info("Blank cells: KIVI and naive per-token are measured at every bit width, the other schemes only at "
            f"INT{bits}. Switch on *Every scheme at every bit width* at the top to fill the table (cached after).")

# --- 4. bytes -------------------------------------------------------------------------------------------
st.header("Bytes: codes, scales, zero points and the residual window")
rows = tiny_bytes_rows(model.cfg, [schemes[k] for k in ALL_KINDS], S)
c = st.columns([3, 2])
c[0].plotly_chart(figs.bytes_by_part(rows, S), width="stretch")
curves = {}
for key in ("fp16", "kivi", "token", "kivi_nores", "fp8_e4m3"):
    sch = FULL if key == "fp16" else schemes[key]
    xs = [n for n in (2**k for k in range(0, 11)) if n <= model.cfg.max_seq_len]
    curves[key] = (sch.short, xs, [scheme_bytes(sch, n, CFG.n_layers, model.cfg.n_kv_heads, CFG.head_dim)["total"] / n
                                   for n in xs])
c[1].plotly_chart(figs.bytes_vs_context(curves, R), width="stretch")
st.latex(rf"\text{{bytes per token}} = 2 \cdot L \cdot H_{{kv}} \cdot d_h \cdot p = 2 \cdot {CFG.n_layers}"
         rf"\cdot {model.cfg.n_kv_heads} \cdot {CFG.head_dim} \cdot p, \qquad p_{{\mathrm{{FP16}}}} = 2\,\mathrm{{B}},"
         rf"\quad p_{{\mathrm{{KIVI\,INT{bits}}}}} = {kivi.bytes_per_token / (2 * CFG.n_layers * model.cfg.n_kv_heads * CFG.head_dim):.4f}"
         rf"\,\mathrm{{B}}\ \text{{at {S} tokens}}")
st.caption(f"Exact counts for the tiny {variant.upper()} model ({CFG.n_layers} layers × {model.cfg.n_kv_heads} KV "
           f"heads × {CFG.head_dim} channels, K and V): codes bit-packed at {bits} bits, an fp16 scale and fp16 zero "
           f"point per group, residual tokens at 16 bits. KIVI's R={R} full-precision tokens cost a lot in a short "
           f"context and fade in a long one; the cache's own `used_bytes()` is tested equal to these numbers.")

st.subheader("At real-model scale")
c = st.columns([2, 2, 2, 1.4])
c[0].selectbox("Model", list(presets), key="model", format_func=lambda k: presets[k].name)
c[1].selectbox("GPU", list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
c[2].select_slider("Context per request (tokens)", CONTEXTS, key="ctx", format_func=lambda v: f"{v:,}")
c[3].number_input("Memory utilization", 0.05, 1.0, step=0.01, key="util")
arch, gpu = presets[st.session_state["model"]], gpus[st.session_state["gpu"]]
ctx = min(st.session_state["ctx"], arch.max_position_embeddings)
if ctx < st.session_state["ctx"]:
    st.info(f"{arch.name} was trained for {arch.max_position_embeddings:,} tokens: counting {ctx:,} per request.")
scale_schemes = [make_scheme(k, bits, G, g, R, sym) for k in ("kivi", "token", "kivi_nores")] + \
    [make_scheme(k, 8, G, g, R, sym) for k in ("kivi", "fp8_e4m3")]
try:
    srows = scale_rows(arch, scale_schemes, ctx, gpu.memory_bytes, gpu.bandwidth_bytes_per_s,
                       st.session_state["util"])
except ValueError as exc:
    st.error(plain(exc))
    srows = None
if srows:
    sframe = pd.DataFrame([{"scheme": (f"INT{s.bits} " if s.key in SCHEME_KINDS else "") + r.label,
                            "bytes/token": r.bytes_per_token, "per request": r.per_request_bytes / 2**30,
                            "vs FP16": r.vs_fp16, "max requests": r.max_requests,
                            "decode step (ms)": r.step_seconds * 1e3, "tokens/s bound": r.tokens_per_s}
                           for s, r in zip([FULL, *scale_schemes], srows, strict=True)])
    k = st.columns(3)
    k[0].metric("FP16: requests that fit", f"{srows[0].max_requests:,}")
    k[1].metric(f"KIVI INT{bits}: requests that fit", f"{srows[1].max_requests:,}",
                f"{srows[1].max_requests / max(1, srows[0].max_requests):.2f}× FP16", delta_color="off", delta_arrow="off")
    k[2].metric(f"KIVI INT{bits}: decode tokens/s bound", f"{srows[1].tokens_per_s:,.0f}",
                f"{srows[1].tokens_per_s / max(1e-9, srows[0].tokens_per_s):.2f}× FP16", delta_color="off", delta_arrow="off")
    st.dataframe(sframe, hide_index=True, width="stretch", column_config={
        "bytes/token": st.column_config.NumberColumn(format="%,.0f"),
        "per request": st.column_config.NumberColumn("per request (GiB)", format="%.3f"),
        "vs FP16": st.column_config.NumberColumn(format="%.3f"),
        "decode step (ms)": st.column_config.NumberColumn(format="%.1f"),
        "tokens/s bound": st.column_config.NumberColumn(format="%,.0f")})
    st.caption(f"{arch.name} at {ctx:,} tokens per request on one {gpu.name} ({gpu.memory_gib:g} GiB × "
               f"{st.session_state['util']:.2f} usable, weights in 16 bits). Decode is memory-bound: one step at the "
               f"largest batch must read every weight once and every request's cache, so its time is at least "
               f"(weights + KV bytes) ÷ {gpu.bandwidth_tb_s:g} TB/s. A bound, not a measurement: the dequantizing kernel "
               "must be light enough not to eat the saving.")

# --- 5. free-running --------------------------------------------------------------------------------------
st.header("Free-running: where greedy text first parts from full precision")
c = st.columns([3, 2, 3])
c[0].text_input("Prompt", key="prompt", max_chars=MAX_PROMPT, help=f"At most {MAX_PROMPT} bytes of UTF-8.")
c[1].slider("New tokens", 16, MAX_NEW, key="n")
c[2].selectbox("Scheme for the texts", ALL_KINDS, key="free",
               format_func=lambda k: (f"INT{bits} " if k in SCHEME_KINDS else "") + schemes[k].label)
prompt_ids = list(st.session_state["prompt"].encode("utf-8"))
n_new = st.session_state["n"]
if not prompt_ids:
    st.error("The prompt is empty: type at least one character.")
elif len(prompt_ids) > MAX_PROMPT:
    st.error(f"The prompt is {len(prompt_ids)} bytes; the limit is {MAX_PROMPT}. Shorten it.")
else:
    free_kind = st.session_state["free"]
    free_s = QUANT_DECODE_FACTOR * model_rates(variant, "sdpa").seconds(cached_work(len(prompt_ids), n_new)) \
        + QUANT_EVAL_FACTOR * len(ALL_KINDS) * model_rates(variant, "eager").seconds(prefill_work(len(prompt_ids) + n_new))

    def free_and_divergence(progress):
        progress(0.0, "greedy decoding through both caches")
        fr = free_for(variant, tuple(prompt_ids), n_new, free_kind, bits, G, g, R, sym)  # bounded: always fits
        progress(0.7, "where every scheme parts from full precision")
        return fr, divergence_for(variant, tuple(prompt_ids), tuple(fr.ref_ids), bits, G, g, R, sym)

    got = run_job("kv_quantization.free", (variant, tuple(prompt_ids), n_new, free_kind, bits, G, g, R, sym), free_s,
                  free_and_divergence, what=f"Generating {n_new} tokens through the full-precision and the quantized "
                  "cache")
if prompt_ids and len(prompt_ids) <= MAX_PROMPT and got is not None:
    run, div = got
    first = run.first_difference
    k = st.columns(3)
    k[0].metric("First differing token", "none" if first is None else f"{first}",
                help="Index among the generated tokens (0 = the first one).")
    k[1].metric("Same tokens before it", f"{n_new if first is None else first} of {n_new}")
    k[2].metric("Cache after the run", f"{run.used_bytes:,} B", f"{run.used_bytes / run.full_bytes:.1%} of FP16",
                delta_color="off", delta_arrow="off")
    mark = "▌"

    def show(ids):
        text = bytes(ids).decode("utf-8", errors="replace") if first is None else (
            bytes(ids[:first]).decode("utf-8", errors="replace") + mark
            + bytes(ids[first:]).decode("utf-8", errors="replace"))
        return st.session_state["prompt"] + text

    c = st.columns(2)
    c[0].markdown("**Full-precision cache**")
    c[0].code(show(run.ref_ids), language=None, wrap_lines=True)
    c[1].markdown(f"**{schemes[free_kind].label}" + (f", INT{bits}**" if free_kind in SCHEME_KINDS else "**"))
    c[1].code(show(run.quant_ids), language=None, wrap_lines=True)
    st.caption(f"Greedy decoding, one prefill call for the prompt and then one token per step through the cache. "
               f"{mark} marks where the texts part. Every scheme at this setting (one teacher-forced pass over the "
               "full-precision text finds the same position):")
    st.dataframe(pd.DataFrame([{"scheme": (f"INT{bits} " if kk in SCHEME_KINDS else "") + schemes[kk].label,
                                "first differing token": "none" if div[kk] is None else str(div[kk])}
                               for kk in ALL_KINDS]), hide_index=True, width="stretch")

# --- 6. K vs V channels -------------------------------------------------------------------------------------
st.header("Keys vs values, channel by channel")
stats = queued(lambda: stats_for(variant, S), "Reading K and V channel by channel")
if st.session_state["head"] > model.cfg.n_kv_heads - 1:
    st.session_state["head"] = model.cfg.n_kv_heads - 1
c = st.columns(2)
c[0].slider("Layer", 0, CFG.n_layers - 1, key="layer")
if model.cfg.n_kv_heads > 1:
    c[1].slider("KV head", 0, model.cfg.n_kv_heads - 1, key="head")
else:
    c[1].markdown("**KV head 0** — MQA has one K/V head, shared by every query head.")
layer, head = st.session_state["layer"], st.session_state["head"]
st.plotly_chart(figs.channel_heatmaps(stats.k_abs[layer, head], stats.v_abs[layer, head], layer, head),
                width="stretch")
k_ratio, v_ratio = stats.outlier_ratio("k"), stats.outlier_ratio("v")
c = st.columns([3, 2])
c[0].plotly_chart(figs.channel_bars(stats.channel_mean("k")[layer, head], stats.channel_mean("v")[layer, head]),
                  width="stretch")
ratios = pd.DataFrame([{"layer": li, "head": h, "K max ÷ median": k_ratio[li, h], "V max ÷ median": v_ratio[li, h],
                        "K's top channels": ", ".join(map(str, stats.top_channels("k", li, h)))}
                       for li in range(CFG.n_layers) for h in range(model.cfg.n_kv_heads)])
c[1].dataframe(ratios, hide_index=True, width="stretch", height=340, column_config={
    "K max ÷ median": st.column_config.NumberColumn(format="%.1f×"),
    "V max ÷ median": st.column_config.NumberColumn(format="%.1f×")})
strong = float(k_ratio.max()) >= OUTLIER_RATIO
st.markdown(
    f"**Does this model have outlier K channels?** {'Yes' if strong else 'Only weak ones'}: across every layer and "
    f"KV head, K's largest channel averages **{k_ratio.mean():.1f}×** its median channel (at most "
    f"**{k_ratio.max():.1f}×**); V's averages {v_ratio.mean():.1f}× (at most {v_ratio.max():.1f}×)."
    + ("" if strong else f" Nothing reaches {OUTLIER_RATIO:g}×, so per-channel K has little to fix here — the "
       "injected outlier below shows what it fixes when there is one."))
st.caption(f"|K| and |V| as cached (K after RoPE, which is what gets quantized) on the first held-out window of {S} "
           "tokens.")

st.subheader("A synthetic outlier channel, injected")
c = st.columns(2)
c[0].slider("Channel to make an outlier", 0, CFG.head_dim - 1, key="ch")
c[1].slider("Outlier size (× the head's mean |K|, added at every token)", 0.0, 50.0, step=0.5, key="factor")
T_demo = S // G * G
if T_demo == 0:
    st.error(f"The window of {S} tokens is shorter than one chunk of G={G}; choose a longer window or a smaller G.")
else:
    cases = queued(lambda: demo_for(variant, S, T_demo, layer, head, bits, G, g, st.session_state["ch"],
                                    st.session_state["factor"]), "Injecting the outlier")
    cframe = pd.DataFrame([vars(x) for x in cases])
    st.plotly_chart(figs.outlier_errors(cframe), width="stretch")
    inj = {x.axis: x for x in cases if x.case == "injected"}
    st.caption(f"Labelled synthetic: the real keys of layer {layer}, KV head {head}, with channel "
               f"{st.session_state['ch']} raised by {st.session_state['factor']:g}× the head's mean |K| at every token, "
               f"quantized to INT{bits}. Per-token groups of {g} channels share one scale with the outlier, so the "
               f"ordinary channels lose {inj['token'].rel_error_other:.0%} (RMS) vs {inj['channel'].rel_error_other:.0%} "
               f"with per-channel groups of {G} tokens; the attention scores q·k of the real queries lose "
               f"{inj['token'].rel_error_scores:.0%} vs {inj['channel'].rel_error_scores:.0%}.")

# --- 7. seed 001 --------------------------------------------------------------------------------------------
st.header("Seed 001's claims, checked")
claims = seed_claims(table, bits, presets.get("llama-3.1-8b"), gpus.get("h100-sxm"))
st.table(pd.DataFrame([{"Claim": x.claim, "Seed 001 says": x.seed_says, "We find": x.we_find, "Verdict": x.verdict}
                       for x in claims]).set_index("Claim"))
st.caption("Quantization blurs every token a little; eviction and sliding windows drop tokens outright. The "
           "byte counts behind the seed's 128 KiB-per-token example are checked on the KV memory page.")
url.sync()
