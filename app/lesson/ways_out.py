"""Steps 9–12, the three ways out and the rule that follows: shrink the cache, share its memory in blocks,
get more tokens per byte read, and lay prompts out so their prefixes can be shared."""

from __future__ import annotations

import streamlit as st

from app.figures import lesson as figs
from app.lesson.generation import claim
from app.lesson.nav import ALPHAS, LAYOUT_WORKLOADS, open_full_page
from app.lesson.quiz import ask
from app.present import show_chart
from sim.alloc.policies import simulate_policy
from sim.alloc.prefix_cache import CacheConfig
from sim.alloc.prefix_sweeps import run_both_layouts
from sim.alloc.schedule import ServingConfig
from sim.alloc.workload import LengthWorkloadConfig, PrefixWorkloadConfig, make_workload
from sim.cost.memory import KV_DTYPES, MemoryConfig, fmt_bytes, kv_memory, variant_curves
from sim.cost.presets import load_presets
from sim.lesson import quiz
from sim.lesson import sentences as say
from sim.serving.speculative import expected_tokens_per_pass, speculative_speedup

DRAFT_COST = 0.05  # a draft pass costs this share of a big-model pass (a small draft model)
SHRINK_DTYPES = ("bf16", "fp8", "int8", "int4", "int2")
SHARE_REQUESTS = 200


def shrink() -> None:
    ss = st.session_state
    models = {k: a for k, a in load_presets().items() if not k.startswith("tiny")}
    st.selectbox("Try it: model", list(models), key="model", format_func=lambda k: models[k].name)
    arch = models[ss["model"]]
    curves = variant_curves(MemoryConfig(arch, batch=1, context=1024, kv_dtype="bf16"), contexts=(1024,))
    kinds = curves.name_to_token_bytes
    by_dtype = {d: kv_memory(MemoryConfig(arch, 1, 1, kv_dtype=d)).bytes_per_token for d in SHRINK_DTYPES}
    claim(say.shrink_claim(kinds, by_dtype, "bf16"))
    c = st.columns(2)
    with c[0]:
        show_chart(figs.bars(list(kinds), list(kinds.values()), "how keys and values are stored",
                             "KV bytes per token (B)", say.smallest_title(f"{arch.name} in BF16", kinds, "MHA"),
                             highlight=arch.attention, value_text=[fmt_bytes(v) for v in kinds.values()]),
                   key="lesson_shrink_kinds")
    with c[1]:
        labels = [KV_DTYPES[d].label for d in by_dtype]
        show_chart(figs.bars(labels, list(by_dtype.values()), "KV cache dtype", "KV bytes per token (B)",
                             say.smallest_title(f"{arch.name} ({arch.attention})",
                                                {KV_DTYPES[d].label: v for d, v in by_dtype.items()},
                                                KV_DTYPES["bf16"].label),
                             value_text=[fmt_bytes(v) for v in by_dtype.values()]), key="lesson_shrink_dtypes")
    st.caption("Fewer K/V heads (GQA, MQA) or one compressed latent (MLA) change the model and are fixed when it is "
               "trained; fewer bits per value (quantization) or fewer tokens kept (eviction, sliding windows) "
               "trade accuracy for bytes at serving time.")
    open_full_page("kv_memory", {"model": ss["model"], "tab": "variants"}, "every attention kind and dtype")
    ask(quiz.mqa_vs_mha("llama-3.1-8b"))


@st.cache_data(max_entries=4, show_spinner="Simulating the block pool…")
def _policies(num_requests: int):
    wl = make_workload(LengthWorkloadConfig(num_requests=num_requests))
    return {p: simulate_policy(wl, ServingConfig(), p) for p in ("paged", "reserve_max_len")}


def share() -> None:
    r = _policies(SHARE_REQUESTS)
    paged, reserved = r["paged"], r["reserve_max_len"]
    claim(say.share_claim(paged.token_share, reserved.token_share, paged.mean_running, reserved.mean_running))
    labels = ["paged blocks", "reserve the max length"]
    show_chart(figs.bars(labels, [100 * paged.token_share, 100 * reserved.token_share], "allocation",
                         "claimed memory holding real tokens (%)",
                         say.share_title(paged.token_share, reserved.token_share),
                         highlight="paged blocks",
                         value_text=[f"{100 * paged.token_share:.1f}%", f"{100 * reserved.token_share:.1f}%"]),
               key="lesson_share")
    st.caption("A request's final length is unknown when it starts. Reserving the maximum up front strands the memory "
               f"it never uses; blocks of {ServingConfig().block_size} tokens are handed out as the request grows and "
               "freed when it ends, and requests that share a prefix can point at the same blocks.")
    open_full_page("paged_blocks", {"requests": SHARE_REQUESTS}, "the pool step by step, and fragmentation")


def speculate() -> None:
    ss = st.session_state
    c = st.columns(2)
    c[0].select_slider("Try it: acceptance rate α", ALPHAS, key="alpha")
    c[1].slider("Draft tokens k", 1, 8, key="k")
    alpha, k = ss["alpha"], ss["k"]
    ks = list(range(1, 9))
    tokens = [expected_tokens_per_pass(alpha, j) for j in ks]
    claim(say.speculate_claim(alpha, k, expected_tokens_per_pass(alpha, k), speculative_speedup(alpha, k, DRAFT_COST)))
    show_chart(figs.tokens_per_pass(ks, tokens, k, say.speculate_title(alpha, k, tokens[k - 1])),
               key="lesson_speculate")
    st.caption(f"Each draft pass is taken to cost {DRAFT_COST:.0%} of a big-model pass. Batching is the other way to "
               "get more tokens per byte read: it shares the weights across requests (step 8).")
    open_full_page("serving", {"alpha": alpha, "k": k}, "batching and speculative decoding simulated")


@st.cache_data(max_entries=8, show_spinner="Simulating the prefix cache…")
def _layouts(workload: str):
    runs = run_both_layouts(PrefixWorkloadConfig(workload=workload, num_requests=100), CacheConfig())
    return {layout: run.result.hit_rate for layout, run in runs.items()}


def layout() -> None:
    ss = st.session_state
    st.selectbox("Try it: workload", list(LAYOUT_WORKLOADS), key="workload",
                 format_func=lambda w: w.replace("_", " "))
    hits = _layouts(ss["workload"])
    claim(say.layout_claim(hits["fixed_first"], hits["variable_first"]))
    show_chart(figs.bars(["fixed content first", "variable content first"],
                         [100 * hits["fixed_first"], 100 * hits["variable_first"]], "prompt layout",
                         "prompt tokens served from the cache (%)",
                         say.layout_title(hits["fixed_first"], hits["variable_first"]),
                         value_text=[f"{100 * v:.1f}%" for v in hits.values()]), key="lesson_layout")
    st.caption("Block hashes chain to their parent: a block hits only if every token before it matches too. So what "
               "repeats (system prompt, examples, documents) goes first, and what changes (the question, a time "
               "stamp) last.")
    open_full_page("prefix_caching", {"workload": ss["workload"]}, "hit rates by workload, capacity and block size")
    ask(quiz.better_layout())
