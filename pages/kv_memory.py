"""KV memory: the cache's bytes by model, batch, context and dtype; what fits on a GPU; the real
tiny model's cache measured; the seeds' figures checked."""

import streamlit as st

from app.claims import render_claims
from app.controls import kv_memory as controls
from app.figures.memory import dtype_bars, engine_bars, kv_heatmap, memory_breakdown, variant_lines
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.runs import kv_memory as runs
from app.text import code, for_plotly, plain
from sim.cost import kv_readouts as say
from sim.cost.arch import estimate_num_params
from sim.cost.capacity import dtype_frame, fit_message
from sim.cost.gpus import load_gpus
from sim.cost.hf_config import MAX_CONFIG_CHARS, parse_hf_config_with_notes
from sim.cost.kv_claims import seed_claims
from sim.cost.kv_engine import vllm_command
from sim.cost.memory import MemoryConfig, measurement_rows, presets_frame, variant_rows
from sim.cost.presets import load_presets

presets, gpus = load_presets(), load_gpus()

st.title("KV memory")
st.markdown(
    "Every token a model has read leaves one **key** and one **value** vector per K/V head in **every layer**, "
    "and they stay for as long as the request lives. So the cache grows with *batch × context*, while the "
    "weights stay the same size. Choose a model, a batch and a context; the page counts the bytes exactly and "
    "checks whether they fit on a GPU."
)
url = controls.register(presets, gpus)
choices = controls.draw(url, presets, gpus)


