"""The lab's message catalogs, read without Streamlit: `assets/i18n/<lang>/<area>.json`, one flat object per
area of the lab (core.json: navigation, sidebar, shared words; one per page), merged into one catalog per
language ("masks.title": "Attention masks"); a key lives in one area file only. Both languages have the same
area files, the same keys and the same `str.format` placeholders in each.

Only the words layer (sim/words) reads them: `text(lang, key, **fields)` fills one entry; numbers go in as
numbers and the entry's own spec (`{n:,}`, `{x:.1f}`) formats them, so a number reads the same in both languages.

`PSEUDO` ("keys") is a pseudo-language for tests: every entry is its key with its fields, formatted by the English
entry's specs ("kv.fits(need=72.0)"), so a test pins which message was chosen and with which numbers, and a copy
edit in either language breaks no test. It is never offered to a user (LANGS does not hold it).
"""

from __future__ import annotations

import json
import string
from functools import lru_cache
from pathlib import Path

from sim.refusal import Misuse

LANGS: tuple[str, ...] = ("en", "ko")
DEFAULT_LANG = "en"
PSEUDO = "keys"  # the tests' pseudo-language: keys and numbers instead of words
LANG_NAMES = {"en": "English", "ko": "한국어"}  # each language named in itself (the switch shows both)
CATALOG_DIR = Path(__file__).resolve().parents[2] / "assets" / "i18n"


@lru_cache(maxsize=len(LANGS) + 1)
def catalog(lang: str) -> dict[str, str]:
    """key -> message of one language (read once per process)."""
    if lang == PSEUDO:
        return {key: _pseudo(key, message) for key, message in catalog(DEFAULT_LANG).items()}
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


def _pseudo(key: str, message: str) -> str:
    """'Needs {need:.1f} GiB: fits.' under key kv.fits -> 'kv.fits(need={need:.1f})': the fields in the order
    the English names them, each once, with its spec and conversion."""
    seen: dict[str, str] = {}
    for _, name, spec, conversion in string.Formatter().parse(message):
        if name is not None and name not in seen:
            seen[name] = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
    return key + ("(" + ", ".join(f"{name}={field}" for name, field in seen.items()) + ")" if seen else "")


def placeholders(message: str) -> set[str]:
    """The field names a message fills: 'Layer {layer}, head {head}' -> {'layer', 'head'}."""
    return {name for _, name, _, _ in string.Formatter().parse(message) if name is not None}


def join(lang: str, words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c' in English; '가, 나, 다' in Korean (a list reads with commas there)."""
    if len(words) == 1:
        return words[0]
    if lang == PSEUDO:
        return "[" + " + ".join(words) + "]"
    return ", ".join(words[:-1]) + text(lang, "list.and") + words[-1]
