"""Settings the allocator simulations refuse, worded in either language: a `WordedError` is a ValueError whose
message is a catalog entry (English by default, so `str(exc)` and every caller that matches it are unchanged);
`worded(exc, lang)` gives the page its message in the page language, and any other ValueError as it is."""

from __future__ import annotations

from sim.i18n import text


class WordedError(ValueError):
    """A ValueError worded from the catalog entry `key` with `fields` (already formatted)."""

    def __init__(self, key: str, /, **fields: str) -> None:
        self.key, self.fields = key, fields
        super().__init__(text("en", key, **fields))

    def in_lang(self, lang: str) -> str:
        return text(lang, self.key, **self.fields)


def worded(exc: Exception, lang: str = "en") -> str:
    """The exception's message in `lang` where it has one in the catalogs, else as it was raised."""
    return exc.in_lang(lang) if isinstance(exc, WordedError) else str(exc)
