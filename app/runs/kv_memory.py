"""The KV memory page's cached results: the calculator's numbers, each tab's sweep (computed only
when its tab is open), and the tiny-model measurement handed to the server's queue."""

from __future__ import annotations

import streamlit as st

from app.i18n import t
from app.work import run_job
from sim.cost.capacity import Capacity, DtypeRow, GpuConfig, capacity, dtype_table
from sim.cost.kv_engine import EngineAllocation, KVEngineConfig, engine_allocation
from sim.cost.memory import KvGrid, KvMemory, MemoryConfig, VariantCurves, kv_grid, kv_memory, variant_curves


@st.cache_data(max_entries=64, show_spinner=False)
def sized(cfg: MemoryConfig, gpu: GpuConfig) -> tuple[KvMemory, Capacity]:
    return kv_memory(cfg), capacity(cfg, gpu)


@st.cache_data(max_entries=64, show_spinner=False)
def grid(cfg: MemoryConfig) -> KvGrid:
    return kv_grid(cfg)


@st.cache_data(max_entries=64, show_spinner=False)
def curves(cfg: MemoryConfig) -> VariantCurves:
    return variant_curves(cfg)


@st.cache_data(max_entries=64, show_spinner=False)
def dtypes(cfg: MemoryConfig, gpu: GpuConfig) -> tuple[DtypeRow, ...]:
    return dtype_table(cfg, gpu)


@st.cache_data(max_entries=16, show_spinner=False)
def measure(name: str, batch: int, context: int, language: str):
    """A tiny model's cache measured after a prefill of `batch` × `context` (its untrained twin when the
    checkpoint is missing), named in `language`."""
    from app.resources import model as tiny_model
    from sim.cost.presets import load_presets
    from sim.model.device import pick_device, pick_dtype
    from sim.model.errors import CheckpointError
    from sim.model.measure import measure_tiny_cache, untrained_tiny_model
    from sim.words import text

    try:
        m = tiny_model(name)
        weights = text(language, "kvmem.weights_trained", name=name)
    except CheckpointError:
        device = pick_device()
        m = untrained_tiny_model(name, device, pick_dtype(device))
        weights = text(language, "kvmem.weights_untrained", name=name)
    return measure_tiny_cache(m, batch=batch, context=context, weights=weights, preset=load_presets()[f"tiny-{name}"])


def measured(name: str, batch: int, context: int, lang: str):
    """`measure(name, batch, context, lang)` through the server's queue, estimated from the model's own
    prefill rate; None while it waits for its button."""
    from app.resources import model_rates
    from sim.work.run_cost import prefill_work

    return run_job("kv_memory.measure", (name, batch, context, lang),
                   model_rates(name, "sdpa").seconds(prefill_work(context, batch)),
                   lambda progress: measure(name, batch, context, lang),
                   what=t("kvmem.job", b=batch, s=f"{context:,}"))


@st.cache_data(max_entries=64, show_spinner=False)
def allocated(cfg: MemoryConfig, engine: KVEngineConfig) -> EngineAllocation:
    return engine_allocation(cfg, engine)


REAL_PRESET = "smollm2-135m"  # the preset that is the real model the lab runs: its cache is measured beside it


def real_cache_bytes(preset):
    """The real model's cache bytes after a few-token prefill (sim.model.real_pages), once per server through the
    queue: a warm load and one short prefill, so it starts on open; a cold first load shows its progress."""
    from sim.model.real_pages import CACHE_PROBE_TEXT, WARM_LOAD_S
    from sim.work.run_cost import smollm2_rates, smollm2_tokens

    def work(progress):
        from app.resources import real_model
        from sim.model.real_pages import measure_cache_bytes

        real = real_model()
        ids = real.encode(CACHE_PROBE_TEXT)
        progress(0.5)
        return measure_cache_bytes(real.model, ids, preset)

    # the text's tokens estimated before the tokenizer is loaded, at the prefill's fitted rates
    estimate = smollm2_rates("sdpa").prefill_s(smollm2_tokens(CACHE_PROBE_TEXT)) + WARM_LOAD_S
    return run_job("kv_memory.real_bytes", (preset.key, CACHE_PROBE_TEXT), estimate, work,
                   what=t("rp.kv.job"), button=t("rp.kv.button"))
