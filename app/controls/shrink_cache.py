"""Shrink the cache's URL values and widgets, each declared once: the model and scope of the three checks, the
long generation's length and trials, the real model's cell to rerun, and the offload section's model, context,
share and GPU. Widget keys are the URL keys."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice, Number, Slider, Stops
from app.i18n import t
from app.runs import shrink_cache as runs
from app.urlstate import UrlState
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model.real_source import MODEL_KEY

SCOPES = {"all": (0.125, 0.25, 0.5), "quarter": (0.25,)}  # budgets; each named by shrink.scope.<key>
LONG_LENGTHS = (128, 256, 512, 900)
CONTEXTS = tuple(2**k for k in range(10, 18))


def offload_models() -> list[str]:
    """The presets the offload section offers: every real architecture (not the tiny ones)."""
    return [k for k in load_presets() if not k.startswith("tiny")]


MODEL = Choice("model", lambda: next(iter(runs.available_models())), lambda: [*runs.available_models(), MODEL_KEY],
               label="shrink.w.model", url_label="shrink.url.model")
CELL = Choice("cell", "full", runs.real_cells, label="real.rerun.pick", url_label="real.rerun.pick")
SCOPE = Choice("scope", "all", tuple(SCOPES), label="shrink.w.scope", url_label="shrink.url.scope")
LONG = Stops("long", 900, LONG_LENGTHS, label="shrink.w.long", url_label="shrink.url.long")
TRIALS = Number("trials", 4, 1, 8, label="shrink.w.trials", url_label="shrink.url.trials")
OMODEL = Choice("omodel", "llama-3.1-8b", offload_models, label="shrink.w.omodel", url_label="shrink.url.omodel")
OCTX = Stops("octx", 32768, CONTEXTS, label="shrink.w.octx", url_label="shrink.url.octx")
OPCT = Slider("opct", 50, 0, 100, label="shrink.w.opct", url_label="shrink.url.opct")
OGPU = Choice("ogpu", "h100-sxm", lambda: list(load_gpus()), label="shrink.url.ogpu", url_label="shrink.url.ogpu")
CONTROLS = (MODEL, CELL, SCOPE, LONG, TRIALS, OMODEL, OCTX, OPCT, OGPU)


def register() -> UrlState:
    """Every value the page keeps in its link, checked (lengths snapped to their stops); the bad ones listed once."""
    url = UrlState("shrink_cache")
    url.add(*CONTROLS)
    url.show_problems()
    return url


def draw_checks(model_labels: dict[str, str]) -> None:
    """The model, scope, length and trials of the three checks."""
    c = st.columns([2, 2, 1, 1])
    scope_labels = {k: t(f"shrink.scope.{k}") for k in SCOPES}  # worded now: Streamlit calls format_func later too
    MODEL.draw(c[0], format_func=model_labels.get, help=t("real.w.model_help"))
    SCOPE.draw(c[1], format_func=scope_labels.get)
    LONG.draw(c[2], help=t("shrink.w.long_help"))
    TRIALS.draw(c[3], help=t("shrink.w.trials_help"))


def draw_offload() -> None:
    """The offload section's model, context, share moved and GPU."""
    presets, gpus = load_presets(), load_gpus()
    c = st.columns(4)
    OMODEL.draw(c[0], format_func=lambda k: presets[k].name)
    OCTX.draw(c[1], format_func=lambda v: f"{v:,}")
    OPCT.draw(c[2])
    OGPU.draw(c[3], format_func=lambda k: gpus[k].name)
