"""Decode cost's URL values and widgets, each declared once: the prompt, tiny variant and sampling of the run, how a
cached step runs (eager, or one CUDA-graph replay: disabled, with the reason, on a machine without CUDA), the
per-step chart's log axis, and the scale section's model and length. Widget keys are the URL keys."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice, Number, Slider, Stops, Text, Toggle
from app.i18n import lang, t
from app.model_picker import register as register_picker
from app.tabs import LazyTabs
from app.text import plain
from app.urlstate import UrlState
from sim.cost.arch import ArchPreset
from sim.cost.presets import load_presets
from sim.model.transformer import PRESETS
from sim.words import text

STEP_KINDS = ("eager", "graph")  # URL values
DEFAULT_PROMPT = "HAMLET.\nTo be, or not to be"
MAX_PROMPT_BYTES = 256
CONTEXT = PRESETS["mha"].max_seq_len
SCALE_LENGTHS = tuple(2**k for k in range(7, 18))  # 128 … 131,072
RESULT_TABS = ("per_step", "cumulative", "wall", "parts", "grid", "profile")
MAX_SEED = 2**31 - 1


def scale_presets() -> dict[str, ArchPreset]:
    """The scale section's models: every preset but MLA ones (their FLOP shape is not the formula's)."""
    return {k: p for k, p in load_presets().items() if p.attention != "MLA"}


def _scale_default() -> str:
    presets = scale_presets()
    return "llama-3.1-8b" if "llama-3.1-8b" in presets else next(iter(presets))


PROMPT = Text("prompt", DEFAULT_PROMPT, max_len=MAX_PROMPT_BYTES, max_chars=MAX_PROMPT_BYTES, widget="text_area",
              label="decode.prompt", url_label="decode.url.prompt")
VARIANT = Choice("variant", "mha", tuple(PRESETS), widget="radio", label="decode.variant", url_label="decode.url.variant")
NEW_TOKENS = Slider("n", 64, 1, CONTEXT, label="decode.n", url_label="decode.url.n")
TEMPERATURE = Slider("temp", 0.0, 0.0, 2.0, step=0.05, label="decode.temp", url_label="decode.url.temp")
TOP_K = Number("top_k", 0, 0, 256, label="decode.top_k", url_label="decode.url.top_k")
SEED = Number("seed", 0, 0, MAX_SEED, label="decode.seed", url_label="decode.url.seed")
ATTN = Choice("attn", "sdpa", ("sdpa", "eager"), widget="radio", label="decode.attn", url_label="decode.url.attn")
BUDGET = Number("budget", 30, 1, 600, label="decode.budget", url_label="decode.url.budget")
STEP = Choice("step", "eager", STEP_KINDS, widget="radio", label="decode.step.label", url_label="decode.url.step")
LOG = Toggle("log", True, label="decode.log", url_label="decode.url.log")
SCALE_MODEL = Choice("scale_model", _scale_default, lambda: list(scale_presets()), label="decode.scale_model",
                     url_label="decode.url.scale_model")
SCALE_N = Stops("scale_n", 8192, SCALE_LENGTHS, label="decode.scale_n", url_label="decode.url.scale_n")
CONTROLS = (PROMPT, VARIANT, NEW_TOKENS, TEMPERATURE, TOP_K, SEED, ATTN, BUDGET, STEP, LOG, SCALE_MODEL, SCALE_N)


def result_tabs() -> LazyTabs:
    return LazyTabs("decode_cost", {k: t(f"decode.tab.{k}") for k in RESULT_TABS})


def register(tabs: LazyTabs) -> UrlState:
    """Every value the page keeps in its link, checked (the scale length snapped to its stops); the bad ones listed
    once. Then a link that asks for the graph step on a machine without one falls back to eager, saying why."""
    url = UrlState("decode_cost")
    url.add(*CONTROLS)
    tabs.register(url)
    register_picker(url)
    url.show_problems()
    return url


def draw_run_form(graph_reason: str | None, *, fixed: str | None = None) -> bool:
    """The run's prompt, variant, length, step kind and sampling, in one form; whether its button was pressed.
    `fixed` (the real model's shape, worded) replaces the MHA/GQA/MQA choice: that model's shape is its own."""
    lg = lang()  # bound now: a format_func may be called outside the script run (AppTest calls it)
    with st.form("run"):
        left, right = st.columns([3, 2])
        PROMPT.draw(left, height=90, help=t("decode.prompt_help", n=f"{MAX_PROMPT_BYTES}"))
        if fixed is not None:
            right.caption(f"**{t('rp.variant_fixed')}** — {fixed}")
        else:
            VARIANT.draw(right, horizontal=True, format_func=lambda v: text(lg, "decode.variant_option",
                                                                            name=v.upper(), n=f"{PRESETS[v].n_kv_heads}"))
        NEW_TOKENS.draw(right, help=t("decode.n_help", n=f"{CONTEXT}"))
        step_radio(right, graph_reason)
        c = st.columns(5)
        TEMPERATURE.draw(c[0])
        TOP_K.draw(c[1])
        SEED.draw(c[2])
        ATTN.draw(c[3], horizontal=True)
        BUDGET.draw(c[4], help=t("decode.budget_help"))
        return st.form_submit_button(t("decode.run"), type="primary")


def draw_log() -> bool:
    return LOG.draw()


def draw_scale() -> tuple[ArchPreset, int]:
    """The scale section's model and length: (the preset, the length)."""
    presets = scale_presets()
    c = st.columns([2, 3])
    SCALE_MODEL.draw(c[0], format_func=lambda k: presets[k].name)
    SCALE_N.draw(c[1], format_func=lambda v: f"{v:,}")
    return presets[SCALE_MODEL.value()], SCALE_N.value()


STEP_LABELS = {k: text("en", f"decode.step.{k}") for k in STEP_KINDS}  # English names ('CUDA graph')


def step_label(step: str, lg: str = "en") -> str:
    """A step kind as the radio and the run's description name it."""
    return text(lg, f"decode.step.{step}")


def graph_unavailable_here() -> str | None:
    """Why this server cannot run a CUDA-graph step (None when it can), in the page language."""
    from sim.model.device import pick_device
    from sim.model.graph_step import graph_unavailable
    from sim.words import say, why

    try:
        reason = graph_unavailable(pick_device())
    except ValueError as exc:  # KVLAB_DEVICE names a device torch does not have
        return why(exc, lang())
    return say(lang(), reason) if reason else None


def fall_back_from_graph(reason: str | None) -> None:
    """A link that asks for the graph step on a machine that cannot run it: say so, then use eager."""
    if reason and st.session_state.get("step") == "graph":
        st.warning(t("decode.step.fallback", reason=plain(reason)))
        st.session_state["step"] = "eager"


def step_radio(container, reason: str | None) -> None:
    lg = lang()  # bound now: a format_func may be called outside the script run (AppTest calls it)
    help_text = t("decode.step.help") + ("\n\n" + t("decode.step.disabled", reason=reason) if reason else "")
    STEP.draw(container, horizontal=True, format_func=lambda v: step_label(v, lg), disabled=reason is not None,
              help=help_text)
    if reason:
        container.caption(t("decode.step.unavailable", reason=plain(reason)))
