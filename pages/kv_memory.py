"""KV memory: the cache's bytes by model, batch, context and dtype; what fits on a GPU; the real
tiny model's cache measured; the seeds' figures checked."""

import streamlit as st

from app.claims import render_claims
from app.figures.memory import dtype_bars, kv_heatmap, memory_breakdown, variant_lines
from app.text import code, for_plotly, plain
from app.urlstate import UrlState
from app.work import run_job
from sim.cost.arch import estimate_num_params
from sim.cost.capacity import GpuConfig, capacity, dtype_frame, dtype_table, fit_message, int8_vs_fp16
from sim.cost.gpus import load_gpus
from sim.cost.hf_config import MAX_CONFIG_CHARS, parse_hf_config_with_notes
from sim.cost.kv_claims import seed_claims
from sim.cost.memory import (
    ELEMENT_BYTES,
    GROUP_SIZES,
    KV_DTYPES,
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_LAYERS_PER_KV,
    MAX_TINY_BATCH,
    WEIGHT_DTYPE_BITS,
    MemoryConfig,
    fmt_bytes,
    kv_grid,
    kv_memory,
    measurement_rows,
    presets_frame,
    variant_curves,
    variant_rows,
)
from sim.cost.presets import load_presets

CUSTOM = "custom"
TINY = ("mha", "gqa", "mqa")
MAX_URL_CONFIG = 8000

presets = load_presets()
gpus = load_gpus()
model_options = [*presets, CUSTOM]

st.title("KV memory")
st.markdown(
    "Every token a model has read leaves one **key** and one **value** vector per K/V head in **every layer**, "
    "and they stay for as long as the request lives. So the cache grows with *batch × context*, while the "
    "weights stay the same size. Choose a model, a batch and a context; the page counts the bytes exactly and "
    "checks whether they fit on a GPU."
)

url = UrlState("kv_memory")
url.choice("model", "llama-3.1-8b", model_options, label="model")
url.choice("kv", "fp16", list(KV_DTYPES), label="KV dtype")
url.choice("group", "128", [str(g) for g in GROUP_SIZES], label="group size")
url.int("batch", 16, 1, MAX_BATCH, label="batch")
url.int("ctx", 32768, 1, MAX_CONTEXT, label="context")
url.int("share", 1, 1, MAX_LAYERS_PER_KV, label="layers sharing one K/V")
url.choice("gpu", "h100-sxm", list(gpus), label="GPU")
url.int("ngpu", 1, 1, MAX_GPUS, label="number of GPUs")
url.float("util", 0.9, 0.05, 1.0, label="memory utilization")
url.choice("wdt", "bf16", list(WEIGHT_DTYPE_BITS), label="weight dtype")
url.bool("measure", False, label="measure the real model")
url.choice("tiny", "mha", list(TINY), label="tiny model")
url.int("tbatch", 4, 1, MAX_TINY_BATCH, label="tiny-model batch")
url.int("tctx", 256, 1, 1024, label="tiny-model context")
if st.session_state["model"] == CUSTOM:
    url.text("cfg", "", max_len=MAX_URL_CONFIG, label="pasted config.json")

c = st.columns([3, 2, 1.2, 1.3, 1.6])
c[0].selectbox("Model", model_options, key="model",
               format_func=lambda k: "Your own config.json (paste or upload)" if k == CUSTOM else presets[k].name)
c[1].selectbox("KV cache dtype", list(KV_DTYPES), key="kv", format_func=lambda k: KV_DTYPES[k].label)
c[2].selectbox("Group size g", [str(g) for g in GROUP_SIZES], key="group", disabled=not KV_DTYPES[st.session_state["kv"]].grouped,
               help="Integer formats store a scale and a zero point (2 B each) for every g values.")
