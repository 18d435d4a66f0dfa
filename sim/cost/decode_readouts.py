"""Moved to sim/words/decode.py (the words layer). This name stays only for sim/model/generate.py, which another
change is reworking; it should import sim.words.decode, and then this file goes."""

from sim.words.decode import counted

__all__ = ["counted"]
