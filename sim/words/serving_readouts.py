"""The Serving page's chart titles and sentences, worded from the numbers they state: each names the side that
wins the comparison it makes, so it flips when the comparison flips. Plain numbers in, one sentence out (no
simulator here), so each is checked both ways by hand (tests/test_takeaways_serving.py). Each takes `lang`
("en" or "ko") and words its clauses from the catalogs (sim/words/catalog.py); numbers are formatted here, the same in both."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sim.words import text

PAYS_FROM = 1.0  # a speedup that shows as 1.00× or less does not pay
NEAR_BEST = 0.05  # draft lengths within 5% of the best speedup count as "near the top"


def pct(share: float) -> str:
    """A share as a percent with one decimal, never rounded up to a 100.0% it is not."""
    x = 100 * share
    if 99.95 <= x < 100:
        return "99.9%"
    return f"{x:,.1f}%"


def whole_pct(share: float, lang: str = "en") -> str:
    """A share as a whole percent, never rounded up to a 100% it is not."""
    return text(lang, "serving.s.over_99") if 0.995 <= share < 1 else f"{share:.0%}"


def _seconds(x: float) -> str:
    return f"{x:,.2f} s"


def occupancy_takeaway(static_mean: float, cont_mean: float, max_num_seqs: int, lang: str = "en") -> str:
    """The occupancy chart's title: which scheduler keeps more requests producing a token in an average pass."""
    s, c = f"{static_mean:,.0f}", f"{cont_mean:,.0f}"
    cap = f"{max_num_seqs:,}"
    if s == c:
        return text(lang, "serving.s.occ.same", c=c, cap=cap)
    if cont_mean > static_mean:
        return text(lang, "serving.s.occ.continuous", c=c, s=s, cap=cap)
    return text(lang, "serving.s.occ.static", c=c, s=s, cap=cap)


def kv_takeaway(capacity_tokens: int, static_peak: int, cont_peak: int, static_mean: float,
                cont_mean: float, lang: str = "en") -> str:
    """The KV memory chart's title: the KV slots each scheduler claims at its peak (and on average over its
    passes), as shares of the budget; the scheduler that claims more first."""
    cap = f"{capacity_tokens:,}"
    ps, pc = pct(static_peak / capacity_tokens), pct(cont_peak / capacity_tokens)
    ms, mc = pct(static_mean / capacity_tokens), pct(cont_mean / capacity_tokens)
    fields = dict(cap=cap, ps=ps, pc=pc, ms=ms, mc=mc)
    if ps == pc:
        return text(lang, "serving.s.kv.same", **fields)
    if static_peak > cont_peak:
        return text(lang, "serving.s.kv.static", **fields)
    return text(lang, "serving.s.kv.continuous", **fields)


def _by(ratio: float) -> str:
    """How much larger one latency is than another (ratio ≥ 1): a multiple, or a percent below 1.005×."""
    return f"{ratio:,.2f}×" if ratio >= 1.005 else f"{100 * (ratio - 1):.1f}%"


def _against(q: str, a: float, b: float, lang: str) -> str:
    """`a` against `b` at percentile q, as the subject's clause."""
    f = dict(q=q, a=_seconds(a), b=_seconds(b))
    if _seconds(a) == _seconds(b):
        return text(lang, "serving.s.lat.same_at", **f)
    if a < b:
        return text(lang, "serving.s.lat.lower_by", by=_by(b / a), **f) if a > 0 else \
            text(lang, "serving.s.lat.lower", **f)
    return text(lang, "serving.s.lat.higher_by", by=_by(a / b), **f) if b > 0 else \
        text(lang, "serving.s.lat.higher", **f)


