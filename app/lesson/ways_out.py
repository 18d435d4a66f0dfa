"""Steps 9–12, the three ways out and the rule that follows: shrink the cache, share its memory in blocks,
get more tokens per byte read, and lay prompts out so their prefixes can be shared."""

from __future__ import annotations

import streamlit as st

from app.controls.lesson import ALPHA, BLOCK_STEP, DRAFT_K, MODEL, WORKLOAD
from app.figures import lesson as figs
from app.i18n import lang, t
from app.lesson.generation import claim
from app.lesson.nav import open_full_page
from app.lesson.quiz import ask
from app.present import show_chart
from sim.alloc.policies import simulate_policy
from sim.alloc.prefix_cache import CacheConfig
from sim.alloc.prefix_sweeps import run_both_layouts
from sim.alloc.schedule import PoolConfig
from sim.alloc.workload import LengthWorkloadConfig, PrefixWorkloadConfig, make_workload
from sim.cost.gpus import load_gpus
from sim.cost.memory import MemoryConfig, fmt_bytes, kv_memory, variant_curves
from sim.cost.presets import load_presets
from sim.lesson import quiz
from sim.lesson.blocks import REQUESTS, block_story, touched
from sim.lesson.quiz import LAYOUT_WORKLOADS
from sim.lesson.steps import SLUGS
from sim.serving.speculative import SpecSetup, expected_tokens_per_pass, spec_timing, speculative_speedup
from sim.words import lesson as say
from sim.words.lesson import event_sentence

SPEC = SpecSetup()  # the Serving page's speculative defaults: Llama 3.1 70B drafted by Llama 3.1 8B on an H100
SHRINK_DTYPES = ("bf16", "fp8", "int8", "int4", "int2")
SHARE_REQUESTS = 200


def _shrink(model: str) -> tuple[dict[str, int], dict[str, int]]:
    arch = load_presets()[model]
    curves = variant_curves(MemoryConfig(arch, batch=1, context=1024, kv_dtype="bf16"), contexts=(1024,))
    return curves.name_to_token_bytes, {d: kv_memory(MemoryConfig(arch, 1, 1, kv_dtype=d)).bytes_per_token
                                        for d in SHRINK_DTYPES}


def shrink_finding(model: str, L: str) -> str:
    kinds, by_dtype = _shrink(model)
    return say.shrink_claim(kinds, by_dtype, "bf16", lang=L)


def share_finding(L: str) -> str:
    with st.spinner(t("lesson.job.pool")):
        r = _policies(SHARE_REQUESTS)
    paged, reserved = r["paged"], r["reserve_max_len"]
    return say.share_claim(paged.token_share, reserved.token_share, paged.mean_running, reserved.mean_running, lang=L)


def speculate_finding(alpha: float, k: int, L: str) -> str:
    c = spec_timing(SPEC.target, SPEC.draft, SPEC.gpu).c
    return say.speculate_claim(alpha, k, expected_tokens_per_pass(alpha, k), speculative_speedup(alpha, k, c), lang=L)


def layout_finding(workload: str, L: str) -> str:
    with st.spinner(t("lesson.job.prefix")):
        hits = _layouts(workload)
    return say.layout_claim(hits["fixed_first"], hits["variable_first"], lang=L)


def shrink() -> None:
    ss, L = st.session_state, lang()
    models = {k: a for k, a in load_presets().items() if not k.startswith("tiny")}
    MODEL.draw(format_func=lambda k: models[k].name)
    arch = models[ss["model"]]
    kinds, by_dtype = _shrink(ss["model"])
    claim(shrink_finding(ss["model"], L))
    c = st.columns(2)
    with c[0]:
        show_chart(figs.bars(list(kinds), [v / 1024 for v in kinds.values()], t("lesson.fig.kinds"),
                             t("lesson.fig.kv_per_token"),
                             say.smallest_title(t("lesson.fig.in_bf16", model=arch.name), kinds, "MHA", lang=L),
                             highlight=arch.attention, value_text=[fmt_bytes(v) for v in kinds.values()], half=True),
                   key="lesson_shrink_kinds")
    with c[1]:
        labels = [t(f"lesson.dtype.{d}") for d in by_dtype]
        show_chart(figs.bars(labels, [v / 1024 for v in by_dtype.values()], t("lesson.fig.kv_dtype"),
                             t("lesson.fig.kv_per_token"),
                             say.smallest_title(f"{arch.name} ({arch.attention})",
                                                dict(zip(labels, by_dtype.values(), strict=True)),
                                                t("lesson.dtype.bf16"), lang=L),
                             value_text=[fmt_bytes(v) for v in by_dtype.values()], half=True),
                   key="lesson_shrink_dtypes")
    st.caption(t("lesson.cap.shrink"))
    open_full_page("kv_memory", {"model": ss["model"], "kv": "bf16", "tab": "variants"}, t("lesson.open.shrink"))
    ask(quiz.mqa_vs_mha(quiz.other_model(ss["model"])))  # not the model the step's bars show


