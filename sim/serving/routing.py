"""Requests across N replicas, each a prefix-caching engine (sim.serving.engine): round-robin against prefix-aware
(cache-aware) routing.

  round_robin  : request i goes to replica i mod N.
  prefix_aware : the router keeps, per replica, the block hashes it has sent there (least recently sent forgotten
                 first, as many as the replica has blocks: its guess of what that cache holds, as SGLang's
                 router keeps an approximate tree per worker). A request goes to the replica whose guess matches
                 the longest run of its prompt's chained block hashes; ties go to the replica sent the fewest of the
                 last `window` requests. When that replica was sent more than `balance_slack` more of them than the
                 least loaded one, the request goes to the least loaded instead (load beats affinity).

Routing is decided at arrival from the router's own view; then every replica runs its requests exactly. One replica
is the single-pool engine exactly (a test checks it).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, replace

import numpy as np

from sim.alloc.workload import Workload
from sim.cost.vllm_rules import ADMISSION_WATERMARK
from sim.msg import Msg
from sim.refusal import Misuse, Refusal
from sim.serving.comparison import DeploymentConfig
from sim.serving.config import EngineConfig
from sim.serving.engine import EngineRun, simulate_engine
from sim.serving.shared_prefix import SharedPrefixConfig, make_shared_prefix

ROUTERS = ("round_robin", "prefix_aware")
MAX_REPLICAS = 16


@dataclass(frozen=True)
class RouterConfig:
    num_replicas: int = 4
    router: str = "prefix_aware"
    window: int = 64  # recent requests the load balance counts
    balance_slack: int = 8  # affinity loses once its replica got this many more of them than the least loaded

    def __post_init__(self) -> None:
        # the routing tab bounds the replicas to 1..MAX_REPLICAS; the router and its window are the lab's own
        if not 1 <= self.num_replicas <= MAX_REPLICAS:
            raise Misuse(f"num_replicas must be 1..{MAX_REPLICAS}, got {self.num_replicas}")
        if self.router not in ROUTERS:
            raise Misuse(f"router must be one of {ROUTERS}, got {self.router!r}")
        if not 1 <= self.window <= 10_000 or not 0 <= self.balance_slack <= 10_000:
            raise Misuse(f"window must be 1..10,000 and balance_slack 0..10,000, got {self.window}, "
                         f"{self.balance_slack}")


def route(hashes: list[list[int]], rc: RouterConfig, num_blocks: int) -> list[int]:
    """The replica each request goes to, in arrival order."""
    n_rep = rc.num_replicas
    if rc.router == "round_robin":
        return [i % n_rep for i in range(len(hashes))]
    seen: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(n_rep)]
    recent: deque[int] = deque(maxlen=rc.window)
    load = [0] * n_rep
    out = []
    for hs in hashes:
        match = []
        for view in seen:
            m = 0
            for h in hs:
                if h not in view:
                    break
                m += 1
            match.append(m)
        best = max(range(n_rep), key=lambda r: (match[r], -load[r], -r))
        least = min(range(n_rep), key=lambda r: (load[r], r))
        if load[best] - load[least] > rc.balance_slack:
            best = least
        out.append(best)
        view = seen[best]
        for h in hs:
            view[h] = None
            view.move_to_end(h)
        while len(view) > num_blocks:
            view.popitem(last=False)
        if len(recent) == recent.maxlen:
            load[recent[0]] -= 1
        recent.append(best)
        load[best] += 1
    return out


@dataclass(frozen=True, eq=False)
class RoutingResult:
    router: RouterConfig
    replica: np.ndarray  # (N,) where each request went
    runs: tuple[EngineRun, ...]
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    hit_tokens: int

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / int(self.prompt_len.sum())

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def tokens_per_s(self) -> float:
        return int(self.output_len.sum()) / self.makespan_s

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    def requests_per_replica(self) -> list[int]:
        return np.bincount(self.replica, minlength=self.router.num_replicas).tolist()

    def metrics(self) -> dict:
        ttft = self.ttft_s
        return {"router": self.router.router, "replicas": self.router.num_replicas, "hit_rate": self.hit_rate,
                "throughput_tok_s": self.tokens_per_s, "ttft_p50_s": float(np.percentile(ttft, 50)),
                "ttft_p95_s": float(np.percentile(ttft, 95)), "makespan_s": self.makespan_s,
                "busiest_replica_requests": max(self.requests_per_replica())}


def simulate_routing(wl: Workload, hashes: list[list[int]], cfg: EngineConfig, cost, rc: RouterConfig,
                     tick_s: float = 1.0) -> RoutingResult:
    """Route, then run each replica's requests through its own prefix-caching engine."""
    n = wl.num_requests
    if len(hashes) != n:
        raise Misuse(f"{len(hashes)} hash lists for {n} requests")
    cfg = replace(cfg, enable_prefix_caching=True)
    where = np.array(route(hashes, rc, cfg.num_gpu_blocks), dtype=np.int64)
    first = np.full(n, math.nan)
    finish = np.full(n, math.nan)
    runs = []
    hits = 0
    for r in range(rc.num_replicas):
        idx = np.flatnonzero(where == r)
        if not len(idx):
            runs.append(None)
            continue
        sub = Workload(wl.arrival[idx], wl.prompt_len[idx], wl.output_len[idx], wl.max_tokens[idx], wl.max_model_len)
        run = simulate_engine(sub, cfg, cost, tick_s, prompt_hashes=[hashes[i] for i in idx])
        first[idx] = run.result.first_token_s
        finish[idx] = run.result.finish_s
        hits += run.prefix_hit_tokens
        runs.append(run)
    return RoutingResult(rc, where, tuple(runs), wl.arrival.astype(np.float64) * tick_s, first, finish,
                         wl.prompt_len.copy(), wl.output_len.copy(), hits)


