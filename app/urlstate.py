"""Every page keeps its widget values in the URL, so a shared link opens the same view.

Usage in a page's app/controls module (each control declared once, app/controls/declared.py):

    N = Slider("n", 100, 1, 1024, label="decode.n", url_label="decode.url.n")
    url = UrlState("decode_cost")                   # the page's slug: its values belong to it
    url.add(N)                                      # validates ?n=..., seeds the widget key
    N.draw()                                        # the widget over the same range owns the value from here on
    url.sync()                                      # writes the current values back to the URL

`url.int(...)` and its siblings are what a declaration calls; a value with no declaration of its own (the open tab)
may call them directly.

Each page owns its state. Widget keys are short and may repeat across pages (`batch`, `model`),
so on *entering* a page (the previous run was another page) every key it registers is reset: to
the URL's value when the link carries one, else to what the user last set on this page in this
session, else to the default. Another page's value never leaks in, and coming back to a page
keeps what was set there.

A value in the URL that does not parse or is out of range falls back to the default, and the
page shows one warning listing each such value, escaped and shortened (never an exception), worded in the
page language (core.json's `url.*`; the field labels in it are the page's own). The parsers take `lang`
too, English by default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from app.text import code
from app.work import begin_page_run
from sim.words import text

MAX_URL_TEXT = 2000  # bytes of UTF-8
PAGE_KEY = "_urlstate.page"  # the page the previous run showed
STASH_KEY = "_urlstate.stash"  # page -> {key: value} as the user last left it
CONTROLS_KEY = "_urlstate.controls"  # this run's page's declared controls, by key (the range tests read them)


# --- pure parsers: raw URL string -> (value, problem or None) ------------------------------

def parse_int(raw: str | None, default: int, lo: int, hi: int, lang: str = "en") -> tuple[int, str | None]:
    if raw is None:
        return default, None
    try:
        value = int(raw.strip())
    except ValueError:
        return default, text(lang, "url.not_int", value=code(raw))
    if not lo <= value <= hi:
        return default, text(lang, "url.outside", value=code(value), lo=lo, hi=hi)
    return value, None


def parse_float(raw: str | None, default: float, lo: float, hi: float, lang: str = "en") -> tuple[float, str | None]:
    if raw is None:
        return default, None
    try:
        value = float(raw.strip())
    except ValueError:
        return default, text(lang, "url.not_number", value=code(raw))
    if not math.isfinite(value) or not lo <= value <= hi:
        return default, text(lang, "url.outside", value=code(raw), lo=lo, hi=hi)
    return value, None


def parse_choice(raw: str | None, default: str, options: Sequence[str], lang: str = "en") -> tuple[str, str | None]:
    if raw is None:
        return default, None
    if raw not in options:
        listed = ", ".join(map(str, options[:12]))
        if len(options) > 12:
            listed += text(lang, "url.and_more", n=len(options) - 12)
        return default, text(lang, "url.not_one_of", value=code(raw), options=listed)
    return raw, None


def parse_bool(raw: str | None, default: bool, lang: str = "en") -> tuple[bool, str | None]:
    if raw is None:
        return default, None
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True, None
    if low in ("0", "false", "no", "off"):
        return False, None
    return default, text(lang, "url.not_bool", value=code(raw))


def parse_text(raw: str | None, default: str, max_len: int = MAX_URL_TEXT, lang: str = "en") -> tuple[str, str | None]:
    if raw is None:
        return default, None
    num_bytes = len(raw.encode("utf-8", errors="surrogatepass"))
    if num_bytes > max_len:
        return default, text(lang, "url.too_long", num_bytes=f"{num_bytes:,}", max_len=f"{max_len:,}")
    return raw, None


def dump(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


class UrlState:
    """Reads validated values from st.query_params, seeds widget keys, writes them back."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.keys: list[str] = []
        self.controls: dict[str, Any] = {}  # key -> its declaration (app/controls/declared.py), for those added
        self.problems: list[str] = []
        ss = st.session_state
        self.entering = ss.get(PAGE_KEY) != page
        ss[PAGE_KEY] = page
        ss[CONTROLS_KEY] = self.controls
        stash = ss.setdefault(STASH_KEY, {})
        self._stash: dict[str, Any] = stash.setdefault(page, {})
        begin_page_run()  # a page run starts here: reset its budget of work started unasked
        from app.i18n import read_lang, take_lang_problem  # the one value all pages share: listed here if bad

        self.lang = read_lang()  # the page language: the problems below are worded in it
        if lang_problem := take_lang_problem():
            self.problems.append(lang_problem)
        from app.present import take_present_problem

        if present_problem := take_present_problem():
            self.problems.append(present_problem)

    def _read(self, key: str, parse: Callable[[str | None], tuple[Any, str | None]], label: str) -> Any:
        raws = st.query_params.get_all(key)
        raw = raws[-1] if raws else None
        value, problem = parse(raw)
        if len(raws) > 1:
            self.problems.append(text(self.lang, "url.repeated", key=code(key), label=label, n=len(raws),
                                      raw=code(raw)))
        if problem:
            self.problems.append(text(self.lang, "url.problem", key=code(key), label=label, problem=problem,
                                      value=code(dump(value))))
        ss = st.session_state
        if self.entering or key not in ss:
            # a value in the link wins; else what the user last set here; else the default
            ss[key] = value if raw is not None or key not in self._stash else self._stash[key]
        self._stash[key] = ss[key]
        self.keys.append(key)
        return ss[key]

    def add(self, *controls: Any) -> None:
        """Read each declared control's value from the link (app/controls/declared.py), in order."""
        for control in controls:
            control.register(self)
            self.controls[control.key] = control

    def int(self, key: str, default: int, lo: int, hi: int, label: str = "") -> int:
        return self._read(key, lambda r: parse_int(r, default, lo, hi, self.lang), label or key)

    def float(self, key: str, default: float, lo: float, hi: float, label: str = "") -> float:
        return self._read(key, lambda r: parse_float(r, default, lo, hi, self.lang), label or key)

    def choice(self, key: str, default: str, options: Sequence[str], label: str = "") -> str:
        return self._read(key, lambda r: parse_choice(r, default, options, self.lang), label or key)

    def bool(self, key: str, default: bool, label: str = "") -> bool:
        return self._read(key, lambda r: parse_bool(r, default, self.lang), label or key)

    def text(self, key: str, default: str, max_len: int = MAX_URL_TEXT, label: str = "") -> str:
        """max_len counts UTF-8 bytes (the tiny model reads one token per byte)."""
        return self._read(key, lambda r: parse_text(r, default, max_len, self.lang), label or key)

    def show_problems(self) -> None:
        """One folded box for every bad value in the link (a shared link can carry many): its one-line
        label says how many, the list inside says which and what was used instead."""
        if not self.problems:
            return
        n = len(self.problems)
        lines = "\n".join(f"- {p}" for p in self.problems)
        label = text(self.lang, "url.summary.one" if n == 1 else "url.summary.many", n=n)
        with st.expander(label, expanded=n == 1, icon=":material/link_off:"):
            st.warning(f"{label}:\n{lines}")

    def sync(self) -> None:
        """Write every registered widget's current value into the URL (and the page's own memory)."""
        ss = st.session_state
        for key in self.keys:
            if key in ss:
                self._stash[key] = ss[key]
                shown = dump(ss[key])
                if st.query_params.get_all(key) != [shown]:
                    st.query_params[key] = shown