def latency_takeaway(static_e2e: tuple[float, float], cont_e2e: tuple[float, float], lang: str = "en") -> str:
    """The latency chart's title: end-to-end latency at p50 and p99, (p50, p99) in seconds for each scheduler.
    The subject is the scheduler with the lower median (the lower p99 when the medians match)."""
    (s50, s99), (c50, c99) = static_e2e, cont_e2e
    if _seconds(s50) == _seconds(c50) and _seconds(s99) == _seconds(c99):
        return text(lang, "serving.s.lat.both", p50=_seconds(c50), p99=_seconds(c99))
    cont_first = c50 < s50 if _seconds(s50) != _seconds(c50) else c99 < s99
    if cont_first:
        who, (a50, a99), (b50, b99) = "continuous", cont_e2e, static_e2e
    else:
        who, (a50, a99), (b50, b99) = "static", static_e2e, cont_e2e
    return text(lang, f"serving.s.lat.{who}", p50=_against("p50", a50, b50, lang),
                p99=_against("p99", a99, b99, lang))


def _growth(batches: Sequence[int], tok_s: Sequence[float], lang: str) -> str:
    """Where a throughput curve over the max batch stops growing: the first batch that reaches its best."""
    best = max(tok_s)
    i = next(j for j, v in enumerate(tok_s) if v >= best * (1 - 1e-9))
    at = dict(b=f"{batches[i]:,}", v=f"{tok_s[i]:,.0f}")
    if len(tok_s) == 1:
        return text(lang, "serving.s.grow.one", v=f"{tok_s[0]:,.0f}", b=f"{batches[0]:,}")
    if i == len(tok_s) - 1:
        return text(lang, "serving.s.grow.keeps", **at)
    if all(v >= best * (1 - 1e-9) for v in tok_s[i:]):
        return text(lang, "serving.s.grow.stops", **at)
    return text(lang, "serving.s.grow.peaks", **at)


def sweep_takeaway(batches: Sequence[int], static_tok_s: Sequence[float], cont_tok_s: Sequence[float],
                   lang: str = "en") -> str:
    """The batch sweep's title: where each scheduler's throughput stops growing, and which one leads."""
    ratios = [c / s for s, c in zip(static_tok_s, cont_tok_s, strict=True)]
    n, ahead = len(ratios), sum(c > s for s, c in zip(static_tok_s, cont_tok_s, strict=True))
    behind = sum(c < s for s, c in zip(static_tok_s, cont_tok_s, strict=True))
    if ahead == n:
        lead = text(lang, "serving.s.lead.continuous", lo=f"{min(ratios):,.2f}", hi=f"{max(ratios):,.2f}")
    elif behind == n:
        lead = text(lang, "serving.s.lead.static", lo=f"{1 / max(ratios):,.2f}", hi=f"{1 / min(ratios):,.2f}")
    elif ahead == 0 and behind == 0:
        lead = text(lang, "serving.s.lead.equal")
    else:
        lead = text(lang, "serving.s.lead.split", ahead=f"{ahead}", n=f"{n}", behind=f"{behind}")
    return text(lang, "serving.s.sweep", cont=_growth(batches, cont_tok_s, lang),
                static=_growth(batches, static_tok_s, lang), lead=lead)


def _pays(speedup: float) -> bool:
    return round(speedup, 2) > PAYS_FROM


def spec_batch_takeaway(label: str, alpha: float, k: int, batches: Sequence[int], speedups: Sequence[float],
                        lang: str = "en") -> str:
    """The speculation-in-a-batch chart's title: up to which batch speculative decoding pays (speedup above
    1.00×), from which it stops, or that it pays at every batch shown or at none."""
    head = text(lang, "serving.s.sb.head", label=label, a=f"{alpha:g}", k=f"{k}")
    pays = [_pays(s) for s in speedups]
    n = len(pays)
    if all(pays):
        return text(lang, "serving.s.sb.every", head=head, s0=f"{speedups[0]:,.2f}", b0=f"{batches[0]:,}",
                    s1=f"{speedups[-1]:,.2f}", b1=f"{batches[-1]:,}")
    best = max(range(n), key=lambda i: speedups[i])
    if not any(pays):
        return text(lang, "serving.s.sb.none", head=head, s=f"{speedups[best]:,.2f}", b=f"{batches[best]:,}")
    j = pays.index(False)
    if not any(pays[j:]):  # pays up to a batch, then never again
        return text(lang, "serving.s.sb.upto", head=head, b0=f"{batches[j - 1]:,}", s0=f"{speedups[j - 1]:,.2f}",
                    b1=f"{batches[j]:,}", s1=f"{speedups[j]:,.2f}")
    return text(lang, "serving.s.sb.some", head=head, m=f"{sum(pays)}", n=f"{n}", s=f"{speedups[best]:,.2f}",
                b=f"{batches[best]:,}")


