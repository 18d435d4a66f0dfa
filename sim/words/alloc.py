"""The allocators' results in words (sim/alloc): request labels and per-request tables, worded from the message
values the workloads give their requests (Msg("prefix.label.turn", a=3, b=0)), in either language."""

from __future__ import annotations

from sim.words import say


def requests_frame(result, lang: str = "en"):
    """PrefixCacheResult.to_frame with each request's label worded in `lang` (the CSV the page offers: English)."""
    frame = result.to_frame()
    frame["label"] = [say(lang, x) for x in frame["label"]]
    return frame