# --- the Serving page's study: both routers on one shared-prefix workload -------------------------------------


@dataclass(frozen=True)
class RoutingSetup:
    deployment: DeploymentConfig = DeploymentConfig(kv_limit_tokens=60_000)
    workload: SharedPrefixConfig = SharedPrefixConfig(num_requests=600, num_groups=48, rate_per_s=250.0)
    num_replicas: int = 4
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 8192
    block_size: int = 16

    def __post_init__(self) -> None:
        RouterConfig(self.num_replicas)
        if not 1 <= self.max_num_seqs <= 1024:  # the tab keeps the default
            raise Misuse(f"max_num_seqs must be 1..1,024, got {self.max_num_seqs}")


@dataclass(frozen=True, eq=False)
class RoutingStudy:
    setup: RoutingSetup
    capacity_tokens: int
    results: tuple[RoutingResult, RoutingResult]  # round_robin, prefix_aware

    @property
    def cell_msgs(self) -> dict[str, list[Msg]]:
        """The table's text cells as messages, per column, in row order (to word them in either language)."""
        return {"router": [Msg(f"serving.cell.{r.router.router}") for r in self.results]}

    def to_frame(self):
        import pandas as pd

        rows = []
        for r in self.results:
            m = r.metrics()
            rows.append({"router": m["router"].replace("_", "-"), "hit_rate_pct": 100 * m["hit_rate"],
                         "throughput_tok_s": m["throughput_tok_s"], "ttft_p50_s": m["ttft_p50_s"],
                         "ttft_p95_s": m["ttft_p95_s"], "makespan_s": m["makespan_s"],
                         "busiest_replica_requests": m["busiest_replica_requests"],
                         "requests_per_replica": " / ".join(map(str, r.requests_per_replica()))})
        return pd.DataFrame(rows)


def run_routing(setup: RoutingSetup, progress=None) -> RoutingStudy:
    dep = setup.deployment
    cost = dep.cost()
    _, _, slots = dep.kv_budget(cost)
    sp = make_shared_prefix(setup.workload)
    if sp.workload.max_model_len > dep.arch.max_position_embeddings:
        raise Refusal("serving.err.prompts_past_context", prompt=setup.workload.prompt_len,
                      output=setup.workload.output_len, model=dep.arch.name, ctx=dep.arch.max_position_embeddings)
    hashes = sp.hashes(setup.block_size)
    cfg = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=setup.block_size,
                       watermark=ADMISSION_WATERMARK,
                       max_num_batched_tokens=max(setup.max_num_batched_tokens, setup.max_num_seqs),
                       enable_prefix_caching=True)
    out = []
    for i, router in enumerate(ROUTERS):
        if progress:
            progress(i / 2, f"{router.replace('_', '-')} routing")
        out.append(simulate_routing(sp.workload, hashes, cfg, cost, RouterConfig(setup.num_replicas, router)))
    return RoutingStudy(setup, slots, tuple(out))
