"""KV quantization: KIVI-style K per channel, V per token, a full-precision residual window — what it
saves in bytes and what it costs in quality, position by position, on the real tiny model."""

import pandas as pd
import streamlit as st

from app.claims import render_claims
from app.figures import quant as figs
from app.resources import model as cached_model
from app.resources import model_or_stop, model_rates
from app.text import plain
from app.urlstate import UrlState
from app.work import queued, run_job
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model import quant_bytes as qb
from sim.model import quant_channels as qc
from sim.model import quant_errors as qe
from sim.model import quant_generation as qg
from sim.model.quant import INT_BITS, fp8_backend
from sim.model.quant_cache import FP8_KINDS, SCHEME_KINDS, make_scheme
from sim.model.quant_claims import seed_claims
from sim.model.transformer import PRESETS
from sim.work.run_cost import cached_work, prefill_work

CFG = PRESETS["mha"]  # every variant shares head_dim, layers and context
CHUNKS, RESIDUALS = ["8", "16", "32", "64", "128"], ["16", "32", "64", "128", "256", "512"]
CHANNEL_GROUPS = [str(g) for g in (4, 8, 16, 32, 64) if CFG.head_dim % g == 0]
WINDOW_LENS, BINS = ["128", "256", "512", "1024"], ["8", "16", "32", "64"]
INT_KINDS, ALL_KINDS = list(SCHEME_KINDS), [*SCHEME_KINDS, *FP8_KINDS]
MAX_PROMPT, MAX_NEW = 128, 512
assert MAX_PROMPT + MAX_NEW <= CFG.max_seq_len  # a free run always fits the trained context
CONTEXTS = [2**k for k in range(10, 18)]  # 1,024 … 131,072
# Measured here: a teacher-forced pass through a quantized cache costs about twice an eager prefill,
# greedy decoding through one about four times a plain cached decode.
QUANT_EVAL_FACTOR, QUANT_DECODE_FACTOR = 2.0, 4.0
TABLE_COLUMNS = {"label": ("scheme", None), "delta_loss": ("Δ loss", "%+.5f"), "delta_loss_se": ("± SE", "%.5f"),
                 "ppl_ref": ("ppl full", "%.4f"), "ppl_q": ("ppl quantized", "%.4f"),
                 "top1_agreement": ("top-1 agreement", "%.4f"), "kl": ("KL", "%.2e"),
                 "kl_first_quarter": ("KL, first ¼", "%.2e"), "kl_last_quarter": ("KL, last ¼", "%.2e"),
                 "bytes_per_token": ("bytes/token", "%.1f"), "vs_fp16": ("vs FP16", "%.3f")}
SCALE_COLUMNS = {"bytes/token": (None, "%,.0f"), "per request": ("per request (GiB)", "%.3f"),
                 "vs FP16": (None, "%.3f"), "decode step (ms)": (None, "%.1f"), "tokens/s bound": (None, "%,.0f")}


def columns(spec: dict) -> dict:
    return {k: st.column_config.NumberColumn(label, format=fmt) if fmt else label for k, (label, fmt) in spec.items()}


def show_metrics(metrics, per_row: int) -> None:
    for start in range(0, len(metrics), per_row):
        for col, m in zip(st.columns(per_row), metrics[start : start + per_row], strict=False):
            col.metric(m.label, m.value, m.delta, delta_color="off", delta_arrow="off", help=m.help)


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
    return qe.heldout_windows(qe.EvalConfig(num_windows, window_len))


@st.cache_data(max_entries=4, show_spinner=False)
def reference_for(variant: str, num_windows: int, window_len: int):
    return qe.reference_logits(cached_model(variant), windows_for(num_windows, window_len))


@st.cache_data(max_entries=256, show_spinner=False)
def evaluate(variant: str, num_windows: int, window_len: int, scheme):
    return qe.evaluate_scheme(cached_model(variant), windows_for(num_windows, window_len), scheme,
                              reference_for(variant, num_windows, window_len))


@st.cache_data(max_entries=32, show_spinner=False)
def free_for(variant: str, prompt: tuple, n: int, scheme):
    return qg.free_run(cached_model(variant), list(prompt), n, scheme)


