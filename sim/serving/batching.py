"""Serving many requests on one GPU: static vs continuous batching, and speculative decoding.

Batching. Both schedulers run the same seeded workloads as the paging page (sim.alloc.paging) and are
iteration-level: one iteration is one forward pass of the model over every row in the batch.

  static     : take up to `max_batch` waiting requests, pad them to a rectangle (the longest prompt,
               then one decode step per token of the longest output) and run that batch to the end
               before the next one starts. Rows that finished early still ride along (and are still
               computed) until the batch's slowest request is done. The batch reserves its padded
               KV rectangle, rows × (longest prompt + largest max_tokens), so it can never run out
               mid-batch; a batch that would not fit in the KV budget is cut to the rows that fit.
  continuous : (Orca's iteration-level scheduling with vLLM's paged memory.) Every iteration, the
               running requests first get room for their next token from a sim.alloc.paging.BlockPool;
               when the pool is empty the newest running request is preempted — its blocks are freed
               and it goes back to the head of the queue, to be recomputed later (prompt + what it had
               produced). Then, unless something was preempted, waiting requests are admitted
               first-come first-served while there are fewer than `max_batch` running, their prompts
               fit in `max_batched_tokens`, and the pool keeps `watermark` of its blocks free after
               the prompt's blocks are taken. A request admitted at iteration s is prefilled at s
               (its first token comes out of that pass) and decodes at s+1 .. s+o-1; finished
               requests leave at the end of their last iteration, and their slots are reused at once.

Token conventions are sim.alloc.paging's: after iteration s+j a request holds p+j tokens (the last sampled
token is never fed back). A decode at iteration s+j attends to p+j keys.

Time. An iteration's cost is the roofline (sim.cost.roofline) of everything it does in one pass: the prompt
tokens it prefills and the one token per decoding request, with the weights read once per pass. So a
pass costs max(FLOPs / peak FLOP/s, bytes / bandwidth) with
    FLOPs = 2·(matmul weights)·tokens − lm_head for prompt rows whose logits are not needed + attention
    bytes = weights + KV of every row (read by decodes, written by prefills) + activations.
`RooflineCost` derives its coefficients from sim.cost.roofline.decode_step / prefill_step and sim.cost.memory,
and equals them exactly on a pure decode or a pure prefill batch (tests check it).

Speculative decoding (Leviathan et al. 2023). A draft proposes k tokens; the target scores all of them
in one pass and keeps the longest prefix it agrees with, plus one token of its own (the correction
at the first disagreement, or a bonus token when all k were kept). When each draft token is accepted
independently with probability α, the tokens per target pass are
    E = 1 + α + α² + … + α^k = (1 − α^(k+1)) / (1 − α),
and with a draft step costing c target steps, one round costs k·c + 1 target steps: speedup E / (k·c + 1).
`simulate_speculative` draws the accept/reject of every draft token with a seeded RNG and is checked
against E. `speculative_generate` runs it on the real tiny model (greedy: the output must be exactly
the target's own greedy output).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from sim.alloc.paging import (
    MAX_CAPACITY_TOKENS,
    BlockPool,
    ServingConfig,
    Workload,
    WorkloadConfig,
    cdiv,
    check_fits,
    make_workload,
)
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS, MemoryConfig, layer_groups, weight_bytes
from sim.cost.presets import GLOBAL, LOCAL, ArchPreset, load_presets
from sim.cost.roofline import COMPUTE_DTYPES, RooflineConfig, decode_step, hardware, prefill_step

POLICIES = ("static", "continuous")
POLICY_LABELS = {"static": "Static batching", "continuous": "Continuous batching"}
MAX_REQUESTS = 5000  # the page's bound; a run is a Python loop over iterations
MAX_ITERATIONS = 300_000  # a run needing more forward passes than this is refused (a few seconds)
MAX_BATCH = 1024
ARRIVAL_TICK_S = 0.01  # a paging workload's arrival step, in seconds (Poisson arrivals in 10 ms ticks)
PERCENTILES = (50, 95, 99)
MAX_SPEC_K = 16
MAX_MC_PASSES = 1_000_000


# ---------------------------------------------------------------------------------------------
# What one forward pass costs


@dataclass(frozen=True)
class Work:
    """What one forward pass does, summed over its rows.

    tokens  : tokens fed through the model (prompt tokens + one per decoding request)
    lm_skip : prompt tokens whose logits are not needed (all but the last of each prompt)
    keys_g  : query·key pairs in one full-attention layer, summed over the fed tokens
    keys_l  : the same in one sliding-window layer
    kv_g    : cached tokens read or written in one full-attention layer
    kv_l    : the same in one sliding-window layer (at most the window per request)
    Fields may be numpy arrays (one pass per element) except `tokens` where weights depend on it.
    """

    tokens: int
    lm_skip: object = 0
    keys_g: object = 0
    keys_l: object = 0
    kv_g: object = 0
    kv_l: object = 0


def _keys_upto(n, window: int):
    """Σ_{i=1..n} min(i, window): keys seen by n causal queries starting at position 1."""
    n = np.asarray(n, dtype=np.float64)
    w = float(window)
    return np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w)


def extend_work(num_new, context, window: int, logits_rows=None) -> Work:
    """`num_new` tokens appended after `context` cached ones, per request (arrays allowed for context).
    logits_rows: rows whose logits are needed (default all). Decode at context S is extend(1, S - 1);
    a prefill of p tokens is extend(p, 0, logits_rows=1)."""
    q = np.asarray(num_new, dtype=np.float64)
    s = np.asarray(context, dtype=np.float64)
    keys_g = q * s + q * (q + 1) / 2
    keys_l = _keys_upto(s + q, window) - _keys_upto(s, window)
    lm_skip = 0 if logits_rows is None else q - logits_rows
    return Work(int(num_new) if np.ndim(num_new) == 0 else int(np.sum(num_new)), lm_skip, keys_g, keys_l, s + q,
                np.minimum(s + q, window))


def _scalar(x):
    return float(x) if np.ndim(x) == 0 else x


class RooflineCost:
    """Seconds for one pass of a model on a GPU, from sim.cost.roofline's counts.

    Coefficients come from decode_step/prefill_step at tiny sizes and from sim.cost.memory's layer groups,
    so a pure decode batch at context S costs exactly decode_step(batch, S).time(hw).
    """

    def __init__(self, arch: ArchPreset, gpu_key: str, weight_dtype: str = "bf16", kv_dtype: str = "fp16",
                 compute_dtype: str = "bf16") -> None:
        gpus = load_gpus()
        if gpu_key not in gpus:
            raise ValueError(f"unknown GPU {gpu_key!r}; one of {', '.join(gpus)}")
        if weight_dtype not in WEIGHT_DTYPE_BITS:
            raise ValueError(f"weight dtype must be one of {', '.join(WEIGHT_DTYPE_BITS)}, got {weight_dtype!r}")
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"KV dtype must be one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
        if compute_dtype not in COMPUTE_DTYPES:
            raise ValueError(f"compute dtype must be one of {COMPUTE_DTYPES}, got {compute_dtype!r}")
        self.arch, self.gpu = arch, gpus[gpu_key]
        self.hw = hardware(self.gpu, compute_dtype)
        self.weight_dtype, self.kv_dtype = weight_dtype, kv_dtype
        self.name = f"{arch.name} on {self.gpu.name}"
        rc = RooflineConfig(arch, 1, 1, weight_dtype, kv_dtype)
        d1 = decode_step(rc)
        p1, p2 = prefill_step(rc), prefill_step(replace(rc, context=2))
        self.lin = d1.flops_linear  # FLOPs per fed token, lm_head included
        self.lm = 2 * p1.flops_linear - p2.flops_linear  # lm_head FLOPs per token
        self.act = d1.bytes_activations  # bytes per fed token
        groups = {g.kind: g for g in layer_groups(MemoryConfig(arch, 1, 1, kv_dtype))}
        self.kv_g = groups[GLOBAL].num_storing_layers * groups[GLOBAL].bytes_per_token_per_layer if GLOBAL in groups else 0
        self.kv_l = groups[LOCAL].num_storing_layers * groups[LOCAL].bytes_per_token_per_layer if LOCAL in groups else 0
        g, loc = arch.num_global_layers, arch.num_local_layers
        per_key = d1.flops_attention / (g + loc)  # at context 1 every layer sees one key
        self.attn_g, self.attn_l = per_key * g, per_key * loc
        self.window = arch.sliding_window if loc else 1 << 40
        self._dense_weights = None if arch.is_moe else d1.bytes_weights
        self._moe_weights: dict[int, float] = {}

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes one token takes in every layer that stores it (local layers counted too: a bound)."""
        return int(self.kv_g + self.kv_l)

    def weight_bytes_read(self, tokens: int) -> float:
        if self._dense_weights is not None:
            return self._dense_weights
        tokens = max(1, int(tokens))
        if tokens not in self._moe_weights:  # experts touched depend on how many tokens are routed
            self._moe_weights[tokens] = prefill_step(RooflineConfig(self.arch, 1, min(tokens, 1 << 20),
                                                                    self.weight_dtype, self.kv_dtype)).bytes_weights
        return self._moe_weights[tokens]

    def flops(self, w: Work):
        return self.lin * w.tokens - self.lm * np.asarray(w.lm_skip) + self.attn_g * np.asarray(w.keys_g) \
            + self.attn_l * np.asarray(w.keys_l)

    def bytes(self, w: Work):
        return self.weight_bytes_read(w.tokens) + self.kv_g * np.asarray(w.kv_g) + self.kv_l * np.asarray(w.kv_l) \
            + self.act * w.tokens

    def seconds(self, w: Work):
        if all(isinstance(x, int | float) for x in (w.lm_skip, w.keys_g, w.keys_l, w.kv_g, w.kv_l)):  # fast path
            flops = self.lin * w.tokens - self.lm * w.lm_skip + self.attn_g * w.keys_g + self.attn_l * w.keys_l
            nbytes = self.weight_bytes_read(w.tokens) + self.kv_g * w.kv_g + self.kv_l * w.kv_l + self.act * w.tokens
            return max(flops / self.hw.peak_flops, nbytes / self.hw.bandwidth)
        return _scalar(np.maximum(self.flops(w) / self.hw.peak_flops, self.bytes(w) / self.hw.bandwidth))

    def bound(self, w: Work) -> str:
        return "compute" if float(self.flops(w)) / self.hw.peak_flops >= float(self.bytes(w)) / self.hw.bandwidth \
            else "memory"

    def decode_seconds(self, batch: int, context: int) -> float:
        """A batch of `batch` requests each attending to `context` keys (decode_step's meaning)."""
        w = extend_work(1, context - 1, self.window)
        return self.seconds(Work(batch, 0, w.keys_g * batch, w.keys_l * batch, w.kv_g * batch, w.kv_l * batch))

    def prefill_seconds(self, batch: int, prompt: int) -> float:
        w = extend_work(prompt, 0, self.window, logits_rows=1)
        return self.seconds(Work(batch * prompt, w.lm_skip * batch, w.keys_g * batch, w.keys_l * batch,
                                 w.kv_g * batch, w.kv_l * batch))

    def verify_seconds(self, num_tokens: int, context: int, batch: int = 1) -> float:
        """`batch` requests, each scoring `num_tokens` tokens after `context` cached ones (logits for each)."""
        return self.seconds(self.verify_work(num_tokens, context, batch))

    def verify_work(self, num_tokens: int, context: int, batch: int = 1) -> Work:
        w = extend_work(num_tokens, context, self.window)
        return Work(batch * num_tokens, 0, w.keys_g * batch, w.keys_l * batch, w.kv_g * batch, w.kv_l * batch)


