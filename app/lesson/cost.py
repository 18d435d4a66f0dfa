"""Steps 5–8: what one cached step costs, the cache's bytes, why decode waits on memory, and what
batching does and does not share."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from app.controls.lesson import CONTEXT, CONTEXTS, KV, MODEL
from app.figures import CACHED, NAIVE
from app.figures import lesson as figs
from app.i18n import lang, t
from app.lesson.generation import claim
from app.lesson.nav import open_full_page
from app.lesson.quiz import ask
from app.present import show_chart
from sim.cost.decode import flop_shape
from sim.cost.gpus import load_gpus
from sim.cost.memory import (
    KV_DTYPES,
    WEIGHT_DTYPE_BITS,
    MemoryConfig,
    first_context_over,
    kv_memory,
    request_bytes,
    weight_bytes,
)
from sim.cost.opcount import step_flops
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware, memory_bound_until, prefill_step
from sim.cost.roofline_fit import fit, max_batch_on
from sim.lesson import quiz
from sim.words import lesson as say
from sim.words.cost import steps_frame
from sim.words.fit import fit_sentence, turn_fits

GPU = "h100-sxm"
ROOFLINE_MODEL = "llama-3.1-70b"
COST_MODEL = "llama-3.1-8b"
BYTES_CONTEXT = 32_768  # one request's context in the bytes step
ROOFLINE_CONTEXT = 4096  # the memory-bound step's context


def _models():
    return {k: a for k, a in load_presets().items() if not k.startswith("tiny")}


def _step_curves() -> tuple[list[int], list[int]]:
    shape = flop_shape(load_presets()[COST_MODEL])
    return [sum(step_flops(shape, S, S).values()) for S in CONTEXTS], [sum(step_flops(shape, 1, S).values())
                                                                         for S in CONTEXTS]


def step_cost_finding(ctx: int, L: str) -> str:
    """Step 5's claim at `ctx` tokens (also the recap's line)."""
    naive, cached = _step_curves()
    i = CONTEXTS.index(ctx)
    parts = step_flops(flop_shape(load_presets()[COST_MODEL]), 1, ctx)
    share = (parts["attn_scores"] + parts["attn_v"]) / sum(parts.values())
    return say.step_cost_claim(ctx, cached[i], naive[i], share, lang=L)


def bytes_finding(model: str, kv: str, L: str) -> str:
    arch = _models()[model]
    m = kv_memory(MemoryConfig(arch, batch=1, context=BYTES_CONTEXT, kv_dtype=kv))
    return say.bytes_claim(arch.name, kv.upper(), m.bytes_per_token, BYTES_CONTEXT, m.per_request_bytes,
                           weight_bytes(arch, "bf16"), lang=L)


def memory_bound_finding(L: str) -> str:
    cfg, hw = RooflineConfig(load_presets()[ROOFLINE_MODEL], 1, ROOFLINE_CONTEXT), hardware(load_gpus()[GPU], "bf16")
    return say.roofline_takeaway(decode_step(cfg).intensity, prefill_step(cfg).intensity, hw.ridge, lang=L) + "."


def _batching(ctx: int, L: str):
    arch, gpu = load_presets()[ROOFLINE_MODEL], load_gpus()[GPU]
    hw = hardware(gpu, "bf16")
    contexts = sorted({512, ctx, 131072})
    base = RooflineConfig(arch, 1, 4096)
    turns = {S: memory_bound_until(replace(base, context=S), hw, BATCHES[-1]) for S in contexts}
    needs = turn_fits(turns, base, gpu, L)
    claim_text = say.batching_claim(turns, BATCHES[-1], lang=L) + (" " + t("roofline.fit.turn_head", parts=needs)
                                                                  if needs else "")
    return claim_text, arch, gpu, hw, contexts, base, turns


def batching_finding(ctx: int, L: str) -> str:
    return _batching(ctx, L)[0]


def step_cost() -> None:
    ss, L = st.session_state, lang()
    CONTEXT.draw(format_func=lambda v: f"{v:,}")
    arch = load_presets()[COST_MODEL]
    naive, cached = _step_curves()
    i = CONTEXTS.index(ss["ctx"])
    claim(step_cost_finding(ss["ctx"], L))
    show_chart(figs.step_flops_vs_context(CONTEXTS, naive, cached,
                                          say.step_cost_title(arch.name, ss["ctx"], naive[i], cached[i], lang=L),
                                          lang=L, chosen=ss["ctx"]),
               key="lesson_step_cost")
    st.caption(t("lesson.cap.step_cost"))
    open_full_page("decode_cost", {"scale_model": COST_MODEL, "scale_n": ss["ctx"]},
                   t("lesson.open.step_cost", model=arch.name))


def cache_bytes() -> None:
    ss, L = st.session_state, lang()
    models = _models()
    c = st.columns(2)
    MODEL.draw(c[0], format_func=lambda k: models[k].name)
    dtype_labels = {d: t(f"lesson.dtype.{d}") for d in KV_DTYPES}  # worded now: format_func runs later too
    KV.draw(c[1], format_func=dtype_labels.get)
    arch = models[ss["model"]]
    cfg = MemoryConfig(arch, batch=1, context=BYTES_CONTEXT, kv_dtype=ss["kv"])
    m = kv_memory(cfg)
    weights = weight_bytes(arch, "bf16")
    claim(bytes_finding(ss["model"], ss["kv"], L))
    per_request = [request_bytes(cfg, S) for S in CONTEXTS]
    show_chart(figs.bytes_vs_context(CONTEXTS, per_request, weights,
                                     say.bytes_title(arch.name, ss["kv"].upper(), CONTEXTS, per_request, weights,
                                                     lang=L, over=first_context_over(cfg, weights, CONTEXTS[-1])),
                                     lang=L),
               key="lesson_bytes")
    steps = steps_frame(m, L)  # the KV memory page's formula steps, worded in the page language
    st.table({t("lesson.tab.step"): list(steps.iloc[:, 0]), t("lesson.tab.math"): list(steps.iloc[:, 1])})
    open_full_page("kv_memory", {"model": ss["model"], "kv": ss["kv"], "ctx": BYTES_CONTEXT, "batch": 1},
                   t("lesson.open.bytes"))
    ask(quiz.kib_per_token(quiz.other_model(ss["model"])))  # not the model the step shows


def memory_bound() -> None:
    L = lang()
    arch, gpu = load_presets()[ROOFLINE_MODEL], load_gpus()[GPU]
    hw = hardware(gpu, "bf16")
    cfg = RooflineConfig(arch, 1, ROOFLINE_CONTEXT)
    dec, pre = decode_step(cfg), prefill_step(cfg)
    where = fit(cfg, gpu)  # 70B in BF16 needs two H100s: the step says so and why one GPU's roofline still holds
    n = where.num_gpus or 1
    text = say.roofline_takeaway(dec.intensity, pre.intensity, hw.ridge, lang=L)
    claim(memory_bound_finding(L))
    show_chart(figs.mini_roofline(hw.peak_flops, hw.bandwidth, [
        (t("lesson.fig.decode"), dec.intensity, dec.attainable_flops(hw), CACHED),
        (t("lesson.fig.prefill"), pre.intensity, pre.attainable_flops(hw), NAIVE)],
        say.roofline_title(arch.name, gpu.name if n == 1 else t("lesson.gpus", n=f"{n}", gpu=gpu.name), cfg.batch,
                           cfg.context, text, lang=L), lang=L),
        key="lesson_roofline")
    st.caption(fit_sentence(where, arch.name, L))
    ms = dec.time(hw) * 1e3
    st.caption(t("lesson.cap.roof" if n == 1 else "lesson.cap.roof_n", gb=f"{dec.bytes_weights / 1e9:,.1f}",
                 b=f"{WEIGHT_DTYPE_BITS['bf16'] // 8}", ms=f"{ms:,.1f}", n=f"{n}", ms_n=f"{ms / n:,.1f}"))
    open_full_page("roofline", {"model": ROOFLINE_MODEL, "gpu": GPU, "batch": 1, "context": ROOFLINE_CONTEXT},
                   t("lesson.open.roof"))
    ask(quiz.decode_intensity(ROOFLINE_MODEL, ROOFLINE_CONTEXT))


BATCHES = [2**k for k in range(13)]
NODE_GPUS = 8  # the batching step's deployment: one server of 8 GPUs, the model split across them


def batching() -> None:
    ss, L = st.session_state, lang()
    CONTEXT.draw(label="lesson.c.ctx_each", format_func=lambda v: f"{v:,}")
    claim_text, arch, gpu, hw, contexts, base, turns = _batching(ss["ctx"], L)
    lines = {S: [decode_step(replace(base, batch=B, context=S)).intensity for B in BATCHES] for S in contexts}
    holds = {S: max_batch_on(replace(base, context=S), gpu, NODE_GPUS) for S in contexts}
    claim(claim_text)
    show_chart(figs.intensity_vs_batch(BATCHES, lines, hw.ridge, say.ridge_title(turns, hw.ridge, lang=L), lang=L,
                                       context_to_fit=holds), key="lesson_batching")
    st.caption(t("lesson.cap.node", n=f"{NODE_GPUS}", gpu=gpu.name,
                 holds=", ".join(t("lesson.cap.node_at", S=f"{S:,}", b=f"{b:,}") for S, b in holds.items())))
    st.caption(t("lesson.cap.batching"))
    open_full_page("roofline", {"model": ROOFLINE_MODEL, "gpu": GPU, "context": ss["ctx"], "tab": "batching"},
                   t("lesson.open.batching"))
