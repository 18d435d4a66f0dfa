"""The one error a user can cause: `Refusal(key, **fields)`, a ValueError that carries a catalog message's key and
its (already formatted) fields instead of a sentence. `str(exc)` is its English (what the command line prints and
what a log shows); sim.words.why(exc, lang) words it in the page language. Every refusal in the lab is one: the
allocators', the serving simulators', a trace's (sim.alloc.trace.TraceError, which adds its line and field), the
real model's.

A check that only a bug in the lab can fail (a caller broke a function's contract; no control, link, flag, file or
environment variable a user sets can reach it) raises `Misuse`, a plain ValueError in English for the developer.
sim/ raises no other ValueError (tests/test_purity.py), so every raise says which of the two it is."""

from __future__ import annotations

from sim.msg import Msg


class Refusal(ValueError):
    """`Refusal("serving.err.key", n=1024)`: the message `key` with its fields (numbers, Msgs, names), a Msg
    that sim/words words; `str()` is its English for logs and the command line."""

    def __init__(self, key: str, /, **fields: object) -> None:
        self.key, self.fields = key, fields
        self.msg = Msg(key, **fields)
        super().__init__(key)

    def __str__(self) -> str:
        # the one wording sim/ asks for: English for str(), the command line and logs (tests/test_purity.py's
        # exception); the words layer is loaded when a refusal is shown, not when it is raised
        from sim.words import say

        return say("en", self.msg)


class Misuse(ValueError):
    """A function called against its contract by the lab's own code: a bug, never a user's input. English only,
    for the developer; a page that shows one anyway is showing a bug (tests catch it in either language)."""
