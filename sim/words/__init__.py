"""The words layer: the one place that turns message values (sim.msg.Msg, Word, Items) into sentences, in
English or Korean, for the pages and the command line alike, and the only code that reads the catalogs
(assets/i18n/<lang>/<area>.json, see catalog.py).

    say(lang, Msg("kv.fits", need_gib=72.0))   -> "Needs 72.0 GiB: fits."   (format spec in the catalog entry)

A field that is a Msg, a Word or Items is worded first, in the same language; numbers are formatted by the
entry's own spec (`{n:,}`, `{ratio:.1f}`); a plain string is a name and goes in as it is.
"""

from __future__ import annotations

from sim.msg import Items, Msg, Word
from sim.words.catalog import DEFAULT_LANG, LANG_NAMES, LANGS, catalog, join, placeholders, text

__all__ = ["DEFAULT_LANG", "LANG_NAMES", "LANGS", "catalog", "join", "placeholders", "say", "text", "why"]


def say(lang: str, value: object) -> str:
    """`value` in `lang`: a Msg, Word or Items worded; anything else (a name, a number) as str() gives it."""
    if isinstance(value, Msg):
        return text(lang, value.key, **{k: _field(lang, v) for k, v in value.fields.items()})
    if isinstance(value, Word):
        return text(lang, value.key)
    if isinstance(value, Items):
        words = [say(lang, v) for v in value.items]
        return join(lang, words) if value.sep is None else value.sep.join(words)
    return str(value)


def _field(lang: str, value: object) -> object:
    # numbers stay numbers so the entry's format spec applies; worded values become their text
    return say(lang, value) if isinstance(value, (Msg, Word, Items)) else value


def why(exc: Exception, lang: str = DEFAULT_LANG) -> str:
    """The reason an exception gives: worded in `lang` when it is a Refusal, else as it was raised."""
    from sim.refusal import Refusal

    return say(lang, exc.msg) if isinstance(exc, Refusal) else str(exc)
