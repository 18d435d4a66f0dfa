"""How long real-model work will take on this machine, known before it starts.

A forward pass of the tiny model costs, to a good approximation,

    seconds = calls · per_call + tokens · per_token + pairs · per_pair

where `calls` counts forward calls (each pays a fixed cost per operator, which dominates a model
this small), `tokens` the positions they process (projections, MLP, LM head), and `pairs` the
(query, key) pairs attention scores. `sim.model.measure.measure_rates` fits the three rates from a few
timed forward passes of the real model; the `*_work` functions count calls, tokens and pairs of each job exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """The size of a job, in the cost model's three units."""

    calls: int = 0
    tokens: int = 0
    pairs: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(self.calls + other.calls, self.tokens + other.tokens, self.pairs + other.pairs)

    def __mul__(self, times: int) -> Work:
        return Work(self.calls * times, self.tokens * times, self.pairs * times)


@dataclass(frozen=True)
class ModelRates:
    per_call_s: float
    per_token_s: float
    per_pair_s: float

    def seconds(self, work: Work) -> float:
        return work.calls * self.per_call_s + work.tokens * self.per_token_s + work.pairs * self.per_pair_s

    def prefill_s(self, num_tokens: int, batch: int = 1) -> float:
        return self.seconds(prefill_work(num_tokens, batch))

    def cached_s(self, prompt_len: int, num_new: int, batch: int = 1) -> float:
        return self.seconds(cached_work(prompt_len, num_new, batch))

    def naive_s(self, prompt_len: int, num_new: int) -> float:
        return self.seconds(naive_work(prompt_len, num_new))


# Fitted by measure_rates on this project's 2-core CPU (one torch thread, fp32): the fallback
# before this server has measured its own model.
DEFAULT_RATES = {
    "sdpa": ModelRates(per_call_s=1.5e-3, per_token_s=2.3e-5, per_pair_s=7.6e-8),
    "eager": ModelRates(per_call_s=1.3e-3, per_token_s=3.0e-5, per_pair_s=2.1e-7),
}

# SmolLM2-135M-Instruct (the real model, fp32, one thread, this project's 2-core CPU) costs two different things:
# - a decode step (one new token on a cache): per call from the benchmark's cached decode step (benchmarks.real_model:
#   ~16 tok/s, so ~0.06 s a step), per token ~0.02 s of it, per pair from attention's FLOPs at the fitted matmul rate
#   (30 layers × 9 heads × 64 dims × 4 FLOP ≈ 69 kFLOP at ~13 GFLOP/s; eager twice that). Measured under heavy load.
# - a prefill (many positions in one call): fitted with fit_rates from prefill passes of 1, 16, 64, 150, 256 and 512
#   tokens timed in this thread's CPU time, best of three (as measure_rates does): 28 ms for one token, 2.5–2.6 ms a
#   token from 64 on (sdpa) — a projection over many rows reuses each weight, so a prefilled token costs ~8× less
#   than a decoded one. Fitted 2026-12-05, torch 2.x, sdpa and eager each.
SMOLLM2_DECODE_RATES = {
    "sdpa": ModelRates(per_call_s=4.0e-2, per_token_s=2.1e-2, per_pair_s=5.3e-6),
    "eager": ModelRates(per_call_s=4.5e-2, per_token_s=2.1e-2, per_pair_s=1.1e-5),
}
SMOLLM2_PREFILL_RATES = {
    "sdpa": ModelRates(per_call_s=3.2e-2, per_token_s=2.15e-3, per_pair_s=1.6e-6),
    "eager": ModelRates(per_call_s=4.2e-2, per_token_s=1.8e-3, per_pair_s=5.7e-6),
}

# SmolLM2's tokens before its tokenizer is loaded. Its pre-tokenizer splits digits one a token, and a non-ASCII byte
# is at most one token (Korean measured 0.85–0.87 tokens a byte); other ASCII text measured 0.19–0.36 tokens a byte
# on the lab's own English (the Prefix caching chat, the Lesson's and KV memory's prompts) and typed code and
# whitespace: 0.4 a byte covers them with a margin. An estimate, not a bound: a run of punctuation can reach one
# token a byte, 2.5× this.
SMOLLM2_ASCII_TOKENS_PER_BYTE = 0.4


