"""The Serving page's engine tabs: cached studies (sim.serving.studies) queued through app.work, figures built once."""

from __future__ import annotations

import hashlib

import streamlit as st

from app.i18n import t
from app.work import run_job
from sim.alloc.trace import MAX_PAGE_TRACE_BYTES, TraceFile, parse_trace
from sim.serving import disagg as dg
from sim.serving import offload as of
from sim.serving import routing as rt
from sim.serving import studies as sd
from sim.serving.config import EngineConfig
from sim.serving.engine import EngineRun

CHUNK_S = 2.0  # ~0.8 s for the default 100 requests here; more requests or outputs wait for the Run button
PREEMPTION_S = 2.0
OFFLOAD_S = 1.5  # the default 400 requests of 2,240 tokens, three runs, here
DISAGG_S = 1.2
ROUTING_S = 1.5


def _scale(n_requests: int, prompt: int, output: int, base: tuple[int, int, int]) -> float:
    """Work relative to a default: requests × (prompt + output) tokens."""
    return n_requests * (prompt + output) / (base[0] * (base[1] + base[2]))


def chunk_sweep(setup: sd.StudySetup) -> sd.ChunkSweep | None:
    w = setup.workload
    estimate = CHUNK_S * _scale(w.num_requests, w.prompt_mean, w.output_mean, (100, 3000, 100))
    return run_job("serving.chunked", setup, estimate, lambda progress: sd.sweep_chunk_budget(setup, progress=progress), real_model=False,
                   what=t("serving.job.chunked"))


def preemption(setup: sd.PreemptionSetup) -> sd.PreemptionComparison | None:
    w = setup.study.workload
    estimate = PREEMPTION_S * _scale(w.num_requests, w.prompt_mean, w.output_mean, (300, 600, 400))
    return run_job("serving.preemption", setup, estimate, lambda progress: sd.compare_preemption(setup, progress=progress), real_model=False,
                   what=t("serving.job.preemption"))


@st.cache_data(max_entries=16, show_spinner=False)
def scenario(name: str, config: EngineConfig) -> EngineRun:
    return sd.run_scenario(name, config)


@st.cache_data(max_entries=8, show_spinner=False)
def read_trace(data: bytes) -> TraceFile:
    return parse_trace(data, MAX_PAGE_TRACE_BYTES)


def trace_run(data: bytes, dep, max_num_seqs: int, budget: int) -> sd.TraceRun | None:
    tf = read_trace(data)
    tokens = int(tf.prompt_len.sum() + tf.output_len.sum())
    estimate = 4 * 0.3 * tokens / 50_000  # four serving runs, ~0.3 s per 50k tokens each here
    # keyed by the trace's digest, not its bytes: the shared result cache would hold every 2 MiB trace in its keys
    return run_job("serving.trace", (hashlib.sha256(data).hexdigest(), dep, max_num_seqs, budget), estimate,
                   lambda progress: sd.run_trace(tf, dep, max_num_seqs=max_num_seqs, block_size=16,
                                                 max_num_batched_tokens=budget), real_model=False,
                   what=t("serving.job.trace"))


def offload(setup: of.OffloadSetup) -> of.OffloadStudy | None:
    w = setup.workload
    estimate = OFFLOAD_S * _scale(w.num_requests, w.prompt_len, w.output_len, (400, 2176, 64))
    return run_job("serving.offload", setup, estimate, lambda progress: of.run_offload(setup, progress=progress),
                   real_model=False, what=t("serving.job.offload"))


def disagg(setup: dg.DisaggSetup) -> dg.DisaggStudy | None:
    w = setup.workload
    estimate = DISAGG_S * _scale(w.num_requests, w.prompt_mean, w.output_mean, (300, 3000, 200))
    return run_job("serving.disagg", setup, estimate, lambda progress: dg.run_disagg(setup, progress=progress),
                   real_model=False, what=t("serving.job.disagg"))


def routing(setup: rt.RoutingSetup) -> rt.RoutingStudy | None:
    w = setup.workload
    estimate = ROUTING_S * _scale(w.num_requests, w.prompt_len, w.output_len, (600, 2176, 64))
    return run_job("serving.routing", setup, estimate, lambda progress: rt.run_routing(setup, progress=progress),
                   real_model=False, what=t("serving.job.routing"))
