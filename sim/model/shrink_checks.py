"""Three quality checks for a shrunk KV cache, each scored against the full cache.

Seed 001's claim: quantization blurs every token a little, eviction discards tokens outright, so a
task that must quote a document exactly is hurt far more by discarding. Each check runs greedy
decoding through `decode_loop` with a cache from `make_cache(num_positions)` (a fresh cache for a
run that writes that many positions: prompt + new - 1) and scores what comes out:

1. long_generation: 900 free-running tokens; the fraction of positions whose token equals the full
   cache's, and the first position where they part.
2. exact_quote: a ~150-byte passage of the held-out text early in a ~800-byte context, filler text
   from elsewhere in the held-out text, then the passage's first 24 bytes again; how many of the
   next 32 bytes the model reproduces (up to the first mismatch, and in total).
3. multi_turn: a made-up fact ("KEY: Zorvath 4172.") in an early turn, ~560 bytes of dialogue,
   then the cue "KEY: " again; how many bytes of the fact come back.

The texts come from the validation split of train.py (every 10th 32 KiB chunk, never trained on),
at offsets drawn from `random.Random(f"<check>:{seed}")`: same seed, same prompts, same scores.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from sim.model.generate import check_lengths, decode_loop, greedy
from sim.model.kvcache import ContiguousKVCache
from sim.model.train import load_corpus, made_up_fact
from sim.model.transformer import Llama
from sim.refusal import Misuse

CacheFactory = Callable[[int], object]

QUOTE_PASSAGE_LEN = 150
QUOTE_CUE_LEN = 24
QUOTE_NUM_SCORED = 32
QUOTE_FILLER_LEN = 600
QUOTE_LEAD_LEN = 32
FACT_FILLER_LEN = 560
FACT_LEAD_LEN = 48
FACT_CUE = "KEY: "


def full_cache(model: Llama) -> CacheFactory:
    """The reference: a contiguous cache holding every position the run writes."""
    return lambda n: ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=n, device=model.device, dtype=model.dtype)


# ---------------------------------------------------------------------------------------------
# Scoring (pure: token lists in, counts out)


def agreement(tokens: Sequence[int], reference: Sequence[int]) -> tuple[int, int | None]:
    """(positions where tokens[i] == reference[i], first index where they differ or None)."""
    if len(tokens) != len(reference):
        raise Misuse(f"{len(tokens)} tokens against a reference of {len(reference)}")
    same = [a == b for a, b in zip(tokens, reference, strict=True)]
    first = next((i for i, s in enumerate(same) if not s), None)
    return sum(same), first


def copy_score(produced: Sequence[int], expected: Sequence[int]) -> tuple[int, int]:
    """(bytes equal up to the first mismatch, bytes equal at their position in total)."""
    if len(produced) != len(expected):
        raise Misuse(f"{len(produced)} produced bytes against {len(expected)} expected")
    num_matched, first = agreement(produced, expected)
    return (len(expected) if first is None else first), num_matched


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, kw_only=True)
class LongGenerationResult:
    num_new: int
    prompt_len: int
    num_agree: int  # positions whose token equals the full cache's
    first_divergence: int | None  # index into the new tokens; None when every token agrees
    tokens: tuple[int, ...]
    reference: tuple[int, ...]
    seconds: float = field(default=0.0, compare=False)  # wall time of this cache's run

    @property
    def agreement(self) -> float:
        return self.num_agree / self.num_new

@dataclass(frozen=True, kw_only=True)
class Trial:
    prompt_len: int
    expected: tuple[int, ...]  # what the full text says comes next
    produced: tuple[int, ...]  # what the model wrote
    num_prefix: int  # bytes right up to the first mismatch
    num_matched: int  # bytes right in total


@dataclass(frozen=True)
class RecallResult:
    """exact_quote or multi_turn: bytes copied from far back in the context, summed over trials."""

    check: str  # "exact quote" or "multi-turn fact" (named in a language by shrink.check.<check with _>)
    trials: tuple[Trial, ...]
    seconds: float = field(default=0.0, compare=False)

    @property
    def num_prefix(self) -> int:
        return sum(t.num_prefix for t in self.trials)

    @property
    def num_matched(self) -> int:
        return sum(t.num_matched for t in self.trials)

    @property
    def max_bytes(self) -> int:
        return sum(len(t.expected) for t in self.trials)

    @property
    def fraction(self) -> float:
        """Bytes right before the first mismatch, as a fraction of the most possible."""
        return self.num_prefix / self.max_bytes

# ---------------------------------------------------------------------------------------------
# Running


def greedy_run(model: Llama, make_cache: CacheFactory, *, ids: Sequence[int], num_new: int,
               attn_impl: str = "eager") -> list[int]:
    """num_new greedy tokens after ids, through a cache sized to the positions written."""
    check_lengths(model, len(ids), num_new)
    cache = make_cache(len(ids) + num_new - 1)
    return [rec.token for rec in decode_loop(model, list(ids), num_new, cache=cache, pick=greedy, attn_impl=attn_impl)]


def long_generation(model: Llama, make_cache: CacheFactory, *, prompt_ids: Sequence[int], num_new: int = 900,
                    reference: Sequence[int] | None = None, attn_impl: str = "eager") -> LongGenerationResult:
    """Check 1: num_new greedy tokens through `make_cache` against the full cache's (computed here
    unless `reference` passes them, e.g. computed once for many caches)."""
    check_lengths(model, len(prompt_ids), num_new)
    if reference is None:
        reference = greedy_run(model, full_cache(model), ids=prompt_ids, num_new=num_new, attn_impl=attn_impl)
    if len(reference) != num_new:
        raise Misuse(f"the reference has {len(reference)} tokens; num_new is {num_new}")
    t0 = time.perf_counter()
    tokens = greedy_run(model, make_cache, ids=prompt_ids, num_new=num_new, attn_impl=attn_impl)
    seconds = time.perf_counter() - t0
    num_agree, first = agreement(tokens, reference)
    return LongGenerationResult(num_new=num_new, prompt_len=len(prompt_ids), num_agree=num_agree, first_divergence=first, tokens=tuple(tokens), reference=tuple(reference), seconds=seconds)


def _held_out() -> bytes:
    return bytes(load_corpus()[1].tolist())


def _line_start(text: bytes, offset: int) -> int:
    """The first line start at or after offset (so a passage or filler begins with a whole line)."""
    nl = text.find(b"\n", offset)
    return offset if nl < 0 else nl + 1


def _snippet(text: bytes, rng: random.Random, length: int, avoid: tuple[int, int] | None = None) -> tuple[int, bytes]:
    """length bytes of text from a line start at a random offset, away from the span `avoid`."""
    far = 8 * 1024
    while True:
        start = _line_start(text, rng.randrange(0, len(text) - length - 256))
        if avoid is None or start + length + far < avoid[0] or start > avoid[1] + far:
            return start, text[start : start + length]


def quote_prompts(*, num_trials: int, seed: int, passage_len: int = QUOTE_PASSAGE_LEN, cue_len: int = QUOTE_CUE_LEN,
                  num_scored: int = QUOTE_NUM_SCORED, filler_len: int = QUOTE_FILLER_LEN,
                  lead_len: int = QUOTE_LEAD_LEN) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, expected continuation) per trial: [lead][passage][filler][passage[:cue_len]]
    -> passage[cue_len : cue_len + num_scored]."""
    if cue_len + num_scored > passage_len:
        raise Misuse(f"cue ({cue_len}) + scored bytes ({num_scored}) exceed the passage ({passage_len} bytes)")
    text, rng = _held_out(), random.Random(f"exact_quote:{seed}")
    out = []
    while len(out) < num_trials:
        at, passage = _snippet(text, rng, passage_len)
        _, lead = _snippet(text, rng, lead_len, avoid=(at, at + passage_len))
        _, filler = _snippet(text, rng, filler_len, avoid=(at, at + passage_len))
        cue = passage[:cue_len]
        if (lead + passage[1:] + filler).count(cue):
            continue  # the cue must point at one place only
        out.append((list(lead + passage + filler + cue), list(passage[cue_len : cue_len + num_scored])))
    return out


