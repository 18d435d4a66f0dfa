"""The seeded request workloads every allocator simulation runs on.

Two kinds, one module:
  length workloads (`LengthWorkloadConfig` -> `Workload`): N chat completions with drawn prompt and output
      lengths and arrival steps; token ids do not matter. Paged blocks and the Serving page run these.
  token traces (`PrefixWorkloadConfig` -> `Trace` of `Request`s): prompts as token ids whose shared parts
      repeat (system prompt, few-shot examples, tools, documents, chat history), laid out fixed content
      first or last. The prefix cache runs these: only identical token ids can hit.
Same config, same seed, same requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.msg import Msg
from sim.refusal import Misuse, Refusal

# ---------------------------------------------------------------------------------------------
# Length workloads (paging, serving)

MAX_LENGTH_WORKLOAD_REQUESTS = 100_000
MAX_MODEL_LEN = 32_768
LENGTH_DISTS = ("chat", "uniform", "fixed")
ARRIVALS = ("burst", "poisson")

@dataclass(frozen=True)
class LengthWorkloadConfig:
    """N chat completions. Lengths: "chat" is log-normal (long tail; `spread` is its sigma),
    "uniform" is uniform on 1..2*mean-1, "fixed" is the mean for every request. Means default to
    ShareGPT's (161 prompt / 338 output tokens, as measured in the vLLM paper)."""

    num_requests: int = 1000
    length_dist: str = "chat"
    prompt_mean: int = 160
    output_mean: int = 340
    spread: float = 1.0
    max_model_len: int = 2048
    max_tokens: int = 1024  # the client's cap on output tokens (clamped to max_model_len - prompt)
    arrival: str = "burst"  # burst: all queued at step 0; poisson: arrival_rate requests per step
    arrival_rate: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        # Each value alone is bounded by every control that sets it (app/workload.py, app/controls/serving_engine.py:
        # the same limits, tests/test_alloc_refusals.py builds the configs at their ends): out of range is a bug.
        # Combinations of in-range values a user can choose (max_tokens vs max_model_len, ...) are refusals.
        if not 1 <= self.num_requests <= MAX_LENGTH_WORKLOAD_REQUESTS:
            raise Misuse(f"num_requests must be 1..{MAX_LENGTH_WORKLOAD_REQUESTS:,}, got {self.num_requests:,}")
        if self.length_dist not in LENGTH_DISTS:
            raise Misuse(f"length_dist must be one of {LENGTH_DISTS}, got {self.length_dist!r}")
        if self.arrival not in ARRIVALS:
            raise Misuse(f"arrival must be one of {ARRIVALS}, got {self.arrival!r}")
        if not 2 <= self.max_model_len <= MAX_MODEL_LEN:
            raise Misuse(f"max_model_len must be 2..{MAX_MODEL_LEN:,}, got {self.max_model_len:,}")
        if not 1 <= self.max_tokens < self.max_model_len:
            raise Refusal("alloc.err.max_tokens", hi=self.max_model_len - 1, max_len=self.max_model_len,
                          got=self.max_tokens)
        if not 1 <= self.prompt_mean < self.max_model_len:
            raise Refusal("alloc.err.prompt_mean", hi=self.max_model_len - 1, got=self.prompt_mean)
        if not 1 <= self.output_mean <= self.max_tokens:
            raise Refusal("alloc.err.output_mean", max_tokens=self.max_tokens, got=self.output_mean)
        if not 0.05 <= self.spread <= 3.0:
            raise Misuse(f"spread must be 0.05..3.0, got {self.spread}")
        if not 0.001 <= self.arrival_rate <= 1000:
            raise Misuse(f"arrival_rate must be 0.001..1000 requests per step, got {self.arrival_rate}")


