"""Prefill/decode disaggregation (DistServe, Splitwise; vLLM's disaggregated prefilling, llm-d) against a colocated
pool of the same GPUs.

  disaggregated : N_p prefill GPUs and N_d decode GPUs. A request goes to prefill GPU i mod N_p, which runs its
                  prompt (chunked prefill under the token budget, one engine per GPU: sim.serving.engine) and
                  emits its first token; its KV then crosses that GPU's outgoing link, one transfer at a time in
                  the order prompts finished, bytes = sim.cost.memory's formula for the prompt. Requests go to decode
                  GPUs round-robin in the order their KV lands; a decode GPU holds the KV from then and produces
                  the second token on. The prefill GPU's blocks are freed when the first token is out (the copy is
                  assumed to read them before a new prompt overwrites them).
  colocated     : N_p + N_d GPUs, request i on GPU i mod (N_p + N_d), each prefilling and decoding its own
                  requests, prompt chunks riding in decode passes.

Both use one GPU's KV budget per GPU. A decode GPU's passes carry no prompt work, so its requests' gaps between
tokens stay short; a colocated GPU mixes prompt chunks into decode passes, so its gaps stretch. vLLM's own
documentation says disaggregation tunes time to first token and inter-token latency separately and does not raise
throughput; this module measures both, and whether the latency objectives (SLOs) bind, from the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.alloc.workload import LengthWorkloadConfig, Workload, make_workload
from sim.cost.memory import MemoryConfig, request_bytes
from sim.cost.vllm_rules import ADMISSION_WATERMARK
from sim.msg import Msg
from sim.refusal import Misuse
from sim.serving.comparison import ARRIVAL_TICK_S, DeploymentConfig
from sim.serving.config import EngineConfig
from sim.serving.engine import EngineRun, simulate_engine
from sim.serving.links import GPU_LINKS
from sim.serving.studies import MAX_STUDY_REQUESTS

MAX_POOL_GPUS = 16


@dataclass(frozen=True)
class DisaggConfig:
    num_prefill: int = 1
    num_decode: int = 3

    def __post_init__(self) -> None:
        # the disaggregation tab bounds both pools to a few GPUs (app/controls/serving_engine.py)
        for name, v in (("num_prefill", self.num_prefill), ("num_decode", self.num_decode)):
            if not 1 <= v <= MAX_POOL_GPUS:
                raise Misuse(f"{name} must be 1..{MAX_POOL_GPUS} GPUs, got {v}")

    @property
    def num_gpus(self) -> int:
        return self.num_prefill + self.num_decode


@dataclass(frozen=True, eq=False)
class PoolRun:
    """Per request: arrival, first token, last token; every gap between two tokens of one request; the engines."""

    name: str  # the table's text for the pool (what the CSV keeps)
    label: Msg  # the same, as a message to word in either language
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    token_gaps_s: np.ndarray
    engines: tuple[EngineRun, ...]
    transfer_bytes: np.ndarray | None = None  # (N,) disaggregated only
    transfer_start_s: np.ndarray | None = None
    transfer_end_s: np.ndarray | None = None
    prefill_gpu: np.ndarray | None = None
    decode_gpu: np.ndarray | None = None  # -1: a one-token answer, never decoded

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(N,) per request: (last − first token) / (output − 1); nan for one-token answers."""
        many = self.output_len > 1
        out = np.full(len(self.output_len), math.nan)
        out[many] = (self.finish_s[many] - self.first_token_s[many]) / (self.output_len[many] - 1)
        return out

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def tokens_per_s(self) -> float:
        return int(self.output_len.sum()) / self.makespan_s

    def meets(self, ttft_slo_s: float, tpot_slo_s: float) -> np.ndarray:
        """(N,) bool: first token within its SLO and the mean gap after it too (a one-token answer: TTFT only)."""
        tpot = self.tpot_s
        return (self.ttft_s <= ttft_slo_s) & (np.isnan(tpot) | (tpot <= tpot_slo_s))

    def goodput(self, ttft_slo_s: float, tpot_slo_s: float) -> float:
        """Requests per second that met both SLOs (DistServe's measure)."""
        return int(self.meets(ttft_slo_s, tpot_slo_s).sum()) / self.makespan_s

    def metrics(self, ttft_slo_s: float, tpot_slo_s: float) -> dict:
        q = lambda v, p: float(np.percentile(v, p)) if len(v) else math.nan  # noqa: E731
        tpot = self.tpot_s[~np.isnan(self.tpot_s)]
        return {"pool": self.name, "throughput_tok_s": self.tokens_per_s, "ttft_p50_s": q(self.ttft_s, 50),
                "ttft_p95_s": q(self.ttft_s, 95), "itl_p50_ms": 1e3 * q(self.token_gaps_s, 50),
                "itl_p99_ms": 1e3 * q(self.token_gaps_s, 99), "tpot_p50_ms": 1e3 * q(tpot, 50),
                "slo_met_pct": 100 * float(self.meets(ttft_slo_s, tpot_slo_s).mean()),
                "goodput_req_s": self.goodput(ttft_slo_s, tpot_slo_s), "makespan_s": self.makespan_s}


