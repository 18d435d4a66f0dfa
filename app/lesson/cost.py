"""Steps 5–8: what one cached step costs, the cache's bytes, why decode waits on memory, and what
batching does and does not share."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from app.figures import CACHED, NAIVE
from app.figures import lesson as figs
from app.lesson.generation import claim
from app.lesson.nav import CONTEXTS, open_full_page
from app.lesson.quiz import ask
from app.present import show_chart
from sim.cost.decode import flop_shape
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS, MemoryConfig, kv_memory, request_bytes, weight_bytes
from sim.cost.opcount import step_flops
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware, memory_bound_until, prefill_step, roofline_takeaway
from sim.lesson import quiz
from sim.lesson import sentences as say

GPU = "h100-sxm"
ROOFLINE_MODEL = "llama-3.1-70b"
COST_MODEL = "llama-3.1-8b"
BYTES_CONTEXT = 32_768  # one request's context in the bytes step


def _models():
    return {k: a for k, a in load_presets().items() if not k.startswith("tiny")}


def step_cost() -> None:
    ss = st.session_state
    st.select_slider("Try it: tokens already in the sequence", CONTEXTS, key="ctx", format_func=lambda v: f"{v:,}")
    arch = load_presets()[COST_MODEL]
    shape = flop_shape(arch)
    cached = [sum(step_flops(shape, 1, S).values()) for S in CONTEXTS]
    naive = [sum(step_flops(shape, S, S).values()) for S in CONTEXTS]
    i = CONTEXTS.index(ss["ctx"])
    parts = step_flops(shape, 1, ss["ctx"])
    share = (parts["attn_scores"] + parts["attn_v"]) / sum(parts.values())
    claim(say.step_cost_claim(ss["ctx"], cached[i], naive[i], share))
    show_chart(figs.step_flops_vs_context(CONTEXTS, naive, cached,
                                          say.step_cost_title(arch.name, ss["ctx"], naive[i], cached[i])),
               key="lesson_step_cost")
    st.caption("A cached step multiplies every weight by one token and reads the cache for attention; the naive step "
               "multiplies every weight by every token again.")
    open_full_page("decode_cost", {"scale_model": COST_MODEL, "scale_n": ss["ctx"]}, f"{arch.name} at scale")


def cache_bytes() -> None:
    ss = st.session_state
    models = _models()
    c = st.columns(2)
    c[0].selectbox("Try it: model", list(models), key="model", format_func=lambda k: models[k].name)
    c[1].selectbox("KV dtype", list(KV_DTYPES), key="kv", format_func=lambda k: KV_DTYPES[k].label)
    arch = models[ss["model"]]
    cfg = MemoryConfig(arch, batch=1, context=BYTES_CONTEXT, kv_dtype=ss["kv"])
    m = kv_memory(cfg)
    weights = weight_bytes(arch, "bf16")
    claim(say.bytes_claim(arch.name, ss["kv"].upper(), m.bytes_per_token, BYTES_CONTEXT, m.per_request_bytes,
                          weights))
    st.table({"Step": [s.what for s in m.steps], "With these numbers": [s.math for s in m.steps]})
    per_request = [request_bytes(cfg, S) for S in CONTEXTS]
    show_chart(figs.bytes_vs_context(CONTEXTS, per_request, weights,
                                     say.bytes_title(arch.name, ss["kv"].upper(), CONTEXTS, per_request, weights)),
               key="lesson_bytes")
    open_full_page("kv_memory", {"model": ss["model"], "kv": ss["kv"], "ctx": BYTES_CONTEXT, "batch": 1},
                   "batch, GPU and what fits")
    ask(quiz.kib_per_token())


def memory_bound() -> None:
    arch, gpu = load_presets()[ROOFLINE_MODEL], load_gpus()[GPU]
    hw = hardware(gpu, "bf16")
    cfg = RooflineConfig(arch, 1, 4096)
    dec, pre = decode_step(cfg), prefill_step(cfg)
    text = roofline_takeaway(dec, pre, hw)
    claim(text + ".")
    show_chart(figs.mini_roofline(hw.peak_flops, hw.bandwidth, [
        ("decode", dec.intensity, dec.attainable_flops(hw), CACHED),
        ("prefill", pre.intensity, pre.attainable_flops(hw), NAIVE)],
        f"{arch.name} on {gpu.name}, batch 1, 4,096 tokens: {text}"),
        key="lesson_roofline")
    st.caption(f"A decode step reads all {dec.bytes_weights / 1e9:,.1f} GB of weights (BF16, "
               f"{WEIGHT_DTYPE_BITS['bf16'] // 8} B each) and the whole cache to produce one token per request, so "
               f"it finishes no faster than bytes ÷ bandwidth: {dec.time(hw) * 1e3:,.1f} ms here.")
    open_full_page("roofline", {"model": ROOFLINE_MODEL, "gpu": GPU, "batch": 1, "context": 4096},
                   "every model, GPU and dtype")
    ask(quiz.decode_intensity(ROOFLINE_MODEL, GPU, 4096))


BATCHES = [2**k for k in range(13)]


def batching() -> None:
    ss = st.session_state
    st.select_slider("Try it: context of each request", CONTEXTS, key="ctx", format_func=lambda v: f"{v:,}")
    arch, gpu = load_presets()[ROOFLINE_MODEL], load_gpus()[GPU]
    hw = hardware(gpu, "bf16")
    contexts = sorted({512, ss["ctx"], 131072})
    base = RooflineConfig(arch, 1, 4096)
    lines = {S: [decode_step(replace(base, batch=B, context=S)).intensity for B in BATCHES] for S in contexts}
    turns = {S: memory_bound_until(replace(base, context=S), hw) for S in contexts}
    claim(say.batching_claim(turns))
    show_chart(figs.intensity_vs_batch(BATCHES, lines, hw.ridge, say.ridge_title(turns, hw.ridge)),
               key="lesson_batching")
    st.caption("The weights are read once per step whatever the batch; every request's cache is read in full, "
               "for its own token only. So long contexts keep the step memory-bound however many requests share it.")
    open_full_page("roofline", {"model": ROOFLINE_MODEL, "gpu": GPU, "context": ss["ctx"], "tab": "batching"},
                   "the batch sweep")
