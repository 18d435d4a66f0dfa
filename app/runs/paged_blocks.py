"""The Paged KV blocks page's cached simulations and its real-model job."""

from __future__ import annotations

import streamlit as st

from app.controls.paged_blocks import LIVE_MAX_PROMPT, LiveChoice
from app.i18n import t
from app.work import run_job
from sim.alloc.block_pool import ForkResult, simulate_parallel_sampling
from sim.alloc.paged_schedule import simulate_paged_stepwise
from sim.alloc.policies import Comparison, compare_policies
from sim.alloc.schedule import PoolConfig
from sim.alloc.workload import LengthWorkloadConfig, make_workload


@st.cache_data(max_entries=8, show_spinner=False)
def _compare(wcfg: LengthWorkloadConfig, scfg: PoolConfig) -> Comparison:
    return compare_policies(make_workload(wcfg), scfg)


def compare(wcfg: LengthWorkloadConfig, scfg: PoolConfig) -> Comparison:
    with st.spinner(t("paged.spin.compare")):
        return _compare(wcfg, scfg)


@st.cache_data(max_entries=8, show_spinner=False)
def _pool_frames(wcfg: LengthWorkloadConfig, scfg: PoolConfig, steps: tuple[int, ...]) -> dict:
    wl = make_workload(wcfg)
    return simulate_paged_stepwise(wl, scfg, steps, lazy=True, until=max(steps)).snapshots


def pool_frames(wcfg: LengthWorkloadConfig, scfg: PoolConfig, steps: tuple[int, ...]) -> dict:
    with st.spinner(t("paged.spin.frames")):
        return _pool_frames(wcfg, scfg, steps)


@st.cache_data(max_entries=16, show_spinner=False)
def fork_run(prompt_len: int, n: int, gen: int, bs: int) -> ForkResult:
    return simulate_parallel_sampling(prompt_len, n, gen, bs)


def live_run(choice: LiveChoice):
    """The real model decoding through block tables, then each branch alone (None while it waits for a button)."""
    from app.resources import model, model_rates
    from sim.model.generate import SamplingConfig, encode
    from sim.model.paged_cache import paged_generate, paged_run_seconds

    ids = encode(choice.prompt)
    if len(ids) > LIVE_MAX_PROMPT:
        raise ValueError(t("paged.live.too_long", n=f"{len(ids):,}", max=f"{LIVE_MAX_PROMPT}"))
    n_new, branches, bs = choice.max_new_tokens, choice.num_branches, choice.block_size
    estimate = paged_run_seconds(model_rates("mha", "eager"), prompt_len=len(ids), max_new_tokens=n_new, num_branches=branches)
    sampling = SamplingConfig(choice.temperature, 0, choice.seed)
    return run_job("paged_blocks.live", (tuple(ids), n_new, branches, choice.temperature, bs, choice.seed), estimate,
                   lambda progress: paged_generate(model("mha"), ids, n_new, num_branches=branches, block_size=bs, sampling=sampling),
                   what=t("paged.live.what", n=f"{branches}", new=f"{n_new}"))
