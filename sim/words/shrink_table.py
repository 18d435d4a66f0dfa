"""The Shrink the cache page's words (moved here from sim/cost/shrink.py): the lecture's table, the offload
sentence, the blur-or-discard verdict and what each checkpoint can copy, all worded from sim.cost.shrink's
numbers."""

from __future__ import annotations

from sim.cost.memory import fmt_bytes, fmt_decimal
from sim.cost.shrink import METHODS, CopyAbility, Link, Method, OffloadCost, Score, quote_verdict
from sim.words import text


def link_name(link: Link, lang: str = "en") -> str:
    """A link's name in `lang`: its own name (English, or an identifier the same in both) unless it has words."""
    return text(lang, link.name_key) if link.name_key and lang != "en" else link.name


def method_en(m: Method) -> tuple[str, str, str]:
    """A lecture method's name, what it shrinks and whether it stacks with quantization, in English."""
    return tuple(text("en", f"shrink.table.{m.key}.{part}") for part in ("name", "shrinks", "stacks"))


def offload_sentence(cost: OffloadCost, lang: str = "en") -> str:
    """What bringing the offloaded part back costs per decode step, against reading it from HBM."""
    ratio = cost.transfer_s / cost.hbm_s if cost.hbm_s else 1.0
    fields = dict(bytes=fmt_bytes(cost.offloaded_bytes), link=link_name(cost.link, lang),
                  link_bw=f"{fmt_decimal(cost.link.bytes_per_s)}/s", ms=f"{cost.transfer_s * 1e3:,.1f}",
                  hbm_ms=f"{cost.hbm_s * 1e3:,.2f}", hbm_bw=f"{fmt_decimal(cost.hbm_bytes_per_s)}/s")
    if ratio > 1:
        return text(lang, "shrink.s.offload_slower", x=f"{ratio:,.1f}", **fields)
    return text(lang, "shrink.s.offload_free", **fields)


def method_rows(lang: str = "en") -> list[dict[str, str]]:
    """The lecture's table in `lang`, one dict per method (column title -> cell): the method's name and cells in
    the page language, the other language's words beside them (the seed's Korean in English, the English
    translation in Korean). The page adds where the lab shows each."""
    def col(key: str) -> str:
        return text(lang, f"shrink.col.t_{key}")

    out = []
    for m in METHODS:
        name_en, shrinks_en, stacks_en = method_en(m)
        if lang == "en":
            name, shrinks, stacks, other = name_en, shrinks_en, stacks_en, f"{m.shrinks_ko} / {m.stacks_ko}"
        else:
            name, shrinks, stacks, other = m.name_ko, m.shrinks_ko, m.stacks_ko, f"{shrinks_en} / {stacks_en}"
        out.append({col("method"): name, col("shrinks"): shrinks, col("stacks"): stacks, col("other"): other})
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _pct1(x: float) -> str:
    return f"{100 * x:.1f}%"


def verdict(scores: list[Score], full_quote: float, lang: str = "en") -> str:
    """Does discarding hurt the exact quote more than blurring at equal bytes? Each quantized cache is set
    against the discarding cache whose bytes are nearest its own (the larger on a tie), best policy at that
    budget; the sentence gives both byte shares and says what the model showed, either way (the scores'
    labels in `lang`). The headline is the text before the first colon."""
    blur = [s for s in scores if s.kind == "blur"]
    discard = [s for s in scores if s.kind == "discard"]
    if not blur or not discard:
        return text(lang, "shrink.v.need_both")
    parts, worse, better = [], 0, 0
    for b in sorted(blur, key=lambda s: s.byte_fraction):
        nearest = min(discard, key=lambda d: (abs(d.byte_fraction - b.byte_fraction), -d.byte_fraction))
        peers = [d for d in discard if d.byte_fraction == nearest.byte_fraction]
        best = max(peers, key=lambda d: d.quote)
        worse += best.quote < b.quote
        better += best.quote > b.quote
        parts.append(text(lang, "shrink.v.pair", blur=b.label, blur_bytes=_pct(b.byte_fraction), blur_quote=_pct1(b.quote),
                          best=best.label, best_bytes=_pct(best.byte_fraction), best_quote=_pct1(best.quote)))
    n, same = len(parts), len(parts) - worse - better
    tally = text(lang, "shrink.v.tally", worse=f"{worse}", better=f"{better}", same=f"{same}", n=f"{n}")
    kind = quote_verdict(worse, better, same, full_quote)
    head = text(lang, f"shrink.v.{kind}", full=_pct1(full_quote), tally=tally)
    return text(lang, "shrink.v.sentence", head=head, full=_pct1(full_quote), parts=text(lang, "shrink.v.sep").join(parts))


def _of(n: int, most: int, lang: str) -> str:
    if most:
        return text(lang, "shrink.s.of_pct", n=f"{n}", most=f"{most}", pct=f"{n / most:.0%}")
    return text(lang, "shrink.s.of", n=f"{n}", most="0")


def copy_ability_sentence(abilities: list[CopyAbility], lang: str = "en") -> str:
    """What each model reproduces with the full cache, and which one the checks can use."""
    if not abilities:
        return text(lang, "shrink.s.no_scores")
    each = text(lang, "shrink.v.sep").join(
        text(lang, "shrink.s.ability", model=a.label, quote=_of(a.quote, a.quote_max, lang),
             fact=_of(a.fact, a.fact_max, lang)) for a in abilities)
    able = [a.label for a in abilities if a.copies]
    unable = [a.label for a in abilities if not a.copies]
    if not able:
        tail = text(lang, "shrink.s.none_copies")
    elif not unable:
        tail = text(lang, "shrink.s.all_copy")
    else:
        tail = text(lang, "shrink.s.some_copy", able=text(lang, "list.and").join(able),
                    unable=text(lang, "list.and").join(unable))
    return text(lang, "shrink.s.abilities", each=each, tail=tail)
