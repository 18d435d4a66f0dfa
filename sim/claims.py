"""One type for the seeds' claims, checked: what a seed says, what the lab computes, and the verdict.

Every page that checks a seed builds a tuple of `Claim`s with a pure function next to the numbers it
recomputes (sim/cost/memory.py, sim/cost/decode.py, ...); one app function renders them all the same way.
Torch-free and pandas-free (`claims_frame` imports pandas only when called).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    """How a seed's statement holds up against the lab's own numbers."""

    RIGHT = "right"  # holds as stated
    CLOSE = "close"  # right to within rounding or an order of magnitude the seed meant
    NEEDS_CONTEXT = "needs context"  # true under conditions the seed leaves out
    AMBIGUOUS = "ambiguous"  # reads two ways; one of them holds
    UNDERSTATED = "understated"  # the real effect is larger than claimed
    WRONG = "wrong"  # does not hold


# The four source articles (shared/seeds/NNN_*.txt), their titles in Korean and in English.
SEEDS: dict[str, tuple[str, str]] = {
    "000": ("KV 캐시 완전정복: LLM 추론 속도와 메모리 비용을 결정하는 트랜스포머 핵심 구조 이해하기",
            "Mastering the KV cache: the transformer structure that sets LLM inference speed and memory cost"),
    "001": ("KV 캐시 양자화 — 가중치보다 이쪽이 먼저 넘친다",
            "KV cache quantization — this overflows before the weights do"),
    "002": ("KV 캐시(KV Cache), Flash Attention과 추론 최적화(Inference Optimization)",
            "The KV cache, FlashAttention and inference optimization"),
    "004": ("KV Cahce", "KV Cache (the title is misspelt in the original): a step-by-step walk-through"),
}


@dataclass(frozen=True)
class Claim:
    statement: str  # the seed's claim, in English
    seed: str  # "002" = shared/seeds/002_*.txt; or where a non-seed figure comes from ("this machine")
    claimed: str  # the number or words the seed states
    computed: str  # what the lab computes for the same thing, with its numbers
    verdict: Verdict
    why: str = ""
    original: str = ""  # the seed's own words (Korean), where quoted
    value: float | None = None  # the computed number itself, for tests and charts

    def __post_init__(self) -> None:
        assert isinstance(self.verdict, Verdict), self.verdict
        assert self.statement and self.computed, self

    @property
    def source(self) -> str:
        return f"seed {self.seed}" if self.seed in SEEDS else self.seed


def verdict_counts(claims: tuple[Claim, ...] | list[Claim]) -> dict[Verdict, int]:
    """{verdict: number of claims}, in Verdict order, only verdicts that occur."""
    return {v: n for v in Verdict if (n := sum(c.verdict is v for c in claims))}


def claims_frame(claims: tuple[Claim, ...] | list[Claim]):
    """One row per claim, the same columns on every page (CSV download and on-screen table)."""
    import pandas as pd

    return pd.DataFrame([{
        "Source": c.source, "Claim": c.statement, "Seed says": c.claimed, "We compute": c.computed,
        "Verdict": str(c.verdict), "Why": c.why, "As written": c.original,
    } for c in claims])
