"""Roofline's URL values and widgets, each declared once: the model, hardware and dtypes, the batch and context
stops, the probe switch, and the page's tabs. Widget keys are the URL keys."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice, Stops, Toggle
from app.i18n import t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS
from sim.cost.presets import load_presets
from sim.cost.roofline import COMPUTE_DTYPES
from sim.words import text

BATCHES = [2**k for k in range(13)]  # 1 … 4,096
CONTEXTS = [2**k for k in range(7, 21)]  # 128 … 1,048,576
THIS_MACHINE = "this-machine"
TAB_SLUGS = ("roofline", "bytes", "batching", "levers", "machine", "claims")
TABS = LazyTabs("roofline", {k: text("en", f"roofline.tab.{k}") for k in TAB_SLUGS})  # English: the tests' names


def tabs() -> LazyTabs:
    """The page's tabs labelled in the page language (the same widget key and link values as TABS)."""
    return LazyTabs("roofline", {k: t(f"roofline.tab.{k}") for k in TAB_SLUGS})


MODEL = Choice("model", "llama-3.1-70b", lambda: list(load_presets()), label="roofline.model",
               url_label="roofline.url.model")
GPU = Choice("gpu", "h100-sxm", lambda: [*load_gpus(), THIS_MACHINE], label="roofline.hardware",
             url_label="roofline.url.gpu")
COMPUTE = Choice("compute", "bf16", tuple(COMPUTE_DTYPES), widget="radio", label="roofline.compute",
                 url_label="roofline.url.compute")
WDTYPE = Choice("wdtype", "bf16", tuple(WEIGHT_DTYPE_BITS), widget="radio", label="roofline.weights",
                url_label="roofline.url.wdtype")
KVDTYPE = Choice("kvdtype", "fp16", tuple(KV_DTYPES), label="roofline.kv", url_label="roofline.url.kvdtype")
BATCH = Stops("batch", 1, tuple(BATCHES), label="roofline.batch", url_label="roofline.url.batch")
CONTEXT = Stops("context", 4096, tuple(CONTEXTS), label="roofline.context", url_label="roofline.url.context")
PROBE = Toggle("probe", False, label="roofline.probe_toggle", url_label="roofline.url.probe")
CONTROLS = (MODEL, GPU, COMPUTE, WDTYPE, KVDTYPE, BATCH, CONTEXT, PROBE)


def register(page_tabs: LazyTabs) -> UrlState:
    """Every value the page keeps in its link, checked (batch and context snapped to their stops); the bad ones
    listed once."""
    url = UrlState("roofline")
    url.add(*CONTROLS)
    page_tabs.register(url)
    url.show_problems()
    return url


def draw() -> None:
    """The two rows of widgets above the metrics."""
    presets, gpus = load_presets(), load_gpus()
    c = st.columns(4)
    MODEL.draw(c[0], format_func=lambda k: presets[k].name)
    this_machine = t("roofline.this_machine")  # worded now: Streamlit calls format_func later too
    GPU.draw(c[1], format_func=lambda k: this_machine if k == THIS_MACHINE else gpus[k].name)
    COMPUTE.draw(c[2], horizontal=True, format_func=str.upper)
    WDTYPE.draw(c[3], horizontal=True, format_func=str.upper)
    c = st.columns([1, 2, 2])
    KVDTYPE.draw(c[0], format_func=lambda k: KV_DTYPES[k].label)
    BATCH.draw(c[1])
    CONTEXT.draw(c[2], format_func=lambda v: f"{v:,}")


def draw_probe() -> None:
    """The switch that measures this machine (on already when this machine is the hardware)."""
    PROBE.draw(disabled=GPU.value() == THIS_MACHINE, help=t("roofline.probe_help"))