@dataclass(frozen=True)
class LinearCost:
    """A hand-checkable cost: base + per fed token + per cached token read or written (seconds)."""

    base_s: float = 1.0
    per_token_s: float = 0.0
    per_kv_token_s: float = 0.0
    window: int = 1 << 40
    name: str = "linear"

    def seconds(self, w: Work):
        return _scalar(self.base_s + self.per_token_s * w.tokens + self.per_kv_token_s * np.asarray(w.kv_g))


# ---------------------------------------------------------------------------------------------
# Configurations


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch: int = 256  # static: requests per batch; continuous: most requests running (vLLM's max_num_seqs)
    capacity_tokens: int = 16_384  # KV token slots the GPU has left for the cache
    block_size: int = 16
    watermark: float = 0.01  # continuous: share of blocks an admission must leave free (vLLM's default)
    max_batched_tokens: int = 8192  # continuous: prompt tokens one iteration may prefill

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch <= MAX_BATCH:
            raise ValueError(f"max_batch must be 1..{MAX_BATCH}, got {self.max_batch}")
        if not 0.0 <= self.watermark <= 0.5:
            raise ValueError(f"watermark must be 0..0.5 of the blocks, got {self.watermark}")
        if not 1 <= self.max_batched_tokens <= 1 << 20:
            raise ValueError(f"max_batched_tokens must be 1..{1 << 20:,}, got {self.max_batched_tokens:,}")
        ServingConfig(self.capacity_tokens, self.block_size, self.max_batch)  # validates capacity and block size

    @property
    def paging(self) -> ServingConfig:
        return ServingConfig(self.capacity_tokens, self.block_size, self.max_batch)

    @property
    def num_blocks(self) -> int:
        return self.capacity_tokens // self.block_size

    @property
    def watermark_blocks(self) -> int:
        return int(self.watermark * self.num_blocks)


