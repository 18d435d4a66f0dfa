"""KV memory: the cache's bytes by model, batch, context and dtype; what fits on a GPU; the real
tiny model's cache measured; the seeds' figures checked."""

import streamlit as st

from app import engine_tabs
from app.claims import render_claims
from app.controls import kv_memory as controls
from app.figures.memory import dtype_bars, engine_bars, kv_heatmap, memory_breakdown, variant_lines
from app.i18n import lang, page_title, t
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.runs import kv_memory as runs
from app.text import code, for_plotly, plain
from sim.cost.arch import estimate_num_params
from sim.cost.gpus import load_gpus
from sim.cost.hf_config import MAX_CONFIG_CHARS, parse_hf_config_with_notes
from sim.cost.kv_engine import vllm_command
from sim.cost.memory import MemoryConfig, presets_frame
from sim.cost.presets import load_presets
from sim.words import cost as say
from sim.words import say as say_msg
from sim.words import why
from sim.words.capacity import dtype_frame, fit_message, fit_takeaway
from sim.words.kv_claims import seed_claims

presets, gpus = load_presets(), load_gpus()
CONFIG_PLACEHOLDER = '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, ...}'  # model input
L = lang()

st.title(page_title("kv_memory"))
st.markdown(t("kvmem.intro"))
url = controls.register()
choices = controls.draw(url, presets, gpus)


def read_custom_config():
    """The architecture from the uploaded file, else from the pasted text; None with a message shown."""
    with st.expander(t("kvmem.cfg_box"), expanded=True, icon=":material/upload_file:"):
        st.caption(t("kvmem.cfg_caption", n=f"{controls.MAX_URL_CONFIG:,}"))
        cols = st.columns(2)
        text = controls.CFG.draw(cols[0], height=180, placeholder=CONFIG_PLACEHOLDER)
        upload = cols[1].file_uploader(t("kvmem.cfg_upload"), type=["json"], key="cfg_file", max_upload_size=1)
        source = t("kvmem.cfg_pasted")
        if upload is not None:
            raw = upload.getvalue()
            if len(raw) > MAX_CONFIG_CHARS:
                st.error(t("kvmem.cfg_too_big", name=code(upload.name), n=f"{len(raw):,}", max=f"{MAX_CONFIG_CHARS:,}"),
                         icon=":material/error:")
                return None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                st.error(t("kvmem.cfg_not_utf8", name=code(upload.name), n=f"{exc.start:,}"), icon=":material/error:")
                return None
            source = t("kvmem.cfg_uploaded", name=upload.name[:80])
        if not text.strip():
            st.info(t("kvmem.cfg_empty"), icon=":material/info:")
            return None
        try:
            arch, notes = parse_hf_config_with_notes(text, source=source, unnamed=t("kvmem.cfg.unnamed"))
        except ValueError as exc:
            st.error(plain(why(exc, L)), icon=":material/error:")
            return None
        for note in notes:
            st.info(plain(say_msg(L, note)), icon=":material/info:")
        st.success(say.config_read(arch, code(arch.name), L), icon=":material/check_circle:")
        return arch


