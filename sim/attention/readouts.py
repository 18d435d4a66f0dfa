"""Moved to sim/words/attention.py (the words layer). This name stays only for app/controls/attention_kernels.py,
which another change is reworking; it should import sim.words.attention, and then this file goes."""

from sim.words.attention import lengths_up_to, one_length_caption, stat_word

__all__ = ["lengths_up_to", "one_length_caption", "stat_word"]
