"""The KV memory page's engine views: the prefix-hit staircase tab, the engine-log tab, and the per-GPU line under
tensor parallelism. Each draws one sim call's result; every sentence comes from sim/ in the page language."""

from __future__ import annotations

import streamlit as st

from app.cli_kv import CLI_KV_DTYPES
from app.controls.declared import Number, Text
from app.figures.memory import prefix_staircase
from app.i18n import lang, t
from app.metrics import show_metrics
from app.present import show_chart, show_table
from app.text import plain
from sim.cost import engine_log, prefix_hit, tensor_parallel
from sim.cost.memory import MAX_CONTEXT, MemoryConfig, kv_memory
from sim.cost.vllm_rules import version_label
from sim.refusal import why
from sim.words import engine as engine_words

MAX_URL_LOG = 6000  # bytes of a pasted log kept in the link


PLEN = Number("plen", 2000, 1, MAX_CONTEXT, step=64, label="engine.ctl.plen", url_label="engine.url.plen")
LOG = Text("log", "", max_len=MAX_URL_LOG, max_chars=MAX_URL_LOG, widget="text_area", label="engine.log_box",
           url_label="engine.url.log")


def register(url) -> None:
    """The link's values these views read."""
    url.add(PLEN, LOG)


def version_caption() -> None:
    st.caption(t("engine.version_caption", vllm=version_label()))


def per_gpu_line(kv, num_gpus: int) -> None:
    """With more than one GPU: what one of them keeps (heads split, copied past the K/V heads, latents whole)."""
    if num_gpus <= 1:
        return
    try:
        split = tensor_parallel.tp_split(kv, num_gpus)
    except ValueError as exc:
        st.warning(plain(why(exc, lang())), icon=":material/warning:")
        return
    st.caption(f":material/view_column: {tensor_parallel.tp_sentence(split, lang())}")


def render_prefix_hit(cfg: MemoryConfig, engine, name_plot: str) -> None:
    L = lang()
    st.markdown(t("engine.prefix_intro"))
    PLEN.draw(help=t("engine.ctl.plen_help"))
    try:
        hit = prefix_hit.prefix_hit(cfg, engine, int(st.session_state["plen"]))
    except ValueError as exc:
        st.error(plain(why(exc, L)), icon=":material/error:")
        return
    show_metrics(engine_words.hit_metrics(hit, L))
    xs, ys = hit.staircase()
    show_chart(prefix_staircase(xs, ys, hit.prompt_len, hit.hit_rate, hit.block_size,
                                engine_words.staircase_title(hit, name_plot, L), L), key="staircase")
    st.markdown(engine_words.hit_advice(hit, L))
    st.caption(t("engine.cli"))
    dtype = f" --kv-dtype {cfg.kv_dtype}" if cfg.kv_dtype in CLI_KV_DTYPES else ""  # the CLI's choices
    dtype += f" --state-dtype {cfg.state_dtype}" if cfg.state_dtype else ""
    st.code(f"python -m app.cli prefix-hit --config config.json --prompt-len {hit.prompt_len}{dtype} "
            f"--block-size {engine.block_size}", language="bash")
    version_caption()


def render_log(cfg: MemoryConfig, engine, num_gpus: int, gpu: str, kv_budget: int, name_md: str, allocate) -> None:
    """allocate(cfg, engine): the page's cached engine allocation."""
    L = lang()
    st.markdown(t("engine.log_intro"))
    LOG.draw(height=160, placeholder="Available KV cache memory: 8.11 GiB")
    pasted = st.session_state.get("log", "")
    if not pasted.strip():
        st.info(t("engine.log_empty"), icon=":material/info:")
        return
    try:
        log = engine_log.parse_engine_log(pasted)
        length = engine_log.log_length(log) or cfg.context
        at = MemoryConfig(cfg.arch, context=length, kv_dtype=cfg.kv_dtype, group_size=cfg.group_size,
                          layers_per_kv=cfg.layers_per_kv, state_dtype=cfg.state_dtype)
        rec = engine_log.reconcile(log, kv_memory(at), allocate(at, engine), num_gpus, max(kv_budget, 0) // num_gpus)
    except ValueError as exc:
        st.error(plain(why(exc, L)), icon=":material/error:")
        return
    show_table(engine_words.reconciliation_frame(rec, L), hide_index=True, width="stretch")
    st.caption(engine_words.reconciliation_summary(rec, name_md, cfg.kv_dtype, gpu, L))
    version_caption()