@st.cache_data(max_entries=32, show_spinner=False)
def divergence_for(variant: str, prompt: tuple, ref: tuple, schemes: tuple):
    return qg.divergence_positions(cached_model(variant), list(prompt), list(ref), schemes)


@st.cache_data(max_entries=8, show_spinner=False)
def stats_for(variant: str, window_len: int):
    return qc.channel_stats(cached_model(variant), windows_for(1, window_len)[:, :-1])


@st.cache_data(max_entries=16, show_spinner=False)
def demo_for(variant: str, window_len: int, num_tokens: int, layer: int, head: int, bits: int, G: int, g: int,
             ch: int, factor: float):
    q, k = qc.queries_and_keys(cached_model(variant), windows_for(1, window_len)[:, :-1], layer, head)
    return qc.outlier_demo(k[:num_tokens], q[:num_tokens], bits, G, g, ch, factor)[1]


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
url.int("win", 4, 1, qe.MAX_WINDOWS, label="held-out windows")
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
    c[3].number_input("Held-out windows", 1, qe.MAX_WINDOWS, key="win",
                      help="Passages of the validation split (the last 10% of the corpus, never trained on).")
    c[4].select_slider("Window length (tokens)", WINDOW_LENS, key="len")

variant, bits = st.session_state["variant"], int(st.session_state["bits"])
G, g, R, sym = (int(st.session_state["G"]), int(st.session_state["g"]), int(st.session_state["R"]),
                st.session_state["sym"])
ecfg = qe.EvalConfig(st.session_state["win"], int(st.session_state["len"]))
model = model_or_stop(variant)
try:
    schemes = {kind: make_scheme(kind, bits, G, g, R, sym) for kind in ALL_KINDS}
    ecfg.check(model.cfg.max_seq_len)
except ValueError as exc:
    st.error(plain(exc))
    url.sync()
    st.stop()
eval_s = QUANT_EVAL_FACTOR * model_rates(variant, "eager").seconds(prefill_work(ecfg.window_len, ecfg.num_windows))
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
            scheme = make_scheme(kind, b, G, g, R, sym)
            progress(i / len(todo), f"run {i + 1} of {len(todo)}: {scheme.title}")
            out[(kind, b)] = evaluate(variant, ecfg.num_windows, ecfg.window_len, scheme)
        return out

    got = run_job(f"kv_quantization.{name}", (variant, ecfg, G, g, R, sym, tuple(todo)), eval_s * len(todo), measure,
                  what=f"{what}: {len(todo)} teacher-forced runs over {ecfg.num_windows} × {ecfg.window_len} tokens")
    results.update(got or {})
    return got is not None


if not run_jobs([(kind, bits) for kind in INT_KINDS] + [(k, 8) for k in FP8_KINDS],
                f"Comparing every INT{bits} scheme and FP8 with full precision", "chosen"):
    st.caption("Everything below is measured by this run. Fewer or shorter held-out windows start at once.")
    url.sync()
    st.stop()
chosen = {kind: results[(kind, bits if kind in SCHEME_KINDS else 8)] for kind in ALL_KINDS}
kivi, naive = chosen["kivi"], chosen["token"]
S = ecfg.window_len

st.header(f"INT{bits}: what it saves and what it costs")
show_metrics(qe.headline_metrics(kivi, naive, model.cfg, R), 4)
st.markdown(qe.perplexity_sentence(kivi, naive))
st.caption(f"± is the standard error over the {ecfg.num_windows} windows. Δ loss is the noisiest of the three "
           "measures: on a given passage a blurred cache can be luckier than the exact one. KL and top-1 agreement "
           "compare the two next-byte distributions directly and stay steady.")

st.subheader("Error by token position")
c = st.columns([2, 1, 1])
c[0].radio("Show", list(figs.METRIC_LABELS), key="metric", horizontal=True,
           format_func=lambda k: {"kl": "KL divergence", "delta_loss": "Δ loss", "agreement": "top-1 agreement"}[k])