c[3].number_input("Batch B (requests)", min_value=1, max_value=MAX_BATCH, step=1, key="batch")
c[4].number_input("Context S (tokens)", min_value=1, max_value=MAX_CONTEXT, step=1024, key="ctx")
c = st.columns([3, 1.2, 1.6, 1.3, 1.6])
c[0].selectbox("GPU", list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
c[1].number_input("GPUs", min_value=1, max_value=MAX_GPUS, step=1, key="ngpu",
                  help="Their memory is pooled, as tensor parallelism splits weights and K/V heads across them.")
c[2].slider("Memory utilization", 0.05, 1.0, step=0.01, key="util",
            help="The share a server may fill (vLLM's --gpu-memory-utilization, 0.9 by default); the rest is kept "
                 "for activations and the CUDA context.")
c[3].selectbox("Weight dtype", list(WEIGHT_DTYPE_BITS), key="wdt", format_func=str.upper)
c[4].number_input("Layers sharing one K/V", min_value=1, max_value=MAX_LAYERS_PER_KV, step=1, key="share",
                  help="Cross-layer sharing (as in Cross-Layer Attention): k adjacent layers of the same kind read "
                       "one stored K/V. 1 = none, which is what every preset does.")
url.show_problems()


def read_custom_config():
    """The architecture from the uploaded file, else from the pasted text; None with a message shown."""
    with st.expander("Your config.json", expanded=True, icon=":material/upload_file:"):
        st.caption("Parsed as data only (JSON, never run). An uploaded file wins over pasted text; only pasted "
                   f"text (up to {MAX_URL_CONFIG:,} characters) is kept in the link.")
        cols = st.columns(2)
        text = cols[0].text_area("Paste a Hugging Face config.json", key="cfg", height=180, max_chars=MAX_URL_CONFIG,
                                 placeholder='{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, ...}')
        upload = cols[1].file_uploader("…or upload one", type=["json"], key="cfg_file", max_upload_size=1)
        source = "pasted config.json"
        if upload is not None:
            raw = upload.getvalue()
            if len(raw) > MAX_CONFIG_CHARS:
                st.error(f"{code(upload.name)} is {len(raw):,} bytes; a config.json is at most {MAX_CONFIG_CHARS:,}.",
                         icon=":material/error:")
                return None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                st.error(f"{code(upload.name)} is not UTF-8 text (byte {exc.start:,}).", icon=":material/error:")
                return None
            source = f"uploaded {upload.name[:80]}"
        if not text.strip():
            st.info("Paste or upload a config.json to size its cache.", icon=":material/info:")
            return None
        try:
            arch, notes = parse_hf_config_with_notes(text, source=source)
        except ValueError as exc:
            st.error(plain(exc), icon=":material/error:")
            return None
        for note in notes:
            st.info(plain(note), icon=":material/info:")
        st.success(f"Read {code(arch.name)}: {arch.attention}, {arch.n_layers} layers, {arch.n_kv_heads} K/V heads of "
                   f"{arch.head_dim}, {arch.describe_layers()}.", icon=":material/check_circle:")
        return arch


arch = read_custom_config() if st.session_state["model"] == CUSTOM else presets[st.session_state["model"]]


@st.cache_data(max_entries=64, show_spinner=False)
def sized(cfg: MemoryConfig, gpu_cfg: GpuConfig):
    return kv_memory(cfg), capacity(cfg, gpu_cfg)


@st.cache_data(max_entries=64, show_spinner=False)
def tab_views(cfg: MemoryConfig, gpu_cfg: GpuConfig):
    """The tabs' sweeps: computed after the first chart has been sent."""
    return kv_grid(cfg), variant_curves(cfg), dtype_table(cfg, gpu_cfg)


def render_calculator(arch) -> None:
    try:
        cfg = MemoryConfig(arch, batch=st.session_state["batch"], context=st.session_state["ctx"],
                           kv_dtype=st.session_state["kv"], group_size=int(st.session_state["group"]),
                           layers_per_kv=st.session_state["share"])
        gpu_cfg = GpuConfig(gpus[st.session_state["gpu"]], num_gpus=st.session_state["ngpu"],
                            utilization=float(st.session_state["util"]), weight_dtype=st.session_state["wdt"])
        kv, cap = sized(cfg, gpu_cfg)
    except ValueError as exc:
        st.error(plain(exc), icon=":material/error:")
        return
    gpu_label = f"{gpu_cfg.num_gpus} × {gpu_cfg.gpu.name}" if gpu_cfg.num_gpus > 1 else gpu_cfg.gpu.name
    custom = arch.key not in presets
    name_md = code(arch.name) if custom else arch.name  # a pasted config's name is user text
    name_plot = for_plotly(arch.name)

    if cfg.context > arch.max_position_embeddings:
        st.warning(f"{cfg.context:,} tokens is beyond {name_md}'s trained context of "
                   f"{arch.max_position_embeddings:,}: the bytes are still counted, the model would not cope.",
                   icon=":material/warning:")
    if gpu_cfg.num_gpus > arch.n_kv_heads and arch.attention != "MLA":
        st.caption(f":material/info: With {gpu_cfg.num_gpus} GPUs and {arch.n_kv_heads} K/V heads, tensor parallelism "
                   "would copy some K/V heads onto several GPUs; those copies are not counted here.")

    m = st.columns(6)
    windows = (f" while the context fits every window; averaged over these {cfg.context:,} tokens it is "
               f"{fmt_bytes(kv.avg_bytes_per_token)}") if kv.per_request_bytes < kv.bytes_per_token * cfg.context else ""
    m[0].metric("Per token", fmt_bytes(kv.bytes_per_token), help=f"{kv.bytes_per_token:,} B, all layers{windows}")
    m[1].metric("Per request", fmt_bytes(kv.per_request_bytes), help=f"{kv.per_request_bytes:,} B")
    m[2].metric("All requests", fmt_bytes(kv.total_bytes), help=f"{kv.total_bytes:,} B")
    budget = cap.kv_budget_bytes
    m[3].metric("Room for KV", fmt_bytes(budget) if budget > 0 else "none",
                help=f"{gpu_label}: {fmt_bytes(cap.total_bytes)} × {gpu_cfg.utilization:g} − weights "
                     f"{fmt_bytes(cap.weight_bytes)} = {budget:,} B")
    m[4].metric("Max requests", f"{cap.max_requests:,}", delta=f"at S = {cfg.context:,}", delta_color="off",
                delta_arrow="off", help="Concurrent requests whose cache fits at this context")
    m[5].metric("Max context", f"{cap.max_context:,}", delta=f"at B = {cfg.batch:,}", delta_color="off",
                delta_arrow="off",
                help="Limited by the model's trained context" if cap.max_context_limited_by == "model"
                else "Longest context whose cache fits for this batch (limited by memory)")

    left, right = st.columns([3, 2])
    with left:
        st.subheader("The formula, with your numbers")
        st.latex(r"\text{bytes} = 2 \cdot L \cdot H_{kv} \cdot d_h \cdot p \cdot B \cdot S")
        st.table(kv.steps_frame(), hide_index=True)
        st.caption(f"{name_md}: {arch.attention}, {arch.n_heads} query heads, {arch.n_kv_heads} K/V heads of "
                   f"{arch.head_dim}, {arch.describe_layers()}. Source: "
                   + (plain(arch.source) if custom else arch.source))
        if arch.notes:
            st.caption(plain(arch.notes) if custom else arch.notes)
    with right:
        st.subheader("Does it fit?")
        st.plotly_chart(memory_breakdown(cap, gpu_label), key="breakdown")
        kind, message = fit_message(kv, cap, gpu_cfg, gpu_label, estimate_num_params(arch))
        icon = ":material/check_circle:" if kind == "fits" else ":material/block:"
        (st.success if kind == "fits" else st.warning)(message, icon=icon)

    tabs = st.tabs(["Batch × context", "MHA · GQA · MQA · MLA", "KV dtypes", "Measured on the real model",
                    "Claims in the seeds", "Model presets"])
    grid, curves, dtypes = tab_views(cfg, gpu_cfg)
    with tabs[0]:
        st.plotly_chart(kv_heatmap(grid, budget, (cfg.context, cfg.batch), arch.max_position_embeddings,
                                   f"{name_plot}, {cfg.kv_dtype.upper()} cache: total KV bytes"), key="heatmap")
        st.caption("Each cell is batch × context of one model: the cache is linear in both, so every step up or right "
                   "multiplies it. Left of and below the orange line the cache fits next to the weights; "
                   "sliding-window layers bend the colours once the context passes their window.")
        st.download_button("Download this grid (CSV)", grid.to_frame(budget).to_csv(index=False),
                           file_name=f"kv_grid_{arch.key or 'custom'}_{cfg.kv_dtype}.csv", mime="text/csv",
                           on_click="ignore", icon=":material/download:", key="dl_grid")
    with tabs[1]:
        render_variants(cfg, curves, budget, name_plot)
    with tabs[2]:
        render_dtypes(cfg, dtypes)
    with tabs[3]:
        render_measured()
    with tabs[4]:
        render_seed_claims()
    with tabs[5]:
        render_presets()


def render_variants(cfg: MemoryConfig, curves, budget: int, name_plot: str) -> None:
    st.plotly_chart(variant_lines(curves, budget, cfg.context,
                                  f"{name_plot} with each attention kind, batch {cfg.batch:,}"), key="variants")
    rows = variant_rows(curves, cfg.kv_dtype, cfg.group_size)
    st.dataframe(rows, hide_index=True, width="stretch")
    st.markdown(
        "- **MHA** keeps a K and a V head for every query head; **GQA** lets a group of query heads share one; "
        "**MQA** keeps a single one. The cache scales with the number of K/V heads, nothing else changes.\n"
        "- **MLA** (DeepSeek-V2/V3) stores neither K nor V. Per token and layer it keeps one compressed latent "
        "of d_c values, from which the K and V of *every* head are re-projected (those up-projections fold into "
        "the query and output weights), plus one small RoPE key of d_R values shared by all heads, because the "
        "rotation cannot pass through that folding. Hence (d_c + d_R) · p: **no ×2** (one latent yields both K "
        "and V) and **no ×H_kv**. A model that is not MLA is shown here with DeepSeek-V2's ratios: "
        "d_c = 4·d_h, d_R = d_h/2.\n"
        "- **Sliding-window** layers keep only the last W tokens, so their share stops growing at S = W "
        "(Mistral 7B v0.1: every layer, W = 4,096). **Hybrid** models mix them with global layers: Gemma 2 "
        "alternates 1:1 (W = 4,096), Gemma 3 uses 5 local to 1 global (W = 1,024)."
    )


def arrow_safe(df):
    """Byte counts past 2^63 (absurd configs only) cannot go through Arrow: show those columns as text."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object and any(isinstance(v, int) and abs(v) >= 1 << 62 for v in out[col]):
            out[col] = [f"{v:,}" for v in out[col]]
    return out


def render_dtypes(cfg: MemoryConfig, rows) -> None:
    st.plotly_chart(dtype_bars(rows, cfg.kv_dtype, cfg.context), key="dtypes")
    df = dtype_frame(rows)
    st.dataframe(arrow_safe(df), hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="localized")
                                for c in ("Per token (B)", "Per request (B)", "All requests (B)")})
    st.download_button("Download this table (CSV)", df.to_csv(index=False), file_name="kv_dtypes.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl_dtypes")
    st.caption(f"FP8 here carries one scale per tensor (a few bytes per layer, not counted). The integer formats "
               f"store a 2-byte scale and a 2-byte zero point for every g = {cfg.group_size} values, so INT8 is "
               f"{int8_vs_fp16(cfg.group_size):.4g}× FP16, not 0.5×. Halving the bytes per value "
               "doubles the requests that fit only when the weights stay the same: they do, the weight dtype is "
               "a separate choice.")


@st.cache_data(max_entries=16, show_spinner="Allocating and filling the tiny model's cache…")
def measure(name: str, batch: int, context: int):
    from app.resources import model as tiny_model
    from sim.model.device import pick_device, pick_dtype
    from sim.model.errors import CheckpointError
    from sim.model.measure import measure_tiny_cache, untrained_tiny_model

    try:
        m = tiny_model(name)
        weights = f"trained checkpoint assets/models/{name}.safetensors"
    except CheckpointError:
        device = pick_device()
        m = untrained_tiny_model(name, device, pick_dtype(device))
        weights = f"untrained (no assets/models/{name}.safetensors yet): the bytes depend on shapes, not weights"
    return measure_tiny_cache(m, batch, context, weights=weights, preset=presets[f"tiny-{name}"])


def render_measured() -> None:
    st.markdown("The lab's own tiny model runs on this machine. This allocates its real `ContiguousKVCache` "
                "(`sim/model/kvcache.py`) for the batch and context below, fills it with a real prefill, and counts "
                "the bytes of the K and V tensors next to the formula.")
    c = st.columns([1.4, 1, 1, 1.2])
    c[0].selectbox("Tiny model", list(TINY), key="tiny", format_func=lambda k: presets[f"tiny-{k}"].name)
    c[1].number_input("Batch", min_value=1, max_value=MAX_TINY_BATCH, step=1, key="tbatch")
    c[2].number_input("Context", min_value=1, max_value=1024, step=64, key="tctx")
    c[3].toggle("Run it", key="measure", help="Loads torch and the model, so it is off until asked for.")
    if not st.session_state["measure"]:
        st.info("Switch on **Run it** to allocate and measure.", icon=":material/play_circle:")
        return
    name, batch, context = st.session_state["tiny"], st.session_state["tbatch"], st.session_state["tctx"]
    try:
        from app.resources import model_rates
        from sim.work.run_cost import prefill_work

        r = run_job("kv_memory.measure", (name, batch, context),
                    model_rates(name, "sdpa").seconds(prefill_work(context, batch)),
                    lambda progress: measure(name, batch, context),
                    what=f"Filling the tiny model's cache with a prefill of {batch} × {context:,} tokens")
    except ValueError as exc:
        st.error(plain(exc), icon=":material/error:")
        return
    if r is None:
        return
    p = ELEMENT_BYTES[r.dtype]
    rows = measurement_rows(r)
    st.dataframe(rows, hide_index=True, width="stretch", column_config={"Bytes": st.column_config.NumberColumn(format="%d")})
    st.caption(f"Device {r.device}, cache dtype {r.dtype.upper()} (p = {p}); each tensor is (B, H_kv, S, D) = "
               f"{r.tensor_shape}; weights: {r.weights}.")
    if r.agree:
        st.success(f"They agree: {r.measured_bytes:,} B = {fmt_bytes(r.measured_bytes)}.", icon=":material/check_circle:")
        if r.cuda_allocated_delta is not None and r.cuda_allocated_delta != r.measured_bytes:
            st.caption("On the GPU the allocator hands out blocks in multiples of 512 B, so small tensors take a "
                       "little more than their bytes; the formula with that rounding matches exactly.")
    else:
        st.error("Measured and formula differ — that is a bug in the lab, please report it.", icon=":material/error:")


def render_seed_claims() -> None:
    st.markdown("Every KV-size figure in seeds 000, 001, 002 and 004, recomputed with this page's calculator "
                "(Llama 3 70B has the same attention shape as the Llama 3.1 70B preset). GB = 10⁹ B, GiB = 2³⁰ B.")
    render_claims(seed_claims(presets, gpus), "kv_memory")


def render_presets() -> None:
    df = presets_frame(presets)
    st.dataframe(df, hide_index=True, width="stretch", height=36 * (len(df) + 1) + 4,
                 column_config={"KV per token (B)": st.column_config.NumberColumn(format="localized"),
                                "Trained context": st.column_config.NumberColumn(format="localized")})
    st.caption("Presets are data (assets/presets/models.json): each model's published config.json fields, parsed "
               "by the same code as a pasted file. Parameter estimates count embeddings, attention and MLP/expert "
               "matrices (norms and biases left out).")
    st.download_button("Download the presets (CSV)", df.to_csv(index=False), file_name="kv_presets.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl_presets")


if arch is not None:
    render_calculator(arch)
else:
    st.subheader("Claims in the seeds")
    render_seed_claims()
url.sync()