@st.cache_data(max_entries=4, show_spinner=False)  # the caller's spinner says what runs, in the page language
def _policies(num_requests: int):
    wl = make_workload(LengthWorkloadConfig(num_requests=num_requests))
    return {p: simulate_policy(wl, PoolConfig(), p) for p in ("paged", "reserve_max_len")}


def share() -> None:
    L = lang()
    with st.spinner(t("lesson.job.pool")):
        r = _policies(SHARE_REQUESTS)
    paged, reserved = r["paged"], r["reserve_max_len"]
    claim(share_finding(L))
    labels = [t("lesson.fig.paged"), t("lesson.fig.reserved")]
    show_chart(figs.bars(labels, [100 * paged.token_share, 100 * reserved.token_share], t("lesson.fig.allocation"),
                         t("lesson.fig.real_share"), say.share_title(paged.token_share, reserved.token_share, lang=L),
                         highlight=labels[0],
                         value_text=[f"{100 * paged.token_share:.1f}%", f"{100 * reserved.token_share:.1f}%"]),
               key="lesson_share")
    st.caption(t("lesson.cap.share", bs=f"{PoolConfig().block_size:,}"))
    open_full_page("paged_blocks", {"requests": SHARE_REQUESTS}, t("lesson.open.share"))
    block_tables()


def block_tables() -> None:
    """Three requests on a small pool, one event at a time (the lab's BlockPool plays them)."""
    ss, L = st.session_state, lang()
    frames = block_story()
    st.subheader(t("lesson.bt.head"))
    BLOCK_STEP.draw(options=list(range(len(frames))), format_func=lambda i: f"{i}")
    f = frames[ss["bt"]]
    st.markdown(event_sentence(f, L))
    pool = f.pool
    show_chart(figs.block_tables(pool, REQUESTS, touched(f),
                                 t("lesson.bt.title", k=f"{ss['bt']}", n=f"{len(frames) - 1}",
                                   used=f"{pool.num_used_blocks}", total=f"{pool.num_blocks}",
                                   free=f"{pool.num_blocks - pool.num_used_blocks}"), lang=L), key="lesson_bt")
    st.caption(t("lesson.bt.cap", queue=", ".join(f"#{b}" for b in pool.free_block_queue)))


def speculate() -> None:
    ss, L = st.session_state, lang()
    c = st.columns(2)
    ALPHA.draw(c[0])
    DRAFT_K.draw(c[1])
    alpha, k = ss["alpha"], ss["k"]
    ks = list(range(1, 9))
    tokens = [expected_tokens_per_pass(alpha, j) for j in ks]
    # the draft's cost as the Serving page's default times it (target, draft and GPU from its defaults), so the
    # speedup here is the one its speculative tab shows for the same α and k
    timing = spec_timing(SPEC.target, SPEC.draft, SPEC.gpu)
    claim(speculate_finding(alpha, k, L))
    show_chart(figs.tokens_per_pass(ks, tokens, k, say.speculate_title(alpha, k, tokens[k - 1], lang=L), lang=L),
               key="lesson_speculate")
    presets = load_presets()
    st.caption(t("lesson.cap.spec2", c=f"{timing.c:.3f}", draft=presets[SPEC.draft].name,
                 target=presets[SPEC.target].name, d=f"{timing.draft_step_s * 1e3:.2f}",
                 t=f"{timing.target_step_s * 1e3:.2f}", gpu=load_gpus()[SPEC.gpu].name, ctx=f"{timing.context:,}",
                 step=f"{SLUGS.index('batching') + 1}"))
    open_full_page("serving", {"tab": "spec", "alpha": alpha, "k": k, "c_mode": "roofline", "spec_target": SPEC.target,
                               "spec_draft": SPEC.draft, "gpu": SPEC.gpu}, t("lesson.open.spec"))


@st.cache_data(max_entries=8, show_spinner=False)  # the caller's spinner says what runs, in the page language
def _layouts(workload: str):
    runs = run_both_layouts(PrefixWorkloadConfig(workload=workload, num_requests=100), CacheConfig())
    return {layout: run.result.hit_rate for layout, run in runs.items()}


def layout() -> None:
    ss, L = st.session_state, lang()
    names = {w: t(f"lesson.workload.{w}") for w in LAYOUT_WORKLOADS}  # worded now: format_func runs later too
    WORKLOAD.draw(format_func=names.get)
    with st.spinner(t("lesson.job.prefix")):
        hits = _layouts(ss["workload"])
    claim(layout_finding(ss["workload"], L))
    show_chart(figs.bars([t("lesson.fig.fixed_first"), t("lesson.fig.variable_first")],
                         [100 * hits["fixed_first"], 100 * hits["variable_first"]], t("lesson.fig.layout"),
                         t("lesson.fig.served"), say.layout_title(hits["fixed_first"], hits["variable_first"], lang=L),
                         value_text=[f"{100 * v:.1f}%" for v in hits.values()]), key="lesson_layout")
    st.caption(t("lesson.cap.layout"))
    open_full_page("prefix_caching", {"workload": ss["workload"]}, t("lesson.open.layout"))
    ask(quiz.better_layout(quiz.other_workload(ss["workload"])))  # not the workload the step shows