@dataclass(frozen=True)
class DeploymentConfig:
    """A model preset on a GPU preset; the KV budget is what the weights leave of the usable memory."""

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    weight_dtype: str = "bf16"
    kv_dtype: str = "fp16"
    utilization: float = 0.9  # vLLM's --gpu-memory-utilization
    kv_limit_tokens: int = 0  # > 0: use at most this many KV slots (to watch memory run out)

    def __post_init__(self) -> None:
        if self.model not in load_presets():
            raise ValueError(f"unknown model {self.model!r}")
        if self.gpu not in load_gpus():
            raise ValueError(f"unknown GPU {self.gpu!r}")
        if not 0.05 <= self.utilization <= 1.0:
            raise ValueError(f"utilization must be 0.05..1.0, got {self.utilization}")
        if not 0 <= self.kv_limit_tokens <= MAX_CAPACITY_TOKENS:
            raise ValueError(f"kv_limit_tokens must be 0..{MAX_CAPACITY_TOKENS:,}, got {self.kv_limit_tokens:,}")

    @property
    def arch(self) -> ArchPreset:
        return load_presets()[self.model]

    def cost(self) -> RooflineCost:
        return RooflineCost(self.arch, self.gpu, self.weight_dtype, self.kv_dtype)

    def kv_budget(self, cost: RooflineCost | None = None) -> tuple[int, int, int]:
        """(usable bytes, weight bytes, KV token slots), raising ValueError when the weights do not fit."""
        cost = cost or self.cost()
        gpu = load_gpus()[self.gpu]
        usable = math.floor(gpu.memory_bytes * self.utilization)
        w = weight_bytes(self.arch, self.weight_dtype)
        if w >= usable:
            raise ValueError(f"{self.arch.name} weights in {self.weight_dtype} take {w / 2**30:,.1f} GiB, more than the "
                             f"{usable / 2**30:,.1f} GiB usable on one {gpu.name} at {self.utilization:.0%}: pick a "
                             "smaller model, a lower-precision weight dtype or a bigger GPU")
        slots = (usable - w) // cost.kv_bytes_per_token
        slots = min(slots, MAX_CAPACITY_TOKENS)  # the block pool's bound
        if self.kv_limit_tokens:
            slots = min(slots, self.kv_limit_tokens)
        return usable, w, int(slots)


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ServingResult:
    policy: str
    capacity_tokens: int
    max_batch: int
    # per request
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    num_preempted: np.ndarray  # times each request was preempted
    # running stretches: a request computes from start_s to end_s; static rows stay in the batch until row_end_s
    seg_req: np.ndarray
    seg_start_s: np.ndarray
    seg_end_s: np.ndarray
    seg_row_end_s: np.ndarray
    # per iteration (one forward pass)
    it_start_s: np.ndarray
    it_seconds: np.ndarray
    it_rows: np.ndarray  # rows computed (static: the padded batch)
    it_tokens: np.ndarray  # output tokens produced (rows doing useful work)
    it_prefills: np.ndarray  # requests prefilled in this pass
    it_prefill_tokens: np.ndarray
    it_kv_claimed: np.ndarray  # KV slots held (continuous: blocks × block size; static: the reservation)
    it_kv_tokens: np.ndarray  # slots holding real tokens
    it_finished: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def label(self) -> str:
        return POLICY_LABELS[self.policy]

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def num_iterations(self) -> int:
        return len(self.it_seconds)

    @property
    def num_output_tokens(self) -> int:
        return int(self.output_len.sum())

    @property
    def num_preemptions(self) -> int:
        return int(self.num_preempted.sum())

    @property
    def makespan_s(self) -> float:
        """From the first arrival to the last token."""
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def tokens_per_s(self) -> float:
        return self.num_output_tokens / self.makespan_s

    @property
    def requests_per_s(self) -> float:
        return self.num_requests / self.makespan_s

    @property
    def busy_s(self) -> float:
        return float(self.it_seconds.sum())

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(last token − first token) / (output − 1), for requests with more than one output token."""
        many = self.output_len > 1
        return (self.finish_s[many] - self.first_token_s[many]) / (self.output_len[many] - 1)

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def mean_batch(self) -> float:
        """Useful rows per pass, weighted by each pass's duration."""
        return float(np.sum(self.it_tokens * self.it_seconds) / self.busy_s)

    @property
    def mean_rows(self) -> float:
        return float(np.sum(self.it_rows * self.it_seconds) / self.busy_s)

    @property
    def useful_row_share(self) -> float:
        """Of the rows computed, the share that produced a token someone asked for."""
        return float(self.it_tokens.sum() / self.it_rows.sum())

    @property
    def peak_kv_claimed(self) -> int:
        return int(self.it_kv_claimed.max())

    def percentiles(self, values: np.ndarray) -> tuple[float, ...]:
        if len(values) == 0:
            return tuple(math.nan for _ in PERCENTILES)
        return tuple(float(v) for v in np.percentile(values, PERCENTILES))

    def metrics(self) -> dict[str, float]:
        row = {"policy": self.policy, "throughput_tok_s": self.tokens_per_s, "requests_per_s": self.requests_per_s,
               "makespan_s": self.makespan_s}
        for name, vals, scale in (("ttft", self.ttft_s, 1.0), ("tpot", self.tpot_s, 1e3), ("e2e", self.e2e_s, 1.0)):
            unit = "ms" if scale == 1e3 else "s"
            for q, v in zip(PERCENTILES, self.percentiles(vals), strict=True):
                row[f"{name}_p{q}_{unit}"] = v * scale
        row.update({"mean_batch": self.mean_batch, "useful_rows_pct": 100 * self.useful_row_share,
                    "forward_passes": self.num_iterations, "preemptions": self.num_preemptions,
                    "peak_kv_pct": 100 * self.peak_kv_claimed / self.capacity_tokens})
        return row

    def requests_frame(self):
        import pandas as pd

        return pd.DataFrame({"request": np.arange(self.num_requests), "arrival_s": self.arrival_s,
                             "prompt_tokens": self.prompt_len, "output_tokens": self.output_len,
                             "first_token_s": self.first_token_s, "finish_s": self.finish_s,
                             "ttft_s": self.ttft_s, "e2e_s": self.e2e_s, "preempted": self.num_preempted})

    def series(self, num_points: int = 600):
        """Sampled at evenly spaced times: the pass in progress (useful rows, rows, KV slots)."""
        import pandas as pd

        end = float(self.it_start_s[-1] + self.it_seconds[-1])
        times = np.linspace(float(self.it_start_s[0]), end, num_points, endpoint=False)
        i = np.clip(np.searchsorted(self.it_start_s, times, side="right") - 1, 0, self.num_iterations - 1)
        idle = times >= self.it_start_s[i] + self.it_seconds[i]  # between passes, waiting for arrivals
        z = np.where(idle, 0, 1)
        return pd.DataFrame({"policy": self.policy, "time_s": times, "useful_rows": self.it_tokens[i] * z,
                             "rows": self.it_rows[i] * z, "kv_claimed": self.it_kv_claimed[i] * z,
                             "kv_tokens": self.it_kv_tokens[i] * z})


