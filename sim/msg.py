"""Message values: what sim/ returns instead of sentences.

A `Msg` is a catalog key and its fields. Fields hold numbers as numbers (the catalog entry carries the format,
`"{ratio:.1f}×"`, the same spec in both languages), other `Msg`s (a sentence inside a sentence), `Word`s (an
enum member that is a catalog word: a kind, a comparison) or plain strings that are names, not prose (a model's
name, a user's label). Only sim/words turns a Msg into text, in either language; nothing in sim/ reads a
sentence back, so Korean never depends on the English wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType


@dataclass(frozen=True)
class Msg:
    """`Msg("kv.fits", need_gib=72.0, gpu=Msg("gpu.h100"))`: the message `key`, its fields filled in when worded."""

    key: str
    fields: Mapping[str, object] = field(default_factory=dict)

    def __init__(self, key: str, /, **fields: object) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "fields", MappingProxyType(dict(fields)))

    def __hash__(self) -> int:
        return hash((self.key, tuple(sorted((k, _hashable(v)) for k, v in self.fields.items()))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Msg) and self.key == other.key and dict(self.fields) == dict(other.fields)

    def __reduce__(self):
        # results holding messages are cached by pickling (st.cache_data, the work queue's result cache)
        return (_msg, (self.key, dict(self.fields)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"Msg({self.key!r}{', ' if inner else ''}{inner})"


def _msg(key: str, fields: dict) -> Msg:
    return Msg(key, **fields)


def _hashable(value: object) -> object:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


class Word(Enum):
    """An enum whose members are catalog words: subclass with `KEY = "cmp"` style prefix via `_key_prefix`;
    a member worded is the message `"<prefix>.<value>"` (e.g. `Compare.FASTER` -> `cmp.faster`)."""

    @classmethod
    def prefix(cls) -> str:
        raise NotImplementedError(f"{cls.__name__} names no catalog prefix")

    @property
    def key(self) -> str:
        return f"{self.prefix()}.{self.value}"


class Compare(Word):
    """How one number stands to another, worded by sim/words (`cmp.more`, `cmp.less`, `cmp.same`)."""

    MORE = "more"
    LESS = "less"
    SAME = "same"

    @classmethod
    def prefix(cls) -> str:
        return "cmp"

    @classmethod
    def of(cls, a: float, b: float) -> Compare:
        return cls.MORE if a > b else cls.LESS if a < b else cls.SAME


@dataclass(frozen=True)
class Items:
    """A list to be worded as one phrase ('a, b and c' / '가, 나, 다'): each item a Msg, Word or name."""

    items: tuple[object, ...]
    sep: str | None = None  # punctuation that joins the items as they are ("; "), in any language

    def __init__(self, items, sep: str | None = None) -> None:
        object.__setattr__(self, "items", tuple(items))
        object.__setattr__(self, "sep", sep)
