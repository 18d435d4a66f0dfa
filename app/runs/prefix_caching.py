"""The Prefix caching page's cached simulations and the jobs it gates: each returns the result, or None while
the job waits for its button."""

from __future__ import annotations

import streamlit as st

from app.i18n import lang, t
from app.work import queued, run_job
from sim.alloc import prefix_sweeps as ps
from sim.alloc import workload as wk
from sim.alloc.prefix_cache import CacheConfig
from sim.model import prefix_run as pr
from sim.words import prefix as ro
from sim.words import say


def _spun(fn, key: str):
    """fn cached (st.cache_data), with its spinner worded in the page language."""
    cached = st.cache_data(max_entries=16 if fn is ps.run_both_layouts else 8, show_spinner=False)(fn)

    def run(*args):
        with st.spinner(t(key)):
            return cached(*args)

    return run


both_layouts = _spun(ps.run_both_layouts, "prefix.spin.both")
overview = _spun(ps.compare_workloads, "prefix.spin.overview")
sweeps = _spun(ps.sweep_both_layouts, "prefix.spin.sweeps")
tree = _spun(ps.tree_view, "prefix.spin.tree")


@st.cache_data(max_entries=16, show_spinner=False)
def trace_tokens(cfg: wk.PrefixWorkloadConfig) -> int:
    """Tokens the chosen workload's trace stores: what every simulation of it walks through."""
    return wk.make_trace(cfg).num_stored_tokens


def workloads(cfg: wk.PrefixWorkloadConfig, cache: CacheConfig):
    """(both layouts of the chosen workload, every workload's overview)."""
    job = ro.workloads_job(cfg, trace_tokens(cfg), lang())
    return run_job("prefix_caching.workloads", (cfg, cache), job.estimate_s,
                   lambda progress: (both_layouts(cfg, cache), overview(ps.sizes_only(cfg), cache)),
                   real_model=False, what=job.what)


def capacity_and_block_size(cfg: wk.PrefixWorkloadConfig, cache: CacheConfig):
    job = ro.sweeps_job(cache, trace_tokens(cfg), lang())
    return run_job("prefix_caching.sweeps", (cfg, cache), job.estimate_s, lambda progress: sweeps(cfg, cache),
                   real_model=False, what=job.what)


def radix_tree(cfg: wk.PrefixWorkloadConfig, block_size: int, num_drawn: int):
    job = ro.tree_job(trace_tokens(cfg), lang())
    return run_job("prefix_caching.tree", (cfg, block_size, num_drawn), job.estimate_s,
                   lambda progress: tree(cfg, block_size, num_drawn), real_model=False, what=job.what)


def branch(inputs: pr.BranchInputs):
    """The tiny model prefilling the prefix once and branching every continuation (a queued, gated job)."""
    from app.resources import model, model_rates

    job = inputs.job(model_rates("mha", "sdpa"))
    return run_job("prefix_caching.live", (inputs.prefix_ids, inputs.suffix_ids, inputs.num_new, inputs.repeats),
                   job.estimate_s,
                   lambda progress: pr.branch_from_prefix(model("mha"), list(inputs.prefix_ids),
                                                          [list(s) for s in inputs.suffix_ids], num_new=inputs.num_new,
                                                          repeats=inputs.repeats),
                   what=say(lang(), job.what))


@st.cache_data(max_entries=16, show_spinner=False)
def _kv_change(ids: tuple[int, ...], pos: int):
    from app.resources import model

    return pr.kv_change(model("mha"), list(ids), position=pos)


def kv_change(ids: tuple[int, ...], pos: int):
    """Both prompts through the model in the server's queue (well under a second)."""
    return queued(lambda: _kv_change(ids, pos), t("prefix.spin.kv"))


def real_chat(chat, block_size: int, *, go: bool):
    """SmolLM2 prefilling every request from scratch and from its cached prefix (sim.model.real_prefix), in the
    server's queue behind the section's button; None while it waits. The estimate is the real model's fitted
    prefill rates over the chat's tokens and hits estimated from its bytes (the tokenizer is not loaded yet)."""
    from sim.model import real_prefix as rp
    from sim.model.real_pages import WARM_LOAD_S
    from sim.work.run_cost import smollm2_rates

    estimate = rp.estimate_s(chat, block_size=block_size, rates=smollm2_rates("sdpa").prefill) + WARM_LOAD_S

    def work(progress):
        from app.resources import real_model

        real = real_model()
        return rp.measure_prefix_prefill(real, chat, block_size,
                                         progress=lambda done, total: progress(done / total))

    return run_job("prefix_caching.real_chat", (chat, block_size, rp.REPEATS), estimate, work, go=go,
                   button=t("rp.prefix.run"), auto=False,
                   what=t("rp.prefix.job", n=f"{len(chat.turns)}", repeats=f"{rp.REPEATS}"))
