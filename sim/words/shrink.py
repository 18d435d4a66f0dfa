"""The Shrink the cache page's words (moved here from sim/model/shrink_checks.py, shrink_run.py and
real_recorded.py): each check's summary, each cache's name and score, the table and the recorded grid's verdict,
in either language (catalog areas shrink_cache.json and real.json)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.cost.shrink import QUANT_METHODS, Score, quote_verdict
from sim.model.real_recorded import FIELDS, cell_key, kind, tally
from sim.words import text

if TYPE_CHECKING:  # torch: the recorded view words its table without loading it
    from sim.model.shrink_checks import LongGenerationResult, RecallResult
    from sim.model.shrink_run import ShrinkRow, ShrinkTable


def long_summary(r: LongGenerationResult, lang: str = "en") -> str:
    """How far the long generation kept to the full cache's text."""
    where = (text(lang, "shrink.s.never_departed") if r.first_divergence is None
             else text(lang, "shrink.s.departed_at", at=f"{r.first_divergence:,}"))
    return text(lang, "shrink.s.long_summary", n=f"{r.num_new:,}", same=f"{r.num_agree:,}",
                pct=f"{r.agreement:.0%}", where=where)


def recall_summary(r: RecallResult, lang: str = "en") -> str:
    """An exact quote's or a multi-turn fact's bytes recalled, over its trials."""
    n = len(r.trials)
    check = text(lang, "shrink.check." + r.check.replace(" ", "_").replace("-", "_"))
    return text(lang, "shrink.s.recall_summary_one" if n == 1 else "shrink.s.recall_summary",
                check=check[:1].upper() + check[1:], prefix=f"{r.num_prefix}", most=f"{r.max_bytes}",
                pct=f"{r.fraction:.0%}", n=f"{n}", matched=f"{r.num_matched}")


def row_label(row: ShrinkRow, lang: str = "en") -> str:
    """'H2O (heavy hitters + window) @ 25.0%': the cache as the table and the verdict name it."""
    return recorded_label(row.method, row.budget, lang)


def row_score(row: ShrinkRow, lang: str = "en") -> Score:
    """Its scores, labelled in `lang`."""
    return Score(row.key, row_label(row, lang), row.kind, row.byte_fraction, row.long.agreement, row.quote.fraction,
                 row.turns.fraction)


def table_frame(table: ShrinkTable, lang: str = "en"):
    """One row per cache (the full one first), headed in `lang`."""
    import pandas as pd

    def col(key: str) -> str:
        return text(lang, f"shrink.col.{key}")

    none = text(lang, "shrink.s.none")
    return pd.DataFrame([{
        col("method"): row_label(r, lang), col("bytes"): 100 * r.byte_fraction, col("long"): 100 * r.long.agreement,
        col("divergence"): none if r.long.first_divergence is None else f"{r.long.first_divergence:,}",
        col("quote"): 100 * r.quote.fraction, col("turns"): 100 * r.turns.fraction,
    } for r in (table.full, *table.rows)])


def recorded_label(method: str, budget: float | None, lang: str = "en") -> str:
    name = text(lang, f"shrink.method.{method}")
    return name if budget is None else f"{name} @ {budget:.1%}"


def recorded_score(row: dict, lang: str = "en") -> Score:
    return Score(cell_key(row["method"], row["budget"]), recorded_label(row["method"], row["budget"], lang), kind(row["method"]),
                 row["byte_fraction"], row["long_same"] / row["num_new"], row["quote_prefix"] / row["quote_max"],
                 row["chat_prefix"] / row["chat_max"])


def recorded_rows(rows: list[dict], lang: str = "en") -> list[dict]:
    """One table row per cache, headed in `lang` (numbers as numbers: the table formats them)."""
    def col(key: str) -> str:
        return text(lang, key)

    none = text(lang, "shrink.s.none")
    return [{
        col("shrink.col.method"): recorded_label(r["method"], r["budget"], lang), col("shrink.col.bytes"): 100 * r["byte_fraction"],
        col("shrink.col.long"): 100 * r["long_same"] / r["num_new"],
        col("shrink.col.divergence"): none if r["long_first_divergence"] is None else f"{r['long_first_divergence']:,}",
        col("real.col.quote"): 100 * r["quote_prefix"] / r["quote_max"],
        col("real.col.chat"): 100 * r["chat_prefix"] / r["chat_max"],
        col("real.col.seconds"): r["seconds"],
    } for r in rows]


def recorded_verdict(rows: list[dict], lang: str = "en") -> tuple[str, str]:
    """(headline, sentence): seed 001's claim, discarding hurts an exact quote more than blurring at about equal
    bytes, judged from the table whichever way it comes out; the sentence names every check's outcome."""
    scores = [recorded_score(r, lang) for r in rows]
    full = scores[0]
    if not any(s.kind == "blur" for s in scores) or not any(s.kind == "discard" for s in scores):
        return text(lang, "shrink.v.need_both"), ""
    parts = []
    for check, field in FIELDS.items():
        worse, better, same = tally(scores, field)
        parts.append(text(lang, "real.v.check", check=text(lang, f"real.check.{check}"), worse=f"{worse}",
                          better=f"{better}", same=f"{same}", n=f"{worse + better + same}",
                          full=f"{100 * getattr(full, field):.0f}%"))
    worse, better, same = tally(scores, "quote")
    n = worse + better + same
    kind = quote_verdict(worse, better, same, full.quote)
    head = text(lang, f"real.v.{kind}", full=f"{100 * full.quote:.0f}%", worse=f"{worse}", n=f"{n}")
    return head, text(lang, "real.v.sentence", head=head, parts=text(lang, "shrink.v.sep").join(parts))


def method_label(method: str, lang: str = "en") -> str:
    """A shrinking method's display name in `lang` ("H2O (heavy hitters + window)"): shrink.method.<method>."""
    return text(lang, f"shrink.method.{method}")


def position_convention(policy: str, lang: str = "en") -> str:
    """How an eviction policy treats the positions of the keys it keeps (RoPE), in `lang`."""
    return text(lang, f"shrink.position.{policy}")


def bytes_what(account, lang: str = "en") -> str:
    """The sentence for a method's bytes (sim.model.evict_cache.ByteAccount): what it keeps and every part of its
    bytes."""
    n, k = f"{account.num_tokens:,}", f"{account.kept_tokens:,}"
    if account.method in QUANT_METHODS:
        kept = text(lang, "shrink.s.keeps_all_quantized", n=n)
    elif account.kept_tokens == account.num_tokens:
        kept = text(lang, "shrink.s.keeps_all", n=n)
    else:
        kept = text(lang, "shrink.s.keeps_some", k=k, n=n)
    quantized = account.method in QUANT_METHODS and account.method != "fp8"
    parts = text(lang, "shrink.s.kv_codes" if quantized else "shrink.s.kv_bytes", b=f"{account.kv_bytes:,}")
    if account.extra_parts:
        parts += "".join(text(lang, "shrink.s.extra", b=f"{b:,}", name=text(lang, f"shrink.part.{name}"))
                         for name, b in account.extra_parts)
        parts += f" = {account.total_bytes:,} B"
    return text(lang, "shrink.s.what", label=method_label(account.method, lang), kept=kept, parts=parts,
                share=f"{account.fraction_of_full:.1%}", full=f"{account.full_bytes:,}")