def render_calculator(arch) -> None:
    try:
        cfg, gpu_cfg = choices.memory_config(arch), choices.gpu_config(gpus)
        kv, cap = runs.sized(cfg, gpu_cfg)
        alloc = runs.allocated(cfg, choices.engine_config())
    except ValueError as exc:
        st.error(plain(why(exc, L)), icon=":material/error:")
        return
    custom = arch.key not in presets
    name_md = code(arch.name) if custom else arch.name  # a pasted config's name is user text
    if (beyond := say.beyond_trained_context(cfg, name_md, L)) is not None:
        st.warning(beyond, icon=":material/warning:")
    if (note := say.replicated_heads_note(arch, gpu_cfg, L)) is not None:
        st.caption(f":material/info: {note}")
    show_metrics(say.kv_metrics(kv, cap, gpu_cfg, L))

    left, right = st.columns([3, 2], vertical_alignment="center")
    gpu_label = say.gpu_label(gpu_cfg)
    show_chart_in(left, memory_breakdown(cap, gpu_label, fit_takeaway(cap, gpu_label, L), L), key="breakdown")
    with right:
        kind, message = fit_message(kv, cap, gpu_cfg, gpu_label, estimate_num_params(arch), L)
        icon = ":material/check_circle:" if kind == "fits" else ":material/block:"
        (st.success if kind == "fits" else st.warning)(message, icon=icon)
        source = plain(arch.source) if custom else arch.source
        st.caption(say.shape_caption(arch, name_md, L) + t("kvmem.source", source=source))
        if arch.notes:  # a preset's note in the page language; a pasted config's own text as it came
            st.caption(plain(arch.notes) if custom else (arch.notes_ko if L == "ko" and arch.notes_ko else arch.notes))
    if arch.key == runs.REAL_PRESET:
        render_real_cache(arch)
    command, command_notes = vllm_command(arch, kv, alloc, gpu_cfg.utilization, gpu_cfg.num_gpus)
    with st.expander(t("kvmem.command"), icon=":material/terminal:"):
        st.code(command, language="bash")
        st.caption(say.command_caption(kv, alloc, L))
        for note in command_notes:
            st.caption(f":material/info: {say_msg(L, note)}")
        engine_tabs.version_caption()

    slug, tab = controls.open_tab(url)  # only the open tab's body runs
    with tab:
        {"formula": lambda: render_formula(kv, alloc),
         "engine": lambda: render_engine(kv, alloc, cap.kv_budget_bytes, for_plotly(arch.name), gpu_cfg.num_gpus),
         "prefix_hit": lambda: engine_tabs.render_prefix_hit(cfg, choices.engine_config(), for_plotly(arch.name)),
         "log": lambda: engine_tabs.render_log(cfg, choices.engine_config(), gpu_cfg.num_gpus, gpu_cfg.gpu.name,
                                               cap.kv_budget_bytes, name_md, runs.allocated),
         "grid": lambda: render_grid(cfg, cap.kv_budget_bytes, for_plotly(arch.name)),
         "variants": lambda: render_variants(cfg, runs.curves(cfg), cap.kv_budget_bytes, for_plotly(arch.name)),
         "dtypes": lambda: render_dtypes(cfg, runs.dtypes(cfg, gpu_cfg)),
         "measured": render_measured, "claims": render_seed_claims, "presets": render_presets}[slug]()


def render_real_cache(arch) -> None:
    """The real model's cache measured beside the formula (its wheel installed), else one line on adding it."""
    from app.model_picker import real_unavailable

    st.markdown(f"**{t('rp.kv.head')}**")
    if (missing := real_unavailable()) is not None:
        st.info(missing, icon=":material/download:")
        return
    r = runs.real_cache_bytes(arch)
    if r is None:
        return
    import pandas as pd

    stored = {"run": t("rp.kv.as_run", dtype=r.run_dtype.upper(), device=r.device), "fp16": t("rp.kv.cast")}
    show_table(pd.DataFrame([{t("rp.kv.col.dtype"): stored[what], t("rp.kv.col.measured"): got,
                              t("rp.kv.col.formula"): want, t("rp.kv.col.per_token"): per_token,
                              t("rp.kv.col.same"): t("rp.yes" if same else "rp.no")}
                             for what, got, want, per_token, same in r.rows()]), hide_index=True, width="stretch")
    (st.success if r.agree else st.error)(plain(say_msg(L, r.verdict())),
                                          icon=":material/check_circle:" if r.agree else ":material/error:")


def render_formula(kv, alloc) -> None:
    st.latex(r"\text{bytes} = 2 \cdot L \cdot H_{kv} \cdot d_h \cdot p \cdot B \cdot S")
    st.table(say.steps_frame(kv, L), hide_index=True)
    st.caption(t("kvmem.formula_caption"))
    st.markdown(t("kvmem.by_group"))
    show_table(say.arrow_safe(say.group_frame(kv, alloc, L)), hide_index=True, width="stretch")
    st.caption(say.groups_caption(kv, L))


def render_engine(kv, alloc, budget: int, name_plot: str, num_gpus: int) -> None:
    show_metrics(say.engine_metrics(kv, alloc, budget, L))
    engine_tabs.per_gpu_line(kv, num_gpus)
    rows = say.group_rows(kv, alloc, L)
    show_chart(engine_bars(rows, say.engine_takeaway(kv, alloc, name_plot, L), L), key="engine")
    st.caption(say.engine_caption(kv, alloc, L))
    for note in alloc.notes:
        st.caption(f":material/info: {say_msg(L, note)}")
    show_table(say.arrow_safe(say.engine_frame(alloc, L)), hide_index=True, width="stretch")
    st.caption(t("kvmem.engine_caption"))
    engine_tabs.version_caption()