# ---------------------------------------------------------------------------------------------
# The schedulers


def _check(wl: Workload, sched: SchedulerConfig) -> None:
    if wl.num_requests > MAX_REQUESTS:
        raise ValueError(f"at most {MAX_REQUESTS:,} requests, got {wl.num_requests:,}")
    check_fits(wl, sched.paging)
    if sched.max_batched_tokens < wl.max_model_len:
        raise ValueError(f"max_batched_tokens {sched.max_batched_tokens:,} is below the maximum length "
                         f"{wl.max_model_len:,}: a long (or recomputed) prompt could never be prefilled")
    least = int(np.ceil(wl.output_len.sum() / sched.max_batch))
    if least > MAX_ITERATIONS:
        raise ValueError(f"{int(wl.output_len.sum()):,} output tokens at most {sched.max_batch} per pass need at least "
                         f"{least:,} forward passes, past the simulator's limit of {MAX_ITERATIONS:,}: raise the "
                         "batch size or use fewer or shorter requests")


def simulate_static(wl: Workload, sched: SchedulerConfig, cost, tick_s: float = 1.0) -> ServingResult:
    """Batches of up to max_batch waiting requests, each padded and run until its longest output is done."""
    _check(wl, sched)
    n, window = wl.num_requests, getattr(cost, "window", 1 << 40)
    arrival = wl.arrival.astype(np.float64) * tick_s
    p_all, o_all, mt_all = wl.prompt_len, wl.output_len, wl.max_tokens
    start = np.zeros(n)
    first = np.zeros(n)
    finish = np.zeros(n)
    row_end = np.zeros(n)
    it_parts: dict[str, list[np.ndarray]] = {k: [] for k in ("start", "sec", "rows", "tok", "pre", "pret", "claim",
                                                             "kvtok", "fin")}
    now = 0.0
    nxt = 0
    total_its = 0
    while nxt < n:
        now = max(now, arrival[nxt])
        ready = int(np.searchsorted(arrival, now, side="right"))  # requests that have arrived by now
        b = min(sched.max_batch, ready - nxt)
        # cut the batch to the rows whose padded reservation fits the KV budget
        while b > 1:
            rows = slice(nxt, nxt + b)
            if b * (int(p_all[rows].max()) + int(mt_all[rows].max())) <= sched.capacity_tokens:
                break
            b -= 1
        rows = slice(nxt, nxt + b)
        p, o = p_all[rows], o_all[rows]
        pmax, omax = int(p.max()), int(o.max())
        reserve = b * (pmax + int(mt_all[rows].max()))  # one row always fits (check_fits)
        total_its += omax
        if total_its > MAX_ITERATIONS:
            raise ValueError(f"static batching passed {MAX_ITERATIONS:,} forward passes: raise the batch size or "
                             "use fewer or shorter requests")
        pre = extend_work(pmax, 0, window, logits_rows=1)
        secs = [np.atleast_1d(cost.seconds(Work(b * pmax, pre.lm_skip * b, pre.keys_g * b, pre.keys_l * b,
                                                pre.kv_g * b, pre.kv_l * b)))]
        if omax > 1:
            ctx = pmax + np.arange(1, omax, dtype=np.float64)  # keys a decode at step j attends to
            dw = extend_work(1, ctx - 1, window)
            secs.append(np.atleast_1d(cost.seconds(Work(b, 0, dw.keys_g * b, dw.keys_l * b, dw.kv_g * b,
                                                         dw.kv_l * b))) * np.ones(omax - 1))
        sec = np.concatenate(secs)
        ends = now + np.cumsum(sec)
        start[rows] = now
        first[rows] = ends[0]
        finish[rows] = ends[o - 1]
        row_end[rows] = ends[-1]
        j = np.arange(omax)
        o_sorted = np.sort(o)
        alive = b - np.searchsorted(o_sorted, j, side="right")  # rows with o > j produce a token at step j
        held = np.minimum(j[:, None], o[None, :] - 1) + p[None, :]  # (steps, rows) real tokens held
        it_parts["start"].append(ends - sec)
        it_parts["sec"].append(sec)
        it_parts["rows"].append(np.full(omax, b))
        it_parts["tok"].append(alive)
        it_parts["pre"].append(np.r_[b, np.zeros(omax - 1, dtype=np.int64)])
        it_parts["pret"].append(np.r_[int(p.sum()), np.zeros(omax - 1, dtype=np.int64)])
        it_parts["claim"].append(np.full(omax, reserve))
        it_parts["kvtok"].append(held.sum(axis=1))
        it_parts["fin"].append(np.bincount(o - 1, minlength=omax))
        now = float(ends[-1])
        nxt += b
    cat = {k: np.concatenate(v) for k, v in it_parts.items()}
    idx = np.arange(n)
    return ServingResult(
        "static", sched.capacity_tokens, sched.max_batch, arrival, first, finish, p_all.copy(), o_all.copy(),
        np.zeros(n, dtype=np.int64), idx, start, finish, row_end, cat["start"], cat["sec"], cat["rows"].astype(np.int64), cat["tok"].astype(np.int64),
        cat["pre"].astype(np.int64), cat["pret"].astype(np.int64), cat["claim"].astype(np.int64),
        cat["kvtok"].astype(np.int64), cat["fin"].astype(np.int64))


