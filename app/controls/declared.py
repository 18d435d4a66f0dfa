"""A control declared once: its URL name, default, range (or choices), step and label keys. The same declaration
checks the link's value (app/urlstate.py: a bad value falls back to the default, named in the page's one warning)
and draws the widget, so the URL's range and the widget's range cannot drift apart.

    BATCH = Number("batch", 16, 1, MAX_BATCH, step=1, label="kvmem.ctl.batch", url_label="kvmem.url.batch")
    url.add(BATCH, ...)              # before url.show_problems(): reads ?batch=, seeds the widget key
    BATCH.draw(c[3], help=...)       # the widget, keyed by the URL name, over the declared range

`label` is the widget's catalog key, `url_label` the catalog key that names the value in the link's warning.
Choices may be a callable (the presets on disk, read when the page runs); everything else the widget needs that is
not part of the value (help, format_func, disabled, horizontal) is passed to `draw`. A widget that narrows its range
to the data on show (a slider over the prompt's rows) is declared `narrows=True` and passes `lo=`/`hi=` inside the
declared range to `draw`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import streamlit as st

from app.i18n import t

Options = Sequence[Any] | Callable[[], Sequence[Any]]


def _options(options: Options) -> list[Any]:
    return list(options() if callable(options) else options)


@dataclass(frozen=True)
class _Control:
    key: str  # the URL name and the widget's session key
    _: KW_ONLY
    label: str = ""  # catalog key of the widget's label ("": the value has no widget of its own)
    url_label: str = ""  # catalog key naming the value in the link's warning
    verbatim: bool = False  # the label is a symbol shown as written (`k`), not a catalog key
    other_labels: tuple[str, ...] = ()  # catalog keys of the same value drawn elsewhere under another label
    fielded: bool = False  # the label's message takes fields the page knows (passed to draw as label_fields)

    def label_text(self, label: str | None = None, **fields: object) -> str:
        """The widget's label in the page language (`label`: one of other_labels, for a second place it is drawn)."""
        assert label is None or label in self.other_labels, (self.key, label)
        assert not fields or self.fielded, self.key
        if label is not None:
            return t(label, **fields)
        return self.label if self.verbatim else t(self.label, **fields)

    def _label(self, kw: dict[str, Any]) -> str:
        """The label for `draw`, taking its `label=` (another label key) and `label_fields=` out of the widget's kwargs."""
        return self.label_text(kw.pop("label", None), **kw.pop("label_fields", {}))

    def label_texts(self) -> set[str]:
        """Every label the value is drawn under."""
        return {self.label_text(), *(t(k) for k in self.other_labels)}

    def register(self, url) -> Any:
        raise NotImplementedError

    def value(self) -> Any:
        """The value this run (from the link, the page's memory or the widget)."""
        return st.session_state[self.key]


@dataclass(frozen=True)
class _Range(_Control):
    default: int | float = 0
    lo: int | float = 0
    hi: int | float = 0
    step: int | float | None = None  # None: Streamlit's own (1, or 0.01 for floats)
    narrows: bool = False  # the widget shows a sub-range chosen from the data (passed to draw)

    def __post_init__(self) -> None:
        kinds = {type(v) for v in (self.default, self.lo, self.hi)}
        assert len(kinds) == 1 and kinds <= {int, float}, (self.key, kinds)
        assert self.lo <= self.default <= self.hi, (self.key, self.lo, self.default, self.hi)

    @property
    def is_float(self) -> bool:
        return isinstance(self.default, float)

    def register(self, url) -> int | float:
        read = url.float if self.is_float else url.int
        return read(self.key, self.default, self.lo, self.hi, label=t(self.url_label))

    def bounds(self, lo: int | float | None, hi: int | float | None) -> tuple[int | float, int | float]:
        lo = self.lo if lo is None else lo
        hi = self.hi if hi is None else hi
        assert (lo, hi) == (self.lo, self.hi) or (self.narrows and self.lo <= lo <= hi <= self.hi), (self.key, lo, hi)
        return lo, hi

    def clamp(self, hi: int | float) -> int | float:
        """Keep the value at most `hi` (a position kept from a longer prompt moves to the new prompt's end)."""
        ss = st.session_state
        if ss[self.key] > hi:
            ss[self.key] = hi
        return ss[self.key]

    def _step(self) -> dict[str, Any]:
        return {} if self.step is None else {"step": self.step}


