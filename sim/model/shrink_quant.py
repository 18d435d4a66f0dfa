"""Shrink the cache's quantized caches against each other, worded from the scores the page shows: which kept the
most of the long generation and which the least, each cache's three checks, and, when FP8 comes last, why (the
same reason the KV quantization page measures: e4m3's 3 mantissa bits on every token, where the KIVI caches keep
their newest tokens in full precision). Message values only (sim.msg); no torch, so the recorded real-model grid
is worded without loading a model.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.cost.shrink import Score
from sim.msg import Items, Msg

# What the page's quantized caches are (sim.model.evict_cache.quant_scheme; a test ties these to it): the KIVI
# caches keep their last KIVI_RESIDUAL tokens in full precision, FP8 e4m3 keeps FP8_MANTISSA_BITS per value.
KIVI_RESIDUAL = 128
FP8_MANTISSA_BITS = 3
FP8_METHOD = "fp8"


def blur_ranking(scores: Sequence[Score]) -> tuple[Msg, ...]:
    """() when fewer than two quantized caches were scored; else the ranking by the long generation (every cache's
    three checks listed, most kept first) and, when FP8 is among the last and something kept more, why."""
    blur = sorted((s for s in scores if s.kind == "blur"), key=lambda s: -s.long_agreement)
    if len(blur) < 2:
        return ()
    each = Items(Msg("shrinkq.each", label=s.label, long=s.long_agreement, quote=s.quote, turns=s.turns,
                     bytes=s.byte_fraction) for s in blur)
    hi, lo = blur[0].long_agreement, blur[-1].long_agreement
    if hi == lo:
        return (Msg("shrinkq.same", b=hi, each=each),)
    best = Items(s.label for s in blur if s.long_agreement == hi)
    worst = [s for s in blur if s.long_agreement == lo]
    out = [Msg("shrinkq.ranking", best=best, b=hi, worst=Items(s.label for s in worst), w=lo, each=each)]
    if any(s.method == FP8_METHOD for s in worst):
        out.append(Msg("shrinkq.why_fp8", mant=FP8_MANTISSA_BITS, step=2.0 ** -(FP8_MANTISSA_BITS + 1),
                       R=KIVI_RESIDUAL))
    return tuple(out)