@dataclass(frozen=True)
class Workload:
    arrival: np.ndarray  # (N,) step at which each request arrives, nondecreasing
    prompt_len: np.ndarray  # (N,) >= 1
    output_len: np.ndarray  # (N,) 1..max_tokens
    max_tokens: np.ndarray  # (N,) the request's output cap, <= max_model_len - prompt_len
    max_model_len: int

    def __post_init__(self) -> None:
        # Built by make_workload (which draws within these bounds), a parsed trace (sim.alloc.trace checks every line
        # first), the serving simulators' slices of those and tests: a workload that breaks these is a bug.
        n = len(self.arrival)
        if n < 1 or n > MAX_LENGTH_WORKLOAD_REQUESTS:
            raise Misuse(f"a workload has 1..{MAX_LENGTH_WORKLOAD_REQUESTS:,} requests, got {n:,}")
        for name in ("prompt_len", "output_len", "max_tokens"):
            if len(getattr(self, name)) != n:
                raise Misuse(f"{name} has {len(getattr(self, name))} entries for {n} requests")
        if np.any(np.diff(self.arrival) < 0) or self.arrival[0] < 0:
            raise Misuse("arrivals must be nondecreasing steps >= 0")
        if self.prompt_len.min() < 1:
            raise Misuse(f"every prompt needs at least 1 token (shortest: {self.prompt_len.min()})")
        if self.output_len.min() < 1:
            raise Misuse(f"every request produces at least 1 token (shortest: {self.output_len.min()})")
        bad = np.flatnonzero(self.output_len > self.max_tokens)
        if len(bad):
            i = bad[0]
            raise Misuse(f"request {i} produces {self.output_len[i]} tokens, above its max_tokens {self.max_tokens[i]}")
        bad = np.flatnonzero(self.prompt_len + self.max_tokens > self.max_model_len)
        if len(bad):
            i = bad[0]
            raise Misuse(f"request {i}: prompt {self.prompt_len[i]} + max_tokens {self.max_tokens[i]} "
                         f"exceeds max_model_len {self.max_model_len}")

    @property
    def num_requests(self) -> int:
        return len(self.arrival)

    @property
    def peak_tokens(self) -> np.ndarray:
        """Tokens each request holds at its last step: prompt + output - 1."""
        return self.prompt_len + self.output_len - 1

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"request": np.arange(self.num_requests), "arrival_step": self.arrival,
                             "prompt_tokens": self.prompt_len, "output_tokens": self.output_len,
                             "max_tokens": self.max_tokens})


def workload_from_lengths(prompt_len, output_len, arrival=None, max_tokens=None, max_model_len: int = 2048) -> Workload:
    """A hand-written workload (tests, small examples). max_tokens defaults to each output length."""
    p = np.asarray(prompt_len, dtype=np.int64)
    o = np.asarray(output_len, dtype=np.int64)
    a = np.zeros(len(p), dtype=np.int64) if arrival is None else np.asarray(arrival, dtype=np.int64)
    m = o.copy() if max_tokens is None else np.broadcast_to(np.asarray(max_tokens, dtype=np.int64), p.shape).copy()
    return Workload(a, p, o, m, int(max_model_len))


def _draw_lengths(rng: np.random.Generator, dist: str, mean: int, spread: float, n: int) -> np.ndarray:
    if dist == "fixed":
        return np.full(n, mean, dtype=np.int64)
    if dist == "uniform":
        return rng.integers(1, 2 * mean, size=n, endpoint=False).astype(np.int64)  # 1..2*mean-1, mean `mean`
    mu = math.log(mean) - spread**2 / 2  # log-normal whose mean is `mean`
    return np.rint(rng.lognormal(mu, spread, size=n)).astype(np.int64)


def make_workload(cfg: LengthWorkloadConfig) -> Workload:
    rng = np.random.default_rng(cfg.seed)
    n, L = cfg.num_requests, cfg.max_model_len
    prompt = np.clip(_draw_lengths(rng, cfg.length_dist, cfg.prompt_mean, cfg.spread, n), 1, L - 1)
    cap = np.minimum(cfg.max_tokens, L - prompt)
    output = np.clip(_draw_lengths(rng, cfg.length_dist, cfg.output_mean, cfg.spread, n), 1, cap)
    if cfg.arrival == "burst":
        arrival = np.zeros(n, dtype=np.int64)
    else:
        arrival = np.floor(np.cumsum(rng.exponential(1.0 / cfg.arrival_rate, size=n))).astype(np.int64)
    return Workload(arrival, prompt, output, cap.astype(np.int64), L)


# ---------------------------------------------------------------------------------------------
# Token traces (prefix caching)

PREFIX_WORKLOADS = ("system_prompt", "few_shot", "chat", "agent", "rag", "timestamp", "random")
PREFIX_WORKLOAD_LABELS = {
    "system_prompt": "Shared system prompt + questions",
    "few_shot": "Few-shot examples + query",
    "chat": "Multi-turn chat",
    "agent": "Agent loop (tools repeated)",
    "rag": "RAG: documents + question",
    "timestamp": "Timestamp in the system prompt",
    "random": "Random prompts (nothing shared)",
}
# What "groups" means in each workload (the page's help text).
GROUP_MEANING = {
    "system_prompt": "distinct system prompts",
    "few_shot": "tasks, each with its own examples",
    "chat": "conversations going on at once",
    "agent": "agents running at once",
    "rag": "document sets the questions are about",
    "timestamp": "distinct system prompts",
    "random": "(unused)",
}
LAYOUTS = ("fixed_first", "variable_first")
LAYOUT_LABELS = {"fixed_first": "fixed content first", "variable_first": "variable content first"}