def smollm2_tokens(text: str) -> int:
    """Expected SmolLM2 BPE tokens of `text` (see SMOLLM2_ASCII_TOKENS_PER_BYTE), at least one for non-empty text."""
    raw = text.encode("utf-8")
    heavy = sum(1 for b in raw if b >= 128 or 48 <= b <= 57)  # non-ASCII bytes and digits: one token each at most
    rest = len(raw) - heavy
    return max(heavy + -(-rest * 2 // 5), 1 if raw else 0)  # ceil(0.4 · rest), in integers


@dataclass(frozen=True)
class SplitRates:
    """A model whose prefill and decode steps cost differently per token (the real model): prefill work at the
    prefill rates, one-token steps at the decode rates. The same interface as ModelRates' job helpers."""

    prefill: ModelRates
    decode: ModelRates

    def prefill_s(self, num_tokens: int, batch: int = 1) -> float:
        return self.prefill.seconds(prefill_work(num_tokens, batch))

    def cached_s(self, prompt_len: int, num_new: int, batch: int = 1) -> float:
        return self.prefill_s(prompt_len, batch) + self.decode.seconds(decode_work(prompt_len, num_new, batch))

    def naive_s(self, prompt_len: int, num_new: int) -> float:
        """Each step a forward over the whole sequence from 0: a prefill's cost per token."""
        return self.prefill.seconds(naive_work(prompt_len, num_new))


def smollm2_rates(attn_impl: str) -> SplitRates:
    return SplitRates(SMOLLM2_PREFILL_RATES[attn_impl], SMOLLM2_DECODE_RATES[attn_impl])


def triangle(start: int, stop: int) -> int:
    """Σ_{t=start}^{stop-1} t: attention pairs of one query per position, causal."""
    return max(0, (stop * (stop - 1) - start * (start - 1)) // 2) if stop > start else 0


def prefill_work(num_tokens: int, batch: int = 1) -> Work:
    """One forward over `num_tokens` positions from 0 (causal): T(T+1)/2 pairs per sequence."""
    return Work(1, batch * num_tokens, batch * num_tokens * (num_tokens + 1) // 2)


def decode_work(prompt_len: int, num_new: int, batch: int = 1) -> Work:
    """After a prefill of prompt_len, the num_new − 1 one-token steps (the last token is never fed back)."""
    steps = max(0, num_new - 1)
    return Work(steps, batch * steps, batch * (triangle(prompt_len + 1, prompt_len + steps + 1)))


def cached_work(prompt_len: int, num_new: int, batch: int = 1) -> Work:
    """Prefill, then num_new − 1 one-token steps."""
    return prefill_work(prompt_len, batch) + decode_work(prompt_len, num_new, batch)


def naive_work(prompt_len: int, num_new: int) -> Work:
    """num_new forward passes, the k-th over prompt + k positions from 0."""
    lengths = range(prompt_len, prompt_len + num_new)
    return Work(num_new, sum(lengths), sum(t * (t + 1) // 2 for t in lengths))


def fit_rates(samples: list[tuple[Work, float]]) -> ModelRates:
    """Least squares over (work, seconds) samples, each rate kept ≥ 0 (a noisy fit can go negative)."""
    import numpy as np

    a = np.array([[w.calls, w.tokens, w.pairs] for w, _ in samples], dtype=float)
    b = np.array([s for _, s in samples], dtype=float)
    # scale columns so the solve is well conditioned (pairs are ~1e6 × calls)
    scale = np.maximum(a.max(axis=0), 1.0)
    x, *_ = np.linalg.lstsq(a / scale, b, rcond=None)
    x = np.maximum(x / scale, 0.0)
    return ModelRates(float(x[0]), float(x[1]), float(x[2]))
