"""Moved to sim/words/paging.py (the words layer). This name stays only for sim/model/paged_cache.py, which another
change is reworking; it should import sim.words.paging, and then this file goes."""

from sim.words.paging import sharing_takeaway

__all__ = ["sharing_takeaway"]