SEGMENT_NAMES = ("system prompt", "timestamp", "question", "instructions", "examples", "query", "history", "message",
                 "tool descriptions", "task", "earlier steps", "observation", "documents", "prompt")


VOCAB_SIZE = 32_000  # synthetic token ids are drawn from FIRST_ID..VOCAB_SIZE-1
FIRST_ID = 256
RAG_HEADER_LEN = 12  # "Answer from these documents:" — shorter than a 16-token block on purpose
TIMESTAMP_LEN = 8
CONTEXT_LIMIT = 8192  # a chat or agent run that would pass this starts afresh
MAX_PREFIX_WORKLOAD_REQUESTS = 2000
MAX_SHARED_LEN = 4096
MAX_VARIABLE_LEN = 1024
MAX_OUTPUT_LEN = 1024
MAX_GROUPS = 64
MAX_TRACE_TOKENS = 4_000_000  # stored tokens over all requests (about a second of simulation)


@dataclass(frozen=True, eq=False)
class Request:
    prompt: np.ndarray  # (P,) int32 token ids, P >= 1
    output: np.ndarray  # (O,) int32, O >= 1; the last one is never fed back
    extra_key: str | None = None  # goes into every block hash (LoRA adapter, cache salt, ...)
    label: str | Msg = ""  # a generated request's is a message value (Msg("prefix.label.turn", a=3, b=0)); a name
    segments: tuple[tuple[str, int], ...] = ()  # (what, tokens) spans of the prompt, in order

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def output_len(self) -> int:
        return len(self.output)

    @property
    def num_stored(self) -> int:
        """Tokens whose K/V the request writes: the prompt and every output token but the last."""
        return len(self.prompt) + len(self.output) - 1

    def stored(self) -> np.ndarray:
        return np.concatenate([self.prompt, self.output[:-1]])

    @property
    def extra_keys(self) -> tuple:
        return () if self.extra_key is None else (self.extra_key,)


@dataclass(frozen=True, eq=False)
class Trace:
    requests: tuple[Request, ...]
    workload: str = "custom"
    layout: str = ""

    def __post_init__(self) -> None:
        # make_trace, a parsed trace (at most MAX_TRACE_REQUESTS lines, none empty) and the demo's two prompts
        # build these: a bug, never a user's input
        if not self.requests:
            raise Misuse("a trace needs at least one request")
        if len(self.requests) > MAX_PREFIX_WORKLOAD_REQUESTS:
            raise Misuse(f"a trace has at most {MAX_PREFIX_WORKLOAD_REQUESTS:,} requests, got {len(self.requests):,}")

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @property
    def num_stored_tokens(self) -> int:
        return sum(r.num_stored for r in self.requests)

    @property
    def max_stored(self) -> int:
        return max(r.num_stored for r in self.requests)


def trace_from_lists(prompts, outputs=None, extra_keys=None, labels=None) -> Trace:
    """A hand-written trace. Each output defaults to one token (never stored, so only the prompt is)."""
    n = len(prompts)
    outputs = [[0]] * n if outputs is None else outputs
    extra_keys = [None] * n if extra_keys is None else extra_keys
    labels = [Msg("wl.label.request", n=i) for i in range(n)] if labels is None else labels
    # callers: the demo's two byte prompts (2..400 bytes, checked by the page first) and tests
    if not len(outputs) == len(extra_keys) == len(labels) == n:
        raise Misuse(f"{n} prompts but {len(outputs)} outputs, {len(extra_keys)} extra keys, {len(labels)} labels")
    reqs = []
    for i, (p, o, e, lab) in enumerate(zip(prompts, outputs, extra_keys, labels, strict=True)):
        p = np.asarray(p, dtype=np.int64)
        o = np.asarray(o, dtype=np.int64)
        if len(p) < 1:
            raise Misuse(f"request {i} has an empty prompt")
        if len(o) < 1:
            raise Misuse(f"request {i} produces no token: every request produces at least 1")
        for arr in (p, o):
            if arr.min() < 0 or arr.max() >= 2**31:
                raise Misuse(f"request {i}: token ids must be 0..{2**31 - 1}")
        reqs.append(Request(p.astype(np.int32), o.astype(np.int32), e, lab, (("prompt", len(p)),)))
    return Trace(tuple(reqs))