def simulate_continuous(wl: Workload, sched: SchedulerConfig, cost, tick_s: float = 1.0,
                        check: bool = False) -> ServingResult:
    """Iteration-level scheduling over a BlockPool, preemption by recompute (see the module docstring).

    check=True asserts the pool's invariants after every iteration (slow; for tests)."""
    _check(wl, sched)
    n, bs, max_batch = wl.num_requests, sched.block_size, sched.max_batch
    window = getattr(cost, "window", 1 << 40)
    pool = BlockPool(sched.num_blocks, bs)
    wm = sched.watermark_blocks
    arrival_s = wl.arrival.astype(np.float64) * tick_s
    arrival = arrival_s.tolist()
    prompt, output = wl.prompt_len.tolist(), wl.output_len.tolist()
    first = [math.nan] * n
    finish = [math.nan] * n
    preempted = [0] * n
    waiting: deque[tuple[int, int, int]] = deque()  # (req, prompt to prefill, tokens still to produce)
    running: dict[int, list[int]] = {}  # req -> [start it, prompt, output, segment]; insertion order = age
    crossings: dict[int, list[tuple[int, int]]] = {}  # iteration -> (segment, request) needing a new block then
    finish_at: dict[int, list[int]] = {}
    cap_at: dict[int, list[int]] = {}  # iteration -> requests whose context reaches the window then
    growing: set[int] = set()  # running requests whose context is still below the window
    segs: tuple[list, list, list] = ([], [], [])  # req, start_s, end_s
    its: tuple[list, ...] = tuple([] for _ in range(8))
    (it_start, it_sec, it_rows, it_pre, it_pret, it_claim, it_kvtok, it_fin) = its
    # Σ over running requests of (p - s): a request's context at iteration t is p - s + t
    run_a, grow_a = 0, 0
    n_capped = 0
    now = 0.0
    nxt = 0
    t = 0
    windowed = window < (1 << 40)

    def leave(req: int, r: list[int]) -> None:
        nonlocal run_a, grow_a, n_capped
        run_a -= r[1] - r[0]
        if windowed:
            if req in growing:
                growing.discard(req)
                grow_a -= r[1] - r[0]
            else:
                n_capped -= 1

    while nxt < n or waiting or running:
        while nxt < n and arrival[nxt] <= now:
            waiting.append((nxt, prompt[nxt], output[nxt]))
            nxt += 1
        if not running and not waiting:
            now = arrival[nxt]
            continue
        if t >= MAX_ITERATIONS:
            raise ValueError(f"continuous batching passed {MAX_ITERATIONS:,} forward passes with "
                             f"{len(waiting) + n - nxt:,} requests waiting: raise the KV budget or the batch size")
        if windowed:
            for req in cap_at.pop(t, ()):
                r = running.get(req)
                if r is not None and req in growing and r[1] - r[0] + t >= window:
                    growing.discard(req)
                    grow_a -= r[1] - r[0]
                    n_capped += 1
        # 1. room for every running request's next token, oldest first; preempt the newest when the pool is empty
        was_preempted = False
        for seg, req in sorted(crossings.pop(t, ())):  # segment ids grow with admission: oldest first
            r = running.get(req)
            if r is None or r[3] != seg:
                continue  # preempted since (and maybe re-admitted with another schedule)
            need = r[1] + (t - r[0]) - pool.req_to_num_tokens[req]
            while not pool.can_append(req, need):
                victim = next(reversed(running))
                v = running.pop(victim)
                leave(victim, v)
                pool.free(victim)
                k = t - v[0]  # tokens it had produced
                segs[2][v[3]] = now
                finish_at[v[0] + v[2] - 1].remove(victim)
                waiting.appendleft((victim, v[1] + k, v[2] - k))
                preempted[victim] += 1
                was_preempted = True
                if victim == req:
                    break
            else:
                pool.append(req, need)
                nxt_cross = cdiv(pool.req_to_num_tokens[req], bs) * bs + 1 - r[1] + r[0]
                if nxt_cross < r[0] + r[2]:
                    crossings.setdefault(nxt_cross, []).append((seg, req))
        # 2. admissions (none in an iteration that preempted)
        adm_a, n_adm, adm_local = 0, 0, 0
        pre_tokens, pre_skip, pre_kg, pre_kl, pre_kvl = 0, 0, 0.0, 0.0, 0.0
        if not was_preempted:
            while waiting and len(running) < max_batch:
                req, p, o = waiting[0]
                need = cdiv(p, bs)
                if pre_tokens + p > sched.max_batched_tokens:
                    break
                if pool.num_free_blocks - need < (wm if running else 0):
                    break
                waiting.popleft()
                pool.add_request(req, p)
                running[req] = [t, p, o, len(segs[0])]
                segs[0].append(req)
                segs[1].append(now)
                segs[2].append(math.nan)
                finish_at.setdefault(t + o - 1, []).append(req)
                first_cross = cdiv(p, bs) * bs + 1 - p + t
                if first_cross < t + o:
                    crossings.setdefault(first_cross, []).append((running[req][3], req))
                run_a += p - t
                adm_a += p - t
                n_adm += 1
                if windowed:
                    if p >= window:  # its context is already the window
                        n_capped += 1
                        adm_local += window
                    else:
                        growing.add(req)
                        grow_a += p - t
                        adm_local += p
                        cap_at.setdefault(t + window - p, []).append(req)
                pre_tokens += p
                pre_skip += p - 1
                pre_kg += p * (p + 1) / 2
                if windowed:
                    pre_kl += float(_keys_upto(p, window))
                    pre_kvl += min(p, window)
        # 3. the pass: prefills of the admitted, one decode for every other running request
        n_dec = len(running) - n_adm
        ctx_g = (run_a - adm_a) + n_dec * t  # Σ keys the decodes attend to (full-attention layers)
        if windowed:
            ctx_l = grow_a + len(growing) * t + n_capped * window - adm_local
            work = Work(n_dec + pre_tokens, pre_skip, ctx_g + pre_kg, ctx_l + pre_kl, ctx_g + pre_tokens,
                        ctx_l + pre_kvl)
        else:  # no sliding window: local sums equal the full ones
            work = Work(n_dec + pre_tokens, pre_skip, ctx_g + pre_kg, ctx_g + pre_kg, ctx_g + pre_tokens,
                        ctx_g + pre_tokens)
        sec = float(cost.seconds(work))
        end = now + sec
        for req in list(running)[len(running) - n_adm:] if n_adm else ():
            if math.isnan(first[req]):
                first[req] = end
        it_start.append(now)
        it_sec.append(sec)
        it_rows.append(n_dec + n_adm)
        it_pre.append(n_adm)
        it_pret.append(pre_tokens)
        it_claim.append(pool.num_used_blocks * bs)
        it_kvtok.append(run_a + len(running) * t)
        if check:
            pool.check_invariants()
            assert pool.num_used_blocks <= sched.num_blocks
        done = finish_at.pop(t, ())
        it_fin.append(len(done))
        for req in done:
            r = running.pop(req)
            leave(req, r)
            pool.free(req)
            finish[req] = end
            segs[2][r[3]] = end
        now = end
        t += 1
    assert pool.num_free_blocks == pool.num_blocks, "blocks still held after every request finished"
    seg_end = np.array(segs[2])
    return ServingResult(
        "continuous", sched.capacity_tokens, max_batch, arrival_s, np.array(first), np.array(finish),
        wl.prompt_len.copy(), wl.output_len.copy(), np.array(preempted, dtype=np.int64),
        np.array(segs[0], dtype=np.int64), np.array(segs[1]), seg_end, seg_end,
        np.array(it_start), np.array(it_sec), np.array(it_rows, dtype=np.int64), np.array(it_rows, dtype=np.int64),
        np.array(it_pre, dtype=np.int64), np.array(it_pret, dtype=np.int64), np.array(it_claim, dtype=np.int64),
        np.array(it_kvtok, dtype=np.int64), np.array(it_fin, dtype=np.int64))


