"""The Attention kernels page's runs: every timing takes its turn in the server's one queue, alone; the
backend probe, the timings and the matmul ceiling are cached; the last timing and sweep stay in the session."""

from __future__ import annotations

import time

import streamlit as st

from app.i18n import lang, t
from app.work import server
from sim.attention import shapes as S
from sim.attention.implementations import impl_statuses
from sim.attention.limits import Limits, device_limits
from sim.attention.measure import matmul_rate, run_alone
from sim.attention.timing import SweepResult, TimingResult, sweep_attention, time_attention
from sim.words.attention import progress_text, shape_label, sweep_progress

SHAPE_BUDGET_S = 0.25  # measured seconds per kernel (at least 3 timed calls)
SWEEP_BUDGET_S = 0.15
limits_here = st.cache_resource(show_spinner=False)(device_limits)


def locked(fn, *args, **kwargs):
    """`fn` run in the server's one queue, alone (timings must not disturb each other)."""
    return run_alone(server().queue, fn, *args, **kwargs)


@st.cache_resource(show_spinner=False)
def _statuses(device: str, dtype: str):
    return locked(impl_statuses, device, dtype)


def statuses(device: str, dtype: str):
    """Which kernels run here (probed once per device and dtype)."""
    with st.spinner(t("kernels.run.probing")):
        return _statuses(device, dtype)


def num_timed_runs(device: str, dtype: str) -> int:
    """How many timed kernel runs "Time these kernels" makes here (FlexAttention is timed on its own)."""
    return sum(s.runs for s in statuses(device, dtype) if s.impl != "flex")


@st.cache_data(max_entries=64, show_spinner=False)
def timed(shape: S.AttentionShape, device: str, threads: int | None, budget_s: float, trial: int):
    result = locked(time_attention, shape, device, limits_here(device), budget_s=budget_s, num_threads=threads)
    return result, time.strftime("%H:%M:%S")


@st.cache_data(max_entries=16, show_spinner=False)
def ceiling_flops(device: str, dtype: str, threads: int | None) -> float:
    return locked(matmul_rate, device, dtype, num_threads=threads)


def time_shape(shape: S.AttentionShape, device: str, limits: Limits, threads: int | None, flex: bool, trial: int,
               flex_timeout_s: int) -> None:
    """Time every kernel at `shape` (kept in the session as "ak_timing"). FlexAttention's compile, of up to
    `flex_timeout_s`, shows live progress and a Stop button that kills it; the others come from the cache."""
    lg = lang()
    with st.spinner(t("kernels.run.timing", shape=shape_label(shape, lg))):
        if flex:
            status, stop = st.empty(), st.empty()
            stop.button(t("kernels.run.stop"), key="_work.stop.flex", help=t("kernels.run.stop_help"))
            result = locked(time_attention, shape, device, limits, S.IMPLS, SHAPE_BUDGET_S, flex_timeout_s,
                            threads, lambda what, s=None: status.caption(progress_text(what, s, lg)))
            status.empty()
            stop.empty()
            st.session_state["ak_timing"] = (result, time.strftime("%H:%M:%S"))
        else:
            st.session_state["ak_timing"] = timed(shape, device, threads, SHAPE_BUDGET_S, trial)


def last_timing() -> tuple[TimingResult, str] | None:
    """(the last timing, when it was measured), or None before the first."""
    return st.session_state.get("ak_timing")


def sweep(shape: S.AttentionShape, lengths: list[int], device: str, threads: int | None, trial: int) -> None:
    """Time the kernels at every N in `lengths` (kept in the session as "ak_sweep"), with a progress bar."""
    lg = lang()
    bar = st.progress(0.0, text=t("kernels.run.ceiling"))
    try:
        st.session_state["ak_sweep"] = sweep_attention(
            shape, lengths, lambda s: timed(s, device, threads, SWEEP_BUDGET_S, trial)[0],
            ceiling_flops(device, shape.dtype, threads),
            lambda i, n: bar.progress(i / len(lengths), text=sweep_progress(i, n, len(lengths), lg)))
    finally:
        bar.empty()


def last_sweep() -> SweepResult | None:
    return st.session_state.get("ak_sweep")
