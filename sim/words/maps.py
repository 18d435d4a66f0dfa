"""The cache-validity check's words (moved here from sim/attention/maps.py): the append chart's title and caption,
for the Attention masks page and the Lesson. Torch-free: CacheValidity is only a type here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.readout import small_change
from sim.words import text

if TYPE_CHECKING:
    from sim.attention.maps import CacheValidity


def append_takeaway(with_mask: CacheValidity, without: CacheValidity, lang: str = "en") -> str:
    """The append chart's title: how far appending one token moves the earlier positions' logits with the
    causal mask against without it, worded by which moves them more (in `lang`, from the catalogs)."""
    c, f = max(with_mask.row_diffs), max(without.row_diffs)
    n, moved = without.num_tokens, sum(d > 0 for d in without.row_diffs)
    causal = (text(lang, "masks.s.app.causal_same") if c == 0 else
              text(lang, "masks.s.app.causal_moved", c=small_change(c)))
    if c < f:
        return text(lang, "masks.s.app.less", causal=causal, moved=f"{moved}", n=f"{n}", f=small_change(f))
    if c > f:
        return text(lang, "masks.s.app.more", c=small_change(c), f=small_change(f))
    if c == 0:
        return text(lang, "masks.s.app.both_same")
    return text(lang, "masks.s.app.both_moved", c=small_change(c))


def append_caption(with_mask: CacheValidity, without: CacheValidity, lang: str = "en") -> str:
    """The append chart's caption: how far every layer's K and V at the earlier positions move with the causal
    mask against without it, and so whether the cached K/V stay valid."""
    n = with_mask.num_tokens
    c, f = max(with_mask.max_diff_k, with_mask.max_diff_v), max(without.max_diff_k, without.max_diff_v)
    runs = text(lang, "masks.s.kv.runs", n=f"{n:,}", n1=f"{n + 1:,}")
    moved = text(lang, "masks.s.kv.same") if c == 0 else text(lang, "masks.s.kv.moved", c=small_change(c))
    if c < f:
        return text(lang, "masks.s.kv.less", runs=runs, last=f"{n - 1:,}", moved=moved, f=small_change(f))
    if c > f:
        return text(lang, "masks.s.kv.more", runs=runs, last=f"{n - 1:,}", c=small_change(c), f=small_change(f))
    return text(lang, "masks.s.kv.both", runs=runs, last=f"{n - 1:,}", moved=moved)
