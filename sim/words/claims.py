"""The seeds' claims in words (sim.claims.Claim): the verdict and source as the page language says them and the one
table every page shows (CSV download and on-screen), the claim in the seed's Korean and in English side by side."""

from __future__ import annotations

from sim.claims import SEEDS, Claim, Verdict, latex_as_text
from sim.words import say, text


def verdict_word(verdict: Verdict, lang: str = "en") -> str:
    """'needs context' / '조건부': the verdict as the page language says it."""
    return text(lang, f"claims.verdict.{verdict.name.lower()}")


def source_name(claim: Claim, lang: str = "en") -> str:
    """'seed 002' / '시드 002'; a non-seed source worded when it is a message value (Msg("claims.where.this_machine")),
    else the name as given."""
    if isinstance(claim.seed, str) and claim.seed in SEEDS:
        return text(lang, "claims.source.seed", seed=claim.seed)
    return say(lang, claim.seed)


def statement_columns(lang: str = "en") -> list[str]:
    """The two columns that quote the claim, the page language's first: the English statement and the Korean
    original side by side in both languages ('Claim', 'Korean original' / '원문', '영어 번역')."""
    en, ko = text(lang, "claims.col.statement"), text(lang, "claims.col.original")
    return [ko, en] if lang == "ko" else [en, ko]


def claims_frame(claims: tuple[Claim, ...] | list[Claim], lang: str = "en"):
    """One row per claim, the same columns on every page (CSV download and on-screen table), headed and worded
    in `lang`: the claim in the seed's Korean and in English side by side, then where it comes from, what the
    seed says, what the lab computes, the verdict and why. A claim with no Korean original yet has an empty
    cell there."""
    import pandas as pd

    col = {name: text(lang, f"claims.col.{name}") for name in
           ("statement", "original", "source", "claimed", "computed", "verdict", "why")}
    first = statement_columns(lang)
    rows = [{col["statement"]: c.statement, col["original"]: latex_as_text(c.original),
             col["source"]: source_name(c, lang), col["claimed"]: latex_as_text(c.claimed), col["computed"]: c.computed, col["verdict"]: verdict_word(c.verdict, lang),
             col["why"]: c.why} for c in claims]
    order = [*first, col["source"], col["claimed"], col["computed"], col["verdict"], col["why"]]
    return pd.DataFrame(rows, columns=order)
