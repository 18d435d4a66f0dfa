"""Naive and KV-cached generation, one instrumented step at a time.

naive : every step re-feeds the whole sequence so far (prompt + generated) with no cache,
        recomputing every K and V: step n costs O(n·d² + n²·d).
cached: step 0 (prefill) runs the prompt once and fills the cache; every later step feeds one
        token, computes one new K/V row and reads the rest: O(d² + n·d).
Both run through one loop (`decode_loop`: `prefill`, then `decode_one_token` per token; without a
cache, a prefill of the whole sequence per token) and yield a StepRecord per produced token; with
the same sampling they produce the same tokens. `run_comparison` runs both for the Decode cost page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from sim.cost.opcount import FlopTally, step_bytes
from sim.model.device import Stopwatch
from sim.model.graph_step import StaticDecodeStep, check_step_kind
from sim.model.kvcache import ContiguousKVCache, KVCache
from sim.model.transformer import Llama
from sim.refusal import Misuse, Refusal
from sim.work.conditions import Conditions, Measuring

MODES = ("naive", "cached")


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 = no top-k filter
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise Misuse(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise Misuse(f"top_k must be >= 0, got {self.top_k}")

    def sampler(self) -> Callable[[torch.Tensor], int]:
        """logits (V,) -> token id, drawing from its own generator seeded with `seed` (one per generation)."""
        gen = torch.Generator().manual_seed(self.seed) if self.temperature > 0 else None
        return lambda logits: sample(logits, self, gen)


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    step: int  # 0 = prefill
    position: int  # position of the produced token in the full sequence
    token: int
    num_new: int  # tokens fed through the model this step
    kv_len: int  # keys attended to
    part_to_flops: dict[str, int]
    bytes_weights: int
    bytes_kv: int
    wall_s: float  # device-synced, picking the token included
    logits: torch.Tensor | None = None  # (V,) fp32 on CPU, when asked for

    @property
    def flops(self) -> int:
        return sum(self.part_to_flops.values())


@dataclass(kw_only=True)
class GenerationResult:
    mode: str
    prompt_ids: list[int]
    new_ids: list[int]
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def decode_seconds(self) -> float:
        return sum(s.wall_s for s in self.steps)

    @property
    def tokens_per_s(self) -> float:
        return len(self.new_ids) / self.decode_seconds if self.decode_seconds > 0 else float("inf")


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def greedy(logits: torch.Tensor) -> int:
    """logits (V,) -> the most likely token id."""
    return int(torch.argmax(logits))


def sample(logits: torch.Tensor, cfg: SamplingConfig, gen: torch.Generator | None) -> int:
    """logits (V,) -> token id. Greedy when temperature == 0."""
    if cfg.temperature == 0:
        return greedy(logits)
    logits = logits.float().cpu() / cfg.temperature
    if cfg.top_k:
        kth = torch.topk(logits, min(cfg.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, 1, generator=gen))


@torch.inference_mode()
def prefill(model: Llama, ids: torch.Tensor, cache: KVCache | None, *, attn_impl: str = "eager",
            sdpa_backend: str | None = None, tally: FlopTally | None = None, start_pos: int = 0,
            last_only: bool = True) -> torch.Tensor:
    """Feed ids (B, T) at positions start_pos.. (0: a prompt; later: a chunk on top of what `cache`
    holds) and write their K/V to `cache`. Logits of the last position (B, V), or of every position
    (B, T, V) when not last_only (speculative decoding's verify pass)."""
    logits = model(ids, start_pos=start_pos, cache=cache, attn_impl=attn_impl, sdpa_backend=sdpa_backend,
                   tally=tally, last_only=last_only)
    return logits[:, -1] if last_only else logits


@torch.inference_mode()
def decode_one_token(model: Llama, token: torch.Tensor, pos: int, *, cache: KVCache | None, attn_impl: str = "eager",
                     sdpa_backend: str | None = None, tally: FlopTally | None = None) -> torch.Tensor:
    """Feed one token (B, 1) at position `pos` against the cache; logits (B, V)."""
    return prefill(model, token, cache, attn_impl=attn_impl, sdpa_backend=sdpa_backend, tally=tally, start_pos=pos)


def check_lengths(model: Llama, prompt_len: int, max_new_tokens: int) -> None:
    """A Refusal when the prompt a user typed, or the new tokens asked for, cannot run on this model."""
    limit = model.cfg.max_seq_len
    if prompt_len < 1:
        raise Refusal("model.err.empty_prompt")
    if max_new_tokens < 1:
        raise Refusal("model.err.no_new_tokens", n=max_new_tokens)
    # the last produced token is never fed back, so prompt + new - 1 positions are processed
    if prompt_len + max_new_tokens - 1 > limit:
        raise Refusal("model.err.past_context", prompt=prompt_len, n=max_new_tokens, limit=limit,
                      most=limit - prompt_len + 1)


@torch.inference_mode()
def decode_loop(
    model: Llama,
    ids: list[int],
    num_new: int,
    *,
    cache: KVCache | None = None,
    pick: Callable[[torch.Tensor], int] = greedy,
    start_pos: int = 0,
    attn_impl: str = "eager",
    sdpa_backend: str | None = None,
    count: bool = False,
    keep_logits: bool = False,
    step: str = "eager",
) -> Iterator[StepRecord]:
    """The one prefill + decode loop, whatever the cache (contiguous, paged, quantized).

    Step 0 feeds `ids` at positions start_pos.. with `prefill`; every later step feeds the token just
    picked with `decode_one_token`. Without a cache (naive decoding) every step re-feeds the whole
    sequence from position 0 instead. Each step is timed on the device (synced, picking the token
    included) and, when `count`, its matmul FLOPs are tallied from the shapes executed.

    `step` is how the decode steps after the prefill run (sim.model.graph_step): "eager" (the model's
    forward), "static" (fixed shapes over a ContiguousKVCache's whole buffers) or "graph" (that step
    captured in a CUDA graph and replayed)."""
    if cache is None and start_pos:
        raise Misuse(f"without a cache every step starts at position 0, got start_pos={start_pos}")
    device, cfg = model.device, model.cfg
    check_step_kind(step, device)
    if step != "eager" and cache is None:
        raise Misuse(f"a {step} step decodes from a cache; naive decoding has none")
    static = StaticDecodeStep(model, cache, attn_impl=attn_impl, graph=step == "graph") if step != "eager" else None
    elem = torch.finfo(model.dtype).bits // 8
    # a decode step's bytes: the weights for one fed token, and K/V bytes linear in the positions read
    one_token = step_bytes(cfg, 1, 1, elem, cached=True)
    n0 = len(ids)
    seq = torch.empty(1, n0 + num_new, dtype=torch.long, device=device)  # (1, T): the tokens from start_pos on
    seq[0, :n0] = torch.tensor(ids, dtype=torch.long)
    for i in range(num_new):
        n = n0 + i  # tokens in seq
        kv_len = start_pos + n
        prefilling = cache is None or i == 0
        tally = FlopTally() if count and (prefilling or static is None) else None  # a static step counts its own
        if static is not None and i == 1:  # count its FLOPs (and capture the graph) before its clock starts
            static.prepare(seq[:, n - 1 : n], kv_len - 1)
        with Stopwatch(device) as clock:
            if prefilling:  # the prompt, or the whole sequence again (naive)
                num_fed, start = n, start_pos
                logits = prefill(model, seq[:, :n], cache, attn_impl=attn_impl, sdpa_backend=sdpa_backend,
                                 tally=tally, start_pos=start)[0]  # (V,)
            else:
                num_fed, start = 1, kv_len - 1
                feed = seq[:, n - 1 : n]  # (1, 1)
                logits = (static(feed, start) if static is not None else
                          decode_one_token(model, feed, start, cache=cache, attn_impl=attn_impl, sdpa_backend=sdpa_backend,
                                           tally=tally))[0]  # (V,)
            token = pick(logits)
        if prefilling:
            nbytes = step_bytes(cfg, num_fed, kv_len, elem, cached=cache is not None and start > 0)
            kv_bytes = nbytes["kv"]
        else:  # a static step reads every slot of the cache
            kv_bytes = one_token["kv"] * (static.num_slots if static is not None else kv_len)
            nbytes = one_token
        if static is not None and not prefilling:
            part_to_flops = dict(static.part_to_flops) if count else {}
        else:
            part_to_flops = dict(tally.part_to_flops) if tally else {}
        yield StepRecord(
            step=i,
            position=kv_len,
            token=token,
            num_new=num_fed,
            kv_len=kv_len,
            part_to_flops=part_to_flops,
            bytes_weights=nbytes["weights"],
            bytes_kv=kv_bytes,
            wall_s=clock.seconds,
            logits=logits.float().cpu().clone() if keep_logits else None,
        )
        if i + 1 < num_new:
            seq[0, n] = token


def generate_steps(
    model: Llama,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    mode: str = "cached",
    sampling: SamplingConfig = SamplingConfig(),
    attn_impl: str = "eager",
    sdpa_backend: str | None = None,
    keep_logits: bool = False,
    count: bool = True,
    step: str = "eager",
) -> Iterator[StepRecord]:
    """Yield one StepRecord per generated token (batch size 1): naive without a cache, cached with a
    ContiguousKVCache sized to the positions written (the last produced token is never fed back); `step`
    is how a cached decode step runs (see decode_loop)."""
    if mode not in MODES:
        raise Misuse(f"mode must be one of {MODES}, got {mode!r}")
    check_lengths(model, len(prompt_ids), max_new_tokens)
    num_positions = len(prompt_ids) + max_new_tokens - 1
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=num_positions, device=model.device, dtype=model.dtype) if mode == "cached" else None
    yield from decode_loop(model, prompt_ids, max_new_tokens, cache=cache, pick=sampling.sampler(), attn_impl=attn_impl,
                           sdpa_backend=sdpa_backend, count=count, keep_logits=keep_logits,
                           step=step if mode == "cached" else "eager")


