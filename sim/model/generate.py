"""Naive and KV-cached generation, one instrumented step at a time.

naive : every step re-feeds the whole sequence so far (prompt + generated) with no cache,
        recomputing every K and V: step n costs O(n·d² + n²·d).
cached: step 0 (prefill) runs the prompt once and fills the cache; every later step feeds one
        token, computes one new K/V row and reads the rest: O(d² + n·d).
Both yield a StepRecord per produced token; with the same sampling they produce the same tokens.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from sim.cost.opcount import PARTS, FlopTally, step_bytes
from sim.model.kvcache import ContiguousKVCache
from sim.model.transformer import TinyLlama

MODES = ("naive", "cached")


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 = no top-k filter
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")


@dataclass(frozen=True)
class StepRecord:
    step: int  # 0 = prefill
    position: int  # position of the produced token in the full sequence
    token: int
    num_new: int  # tokens fed through the model this step
    kv_len: int  # keys attended to
    part_to_flops: dict[str, int]
    bytes_weights: int
    bytes_kv: int
    wall_s: float
    logits: torch.Tensor | None = None  # (V,) fp32 on CPU, when asked for

    @property
    def flops(self) -> int:
        return sum(self.part_to_flops.values())


@dataclass
class GenerationResult:
    mode: str
    prompt_ids: list[int]
    new_ids: list[int]
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def total_flops(self) -> int:
        return sum(s.flops for s in self.steps)

    @property
    def decode_seconds(self) -> float:
        return sum(s.wall_s for s in self.steps)

    @property
    def tokens_per_s(self) -> float:
        return len(self.new_ids) / self.decode_seconds if self.decode_seconds > 0 else float("inf")

    def to_frame(self):
        import pandas as pd

        rows = []
        for s in self.steps:
            row = {"step": s.step, "position": s.position, "token": s.token, "num_new": s.num_new,
                   "kv_len": s.kv_len, "flops": s.flops, "bytes_weights": s.bytes_weights,
                   "bytes_kv": s.bytes_kv, "wall_s": s.wall_s}
            row.update({f"flops_{p}": s.part_to_flops[p] for p in PARTS})
            rows.append(row)
        return pd.DataFrame(rows)


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def sample(logits: torch.Tensor, cfg: SamplingConfig, gen: torch.Generator | None) -> int:
    """logits (V,) -> token id. Greedy when temperature == 0."""
    if cfg.temperature == 0:
        return int(torch.argmax(logits))
    logits = logits.float().cpu() / cfg.temperature
    if cfg.top_k:
        kth = torch.topk(logits, min(cfg.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, 1, generator=gen))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.inference_mode()
def prefill(model: TinyLlama, ids: torch.Tensor, cache, attn_impl="eager", sdpa_backend=None, tally=None) -> torch.Tensor:
    """Run the prompt (B, T) from position 0 and fill `cache`; logits of the last position (B, V)."""
    return model(ids, 0, cache, attn_impl, sdpa_backend, tally, last_only=True)[:, -1]


@torch.inference_mode()
def decode_one_token(model: TinyLlama, token: torch.Tensor, pos: int, cache, attn_impl="eager", sdpa_backend=None, tally=None) -> torch.Tensor:
    """Feed one token (B, 1) at position `pos` against the cache; logits (B, V)."""
    return model(token, pos, cache, attn_impl, sdpa_backend, tally, last_only=True)[:, -1]


def check_lengths(model: TinyLlama, prompt_len: int, max_new_tokens: int) -> None:
    limit = model.cfg.max_seq_len
    if prompt_len < 1:
        raise ValueError("the prompt is empty: give at least one byte")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    # the last produced token is never fed back, so prompt + new - 1 positions are processed
    if prompt_len + max_new_tokens - 1 > limit:
        raise ValueError(
            f"prompt ({prompt_len} tokens) + {max_new_tokens} new tokens exceeds the model's trained context of "
            f"{limit} tokens; RoPE positions past {limit} were never trained and give gibberish. "
            f"Ask for at most {limit - prompt_len + 1} new tokens."
        )


@torch.inference_mode()
def generate_steps(
    model: TinyLlama,
    prompt_ids: list[int],
    max_new_tokens: int,
    mode: str = "cached",
    sampling: SamplingConfig = SamplingConfig(),
    attn_impl: str = "eager",
    sdpa_backend: str | None = None,
    keep_logits: bool = False,
    count: bool = True,
) -> Iterator[StepRecord]:
    """Yield one StepRecord per generated token (batch size 1)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    check_lengths(model, len(prompt_ids), max_new_tokens)
    cfg = model.cfg
    device = model.lm_head.weight.device
    dtype = model.lm_head.weight.dtype
    elem = torch.finfo(dtype).bits // 8
    gen = torch.Generator().manual_seed(sampling.seed) if sampling.temperature > 0 else None
    # the last produced token is never fed back: prompt + new - 1 positions get written
    num_positions = len(prompt_ids) + max_new_tokens - 1
    cache = ContiguousKVCache(cfg, 1, num_positions, device, dtype) if mode == "cached" else None
    seq = torch.tensor([prompt_ids], dtype=torch.long, device=device)  # (1, T)
    for step in range(max_new_tokens):
        tally = FlopTally() if count else None
        kv_len = seq.shape[1]
        if mode == "naive":
            feed, start = seq, 0  # the whole sequence, again
        elif step == 0:
            feed, start = seq, 0  # prefill
        else:
            feed, start = seq[:, -1:], kv_len - 1
        _sync(device)
        t0 = time.perf_counter()
        logits = model(feed, start, cache, attn_impl, sdpa_backend, tally, last_only=True)[0, -1]  # (V,)
        token = sample(logits, sampling, gen)
        _sync(device)
        wall = time.perf_counter() - t0
        num_new = feed.shape[1]
        nbytes = step_bytes(cfg, num_new, kv_len, elem, cached=cache is not None and step > 0)
        yield StepRecord(
            step=step,
            position=kv_len,
            token=token,
            num_new=num_new,
            kv_len=kv_len,
            part_to_flops=dict(tally.part_to_flops) if tally else {},
            bytes_weights=nbytes["weights"],
            bytes_kv=nbytes["kv"],
            wall_s=wall,
            logits=logits.float().cpu().clone() if keep_logits else None,
        )
        seq = torch.cat([seq, torch.tensor([[token]], device=device)], dim=1)


def generate(model: TinyLlama, prompt_ids: list[int], max_new_tokens: int, mode: str = "cached", **kwargs) -> GenerationResult:
    steps = list(generate_steps(model, prompt_ids, max_new_tokens, mode, **kwargs))
    return GenerationResult(mode, list(prompt_ids), [s.token for s in steps], steps)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token lists differ (None when identical)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
