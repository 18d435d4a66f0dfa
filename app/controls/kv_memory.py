"""The KV memory page's URL values and widgets: the model, cache dtype, batch, context and GPU (a
`KvChoices`, turned into a `MemoryConfig` and a `GpuConfig`), the open tab, and the tiny model to
measure (a `TinyChoices`). Widget keys are the URL keys."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

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

CUSTOM = "custom"
TINY = ("mha", "gqa", "mqa")
MAX_TINY_CONTEXT = 1024
MAX_URL_CONFIG = 8000
# The tabs under the calculator: the link's `tab` value -> the tab's label. Only the open one runs.
TABS = {
    "formula": "The formula, with your numbers",
    "engine": "Formula vs vLLM's blocks",
    "grid": "Batch × context",
    "variants": "MHA · GQA · MQA · MLA",
    "dtypes": "KV dtypes",
    "measured": "Measured on the real model",
    "claims": "Claims in the seeds",
    "presets": "Model presets",
}
KV_TABS = LazyTabs("kv_memory", TABS)
MAX_BATCHED_TOKENS = 1 << 20
STATE_CHOICES = {"config": "as the config says", "fp32": "FP32", "bf16": "BF16", "fp16": "FP16"}
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
    url.choice("model", "llama-3.1-8b", [*presets, CUSTOM], label="model")
    url.choice("kv", "fp16", list(KV_DTYPES), label="KV dtype")
    url.choice("group", "128", [str(g) for g in GROUP_SIZES], label="group size")
    url.int("batch", 16, 1, MAX_BATCH, label="batch")
    url.int("ctx", 32768, 1, MAX_CONTEXT, label="context")
    url.int("share", 1, 1, MAX_LAYERS_PER_KV, label="layers sharing one K/V")
    url.choice("gpu", "h100-sxm", list(gpus), label="GPU")
    url.int("ngpu", 1, 1, MAX_GPUS, label="number of GPUs")
    url.float("util", 0.9, 0.05, 1.0, label="memory utilization")
    url.choice("wdt", "bf16", list(WEIGHT_DTYPE_BITS), label="weight dtype")
    url.choice("bs", "16", [str(b) for b in BLOCK_SIZES], label="block size")
    url.int("mnbt", DEFAULT_BATCHED_TOKENS, 1, MAX_BATCHED_TOKENS, label="max batched tokens")
    url.bool("hybrid", True, label="hybrid KV cache manager")
    url.choice("sdt", "config", list(STATE_CHOICES), label="state dtype")
    url.bool("measure", False, label="measure the real model")
    url.choice("tiny", "mha", list(TINY), label="tiny model")
    url.int("tbatch", 4, 1, MAX_TINY_BATCH, label="tiny-model batch")
    url.int("tctx", 256, 1, MAX_TINY_CONTEXT, label="tiny-model context")
    KV_TABS.register(url)
    if st.session_state["model"] == CUSTOM:
        url.text("cfg", "", max_len=MAX_URL_CONFIG, label="pasted config.json")
    return url


def draw(url: UrlState, presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> KvChoices:
    """The two rows of widgets above the calculator, then the link's problems."""
    ss = st.session_state
    c = st.columns([3, 2, 1.2, 1.3, 1.6])
    c[0].selectbox("Model", [*presets, CUSTOM], key="model",
                   format_func=lambda k: "Your own config.json (paste or upload)" if k == CUSTOM else presets[k].name)
    c[1].selectbox("KV cache dtype", list(KV_DTYPES), key="kv", format_func=lambda k: KV_DTYPES[k].label)
    c[2].selectbox("Group size g", [str(g) for g in GROUP_SIZES], key="group", disabled=not KV_DTYPES[ss["kv"]].grouped,
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
    c = st.columns([1.2, 1.6, 2, 2.2], vertical_alignment="bottom")
    c[0].selectbox("Block size (tokens)", [str(b) for b in BLOCK_SIZES], key="bs",
                   help="vLLM's --block-size: the allocator hands out blocks of this many tokens per layer.")
    c[1].number_input("Max batched tokens", min_value=1, max_value=MAX_BATCHED_TOKENS, step=1024, key="mnbt",
                      help="vLLM's --max-num-batched-tokens: tokens one step may schedule. Sliding-window layers "
                           "reserve room for them on top of the window.")
    c[2].toggle("Hybrid KV cache manager", key="hybrid",
                help="vLLM's per-layer-kind groups. Off (--disable-hybrid-kv-cache-manager): sliding and chunked "
                     "layers are reserved as if they kept everything.")
    custom = ss["model"] == CUSTOM
    c[3].selectbox("Linear-attention / Mamba state dtype", list(STATE_CHOICES), key="sdt",
                   format_func=STATE_CHOICES.get,
                   disabled=not custom and not presets[ss["model"]].num_state_layers,
                   help="What the recurrent state is kept in (vLLM's --mamba-ssm-cache-dtype); the K/V dtype does "
                        "not apply to it.")
    url.show_problems()
    return KvChoices(ss["model"], ss["kv"], int(ss["group"]), ss["batch"], ss["ctx"], ss["share"], ss["gpu"],
                     ss["ngpu"], float(ss["util"]), ss["wdt"], int(ss["bs"]), ss["mnbt"], ss["hybrid"],
                     "" if ss["sdt"] == "config" else ss["sdt"])


def open_tab(url: UrlState):
    """The tabs, with the link's tab open: (its key in TABS, its container); only that tab's body runs."""
    return KV_TABS.open(url)


def draw_tiny(presets: dict[str, ArchPreset]) -> TinyChoices:
    """Which tiny model to fill, how big, and the switch that loads torch."""
    c = st.columns([1.4, 1, 1, 1.2])
    c[0].selectbox("Tiny model", list(TINY), key="tiny", format_func=lambda k: presets[f"tiny-{k}"].name)
    c[1].number_input("Batch", min_value=1, max_value=MAX_TINY_BATCH, step=1, key="tbatch")
    c[2].number_input("Context", min_value=1, max_value=MAX_TINY_CONTEXT, step=64, key="tctx")
    c[3].toggle("Run it", key="measure", help="Loads torch and the model, so it is off until asked for.")
    ss = st.session_state
    return TinyChoices(ss["tiny"], ss["tbatch"], ss["tctx"], ss["measure"])