def _sub(wl: Workload, idx: np.ndarray, arrival: np.ndarray, output: np.ndarray) -> Workload:
    return Workload(arrival, wl.prompt_len[idx], output, output.copy(), wl.max_model_len)


def simulate_colocated(wl: Workload, cfg: EngineConfig, cost, num_gpus: int, tick_s: float = 1.0) -> PoolRun:
    n = wl.num_requests
    arrival = wl.arrival.astype(np.float64) * tick_s
    first, finish = np.full(n, math.nan), np.full(n, math.nan)
    gaps, engines = [], []
    where = np.arange(n) % num_gpus
    for g in range(num_gpus):
        idx = np.flatnonzero(where == g)
        if not len(idx):
            continue
        run = simulate_engine(_sub(wl, idx, arrival[idx], wl.output_len[idx]), cfg, cost)
        first[idx], finish[idx] = run.result.first_token_s, run.result.finish_s
        gaps.append(run.result.itl_s)
        engines.append(run)
    return PoolRun(f"colocated ({num_gpus} GPUs)", Msg("serving.cell.pool_colocated", n=num_gpus), arrival, first, finish, wl.prompt_len.copy(), wl.output_len.copy(),
                   np.concatenate(gaps) if gaps else np.zeros(0), tuple(engines))


def simulate_disagg(wl: Workload, cfg: EngineConfig, cost, dc: DisaggConfig, kv_bytes: Callable[[int], int],
                    link_bytes_per_s: float, tick_s: float = 1.0) -> PoolRun:
    """The disaggregated pool (module docstring). kv_bytes(prompt_len): bytes to move; link_bytes_per_s may be
    math.inf (a transfer that costs nothing)."""
    if not link_bytes_per_s > 0:
        raise Misuse(f"the link must move a positive number of bytes per second, got {link_bytes_per_s}")
    n = wl.num_requests
    arrival = wl.arrival.astype(np.float64) * tick_s
    first, finish = np.full(n, math.nan), np.full(n, math.nan)
    engines = []
    p_gpu = np.arange(n) % dc.num_prefill
    sizes = {int(p): int(kv_bytes(int(p))) for p in np.unique(wl.prompt_len)}
    nbytes = np.array([sizes[int(p)] for p in wl.prompt_len], dtype=np.int64)
    t_start, t_end = np.full(n, math.nan), np.full(n, math.nan)
    for g in range(dc.num_prefill):
        idx = np.flatnonzero(p_gpu == g)
        if not len(idx):
            continue
        run = simulate_engine(_sub(wl, idx, arrival[idx], np.ones(len(idx), dtype=np.int64)), cfg, cost)
        engines.append(run)
        first[idx] = run.result.first_token_s
        free_at = -math.inf
        for i in idx[np.lexsort((idx, first[idx]))]:  # one transfer at a time, in the order prompts finished
            t_start[i] = max(first[i], free_at)
            t_end[i] = free_at = t_start[i] + nbytes[i] / link_bytes_per_s
    many = np.flatnonzero(wl.output_len > 1)
    finish[wl.output_len <= 1] = first[wl.output_len <= 1]
    order = many[np.lexsort((many, t_end[many]))]  # decode GPUs take requests as their KV lands
    d_gpu = np.full(n, -1, dtype=np.int64)
    d_gpu[order] = np.arange(len(order)) % dc.num_decode
    gaps = []
    for g in range(dc.num_decode):
        idx = order[d_gpu[order] == g]
        if not len(idx):
            continue
        run = simulate_engine(_sub(wl, idx, t_end[idx], wl.output_len[idx]), cfg, cost,
                              prefilled_first_s=first[idx])
        engines.append(run)
        finish[idx] = run.result.finish_s
        gaps.append(run.result.itl_s)
    return PoolRun(f"disaggregated ({dc.num_prefill} prefill + {dc.num_decode} decode)",
                   Msg("serving.cell.pool_disaggregated", p=dc.num_prefill, d=dc.num_decode), arrival, first, finish,
                   wl.prompt_len.copy(), wl.output_len.copy(), np.concatenate(gaps) if gaps else np.zeros(0),
                   tuple(engines), nbytes, t_start, t_end, p_gpu, d_gpu)