@dataclass(frozen=True)
class Slider(_Range):
    """An int or float on a slider (floats when the default is a float)."""

    def draw(self, where=st, *, lo=None, hi=None, **kw) -> int | float:
        lo, hi = self.bounds(lo, hi)
        self.clamp(hi)
        return where.slider(self._label(kw), lo, hi, key=self.key, **self._step(), **kw)


@dataclass(frozen=True)
class Number(_Range):
    """An int or float typed into a number box."""

    def draw(self, where=st, *, lo=None, hi=None, **kw) -> int | float:
        lo, hi = self.bounds(lo, hi)
        self.clamp(hi)
        return where.number_input(self._label(kw), min_value=lo, max_value=hi, key=self.key, **self._step(), **kw)


@dataclass(frozen=True)
class Stops(_Control):
    """A number picked from fixed stops (a select slider; floats when the default is a float). The link may carry
    any number between the first and the last stop; it is snapped to the nearest stop (the lower one on a tie)."""

    default: int | float = 0
    stops: tuple[int | float, ...] = ()

    def __post_init__(self) -> None:
        assert self.default in self.stops and list(self.stops) == sorted(self.stops), self.key

    @property
    def lo(self) -> int:
        return self.stops[0]

    @property
    def hi(self) -> int:
        return self.stops[-1]

    def register(self, url) -> int | float:
        read = url.float if isinstance(self.default, float) else url.int
        read(self.key, self.default, self.lo, self.hi, label=t(self.url_label))
        ss = st.session_state
        if ss[self.key] not in self.stops:
            ss[self.key] = min(self.stops, key=lambda v: abs(v - ss[self.key]))
        return ss[self.key]

    def draw(self, where=st, **kw) -> int:
        return where.select_slider(self._label(kw), list(self.stops), key=self.key, **kw)


@dataclass(frozen=True)
class Among(_Range):
    """An int in lo..hi in the link, picked in a select box (or select slider) among the values on show (the requests
    holding blocks, the lengths this device can sweep): `draw` takes them, each inside the declared range."""

    widget: str = "selectbox"  # or "select_slider"

    def draw(self, where=st, *, options: Sequence[int], **kw) -> int:
        assert all(self.lo <= o <= self.hi for o in options), (self.key, options)
        return getattr(where, self.widget)(self._label(kw), list(options), key=self.key, **kw)


WIDGETS = ("selectbox", "radio", "select_slider", "segmented_control", "pills")


@dataclass(frozen=True)
class Choice(_Control):
    """One of a list of strings: a select box, radio, select slider, segmented control or pills. `default` may be
    a callable too (the first preset on disk)."""

    default: str | Callable[[], str] = ""
    options: Options = ()
    widget: str = "selectbox"

    def __post_init__(self) -> None:
        assert self.widget in WIDGETS, self.widget

    def choices(self) -> list[Any]:
        return _options(self.options)

    def default_value(self) -> str:
        return self.default() if callable(self.default) else self.default

    def register(self, url) -> str:
        return url.choice(self.key, self.default_value(), self.choices(), label=t(self.url_label))

    def draw(self, where=st, **kw) -> str:
        return getattr(where, self.widget)(self._label(kw), self.choices(), key=self.key, **kw)


@dataclass(frozen=True)
class Toggle(_Control):
    default: bool = False
    widget: str = "toggle"  # or "checkbox"

    def __post_init__(self) -> None:
        assert self.widget in ("toggle", "checkbox"), self.widget

    def register(self, url) -> bool:
        return url.bool(self.key, self.default, label=t(self.url_label))

    def draw(self, where=st, **kw) -> bool:
        return getattr(where, self.widget)(self._label(kw), key=self.key, **kw)


@dataclass(frozen=True)
class Text(_Control):
    """Text up to max_len UTF-8 bytes in the link; the widget's max_chars is `max_chars` (None: no limit)."""

    default: str = ""
    max_len: int = 2000
    max_chars: int | None = None
    widget: str = "text_input"  # or "text_area"

    def __post_init__(self) -> None:
        assert self.widget in ("text_input", "text_area"), self.widget

    def register(self, url) -> str:
        return url.text(self.key, self.default, max_len=self.max_len, label=t(self.url_label))

    def draw(self, where=st, **kw) -> str:
        if self.max_chars is not None:
            kw["max_chars"] = self.max_chars
        return getattr(where, self.widget)(self._label(kw), key=self.key, **kw)


Control = Slider | Number | Among | Stops | Choice | Toggle | Text
