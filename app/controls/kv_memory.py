"""The KV memory page's URL values and widgets: the model, cache dtype, batch, context and GPU (a
`KvChoices`, turned into a `MemoryConfig` and a `GpuConfig`), the open tab, and the tiny model to
measure (a `TinyChoices`). Widget keys are the URL keys. Every label in the page language (app.i18n.t)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import engine_tabs
from app.controls.declared import Choice, Number, Slider, Text, Toggle
from app.i18n import lang, t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from sim.cost.arch import ArchPreset
from sim.cost.capacity import GpuConfig
from sim.cost.gpus import GpuPreset, load_gpus
from sim.cost.kv_engine import BLOCK_SIZES, DEFAULT_BATCHED_TOKENS, KVEngineConfig
from sim.cost.memory import (
    GROUP_SIZES,
    KV_DTYPES,
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_LAYERS_PER_KV,
    MAX_TINY_BATCH,
    WEIGHT_DTYPE_BITS,
    MemoryConfig,
)
from sim.cost.presets import load_presets
from sim.i18n import LANGS, text

CUSTOM = "custom"
TINY = ("mha", "gqa", "mqa")
MAX_TINY_CONTEXT = 1024
MAX_URL_CONFIG = 8000
# The tabs under the calculator: the link's `tab` value -> the tab's label (kvmem.tab.<slug>). Only the open one runs.
TAB_SLUGS = ("formula", "engine", "prefix_hit", "log", "grid", "variants", "dtypes", "measured", "claims", "presets")


def tab_labels(language: str) -> dict[str, str]:
    return {slug: text(language, f"kvmem.tab.{slug}") for slug in TAB_SLUGS}


TABS = tab_labels("en")
KV_TABS = LazyTabs("kv_memory", TABS)
MAX_BATCHED_TOKENS = 1 << 20
STATE_CHOICES = ("config", "fp32", "bf16", "fp16")  # "config": as the config says (kvmem.ctl.sdt_config)
TAB_WIDGET = KV_TABS.widget_key


@dataclass(frozen=True)
class KvChoices:
    model: str  # a preset key or CUSTOM
    kv_dtype: str
    group_size: int
    batch: int
    context: int
    layers_per_kv: int
    gpu: str
    num_gpus: int
    utilization: float
    weight_dtype: str
    block_size: int = 16
    batched_tokens: int = DEFAULT_BATCHED_TOKENS
    hybrid: bool = True
    state_dtype: str = ""  # "" = the config's

    def memory_config(self, arch: ArchPreset) -> MemoryConfig:
        return MemoryConfig(arch, batch=self.batch, context=self.context, kv_dtype=self.kv_dtype,
                            group_size=self.group_size, layers_per_kv=self.layers_per_kv, state_dtype=self.state_dtype)

    def engine_config(self) -> KVEngineConfig:
        return KVEngineConfig(block_size=self.block_size, max_num_batched_tokens=self.batched_tokens, hybrid=self.hybrid)

    def gpu_config(self, gpus: dict[str, GpuPreset]) -> GpuConfig:
        return GpuConfig(gpus[self.gpu], num_gpus=self.num_gpus, utilization=self.utilization,
                         weight_dtype=self.weight_dtype)


@dataclass(frozen=True)
class TinyChoices:
    name: str  # one of TINY
    batch: int
    context: int
    run: bool


MODEL = Choice("model", "llama-3.1-8b", lambda: [*load_presets(), CUSTOM], label="kvmem.ctl.model",
               url_label="kvmem.url.model")
KV = Choice("kv", "fp16", tuple(KV_DTYPES), label="kvmem.ctl.kv", url_label="kvmem.url.kv")
GROUP = Choice("group", "128", tuple(str(g) for g in GROUP_SIZES), label="kvmem.ctl.group", url_label="kvmem.url.group")
BATCH = Number("batch", 16, 1, MAX_BATCH, step=1, label="kvmem.ctl.batch", url_label="kvmem.url.batch")
CTX = Number("ctx", 32768, 1, MAX_CONTEXT, step=1024, label="kvmem.ctl.ctx", url_label="kvmem.url.ctx")
SHARE = Number("share", 1, 1, MAX_LAYERS_PER_KV, step=1, label="kvmem.ctl.share", url_label="kvmem.url.share")
GPU = Choice("gpu", "h100-sxm", lambda: list(load_gpus()), label="kvmem.ctl.gpu", url_label="kvmem.url.gpu")
NGPU = Number("ngpu", 1, 1, MAX_GPUS, step=1, label="kvmem.ctl.ngpu", url_label="kvmem.url.ngpu")
UTIL = Slider("util", 0.9, 0.05, 1.0, step=0.01, label="kvmem.ctl.util", url_label="kvmem.url.util")
WDT = Choice("wdt", "bf16", tuple(WEIGHT_DTYPE_BITS), label="kvmem.ctl.wdt", url_label="kvmem.url.wdt")
BS = Choice("bs", "16", tuple(str(b) for b in BLOCK_SIZES), label="kvmem.ctl.bs", url_label="kvmem.url.bs")
MNBT = Number("mnbt", DEFAULT_BATCHED_TOKENS, 1, MAX_BATCHED_TOKENS, step=1024, label="kvmem.ctl.mnbt",
              url_label="kvmem.url.mnbt")
HYBRID = Toggle("hybrid", True, label="kvmem.ctl.hybrid", url_label="kvmem.url.hybrid")
SDT = Choice("sdt", "config", STATE_CHOICES, label="kvmem.ctl.sdt", url_label="kvmem.url.sdt")
MEASURE = Toggle("measure", False, label="kvmem.ctl.run", url_label="kvmem.url.measure")
TINY_MODEL = Choice("tiny", "mha", TINY, label="kvmem.ctl.tiny", url_label="kvmem.url.tiny")
TBATCH = Number("tbatch", 4, 1, MAX_TINY_BATCH, step=1, label="kvmem.ctl.tbatch", url_label="kvmem.url.tbatch")
TCTX = Number("tctx", 256, 1, MAX_TINY_CONTEXT, step=64, label="kvmem.ctl.tctx", url_label="kvmem.url.tctx")
CFG = Text("cfg", "", max_len=MAX_URL_CONFIG, max_chars=MAX_URL_CONFIG, widget="text_area", label="kvmem.cfg_paste",
           url_label="kvmem.url.cfg")
CONTROLS = (MODEL, KV, GROUP, BATCH, CTX, SHARE, GPU, NGPU, UTIL, WDT, BS, MNBT, HYBRID, SDT, MEASURE, TINY_MODEL, TBATCH,
            TCTX)


def register() -> UrlState:
    """Every value the page keeps in its link, checked (bad ones fall back with one warning, shown later)."""
    url = UrlState("kv_memory")
    url.add(*CONTROLS)
    engine_tabs.register(url)
    KV_TABS.register(url)
    if MODEL.value() == CUSTOM:
        url.add(CFG)
    return url


def draw(url: UrlState, presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> KvChoices:
    """The two rows of widgets above the calculator, then the link's problems."""
    ss = st.session_state
    c = st.columns([3, 2, 1.2, 1.3, 1.6])
    own = t("kvmem.ctl.custom")  # worded now: Streamlit calls format_func later too
    MODEL.draw(c[0], format_func=lambda k: own if k == CUSTOM else presets[k].name)
    dtype_labels = {k: t(f"kvmem.dtype.{k}") for k in KV_DTYPES}
    KV.draw(c[1], format_func=dtype_labels.get)
    GROUP.draw(c[2], disabled=not KV_DTYPES[ss["kv"]].grouped, help=t("kvmem.ctl.group_help"))
    BATCH.draw(c[3])
    CTX.draw(c[4])
    c = st.columns([3, 1.2, 1.6, 1.3, 1.6])
    GPU.draw(c[0], format_func=lambda k: gpus[k].name)
    NGPU.draw(c[1], help=t("kvmem.ctl.ngpu_help"))
    UTIL.draw(c[2], help=t("kvmem.ctl.util_help"))
    WDT.draw(c[3], format_func=str.upper)
    SHARE.draw(c[4], help=t("kvmem.ctl.share_help"))
    c = st.columns([1.2, 1.6, 2, 2.2], vertical_alignment="bottom")
    BS.draw(c[0], help=t("kvmem.ctl.bs_help"))
    MNBT.draw(c[1], help=t("kvmem.ctl.mnbt_help"))
    HYBRID.draw(c[2], help=t("kvmem.ctl.hybrid_help"))
    custom = ss["model"] == CUSTOM
    state_labels = {"config": t("kvmem.ctl.sdt_config"), **{k: k.upper() for k in STATE_CHOICES[1:]}}
    SDT.draw(c[3], format_func=state_labels.get, disabled=not custom and not presets[ss["model"]].num_state_layers,
             help=t("kvmem.ctl.sdt_help"))
    url.show_problems()
    return KvChoices(ss["model"], ss["kv"], int(ss["group"]), ss["batch"], ss["ctx"], ss["share"], ss["gpu"],
                     ss["ngpu"], float(ss["util"]), ss["wdt"], int(ss["bs"]), ss["mnbt"], ss["hybrid"],
                     "" if ss["sdt"] == "config" else ss["sdt"])


def open_tab(url: UrlState):
    """The tabs, with the link's tab open: (its key in TABS, its container); only that tab's body runs. Labelled in
    the page language; a tab opened before the language switched stays open (its label read in either language)."""
    labels = tab_labels(lang())
    ss = st.session_state
    label_to_slug = {label: slug for language in LANGS for slug, label in tab_labels(language).items()}
    if ss.get(TAB_WIDGET) in label_to_slug:
        ss[TAB_WIDGET] = labels[label_to_slug[ss[TAB_WIDGET]]]
    return LazyTabs("kv_memory", labels).open(url)


def draw_tiny(presets: dict[str, ArchPreset]) -> TinyChoices:
    """Which tiny model to fill, how big, and the switch that loads torch."""
    c = st.columns([1.4, 1, 1, 1.2])
    TINY_MODEL.draw(c[0], format_func=lambda k: presets[f"tiny-{k}"].name)
    TBATCH.draw(c[1])
    TCTX.draw(c[2])
    MEASURE.draw(c[3], help=t("kvmem.ctl.run_help"))
    ss = st.session_state
    return TinyChoices(ss["tiny"], ss["tbatch"], ss["tctx"], ss["measure"])