@dataclass(frozen=True)
class PrefixWorkloadConfig:
    """A seeded stream of requests. `shared_len` is the content that repeats (system prompt, examples,
    tool descriptions, documents); `variable_len` what is new in each request (question, message,
    observation); lengths of variable parts and outputs are drawn uniformly within ±50% of the mean."""

    workload: str = "system_prompt"
    layout: str = "fixed_first"
    num_requests: int = 200
    shared_len: int = 500
    variable_len: int = 64
    output_len: int = 64
    num_groups: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        # the Prefix caching page's controls declare these very ranges (app/controls/prefix_caching.py): a bug
        if self.workload not in PREFIX_WORKLOADS:
            raise Misuse(f"workload must be one of {PREFIX_WORKLOADS}, got {self.workload!r}")
        if self.layout not in LAYOUTS:
            raise Misuse(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        for name, lo, hi in (("num_requests", 1, MAX_PREFIX_WORKLOAD_REQUESTS), ("shared_len", 1, MAX_SHARED_LEN),
                             ("variable_len", 1, MAX_VARIABLE_LEN), ("output_len", 1, MAX_OUTPUT_LEN),
                             ("num_groups", 1, MAX_GROUPS), ("seed", 0, 2**32 - 1)):
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise Misuse(f"{name} must be {lo:,}..{hi:,}, got {value:,}")


def _ids(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(FIRST_ID, VOCAB_SIZE, size=n).astype(np.int32)


def _jitter(rng: np.random.Generator, mean: int) -> int:
    """Uniform on ceil(mean/2) .. mean + floor(mean/2): mean `mean` (within half a token)."""
    return int(rng.integers((mean + 1) // 2, mean + mean // 2 + 1))


class _Builder:
    def __init__(self, layout: str) -> None:
        self.layout = layout
        self.requests: list[Request] = []
        self.tokens = 0

    def add(self, fixed: list[tuple[str, np.ndarray]], variable_order: list[tuple[str, np.ndarray]],
            output: np.ndarray, label: Msg) -> None:
        parts = fixed if self.layout == "fixed_first" else variable_order
        parts = [(name, ids) for name, ids in parts if len(ids)]
        prompt = np.concatenate([ids for _, ids in parts])
        req = Request(prompt, output, None, label, tuple((name, len(ids)) for name, ids in parts))
        self.tokens += req.num_stored
        if self.tokens > MAX_TRACE_TOKENS:
            # the page's sizes (requests x shared, new and output tokens) multiply past this: the user's to change
            raise Refusal("alloc.err.trace_tokens", n=len(self.requests) + 1, tokens=self.tokens, max=MAX_TRACE_TOKENS)
        self.requests.append(req)


def _system_like(cfg: PrefixWorkloadConfig, rng, b: _Builder, with_timestamp: bool) -> None:
    systems = [_ids(rng, cfg.shared_len) for _ in range(cfg.num_groups)]
    for i in range(cfg.num_requests):
        g = int(rng.integers(cfg.num_groups))
        q = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        sys_part = ("system prompt", systems[g])
        if with_timestamp:
            ts = ("timestamp", _ids(rng, TIMESTAMP_LEN))
            b.add([sys_part, ts, ("question", q)], [ts, sys_part, ("question", q)], out,
                  Msg("prefix.label.system", a=g, b=i))
        else:
            b.add([sys_part, ("question", q)], [("question", q), sys_part], out, Msg("prefix.label.system", a=g, b=i))


def _few_shot(cfg: PrefixWorkloadConfig, rng, b: _Builder) -> None:
    header = _ids(rng, max(1, cfg.shared_len // 4))
    examples = [_ids(rng, max(1, cfg.shared_len - len(header))) for _ in range(cfg.num_groups)]
    for i in range(cfg.num_requests):
        g = int(rng.integers(cfg.num_groups))
        q = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        parts = [("instructions", header), ("examples", examples[g])]
        b.add(parts + [("query", q)], [("query", q)] + parts, out, Msg("prefix.label.task", a=g, b=i))


def _chat(cfg: PrefixWorkloadConfig, rng, b: _Builder) -> None:
    system = _ids(rng, cfg.shared_len)
    history: list[list[np.ndarray]] = [[] for _ in range(cfg.num_groups)]
    conv_id = list(range(cfg.num_groups))  # a full conversation is replaced by a new one
    turn = [0] * cfg.num_groups
    next_id = cfg.num_groups
    for _ in range(cfg.num_requests):
        c = int(rng.integers(cfg.num_groups))
        msg = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        if len(system) + sum(map(len, history[c])) + len(msg) + len(out) > CONTEXT_LIMIT:
            history[c], conv_id[c], turn[c], next_id = [], next_id, 0, next_id + 1
        hist = np.concatenate(history[c]) if history[c] else np.zeros(0, np.int32)
        b.add([("system prompt", system), ("history", hist), ("message", msg)],
              [("message", msg), ("system prompt", system), ("history", hist)], out,
              Msg("prefix.label.turn", a=conv_id[c], b=turn[c]))
        history[c] += [msg, out]
        turn[c] += 1


def _agent(cfg: PrefixWorkloadConfig, rng, b: _Builder) -> None:
    tools = _ids(rng, cfg.shared_len)
    task: list[np.ndarray] = [_ids(rng, _jitter(rng, cfg.variable_len)) for _ in range(cfg.num_groups)]
    steps: list[list[np.ndarray]] = [[] for _ in range(cfg.num_groups)]  # a1, o1, a2, o2, ...
    run_id = list(range(cfg.num_groups))
    step = [0] * cfg.num_groups
    next_id = cfg.num_groups
    for _ in range(cfg.num_requests):
        a = int(rng.integers(cfg.num_groups))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        if len(tools) + len(task[a]) + sum(map(len, steps[a])) + len(out) > CONTEXT_LIMIT:
            task[a] = _ids(rng, _jitter(rng, cfg.variable_len))
            steps[a], run_id[a], step[a], next_id = [], next_id, 0, next_id + 1
        if steps[a]:  # the newest observation is what this step adds
            older = np.concatenate(steps[a][:-1])
            new = ("observation", steps[a][-1])
            b.add([("tool descriptions", tools), ("task", task[a]), ("earlier steps", older), new],
                  [new, ("tool descriptions", tools), ("task", task[a]), ("earlier steps", older)], out,
                  Msg("prefix.label.step", a=run_id[a], b=step[a]))
        else:
            b.add([("tool descriptions", tools), ("task", task[a])], [("task", task[a]), ("tool descriptions", tools)],
                  out, Msg("prefix.label.step", a=run_id[a], b=0))
        steps[a] += [out, _ids(rng, _jitter(rng, cfg.variable_len))]
        step[a] += 1


def _rag(cfg: PrefixWorkloadConfig, rng, b: _Builder) -> None:
    header = _ids(rng, RAG_HEADER_LEN)
    docs = [_ids(rng, cfg.shared_len) for _ in range(cfg.num_groups)]
    for i in range(cfg.num_requests):
        g = int(rng.integers(cfg.num_groups))
        q = _ids(rng, _jitter(rng, cfg.variable_len))
        out = _ids(rng, _jitter(rng, cfg.output_len))
        h, d, qq = ("instructions", header), ("documents", docs[g]), ("question", q)
        b.add([h, d, qq], [h, qq, d], out, Msg("prefix.label.question", a=g, b=i))


def _random(cfg: PrefixWorkloadConfig, rng, b: _Builder) -> None:
    for i in range(cfg.num_requests):
        p = ("prompt", _ids(rng, _jitter(rng, cfg.shared_len + cfg.variable_len)))
        b.add([p], [p], _ids(rng, _jitter(rng, cfg.output_len)), Msg("wl.label.request", n=i))


def make_trace(cfg: PrefixWorkloadConfig) -> Trace:
    rng = np.random.default_rng(cfg.seed)
    b = _Builder(cfg.layout)
    if cfg.workload in ("system_prompt", "timestamp"):
        _system_like(cfg, rng, b, cfg.workload == "timestamp")
    elif cfg.workload == "few_shot":
        _few_shot(cfg, rng, b)
    elif cfg.workload == "chat":
        _chat(cfg, rng, b)
    elif cfg.workload == "agent":
        _agent(cfg, rng, b)
    elif cfg.workload == "rag":
        _rag(cfg, rng, b)
    else:
        _random(cfg, rng, b)
    return Trace(tuple(b.requests), cfg.workload, cfg.layout)