def generate(model: Llama, prompt_ids: list[int], max_new_tokens: int, *, mode: str = "cached", **kwargs) -> GenerationResult:
    steps = list(generate_steps(model, prompt_ids, max_new_tokens, mode=mode, **kwargs))
    return GenerationResult(mode=mode, prompt_ids=list(prompt_ids), new_ids=[s.token for s in steps], steps=steps)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token lists differ (None when identical)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(kw_only=True)
class DecodeComparison:
    """Naive and cached generation of the same tokens, and what they measured.

    Naive decoding is O(N²) in time: it may be given a wall-time budget, after which it stops
    and the comparison covers the tokens it produced (`compared`)."""

    naive: list[StepRecord]
    cached: list[StepRecord]
    num_requested: int
    naive_budget_s: float | None
    step: str = "eager"  # how the cached decode steps ran (sim.model.graph_step.STEP_KINDS)
    conditions: Conditions | None = None  # the load the times were measured under

    @property
    def compared(self) -> int:
        return min(len(self.naive), len(self.cached))

    @property
    def naive_complete(self) -> bool:
        return len(self.naive) == self.num_requested

    @property
    def first_difference(self) -> int | None:
        """First generated token where the two runs differ, over the tokens both produced."""
        k = self.compared
        return first_difference([r.token for r in self.naive[:k]], [r.token for r in self.cached[:k]])

    def seconds(self, mode: str, steps: int | None = None) -> float:
        recs = self.naive if mode == "naive" else self.cached
        return sum(r.wall_s for r in recs[: steps if steps is not None else len(recs)])

    @property
    def speedup(self) -> float:
        """Naive time / cached time over the same (compared) tokens."""
        k = self.compared
        return self.seconds("naive", k) / self.seconds("cached", k)

    def tokens_per_s(self, mode: str) -> float:
        recs = self.naive if mode == "naive" else self.cached
        return len(recs) / self.seconds(mode)

    def flops(self, mode: str, steps: int | None = None) -> int:
        recs = self.naive if mode == "naive" else self.cached
        return sum(r.flops for r in recs[: steps if steps is not None else len(recs)])

    def to_frame(self, mode: str):
        """One row per step of `mode`: what was fed, the token, FLOPs (total and by part), wall time."""
        import pandas as pd

        return pd.DataFrame([{"step": r.step, "position": r.position, "token": r.token, "num_new": r.num_new,
                              "kv_len": r.kv_len, "flops": r.flops, "wall_s": r.wall_s,
                              **{f"flops_{p}": f for p, f in r.part_to_flops.items()}}
                             for r in (self.naive if mode == "naive" else self.cached)])


