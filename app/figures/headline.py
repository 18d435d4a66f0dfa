"""A chart title that states the chart's takeaway in a sentence: plotly never wraps a title, so it is
wrapped here into lines that fit the chart's width, and the top margin grows to hold them."""

from __future__ import annotations

import re
import textwrap
import unicodedata

import plotly.graph_objects as go

LINE_PX = 28  # one title line at presenter mode's 21 px type (plotly spaces lines 1.3 em apart)
PAD_PX = 10  # above the first line
GAP_PX = 16  # between the last line and whatever sits at the plot's top
# How many characters a title line may hold, set by the narrowest view a class meets: a 1024×768 projector with
# the sidebar open, where a chart across the page is 564 px wide (556 px for the title) and the normal 17-px bold
# title type takes up to 8.4 px a Latin character (measured in Chromium on every page). Presenter mode's 21-px
# type has more room than that: the sidebar folds away (a chart across the page: 1,090 px at 1280, ~900 at 1024).
TITLE_CHAR_PX = 8.4
PAGE_TITLE_PX = 556
COLUMN_GAP_PX = 12  # what a chart in a column loses to the gap beside it


def column_chars(share: float) -> int:
    """Characters a title line may hold on a chart that takes `share` of the page's width (st.columns weights)."""
    return int((PAGE_TITLE_PX * share - (COLUMN_GAP_PX if share < 1 else 0)) / TITLE_CHAR_PX)


FULL_WIDTH_CHARS = column_chars(1)  # 66: a chart across the page
HALF_WIDTH_CHARS = column_chars(1 / 2)  # 31: a chart in one of two columns


def _width(word: str) -> int:
    """A word's width in Latin characters: a Hangul (or other East Asian wide) glyph is about two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in word)


# A number and its unit stay on one line ("170 MFLOP", "4 KiB", "0.43 ms", "3.9×" needs nothing): the space between
# a word ending in a digit and a unit word is held while lines are made, and given back after.
_NUMBER_END = re.compile(r"\d[%×]?$")
# a unit word, perhaps with punctuation or a Korean particle after it ("KiB씩")
_UNIT = re.compile(r"^(?:[kKMGTPE]i?B|B|[kMGTPE]?FLOPs?(?:/s|/B)?|FLOP/(?:s|B)|[mµn]?s|[GT]B/s|tokens?)"
                   r"(?:[,.;:)]|[\uac00-\ud7a3])*$")
_HELD = "\x00"


def _hold_units(text: str) -> str:
    words = text.split(" ")
    out = words[:1]
    for word in words[1:]:
        if out[-1] and _NUMBER_END.search(out[-1]) and _UNIT.match(word):
            out[-1] += _HELD + word
        else:
            out.append(word)
    return " ".join(out)


def _wrap(text: str, chars_per_line: int) -> list[str]:
    """textwrap's lines for Latin text; for text with wide glyphs (Korean), words packed by their drawn width.
    A number is never parted from its unit."""
    text = _hold_units(text)
    if _width(text) == len(text):
        lines = textwrap.wrap(text, chars_per_line, break_long_words=False, break_on_hyphens=False)
        return [line.replace(_HELD, " ") for line in lines]
    lines: list[str] = []
    for word in filter(None, text.split(" ")):  # a no-break space (U+00A0) keeps a formula on one line
        if lines and _width(lines[-1]) + 1 + _width(word) <= chars_per_line:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return [line.replace(_HELD, " ") for line in lines]


def set_headline(fig: go.Figure, text: str, chars_per_line: int, below_px: int = 0) -> go.Figure:
    """Title `text` (already escaped if it holds user text), wrapped at chars_per_line and anchored to the
    figure's top. The top margin becomes what the lines need if that is more than the builder's own, and the
    figure grows by as much, so the plot keeps its height. below_px: room the builder keeps between the title
    and the plot (annotations, subplot titles)."""
    lines = _wrap(text, chars_per_line) or [""]
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 100  # plotly's default
    new_top = max(top, PAD_PX + LINE_PX * len(lines) + GAP_PX + below_px)
    height = (fig.layout.height or 450) + new_top - top  # 450: plotly's default height
    # y=1 with a padding in px, not a fraction of the height: presenter mode scales a chart's height (and caps
    # it), which moved a fractional y up to the figure's edge and cut the first line off
    fig.update_layout(title=dict(text="<br>".join(lines), y=1, yref="container", yanchor="top",
                                 pad=dict(t=PAD_PX + 20)), margin=dict(t=new_top), height=height)
    return fig