def simulate(wl: Workload, sched: SchedulerConfig, cost, policy: str, tick_s: float = 1.0) -> ServingResult:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    fn = simulate_static if policy == "static" else simulate_continuous
    return fn(wl, sched, cost, tick_s)


# ---------------------------------------------------------------------------------------------
# The page's one call


@dataclass(frozen=True)
class ServingSetup:
    workload: WorkloadConfig = WorkloadConfig(num_requests=1000)
    deployment: DeploymentConfig = DeploymentConfig()
    max_batch: int = 256
    block_size: int = 16
    watermark: float = 0.01
    max_batched_tokens: int = 8192


@dataclass(frozen=True)
class ServingComparison:
    setup: ServingSetup
    workload: Workload
    usable_bytes: int
    weight_bytes: int
    kv_bytes_per_token: int
    capacity_tokens: int
    decode_s_batch1: float  # one request alone, at the mean prompt length
    results: dict[str, ServingResult]

    @property
    def speedup(self) -> float:
        """Continuous over static throughput."""
        return self.results["continuous"].tokens_per_s / self.results["static"].tokens_per_s

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([r.metrics() for r in self.results.values()])


def run_serving(setup: ServingSetup) -> ServingComparison:
    wcfg, dep = setup.workload, setup.deployment
    if wcfg.num_requests > MAX_REQUESTS:
        raise ValueError(f"at most {MAX_REQUESTS:,} requests, got {wcfg.num_requests:,}")
    arch = dep.arch
    if wcfg.max_model_len > arch.max_position_embeddings:
        raise ValueError(f"max model length {wcfg.max_model_len:,} is past {arch.name}'s trained context of "
                         f"{arch.max_position_embeddings:,} tokens")
    cost = dep.cost()
    usable, wbytes, slots = dep.kv_budget(cost)
    if slots < wcfg.max_model_len:
        raise ValueError(f"the KV budget holds {slots:,} tokens ({(usable - wbytes) / 2**30:,.2f} GiB at "
                         f"{cost.kv_bytes_per_token:,} bytes per token), less than one request of the maximum length "
                         f"{wcfg.max_model_len:,}")
    sched = SchedulerConfig(setup.max_batch, slots, setup.block_size, setup.watermark, setup.max_batched_tokens)
    wl = make_workload(wcfg)
    tick = ARRIVAL_TICK_S if wcfg.arrival == "poisson" else 1.0
    results = {p: simulate(wl, sched, cost, p, tick) for p in POLICIES}
    return ServingComparison(setup, wl, usable, wbytes, cost.kv_bytes_per_token, slots,
                             cost.decode_seconds(1, wcfg.prompt_mean), results)


