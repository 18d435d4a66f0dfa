"""The Serving page's chart titles and sentences, worded from the numbers they state: each names the side that
wins the comparison it makes, so it flips when the comparison flips. Plain numbers in, one sentence out (no
simulator here), so each is checked both ways by hand (tests/test_takeaways_serving.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence

PAYS_FROM = 1.0  # a speedup that shows as 1.00× or less does not pay
NEAR_BEST = 0.05  # draft lengths within 5% of the best speedup count as "near the top"


def pct(share: float) -> str:
    """A share as a percent with one decimal, never rounded up to a 100.0% it is not."""
    x = 100 * share
    if 99.95 <= x < 100:
        return "99.9%"
    return f"{x:,.1f}%"


def whole_pct(share: float) -> str:
    """A share as a whole percent, never rounded up to a 100% it is not."""
    return "over 99%" if 0.995 <= share < 1 else f"{share:.0%}"


def _seconds(x: float) -> str:
    return f"{x:,.2f} s"


def occupancy_takeaway(static_mean: float, cont_mean: float, max_batch: int) -> str:
    """The occupancy chart's title: which scheduler keeps more requests producing a token in an average pass."""
    s, c = f"{static_mean:,.0f}", f"{cont_mean:,.0f}"
    cap = f"(max batch {max_batch:,})"
    if s == c:
        return f"Both schedulers keep {c} requests doing useful work in an average pass {cap}"
    if cont_mean > static_mean:
        return f"Continuous batching keeps {c} requests doing useful work in an average pass vs {s} static {cap}"
    return f"Static batching keeps {s} requests doing useful work in an average pass vs {c} continuous {cap}"


def kv_takeaway(capacity_tokens: int, static_peak: int, cont_peak: int, static_mean: float,
                cont_mean: float) -> str:
    """The KV memory chart's title: the KV slots each scheduler claims at its peak (and on average over its
    passes), as shares of the budget; the scheduler that claims more first."""
    cap = f"{capacity_tokens:,} KV token slots"
    ps, pc = pct(static_peak / capacity_tokens), pct(cont_peak / capacity_tokens)
    ms, mc = pct(static_mean / capacity_tokens), pct(cont_mean / capacity_tokens)
    if ps == pc:
        return f"Both schedulers claim up to {pc} of the {cap} (mean {ms} static, {mc} continuous)"
    if static_peak > cont_peak:
        return f"Static batching claims up to {ps} of the {cap}, continuous only {pc} (mean {ms} vs {mc})"
    return f"Continuous batching claims up to {pc} of the {cap}, static only {ps} (mean {mc} vs {ms})"


def _by(ratio: float) -> str:
    """How much larger one latency is than another (ratio ≥ 1): a multiple, or a percent below 1.005×."""
    return f"{ratio:,.2f}×" if ratio >= 1.005 else f"{100 * (ratio - 1):.1f}%"


def _against(q: str, a: float, b: float) -> str:
    """`a` against `b` at percentile q, as the subject's clause."""
    both = f"({_seconds(a)} vs {_seconds(b)})"
    if _seconds(a) == _seconds(b):
        return f"the same at {q} ({_seconds(a)})"
    if a < b:
        return f"{_by(b / a)} lower at {q} {both}" if a > 0 else f"lower at {q} {both}"
    return f"{_by(a / b)} higher at {q} {both}" if b > 0 else f"higher at {q} {both}"


def latency_takeaway(static_e2e: tuple[float, float], cont_e2e: tuple[float, float]) -> str:
    """The latency chart's title: end-to-end latency at p50 and p99, (p50, p99) in seconds for each scheduler.
    The subject is the scheduler with the lower median (the lower p99 when the medians match)."""
    (s50, s99), (c50, c99) = static_e2e, cont_e2e
    if _seconds(s50) == _seconds(c50) and _seconds(s99) == _seconds(c99):
        return f"Both schedulers' end-to-end latency is {_seconds(c50)} at p50 and {_seconds(c99)} at p99"
    cont_first = c50 < s50 if _seconds(s50) != _seconds(c50) else c99 < s99
    if cont_first:
        who, (a50, a99), (b50, b99) = "Continuous batching", cont_e2e, static_e2e
    else:
        who, (a50, a99), (b50, b99) = "Static batching", static_e2e, cont_e2e
    return f"{who}'s end-to-end latency is {_against('p50', a50, b50)} and {_against('p99', a99, b99)}"


def _growth(batches: Sequence[int], tok_s: Sequence[float]) -> str:
    """Where a throughput curve over the max batch stops growing: the first batch that reaches its best."""
    best = max(tok_s)
    i = next(j for j, v in enumerate(tok_s) if v >= best * (1 - 1e-9))
    at = f"max batch {batches[i]:,} ({tok_s[i]:,.0f} tokens/s)"
    if len(tok_s) == 1:
        return f"is {tok_s[0]:,.0f} tokens/s at max batch {batches[0]:,}"
    if i == len(tok_s) - 1:
        return f"keeps growing up to {at}"
    if all(v >= best * (1 - 1e-9) for v in tok_s[i:]):
        return f"stops growing at {at}"
    return f"peaks at {at}"