def fact_prompts(*, num_trials: int, seed: int, filler_len: int = FACT_FILLER_LEN,
                 lead_len: int = FACT_LEAD_LEN) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, expected fact) per trial: [lead turn]KEY: <fact>\\n\\n[other turns]\\n\\nKEY: -> <fact>."""
    text, rng = _held_out(), random.Random(f"multi_turn:{seed}")
    out = []
    for _ in range(num_trials):
        fact = made_up_fact(rng).encode()
        _, lead = _snippet(text, rng, lead_len)
        _, filler = _snippet(text, rng, filler_len)
        cue = FACT_CUE.encode()
        prompt = lead + b"\n" + cue + fact + b"\n\n" + filler + b"\n\n" + cue
        out.append((list(prompt), list(fact)))
    return out


def _recall(check: str, model: Llama, make_cache: CacheFactory, prompts, attn_impl: str) -> RecallResult:
    t0 = time.perf_counter()
    trials = []
    for ids, expected in prompts:
        produced = greedy_run(model, make_cache, ids=ids, num_new=len(expected), attn_impl=attn_impl)
        prefix, matched = copy_score(produced, expected)
        trials.append(Trial(prompt_len=len(ids), expected=tuple(expected), produced=tuple(produced), num_prefix=prefix, num_matched=matched))
    return RecallResult(check, tuple(trials), time.perf_counter() - t0)


def exact_quote(model: Llama, make_cache: CacheFactory, *, num_trials: int = 4, seed: int = 0,
                passage_len: int = QUOTE_PASSAGE_LEN, cue_len: int = QUOTE_CUE_LEN,
                num_scored: int = QUOTE_NUM_SCORED, filler_len: int = QUOTE_FILLER_LEN,
                attn_impl: str = "eager") -> RecallResult:
    """Check 2: quote a held-out passage from ~800 bytes back, given its first cue_len bytes."""
    prompts = quote_prompts(num_trials=num_trials, seed=seed, passage_len=passage_len, cue_len=cue_len, num_scored=num_scored, filler_len=filler_len)
    return _recall("exact quote", model, make_cache, prompts, attn_impl)


def multi_turn(model: Llama, make_cache: CacheFactory, *, num_trials: int = 4, seed: int = 0,
               filler_len: int = FACT_FILLER_LEN, attn_impl: str = "eager") -> RecallResult:
    """Check 3: recall a made-up fact stated in an early turn when its cue comes back."""
    return _recall("multi-turn fact", model, make_cache, fact_prompts(num_trials=num_trials, seed=seed, filler_len=filler_len), attn_impl)


@torch.inference_mode()
def full_cache_scores(model: Llama, num_trials: int = 4, seed: int = 0) -> dict[str, dict]:
    """The full cache's quote and fact scores (what train.py writes into a copy model's report)."""
    out = {}
    for name, check in (("exact_quote", exact_quote), ("multi_turn", multi_turn)):
        r = check(model, full_cache(model), num_trials=num_trials, seed=seed)
        out[name] = {"num_trials": num_trials, "seed": seed, "num_prefix": r.num_prefix,
                     "num_matched": r.num_matched, "max_bytes": r.max_bytes}
    return out