def render_grid(cfg: MemoryConfig, budget: int, name_plot: str) -> None:
    grid = runs.grid(cfg)
    show_chart(kv_heatmap(grid, budget, (cfg.context, cfg.batch), cfg.arch.max_position_embeddings,
                          say.grid_takeaway(grid, cfg, budget, name_plot, L), L), key="heatmap")
    st.caption(say.grid_caption(grid, cfg, budget, L))
    st.download_button(t("kvmem.dl_grid"), grid.to_frame(budget).to_csv(index=False),
                       file_name=f"kv_grid_{cfg.arch.key or 'custom'}_{cfg.kv_dtype}.csv", mime="text/csv",
                       on_click="ignore", icon=":material/download:", key="dl_grid")


def render_variants(cfg: MemoryConfig, curves, budget: int, name_plot: str) -> None:
    show_chart(variant_lines(curves, budget, cfg.context, say.variants_takeaway(curves, cfg, name_plot, L), L),
               key="variants")
    show_table(say.variant_frame(curves, cfg, L), hide_index=True, width="stretch")
    st.markdown(t("kvmem.variants_text", mla=say.mla_note(curves, cfg.arch, L),
                  windowed=say.windowed_presets_note(presets, L)))


def render_dtypes(cfg: MemoryConfig, rows) -> None:
    show_chart(dtype_bars(rows, cfg.kv_dtype, say.dtypes_takeaway(rows, cfg.kv_dtype, cfg.context, L), L),
               key="dtypes")
    df = dtype_frame(rows, L)
    show_table(say.arrow_safe(df), hide_index=True, width="stretch",
               column_config={t(f"kvmem.col.{c}"): st.column_config.NumberColumn(format="localized")
                              for c in ("per_token_b", "per_request_b", "all_requests_b")})
    st.download_button(t("kvmem.dl_table"), df.to_csv(index=False), file_name="kv_dtypes.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl_dtypes")
    st.caption(say.dtypes_caption(cfg.group_size, L))


def render_measured() -> None:
    st.markdown(t("kvmem.measured_intro"))
    tiny = controls.draw_tiny(presets)
    if not tiny.run:
        st.info(t("kvmem.measured_off"), icon=":material/play_circle:")
        return
    try:
        r = runs.measured(tiny.name, tiny.batch, tiny.context, L)
    except ValueError as exc:
        st.error(plain(why(exc, L)), icon=":material/error:")
        return
    if r is None:
        return
    show_table(say.measurement_frame(r, L), hide_index=True, width="stretch",
               column_config={t("kvmem.col.bytes"): st.column_config.NumberColumn(format="%d")})
    st.caption(say.measured_caption(r, L))
    if r.agree:
        st.success(say.measured_agreement(r, L), icon=":material/check_circle:")
        if r.allocator_rounds_up:
            st.caption(t("kvmem.measured_rounding"))
    else:
        st.error(t("kvmem.measured_differ"), icon=":material/error:")


def render_seed_claims() -> None:
    st.markdown(t("kvmem.claims_intro"))
    render_claims(seed_claims(presets, gpus, L), "kv_memory")


def render_presets() -> None:
    df = say.presets_table(presets_frame(presets), presets, L)
    show_table(df, hide_index=True, width="stretch", height=36 * (len(df) + 1) + 4,
               column_config={t(f"kvmem.col.{c}"): st.column_config.NumberColumn(format="localized")
                              for c in ("kv_per_token_b", "trained_context")})
    st.caption(t("kvmem.presets_caption"))
    st.download_button(t("kvmem.dl_presets"), df.to_csv(index=False), file_name="kv_presets.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl_presets")


arch = read_custom_config() if choices.model == controls.CUSTOM else presets[choices.model]
if arch is not None:
    render_calculator(arch)
else:
    st.subheader(t("kvmem.tab.claims"))
    render_seed_claims()
url.sync()
