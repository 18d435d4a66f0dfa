"""Every page keeps its widget values in the URL, so a shared link opens the same view.

Usage in a page:

    url = UrlState()
    url.int("n", default=100, lo=1, hi=1024)        # validates ?n=..., seeds the widget key
    st.slider("New tokens", 1, 1024, key="n")       # the widget owns the value from here on
    url.sync()                                      # writes the current values back to the URL

A value in the URL that does not parse or is out of range falls back to the default, and the
page shows a warning naming the value and the allowed range (never an exception).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

MAX_URL_TEXT = 2000


# --- pure parsers: raw URL string -> (value, problem or None) ------------------------------

def parse_int(raw: str | None, default: int, lo: int, hi: int) -> tuple[int, str | None]:
    if raw is None:
        return default, None
    try:
        value = int(raw.strip())
    except ValueError:
        return default, f"{raw!r} is not a whole number"
    if not lo <= value <= hi:
        return default, f"{value} is outside {lo}..{hi}"
    return value, None


def parse_float(raw: str | None, default: float, lo: float, hi: float) -> tuple[float, str | None]:
    if raw is None:
        return default, None
    try:
        value = float(raw.strip())
    except ValueError:
        return default, f"{raw!r} is not a number"
    if not math.isfinite(value) or not lo <= value <= hi:
        return default, f"{raw} is outside {lo}..{hi}"
    return value, None


def parse_choice(raw: str | None, default: str, options: Sequence[str]) -> tuple[str, str | None]:
    if raw is None:
        return default, None
    if raw not in options:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        return default, f"{shown!r} is not one of {', '.join(map(str, options))}"
    return raw, None


def parse_bool(raw: str | None, default: bool) -> tuple[bool, str | None]:
    if raw is None:
        return default, None
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True, None
    if low in ("0", "false", "no", "off"):
        return False, None
    return default, f"{raw!r} is not true/false"


def parse_text(raw: str | None, default: str, max_len: int = MAX_URL_TEXT) -> tuple[str, str | None]:
    if raw is None:
        return default, None
    if len(raw) > max_len:
        return default, f"text of {len(raw):,} characters is longer than {max_len:,}"
    return raw, None


def dump(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


class UrlState:
    """Reads validated values from st.query_params, seeds widget keys, writes them back."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.problems: list[str] = []

    def _read(self, key: str, parse: Callable[[str | None], tuple[Any, str | None]], label: str) -> Any:
        raw = st.query_params.get(key)
        value, problem = parse(raw)
        if problem:
            self.problems.append(f"URL value `{key}` ({label}): {problem}; using the default {dump(value)!r}.")
        if key not in st.session_state:
            st.session_state[key] = value
        self.keys.append(key)
        return st.session_state[key]

    def int(self, key: str, default: int, lo: int, hi: int, label: str = "") -> int:
        return self._read(key, lambda r: parse_int(r, default, lo, hi), label or key)

    def float(self, key: str, default: float, lo: float, hi: float, label: str = "") -> float:
        return self._read(key, lambda r: parse_float(r, default, lo, hi), label or key)

    def choice(self, key: str, default: str, options: Sequence[str], label: str = "") -> str:
        return self._read(key, lambda r: parse_choice(r, default, options), label or key)

    def bool(self, key: str, default: bool, label: str = "") -> bool:
        return self._read(key, lambda r: parse_bool(r, default), label or key)

    def text(self, key: str, default: str, max_len: int = MAX_URL_TEXT, label: str = "") -> str:
        return self._read(key, lambda r: parse_text(r, default, max_len), label or key)

    def show_problems(self) -> None:
        for p in self.problems:
            st.warning(p, icon=":material/link_off:")

    def sync(self) -> None:
        """Write every registered widget's current value into the URL."""
        for key in self.keys:
            if key in st.session_state:
                text = dump(st.session_state[key])
                if st.query_params.get(key) != text:
                    st.query_params[key] = text