# ---------------------------------------------------------------------------------------------
# Speculative decoding: closed form and Monte Carlo


def _check_spec(alpha: float, k: int) -> None:
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise ValueError(f"acceptance rate α must be within 0..1, got {alpha!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= MAX_SPEC_K:
        raise ValueError(f"draft length k must be a whole number 1..{MAX_SPEC_K}, got {k!r}")


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) / (1 − α): accepted drafts plus the target's own token, on average."""
    _check_spec(alpha, k)
    if alpha == 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speculative_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al.'s improvement in wall time: E / (k·c + 1), c = draft step / target step."""
    if not (math.isfinite(c) and 0.0 <= c <= 10.0):
        raise ValueError(f"cost ratio c must be within 0..10, got {c!r}")
    return expected_tokens_per_pass(alpha, k) / (k * c + 1)


def optimal_k(alpha: float, c: float, k_max: int = MAX_SPEC_K) -> int:
    """The draft length 1..k_max with the largest speedup (the smallest on a tie)."""
    return max(range(1, k_max + 1), key=lambda k: (speculative_speedup(alpha, k, c), -k))


@dataclass(frozen=True)
class SpecMonteCarlo:
    alpha: float
    k: int
    accepted: np.ndarray  # (passes,) drafts kept in each target pass

    @property
    def num_passes(self) -> int:
        return len(self.accepted)

    @property
    def tokens_per_pass(self) -> np.ndarray:
        return self.accepted + 1

    @property
    def mean(self) -> float:
        return float(self.tokens_per_pass.mean())

    @property
    def stderr(self) -> float:
        return float(self.tokens_per_pass.std(ddof=1) / math.sqrt(self.num_passes)) if self.num_passes > 1 else math.inf

    @property
    def expected(self) -> float:
        return expected_tokens_per_pass(self.alpha, self.k)

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts ÷ drafts the target judged (those after a rejection are never judged)."""
        judged = self.accepted.sum() + np.count_nonzero(self.accepted < self.k)
        return float(self.accepted.sum() / judged) if judged else math.nan


def simulate_speculative(alpha: float, k: int, num_passes: int = 20_000, seed: int = 0) -> SpecMonteCarlo:
    """Draw, for every draft token of every pass, whether the target accepts it (probability α, each
    independent); a pass keeps drafts up to the first rejection."""
    _check_spec(alpha, k)
    if not 1 <= num_passes <= MAX_MC_PASSES:
        raise ValueError(f"num_passes must be 1..{MAX_MC_PASSES:,}, got {num_passes:,}")
    rng = np.random.default_rng(seed)
    ok = rng.random((num_passes, k)) < alpha  # (passes, k) per draft token
    accepted = np.where(ok.all(axis=1), k, np.argmin(ok, axis=1))  # index of the first rejection
    return SpecMonteCarlo(alpha, k, accepted.astype(np.int64))


@dataclass(frozen=True)
class SpecTiming:
    """Speculative rounds timed with the roofline: a target and a draft model on one GPU, batch 1."""

    target: str
    draft: str
    context: int
    target_step_s: float  # one target decode step
    draft_step_s: float
    verify_s: dict[int, float]  # k -> one target pass over k + 1 tokens

    @property
    def c(self) -> float:
        return self.draft_step_s / self.target_step_s

    def speedup(self, alpha: float, k: int) -> float:
        """E · t_target / (k · t_draft + t_verify(k+1)): Leviathan's formula with the verify pass timed too."""
        return expected_tokens_per_pass(alpha, k) * self.target_step_s / (k * self.draft_step_s + self.verify_s[k])