# --- the Serving page's study ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DisaggSetup:
    deployment: DeploymentConfig = DeploymentConfig()
    workload: LengthWorkloadConfig = LengthWorkloadConfig(
        num_requests=300, prompt_mean=3000, output_mean=200, spread=0.5, max_model_len=8192, max_tokens=1024,
        arrival="poisson", arrival_rate=28.0 * ARRIVAL_TICK_S, seed=0)
    pools: DisaggConfig = DisaggConfig(2, 2)
    link: str = "nvlink4"
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    ttft_slo_s: float = 1.0
    tpot_slo_ms: float = 8.0

    def __post_init__(self) -> None:
        # the disaggregation tab picks the link from GPU_LINKS and bounds the SLOs and the requests to these ranges
        if self.link not in GPU_LINKS:
            raise Misuse(f"link must be one of {', '.join(GPU_LINKS)}, got {self.link!r}")
        if not 0.01 <= self.ttft_slo_s <= 600 or not 1 <= self.tpot_slo_ms <= 10_000:
            raise Misuse(f"SLOs must be 0.01..600 s to first token and 1..10,000 ms per token, got "
                         f"{self.ttft_slo_s} s and {self.tpot_slo_ms} ms")
        if self.workload.num_requests > MAX_STUDY_REQUESTS:
            raise Misuse(f"at most {MAX_STUDY_REQUESTS:,} requests here, got {self.workload.num_requests:,}")


@dataclass(frozen=True, eq=False)
class DisaggStudy:
    setup: DisaggSetup
    capacity_tokens: int
    colocated: PoolRun
    disagg: PoolRun

    @property
    def cell_msgs(self) -> dict[str, list[Msg]]:
        """The table's text cells as messages, per column, in row order (to word them in either language)."""
        return {"pool": [self.colocated.label, self.disagg.label]}

    def to_frame(self):
        import pandas as pd

        s = self.setup
        return pd.DataFrame([r.metrics(s.ttft_slo_s, s.tpot_slo_ms / 1e3) for r in (self.colocated, self.disagg)])

    @property
    def transfer_gb(self) -> float:
        return float(self.disagg.transfer_bytes.sum()) / 1e9

    @property
    def transfer_p50_ms(self) -> float:
        return 1e3 * float(np.median(self.disagg.transfer_end_s - self.disagg.transfer_start_s))


def run_disagg(setup: DisaggSetup, progress=None) -> DisaggStudy:
    dep = setup.deployment
    arch = dep.arch
    if setup.workload.max_model_len > arch.max_position_embeddings:
        # the page caps the study's lengths at the model's context first (app/controls/serving_engine.disagg_setup)
        raise Misuse(f"max model length {setup.workload.max_model_len:,} is past {arch.name}'s trained context of "
                     f"{arch.max_position_embeddings:,} tokens")
    cost = dep.cost()
    _, _, slots = dep.kv_budget(cost)
    wl = make_workload(setup.workload)
    cfg = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=16,
                       watermark=ADMISSION_WATERMARK,
                       max_num_batched_tokens=max(setup.max_num_batched_tokens, setup.max_num_seqs))
    if progress:
        progress(0.0, "colocated pool")
    coloc = simulate_colocated(wl, cfg, cost, setup.pools.num_gpus, ARRIVAL_TICK_S)
    if progress:
        progress(0.5, "prefill and decode pools")
    dis = simulate_disagg(wl, cfg, cost, setup.pools, lambda p: prompt_kv_bytes(arch, dep.kv_dtype, p),
                          GPU_LINKS[setup.link].bytes_per_s, ARRIVAL_TICK_S)
    return DisaggStudy(setup, slots, coloc, dis)


def prompt_kv_bytes(arch, kv_dtype: str, prompt_len: int) -> int:
    """The KV a prompt leaves behind: sim.cost.memory's formula at that context (every layer group)."""
    return request_bytes(MemoryConfig(arch, 1, prompt_len, kv_dtype))
