"""Settings the serving simulators refuse, worded in either language.

A `Refusal` is a ValueError whose message is a catalog entry: `str(exc)` is its English (what the command line
prints and what tests match), `why(exc, lang)` the same message in the page language. Any other ValueError is
shown as it is, so a refusal that has no entry yet still reads in English."""

from __future__ import annotations

from sim.i18n import text


class Refusal(ValueError):
    """`Refusal("serving.err.key", n="1,024")`: the message `key` with its (already formatted) fields."""

    def __init__(self, key: str, /, **fields: object) -> None:
        self.key, self.fields = key, fields
        super().__init__(text("en", key, **fields))

    def words(self, lang: str = "en") -> str:
        return text(lang, self.key, **self.fields)


def why(exc: Exception, lang: str = "en") -> str:
    """The reason an exception gives: in `lang` when it can word itself (a Refusal, a sim.alloc.trace.TraceError),
    else as it was raised."""
    words = getattr(exc, "words", None)
    return words(lang) if callable(words) else str(exc)
