"""The lab's message catalogs, read without Streamlit: `assets/i18n/<lang>/<area>.json`, one flat object per
area of the lab (core.json: navigation, sidebar, shared words; one per page), merged into one catalog per
language ("masks.title": "Attention masks"); a key lives in one area file only. Both languages have the same
area files, the same keys and the same `str.format` placeholders in each.

sim/ sentence functions take `lang: str = "en"` and build every sentence from catalog entries with
`text(lang, key, **fields)`; the caller formats numbers before they go in (`f"{n:,}"`), so a number reads the
same in both languages. English is the default everywhere, so a caller that passes no language gets the
English it always got. app/i18n.py adds the current page language on top of this module.
"""

from __future__ import annotations

import json
import string
from functools import lru_cache
from pathlib import Path

from sim.refusal import Misuse

LANGS: tuple[str, ...] = ("en", "ko")
DEFAULT_LANG = "en"
LANG_NAMES = {"en": "English", "ko": "한국어"}  # each language named in itself (the switch shows both)
CATALOG_DIR = Path(__file__).resolve().parents[2] / "assets" / "i18n"


@lru_cache(maxsize=len(LANGS))
def catalog(lang: str) -> dict[str, str]:
    """key -> message of one language (read once per process)."""
    if lang not in LANGS:  # a link's lang= is checked against LANGS first (app/i18n.py), the sidebar offers only them
        raise Misuse(f"language {lang!r} is not one of {', '.join(LANGS)}")
    entries: dict[str, str] = {}
    for path in sorted((CATALOG_DIR / lang).glob("*.json")):
        with open(path, encoding="utf-8") as f:
            part = json.load(f)
        where = f"assets/i18n/{lang}/{path.name}"
        assert all(isinstance(v, str) for v in part.values()), f"{where}: every value must be a string"
        twice = sorted(part.keys() & entries.keys())
        assert not twice, f"{where}: {', '.join(twice[:5])} already in another {lang} area file"
        entries.update(part)
    return entries


def text(lang: str, key: str, /, **fields: object) -> str:
    """The message `key` in `lang`, its `{placeholders}` filled from `fields` (KeyError names a missing key)."""
    try:
        message = catalog(lang)[key]
    except KeyError:
        raise KeyError(f"no message {key!r} in assets/i18n/{lang}/") from None
    if "{vllm}" in message and "vllm" not in fields:  # the vLLM release whose rule the message states
        from sim.cost.vllm_rules import version_label

        fields = {**fields, "vllm": version_label()}
    return message.format(**fields) if fields else message


def placeholders(message: str) -> set[str]:
    """The field names a message fills: 'Layer {layer}, head {head}' -> {'layer', 'head'}."""
    return {name for _, name, _, _ in string.Formatter().parse(message) if name is not None}


def join(lang: str, words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c' in English; '가, 나, 다' in Korean (a list reads with commas there)."""
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + text(lang, "list.and") + words[-1]
