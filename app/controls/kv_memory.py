"""The KV memory page's URL values and widgets: the model, cache dtype, batch, context and GPU (a
`KvChoices`, turned into a `MemoryConfig` and a `GpuConfig`), the open tab, and the tiny model to
measure (a `TinyChoices`). Widget keys are the URL keys. Every label in the page language (app.i18n.t)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import engine_tabs
from app.i18n import lang, t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from sim.cost.arch import ArchPreset
from sim.cost.capacity import GpuConfig
from sim.cost.gpus import GpuPreset
from sim.cost.kv_engine import BLOCK_SIZES, DEFAULT_BATCHED_TOKENS, EngineConfig
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

    def engine_config(self) -> EngineConfig:
        return EngineConfig(block_size=self.block_size, max_num_batched_tokens=self.batched_tokens, hybrid=self.hybrid)

    def gpu_config(self, gpus: dict[str, GpuPreset]) -> GpuConfig:
        return GpuConfig(gpus[self.gpu], num_gpus=self.num_gpus, utilization=self.utilization,
                         weight_dtype=self.weight_dtype)


@dataclass(frozen=True)
class TinyChoices:
    name: str  # one of TINY
    batch: int
    context: int
    run: bool


def register(presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> UrlState:
    """Every value the page keeps in its link, checked (bad ones fall back with one warning, shown later)."""
    url = UrlState("kv_memory")
    url.choice("model", "llama-3.1-8b", [*presets, CUSTOM], label=t("kvmem.url.model"))
    url.choice("kv", "fp16", list(KV_DTYPES), label=t("kvmem.url.kv"))
    url.choice("group", "128", [str(g) for g in GROUP_SIZES], label=t("kvmem.url.group"))
    url.int("batch", 16, 1, MAX_BATCH, label=t("kvmem.url.batch"))
    url.int("ctx", 32768, 1, MAX_CONTEXT, label=t("kvmem.url.ctx"))
    url.int("share", 1, 1, MAX_LAYERS_PER_KV, label=t("kvmem.url.share"))
    url.choice("gpu", "h100-sxm", list(gpus), label=t("kvmem.url.gpu"))
    url.int("ngpu", 1, 1, MAX_GPUS, label=t("kvmem.url.ngpu"))
    url.float("util", 0.9, 0.05, 1.0, label=t("kvmem.url.util"))
    url.choice("wdt", "bf16", list(WEIGHT_DTYPE_BITS), label=t("kvmem.url.wdt"))
    url.choice("bs", "16", [str(b) for b in BLOCK_SIZES], label=t("kvmem.url.bs"))
    url.int("mnbt", DEFAULT_BATCHED_TOKENS, 1, MAX_BATCHED_TOKENS, label=t("kvmem.url.mnbt"))
    url.bool("hybrid", True, label=t("kvmem.url.hybrid"))
    url.choice("sdt", "config", list(STATE_CHOICES), label=t("kvmem.url.sdt"))
    url.bool("measure", False, label=t("kvmem.url.measure"))
    url.choice("tiny", "mha", list(TINY), label=t("kvmem.url.tiny"))
    url.int("tbatch", 4, 1, MAX_TINY_BATCH, label=t("kvmem.url.tbatch"))
    url.int("tctx", 256, 1, MAX_TINY_CONTEXT, label=t("kvmem.url.tctx"))
    engine_tabs.register(url)
    KV_TABS.register(url)
    if st.session_state["model"] == CUSTOM:
        url.text("cfg", "", max_len=MAX_URL_CONFIG, label=t("kvmem.url.cfg"))
    return url


def draw(url: UrlState, presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> KvChoices:
    """The two rows of widgets above the calculator, then the link's problems."""
    ss = st.session_state
    c = st.columns([3, 2, 1.2, 1.3, 1.6])
    own = t("kvmem.ctl.custom")  # worded now: Streamlit calls format_func later too
    c[0].selectbox(t("kvmem.ctl.model"), [*presets, CUSTOM], key="model",
                   format_func=lambda k: own if k == CUSTOM else presets[k].name)
    dtype_labels = {k: t(f"kvmem.dtype.{k}") for k in KV_DTYPES}
    c[1].selectbox(t("kvmem.ctl.kv"), list(KV_DTYPES), key="kv", format_func=dtype_labels.get)
    c[2].selectbox(t("kvmem.ctl.group"), [str(g) for g in GROUP_SIZES], key="group",
                   disabled=not KV_DTYPES[ss["kv"]].grouped, help=t("kvmem.ctl.group_help"))
    c[3].number_input(t("kvmem.ctl.batch"), min_value=1, max_value=MAX_BATCH, step=1, key="batch")
    c[4].number_input(t("kvmem.ctl.ctx"), min_value=1, max_value=MAX_CONTEXT, step=1024, key="ctx")
    c = st.columns([3, 1.2, 1.6, 1.3, 1.6])
    c[0].selectbox(t("kvmem.ctl.gpu"), list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
    c[1].number_input(t("kvmem.ctl.ngpu"), min_value=1, max_value=MAX_GPUS, step=1, key="ngpu",
                      help=t("kvmem.ctl.ngpu_help"))
    c[2].slider(t("kvmem.ctl.util"), 0.05, 1.0, step=0.01, key="util", help=t("kvmem.ctl.util_help"))
    c[3].selectbox(t("kvmem.ctl.wdt"), list(WEIGHT_DTYPE_BITS), key="wdt", format_func=str.upper)
    c[4].number_input(t("kvmem.ctl.share"), min_value=1, max_value=MAX_LAYERS_PER_KV, step=1, key="share",
                      help=t("kvmem.ctl.share_help"))
    c = st.columns([1.2, 1.6, 2, 2.2], vertical_alignment="bottom")
    c[0].selectbox(t("kvmem.ctl.bs"), [str(b) for b in BLOCK_SIZES], key="bs", help=t("kvmem.ctl.bs_help"))
    c[1].number_input(t("kvmem.ctl.mnbt"), min_value=1, max_value=MAX_BATCHED_TOKENS, step=1024, key="mnbt",
                      help=t("kvmem.ctl.mnbt_help"))
    c[2].toggle(t("kvmem.ctl.hybrid"), key="hybrid", help=t("kvmem.ctl.hybrid_help"))
    custom = ss["model"] == CUSTOM
    state_labels = {"config": t("kvmem.ctl.sdt_config"), **{k: k.upper() for k in STATE_CHOICES[1:]}}
    c[3].selectbox(t("kvmem.ctl.sdt"), list(STATE_CHOICES), key="sdt", format_func=state_labels.get,
                   disabled=not custom and not presets[ss["model"]].num_state_layers, help=t("kvmem.ctl.sdt_help"))
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
    c[0].selectbox(t("kvmem.ctl.tiny"), list(TINY), key="tiny", format_func=lambda k: presets[f"tiny-{k}"].name)
    c[1].number_input(t("kvmem.ctl.tbatch"), min_value=1, max_value=MAX_TINY_BATCH, step=1, key="tbatch")
    c[2].number_input(t("kvmem.ctl.tctx"), min_value=1, max_value=MAX_TINY_CONTEXT, step=64, key="tctx")
    c[3].toggle(t("kvmem.ctl.run"), key="measure", help=t("kvmem.ctl.run_help"))
    ss = st.session_state
    return TinyChoices(ss["tiny"], ss["tbatch"], ss["tctx"], ss["measure"])
