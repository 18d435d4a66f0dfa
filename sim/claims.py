"""One type for the seeds' claims, checked: what a seed says, what the lab computes, and the verdict.

Every page that checks a seed builds a tuple of `Claim`s with a pure function next to the numbers it
recomputes (sim/cost/memory.py, sim/cost/decode.py, ...); one app function renders them all the same way.
Torch-free and pandas-free. `statement` is the English; `original` the seed's own Korean words (for a claim from no
seed, the statement in Korean); sim/words/claims.py words the table, both side by side in either language and the
rest of it in the page language.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sim.msg import Msg


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
    statement: str  # the seed's claim, in English (the translation shown beside `original`)
    seed: str | Msg  # "002" = shared/seeds/002_*.txt; or where a non-seed figure comes from: a message value
    # (Msg("claims.where.this_machine")) or a name as it is ("vLLM docs")
    claimed: str  # the number or words the seed states
    computed: str  # what the lab computes for the same thing, with its numbers
    verdict: Verdict
    why: str = ""
    original: str = ""  # the seed's own words (Korean), quoted verbatim; for a non-seed claim, statement in Korean
    value: float | None = None  # the computed number itself, for tests and charts

    def __post_init__(self) -> None:
        assert isinstance(self.verdict, Verdict), self.verdict
        assert self.statement and self.computed, self


def verdict_counts(claims: tuple[Claim, ...] | list[Claim]) -> dict[Verdict, int]:
    """{verdict: number of claims}, in Verdict order, only verdicts that occur."""
    return {v: n for v in Verdict if (n := sum(c.verdict is v for c in claims))}


# The seeds write some formulas in LaTeX; a table cell shows text, so each is read as the plain symbols it means.
_LATEX_SYMBOLS = {"\\times": "×", "\\cdot": "·", "\\to": " → ", "\\approx": "≈", "\\le": "≤", "\\ge": "≥"}
_SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def latex_as_text(quote: str) -> str:
    """A seed's words with its LaTeX written as plain symbols: '$\\frac{1}{h}$' -> '1/h', '2 \\times 32' -> '2 × 32',
    '131{,}072 \\ \\text{KiB}' -> '131,072 KiB', 'O(ND^2)' -> 'O(ND²)'. Text without LaTeX is returned unchanged.
    (It reads the seeds' quotes, never text the lab wrote.)"""
    import re

    if not re.search(r"\\[A-Za-z]|\$[^$]*[\\^][^$]*\$", quote):  # a macro, or $...$ holding one or a power
        return quote
    out = quote.replace("{,}", ",").replace("$", "")
    out = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", out)
    out = re.sub(r"\\text\{([^{}]*)\}", r"\1", out)
    for macro, symbol in _LATEX_SYMBOLS.items():
        out = re.sub(re.escape(macro) + r"(?![A-Za-z])", symbol, out)
    out = re.sub(r"\^\{?(\d+)\}?", lambda m: m.group(1).translate(_SUPERSCRIPTS), out)
    out = out.replace("\\ ", " ")
    return re.sub(r" {2,}", " ", out)