@dataclass(frozen=True)
class SpecBatchPoint:
    batch: int
    target_step_s: float
    round_s: float  # k draft steps + one verify pass, for the whole batch
    speedup: float
    verify_bound: str


def spec_batch_sweep(target: str, draft: str, gpu: str, alpha: float, k: int, context: int = 1024,
                     batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), weight_dtype: str = "bf16") -> list[SpecBatchPoint]:
    """Speculation inside a batch: every request drafts k tokens and the target verifies batch × (k + 1) tokens
    in one pass. At batch 1 the pass is memory-bound and the extra tokens are nearly free; as the batch grows
    the verify pass turns compute-bound and costs about (k + 1) decode steps, so the gain fades."""
    _check_spec(alpha, k)
    presets = load_presets()
    tc = RooflineCost(presets[target], gpu, weight_dtype)
    dc = RooflineCost(presets[draft], gpu, weight_dtype)
    e = expected_tokens_per_pass(alpha, k)
    out = []
    for b in batches:
        if not 1 <= b <= 4096:
            raise ValueError(f"batch must be 1..4,096, got {b}")
        t_dec = tc.decode_seconds(b, context)
        vw = tc.verify_work(k + 1, context, b)
        round_s = k * dc.decode_seconds(b, context) + tc.seconds(vw)
        out.append(SpecBatchPoint(b, t_dec, round_s, e * t_dec / round_s, tc.bound(vw)))
    return out


def spec_timing(target: str, draft: str, gpu: str, context: int = 1024, weight_dtype: str = "bf16") -> SpecTiming:
    presets = load_presets()
    for name in (target, draft):
        if name not in presets:
            raise ValueError(f"unknown model {name!r}")
    if not 1 <= context <= 131_072:
        raise ValueError(f"context must be 1..131,072, got {context:,}")
    tc = RooflineCost(presets[target], gpu, weight_dtype)
    dc = RooflineCost(presets[draft], gpu, weight_dtype)
    target_s, draft_s = tc.decode_seconds(1, context), dc.decode_seconds(1, context)
    if draft_s >= target_s:
        raise ValueError(f"the draft {presets[draft].name} takes {draft_s * 1e3:,.2f} ms per decode step, no less than "
                         f"the target {presets[target].name}'s {target_s * 1e3:,.2f} ms (c = {draft_s / target_s:,.2f}): "
                         "speculation only pays with a draft cheaper than its target; pick a smaller draft")
    return SpecTiming(target, draft, context, target_s, draft_s,
                      {k: tc.verify_seconds(k + 1, context) for k in range(1, MAX_SPEC_K + 1)})