def run_comparison(model: Llama, prompt_ids: list[int], num_new: int, *, sampling: SamplingConfig,
                   attn_impl: str = "sdpa", naive_budget_s: float | None = None, on_step=None,
                   step: str = "eager") -> DecodeComparison:
    """Cached and naive generation of the same tokens, one step of each in turn, so that both are timed under the
    same load (a burst of other work slows both alike); naive stops when its steps have spent `naive_budget_s`,
    cached runs on to the end. on_step(mode, i) reports progress. `step`: how the cached decode steps run
    (sim.model.graph_step). The load before and after is kept with the times (`conditions`)."""
    check_step_kind(step, model.device)
    for mode in ("cached", "naive"):  # warm-up: first calls pay one-time kernel and allocator costs
        for _ in generate_steps(model, prompt_ids[:8], 3, mode=mode, sampling=sampling, attn_impl=attn_impl, count=False,
                                step=step):
            pass
    cached, naive, spent = [], [], 0.0
    naive_steps = generate_steps(model, prompt_ids, num_new, mode="naive", sampling=sampling, attn_impl=attn_impl)
    with Measuring() as measuring:
        for rec in generate_steps(model, prompt_ids, num_new, mode="cached", sampling=sampling, attn_impl=attn_impl,
                                  step=step):
            cached.append(rec)
            if on_step:
                on_step("cached", len(cached))
            if naive_steps is None:
                continue
            naive.append(next(naive_steps))  # the same step number: both generators yield num_new records
            spent += naive[-1].wall_s
            if on_step:
                on_step("naive", len(naive))
            if naive_budget_s is not None and spent > naive_budget_s:
                naive_steps.close()
                naive_steps = None
    return DecodeComparison(naive=naive, cached=cached, num_requested=num_new, naive_budget_s=naive_budget_s, step=step, conditions=measuring.conditions)