c[1].select_slider("Positions per point", BINS, key="bin")
c[2].toggle("Log scale", key="log", disabled=st.session_state["metric"] != "kl")
metric = st.session_state["metric"]
frame = pd.concat([r.binned(int(st.session_state["bin"])).assign(key=k) for k, r in chosen.items()])
st.plotly_chart(figs.error_by_position(frame, metric, st.session_state["log"] and metric == "kl",
                                       [k for k in ALL_KINDS if k not in FP8_KINDS] + ["fp8_e4m3"]), width="stretch")
st.caption(qe.position_caption(kivi, naive, ecfg.num_windows, R))

st.subheader("Bits × scheme")
if st.session_state["all"]:
    run_jobs([(kind, b) for b in INT_BITS for kind in INT_KINDS], "Measuring every scheme at the other bit widths", "all")
else:
    run_jobs([(kind, b) for b in INT_BITS for kind in ("kivi", "token")], "Measuring KIVI and naive at 8, 4, 3, 2 bits",
             "bits")
table = qe.results_frame(list(results.values()), qb.fp16_bytes_per_token(model.cfg))
st.plotly_chart(figs.bits_heatmap(qe.metric_grid(results, metric, ALL_KINDS, INT_BITS), metric), width="stretch")
st.caption(f"The metric chosen above for the position chart. FP8 is 8 bits only (each value cast on its own, one "
           f"per-tensor scale of 1; {'torch float8 dtypes' if fp8_backend('e4m3') == 'torch' else 'emulated, this torch has no float8'})"
           f". Bytes per token at {S} tokens are in the table below.")
shown = table[["format", *TABLE_COLUMNS]]
st.dataframe(shown, hide_index=True, width="stretch", column_config=columns(TABLE_COLUMNS))
st.download_button("Download the bits × scheme table (CSV)", shown.to_csv(index=False),
                   f"kv_quantization_{variant}_G{G}_g{g}_R{R}.csv", "text/csv")
if not st.session_state["all"]:
    st.info("Blank cells: KIVI and naive per-token are measured at every bit width, the other schemes only at "
            f"INT{bits}. Switch on *Every scheme at every bit width* at the top to fill the table (cached after).")

st.header("Bytes: codes, scales, zero points and the residual window")
c = st.columns([3, 2])
c[0].plotly_chart(figs.bytes_by_part(qb.tiny_bytes_rows(model.cfg, [schemes[k] for k in ALL_KINDS], S), S),
                  width="stretch")
c[1].plotly_chart(figs.bytes_vs_context(qb.bytes_curves(model.cfg, schemes), R), width="stretch")
L, Hkv, D = model.cfg.n_layers, model.cfg.n_kv_heads, model.cfg.head_dim
st.latex(rf"\text{{bytes per token}} = 2 \cdot L \cdot H_{{kv}} \cdot d_h \cdot p = 2 \cdot {L}\cdot {Hkv} \cdot {D}"
         rf" \cdot p, \qquad p_{{\mathrm{{FP16}}}} = 2\,\mathrm{{B}},\quad p_{{\mathrm{{KIVI\,INT{bits}}}}} = "
         rf"{qb.bytes_per_value(model.cfg, kivi.bytes_per_token):.4f}\,\mathrm{{B}}\ \text{{at {S} tokens}}")
st.caption(qb.tiny_bytes_caption(model.cfg, variant, bits, R))

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
scale_schemes = [schemes["kivi"], schemes["token"], schemes["kivi_nores"], make_scheme("kivi", 8, G, g, R, sym), schemes["fp8_e4m3"]]
try:
    view = qb.scale_view(arch, gpu, scale_schemes, ctx, st.session_state["util"])
except ValueError as exc:
    st.error(plain(exc))
    view = None
if view is not None:
    show_metrics(view.metrics(bits), 3)
    st.dataframe(view.frame(), hide_index=True, width="stretch", column_config=columns(SCALE_COLUMNS))
    st.caption(view.caption())

st.header("Free-running: where greedy text first parts from full precision")
c = st.columns([3, 2, 3])
c[0].text_input("Prompt", key="prompt", max_chars=MAX_PROMPT, help=f"At most {MAX_PROMPT} bytes of UTF-8.")
c[1].slider("New tokens", 16, MAX_NEW, key="n")
c[2].selectbox("Scheme for the texts", ALL_KINDS, key="free", format_func=lambda k: schemes[k].title)
prompt_ids, n_new, free_kind = list(st.session_state["prompt"].encode("utf-8")), st.session_state["n"], \
    st.session_state["free"]