def read_custom_config():
    """The architecture from the uploaded file, else from the pasted text; None with a message shown."""
    with st.expander("Your config.json", expanded=True, icon=":material/upload_file:"):
        st.caption("Parsed as data only (JSON, never run). An uploaded file wins over pasted text; only pasted "
                   f"text (up to {controls.MAX_URL_CONFIG:,} characters) is kept in the link.")
        cols = st.columns(2)
        text = cols[0].text_area("Paste a Hugging Face config.json", key="cfg", height=180,
                                 max_chars=controls.MAX_URL_CONFIG,
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
        st.success(say.config_read(arch, code(arch.name)), icon=":material/check_circle:")
        return arch


def render_calculator(arch) -> None:
    try:
        cfg, gpu_cfg = choices.memory_config(arch), choices.gpu_config(gpus)
        kv, cap = runs.sized(cfg, gpu_cfg)
        alloc = runs.allocated(cfg, choices.engine_config())
    except ValueError as exc:
        st.error(plain(exc), icon=":material/error:")
        return
    custom = arch.key not in presets
    name_md = code(arch.name) if custom else arch.name  # a pasted config's name is user text
    if (beyond := say.beyond_trained_context(cfg, name_md)) is not None:
        st.warning(beyond, icon=":material/warning:")
    if (note := say.replicated_heads_note(arch, gpu_cfg)) is not None:
        st.caption(f":material/info: {note}")
    show_metrics(say.kv_metrics(kv, cap, gpu_cfg))

    left, right = st.columns([3, 2], vertical_alignment="center")
    gpu_label = say.gpu_label(gpu_cfg)
    show_chart_in(left, memory_breakdown(cap, gpu_label, cap.takeaway(gpu_label)), key="breakdown")
    with right:
        kind, message = fit_message(kv, cap, gpu_cfg, gpu_label, estimate_num_params(arch))
        icon = ":material/check_circle:" if kind == "fits" else ":material/block:"
        (st.success if kind == "fits" else st.warning)(message, icon=icon)
        st.caption(say.shape_caption(arch, name_md) + " Source: " + (plain(arch.source) if custom else arch.source))
        if arch.notes:
            st.caption(plain(arch.notes) if custom else arch.notes)
    command, command_notes = vllm_command(arch, kv, alloc, gpu_cfg.utilization, gpu_cfg.num_gpus)
    with st.expander("The vLLM command for this view", icon=":material/terminal:"):
        st.code(command, language="bash")
        st.caption(say.command_caption(kv, alloc))
        for note in command_notes:
            st.caption(f":material/info: {note}")

    slug, tab = controls.open_tab(url)  # only the open tab's body runs
    with tab:
        {"formula": lambda: render_formula(kv, alloc),
         "engine": lambda: render_engine(kv, alloc, cap.kv_budget_bytes, for_plotly(arch.name)),
         "grid": lambda: render_grid(cfg, cap.kv_budget_bytes, for_plotly(arch.name)),
         "variants": lambda: render_variants(cfg, runs.curves(cfg), cap.kv_budget_bytes, for_plotly(arch.name)),
         "dtypes": lambda: render_dtypes(cfg, runs.dtypes(cfg, gpu_cfg)),
         "measured": render_measured, "claims": render_seed_claims, "presets": render_presets}[slug]()


def render_formula(kv, alloc) -> None:
    st.latex(r"\text{bytes} = 2 \cdot L \cdot H_{kv} \cdot d_h \cdot p \cdot B \cdot S")
    st.table(kv.steps_frame(), hide_index=True)
    st.caption("L layers, H_kv K/V heads of d_h values, p bytes per value, B requests of S tokens each; the 2 is one "
               "key and one value. Change any control above and every line is recomputed.")
    st.markdown("**By layer group** — what each kind of layer keeps for one request, its share of the formula's "
                "total, and what a vLLM-style allocator reserves for it:")
    show_table(say.arrow_safe(say.group_frame(kv, alloc)), hide_index=True, width="stretch")
    st.caption(say.groups_caption(kv))


def render_engine(kv, alloc, budget: int, name_plot: str) -> None:
    show_metrics(say.engine_metrics(kv, alloc, budget))
    rows = say.group_rows(kv, alloc)
    show_chart(engine_bars(rows, say.engine_takeaway(kv, alloc, name_plot)), key="engine")
    st.caption(say.engine_caption(kv, alloc))
    for note in alloc.notes:
        st.caption(f":material/info: {note}")
    show_table(say.arrow_safe(say.engine_frame(alloc)), hide_index=True, width="stretch")
    st.caption("The exact formula counts what the cache holds; vLLM reserves whole blocks per KV cache group, as "
               "its 'Maximum concurrency for N tokens per request' line counts with --max-model-len N. Both use the "
               "same room for KV (the GPU × utilization − weights).")


def render_grid(cfg: MemoryConfig, budget: int, name_plot: str) -> None:
    grid = runs.grid(cfg)
    show_chart(kv_heatmap(grid, budget, (cfg.context, cfg.batch), cfg.arch.max_position_embeddings,
                          say.grid_takeaway(grid, cfg, budget, name_plot)), key="heatmap")
    st.caption(say.grid_caption(grid, cfg, budget))
    st.download_button("Download this grid (CSV)", grid.to_frame(budget).to_csv(index=False),
                       file_name=f"kv_grid_{cfg.arch.key or 'custom'}_{cfg.kv_dtype}.csv", mime="text/csv",
                       on_click="ignore", icon=":material/download:", key="dl_grid")


def render_variants(cfg: MemoryConfig, curves, budget: int, name_plot: str) -> None:
    show_chart(variant_lines(curves, budget, cfg.context, say.variants_takeaway(curves, cfg, name_plot)),
               key="variants")
    show_table(variant_rows(curves, cfg.kv_dtype, cfg.group_size), hide_index=True, width="stretch")
    st.markdown(
        "- **MHA** keeps a K and a V head for every query head; **GQA** lets a group of query heads share one; "
        "**MQA** keeps a single one. The cache scales with the number of K/V heads, nothing else changes.\n"
        "- **MLA** (DeepSeek-V2/V3) stores neither K nor V. Per token and layer it keeps one compressed latent "
        "of d_c values, from which the K and V of *every* head are re-projected (those up-projections fold into "
        "the query and output weights), plus one small RoPE key of d_R values shared by all heads, because the "
        "rotation cannot pass through that folding. Hence (d_c + d_R) · p: **no ×2** (one latent yields both K "
        f"and V) and **no ×H_kv**. {say.mla_note(curves, cfg.arch)}\n"
        "- **Sliding-window** layers keep only the last W tokens, so their share stops growing at S = W. "
        f"**Hybrid** models mix them with global layers. {say.windowed_presets_note(presets)}"
    )


def render_dtypes(cfg: MemoryConfig, rows) -> None:
    show_chart(dtype_bars(rows, cfg.kv_dtype, say.dtypes_takeaway(rows, cfg.kv_dtype, cfg.context)), key="dtypes")
    df = dtype_frame(rows)
    show_table(say.arrow_safe(df), hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="localized")
                                for c in ("Per token (B)", "Per request (B)", "All requests (B)")})
    st.download_button("Download this table (CSV)", df.to_csv(index=False), file_name="kv_dtypes.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl_dtypes")
    st.caption(say.dtypes_caption(cfg.group_size))


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
    tiny = controls.draw_tiny(presets)
    if not tiny.run:
        st.info("Switch on **Run it** to allocate and measure.", icon=":material/play_circle:")
        return
    try:
        r = runs.measured(tiny.name, tiny.batch, tiny.context, measure)
    except ValueError as exc:
        st.error(plain(exc), icon=":material/error:")
        return
    if r is None:
        return
    show_table(measurement_rows(r), hide_index=True, width="stretch",
                 column_config={"Bytes": st.column_config.NumberColumn(format="%d")})
    st.caption(r.caption)
    if r.agree:
        st.success(r.agreement, icon=":material/check_circle:")
        if r.allocator_rounds_up:
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
    show_table(df, hide_index=True, width="stretch", height=36 * (len(df) + 1) + 4,
                 column_config={"KV per token (B)": st.column_config.NumberColumn(format="localized"),
                                "Trained context": st.column_config.NumberColumn(format="localized")})
    st.caption("Presets are data (assets/presets/models.json): each model's published config.json fields, parsed "
               "by the same code as a pasted file. Parameter estimates count embeddings, attention and MLP/expert "
               "matrices (norms and biases left out).")
    st.download_button("Download the presets (CSV)", df.to_csv(index=False), file_name="kv_presets.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl_presets")


arch = read_custom_config() if choices.model == controls.CUSTOM else presets[choices.model]
if arch is not None:
    render_calculator(arch)
else:
    st.subheader("Claims in the seeds")
    render_seed_claims()
url.sync()