def spec_curves_takeaway(alpha: float, c: float, k: int, speedup: float, best_k: int, best_speedup: float,
                         lang: str = "en") -> str:
    """The speculative curves' title: the best draft length at the chosen α and c, against the chosen k, or
    that no k pays."""
    head = text(lang, "serving.s.sc.head", a=f"{alpha:g}", c=f"{c:.3f}")
    if not _pays(best_speedup):
        return text(lang, "serving.s.sc.none", head=head, best_k=f"{best_k}", best=f"{best_speedup:,.2f}")
    if k == best_k:
        return text(lang, "serving.s.sc.chosen_best", head=head, k=f"{k}", s=f"{speedup:,.2f}")
    chosen = text(lang, "serving.s.sc.chosen", k=f"{k}", s=f"{speedup:,.2f}")
    if not _pays(speedup):
        chosen += text(lang, "serving.s.sc.slower" if round(speedup, 2) < PAYS_FROM else "serving.s.sc.no_faster")
    return text(lang, "serving.s.sc.best", head=head, best_k=f"{best_k}", best=f"{best_speedup:,.2f}",
                chosen=chosen)


def monte_carlo_sentence(alpha: float, num_within: int, num: int, lang: str = "en") -> str:
    """How many Monte Carlo means land within 2 standard errors of the formula (about 1 in 20 falls outside
    by chance alone)."""
    if num_within == num:
        return text(lang, "serving.s.mc.all", a=f"{alpha:g}", n=f"{num}")
    return text(lang, "serving.s.mc.some", a=f"{alpha:g}", m=f"{num_within}", n=f"{num}")


def near_best_sentence(alpha: float, ks_near: Sequence[int], best_k: int, lang: str = "en") -> str:
    """How flat the speedup curve is around its best draft length: the k within 5% of the best."""
    near = f"{NEAR_BEST:.0%}"
    if len(ks_near) <= 1:
        return text(lang, "serving.s.near.sharp", a=f"{alpha:g}", k=f"{best_k}", near=near)
    return text(lang, "serving.s.near.flat", a=f"{alpha:g}", lo=f"{min(ks_near)}", hi=f"{max(ks_near)}", near=near,
                k=f"{best_k}")


def batch_gain_sentence(alpha: float, k: int, batches: Sequence[int], speedups: Sequence[float],
                        lang: str = "en") -> str:
    """How speculation's gain changes from the smallest batch to the largest (the batch chart)."""
    first, last = speedups[0], speedups[-1]
    span = text(lang, "serving.s.gain.span", s0=f"{first:,.2f}", b0=f"{batches[0]:,}", s1=f"{last:,.2f}",
                b1=f"{batches[-1]:,}")
    if f"{first:,.2f}" == f"{last:,.2f}" or math.isclose(first, last):
        how = "holds"
    elif last < first:
        how = "fades" if _pays(last) else "fades_loss"
    else:
        how = "grows"
    return text(lang, "serving.s.gain", a=f"{alpha:g}", k=f"{k}", how=text(lang, f"serving.s.gain.{how}"),
                span=span)


def batching_trend_sentence(batches: Sequence[int], ratios: Sequence[float], lang: str = "en") -> str:
    """Continuous over static throughput from the smallest max batch of the sweep to the largest."""
    first, last = ratios[0], ratios[-1]
    if last == first:
        return text(lang, "serving.s.trend.stays", r=f"{first:,.2f}")
    return text(lang, "serving.s.trend.grows" if last > first else "serving.s.trend.shrinks", r0=f"{first:,.2f}",
                b0=f"{batches[0]:,}", r1=f"{last:,.2f}", b1=f"{batches[-1]:,}")