got = None
if not prompt_ids:
    st.error("The prompt is empty: type at least one character.")
elif len(prompt_ids) > MAX_PROMPT:
    st.error(f"The prompt is {len(prompt_ids)} bytes; the limit is {MAX_PROMPT}. Shorten it.")
else:
    free_s = QUANT_DECODE_FACTOR * model_rates(variant, "sdpa").seconds(cached_work(len(prompt_ids), n_new)) \
        + QUANT_EVAL_FACTOR * len(ALL_KINDS) * model_rates(variant, "eager").seconds(prefill_work(len(prompt_ids) + n_new))

    def free_and_divergence(progress):
        progress(0.0, "greedy decoding through both caches")
        fr = free_for(variant, tuple(prompt_ids), n_new, schemes[free_kind])  # bounded: always fits
        progress(0.7, "where every scheme parts from full precision")
        return fr, divergence_for(variant, tuple(prompt_ids), tuple(fr.ref_ids), tuple(schemes.values()))

    got = run_job("kv_quantization.free", (variant, tuple(prompt_ids), n_new, free_kind, bits, G, g, R, sym), free_s,
                  free_and_divergence, what=f"Generating {n_new} tokens through the full-precision and the quantized "
                  "cache")
if got is not None:
    run, div = got
    show_metrics(run.metrics(), 3)
    c = st.columns(2)
    c[0].markdown("**Full-precision cache**")
    c[0].code(run.marked_text(run.ref_ids), language=None, wrap_lines=True)
    c[1].markdown(f"**{schemes[free_kind].label}" + (f", INT{bits}**" if free_kind in SCHEME_KINDS else "**"))
    c[1].code(run.marked_text(run.quant_ids), language=None, wrap_lines=True)
    st.caption(f"Greedy decoding, one prefill call for the prompt and then one token per step through the cache. "
               f"{qg.MARK} marks where the texts part. Every scheme at this setting (one teacher-forced pass over the "
               "full-precision text finds the same position):")
    st.dataframe(qg.divergence_frame(list(schemes.values()), div), hide_index=True, width="stretch")

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
c = st.columns([3, 2])
c[0].plotly_chart(figs.channel_bars(stats.channel_mean("k")[layer, head], stats.channel_mean("v")[layer, head]),
                  width="stretch")
c[1].dataframe(stats.ratios_frame(), hide_index=True, width="stretch", height=340, column_config={
    "K max ÷ median": st.column_config.NumberColumn(format="%.1f×"),
    "V max ÷ median": st.column_config.NumberColumn(format="%.1f×")})
st.markdown(stats.outlier_sentence())
st.caption(f"|K| and |V| as cached (K after RoPE, which is what gets quantized) on the first held-out window of {S} "
           "tokens.")

st.subheader("A synthetic outlier channel, injected")
c = st.columns(2)
c[0].slider("Channel to make an outlier", 0, CFG.head_dim - 1, key="ch")
c[1].slider("Outlier size (× the head's mean |K|, added at every token)", 0.0, 50.0, step=0.5, key="factor")
ch, factor, T_demo = st.session_state["ch"], st.session_state["factor"], S // G * G
if T_demo == 0:
    st.error(f"The window of {S} tokens is shorter than one chunk of G={G}; choose a longer window or a smaller G.")
else:
    cases = queued(lambda: demo_for(variant, S, T_demo, layer, head, bits, G, g, ch, factor), "Injecting the outlier")
    st.plotly_chart(figs.outlier_errors(pd.DataFrame([vars(x) for x in cases])), width="stretch")
    st.caption(qc.outlier_caption(cases, layer, head, ch, factor, bits, G, g))

st.header("Seed 001's claims, checked")
check = seed_claims(table, bits, presets.get("llama-3.1-8b"), gpus.get("h100-sxm"))
render_claims(check.claims, "kv_quantization")
if check.unmeasured:
    st.info(check.unmeasured_sentence())
st.caption("Quantization blurs every token a little; eviction and sliding windows drop tokens outright. The "
           "byte counts behind the seed's 128 KiB-per-token example are checked on the KV memory page.")
url.sync()