def sweep_takeaway(batches: Sequence[int], static_tok_s: Sequence[float], cont_tok_s: Sequence[float]) -> str:
    """The batch sweep's title: where each scheduler's throughput stops growing, and which one leads."""
    ratios = [c / s for s, c in zip(static_tok_s, cont_tok_s, strict=True)]
    n, ahead = len(ratios), sum(c > s for s, c in zip(static_tok_s, cont_tok_s, strict=True))
    behind = sum(c < s for s, c in zip(static_tok_s, cont_tok_s, strict=True))
    if ahead == n:
        lead = f"continuous leads at every batch, by {min(ratios):,.2f}× to {max(ratios):,.2f}×"
    elif behind == n:
        lead = f"static leads at every batch, by {1 / max(ratios):,.2f}× to {1 / min(ratios):,.2f}×"
    elif ahead == 0 and behind == 0:
        lead = "the two are equal at every batch"
    else:
        lead = f"continuous leads at {ahead} of {n} batch sizes, static at {behind}"
    return (f"Continuous batching's throughput {_growth(batches, cont_tok_s)}, static batching's "
            f"{_growth(batches, static_tok_s)}; {lead}")


def _pays(speedup: float) -> bool:
    return round(speedup, 2) > PAYS_FROM


def spec_batch_takeaway(label: str, alpha: float, k: int, batches: Sequence[int], speedups: Sequence[float]) -> str:
    """The speculation-in-a-batch chart's title: up to which batch speculative decoding pays (speedup above
    1.00×), from which it stops, or that it pays at every batch shown or at none."""
    head = f"{label} (α = {alpha:g}, k = {k}): speculation"
    pays = [_pays(s) for s in speedups]
    n = len(pays)
    if all(pays):
        return (f"{head} pays at every batch shown, {speedups[0]:,.2f}× at batch {batches[0]:,} and "
                f"{speedups[-1]:,.2f}× at batch {batches[-1]:,}")
    best = max(range(n), key=lambda i: speedups[i])
    if not any(pays):
        return f"{head} pays at no batch shown: at best {speedups[best]:,.2f}× (batch {batches[best]:,})"
    j = pays.index(False)
    if not any(pays[j:]):  # pays up to a batch, then never again
        return (f"{head} pays up to batch {batches[j - 1]:,} ({speedups[j - 1]:,.2f}×) and stops paying from batch "
                f"{batches[j]:,} ({speedups[j]:,.2f}×)")
    return (f"{head} pays at {sum(pays)} of {n} batch sizes shown, at best {speedups[best]:,.2f}× "
            f"(batch {batches[best]:,})")


def spec_curves_takeaway(alpha: float, c: float, k: int, speedup: float, best_k: int, best_speedup: float) -> str:
    """The speculative curves' title: the best draft length at the chosen α and c, against the chosen k, or
    that no k pays."""
    head = f"At α = {alpha:g} and c = {c:.3f},"
    if not _pays(best_speedup):
        return (f"{head} speculation pays at no k: even the best, k = {best_k}, runs at {best_speedup:,.2f}× the "
                "speed of plain decoding")
    if k == best_k:
        return f"{head} the chosen k = {k} is the best draft length: {speedup:,.2f}× faster than plain decoding"
    chosen = f"the chosen k = {k} gives {speedup:,.2f}×"
    if not _pays(speedup):
        chosen += ", slower than plain decoding" if round(speedup, 2) < PAYS_FROM else ", no faster than plain decoding"
    return f"{head} the best draft length is k = {best_k}, {best_speedup:,.2f}× faster than plain decoding; {chosen}"


def monte_carlo_sentence(alpha: float, num_within: int, num: int) -> str:
    """How many Monte Carlo means land within 2 standard errors of the formula (about 1 in 20 falls outside
    by chance alone)."""
    if num_within == num:
        return f"Crosses: the Monte Carlo means at α = {alpha:g}, all {num} within 2 standard errors of the formula."
    return (f"Crosses: the Monte Carlo means at α = {alpha:g}, {num_within} of {num} within 2 standard errors of the "
            "formula (about 1 in 20 falls outside by chance alone).")


def near_best_sentence(alpha: float, ks_near: Sequence[int], best_k: int) -> str:
    """How flat the speedup curve is around its best draft length: the k within 5% of the best."""
    if len(ks_near) <= 1:
        return f"The curve peaks sharply: at α = {alpha:g} only k = {best_k} comes within {NEAR_BEST:.0%} of the best."
    return (f"The curve is flat near its top: at α = {alpha:g} every k from {min(ks_near)} to {max(ks_near)} is "
            f"within {NEAR_BEST:.0%} of the best (k = {best_k}).")


def batch_gain_sentence(alpha: float, k: int, batches: Sequence[int], speedups: Sequence[float]) -> str:
    """How speculation's gain changes from the smallest batch to the largest (the batch chart)."""
    first, last = speedups[0], speedups[-1]
    span = f"{first:,.2f}× at batch {batches[0]:,}, {last:,.2f}× at batch {batches[-1]:,}"
    if f"{first:,.2f}" == f"{last:,.2f}" or math.isclose(first, last):
        how = "holds as the batch grows"
    elif last < first:
        how = "fades as the batch grows" if _pays(last) else "fades as the batch grows, to a loss"
    else:
        how = "grows with the batch"
    return f"At α = {alpha:g}, k = {k} the gain {how}: {span} (chart above)."


def batching_trend_sentence(batches: Sequence[int], ratios: Sequence[float]) -> str:
    """Continuous over static throughput from the smallest max batch of the sweep to the largest."""
    first, last = ratios[0], ratios[-1]
    how = "grows" if last > first else "shrinks" if last < first else "stays"
    return (f"In the sweep here it {how} from {first:,.2f}× at max batch {batches[0]:,} to {last:,.2f}× at "
            f"{batches[-1]:,}." if how != "stays" else f"In the sweep here it stays at {first:,.2f}×.")
