"""One token per byte, as in the lab's tiny model: text to token ids and back, a byte as a short label,
and the visibly different byte that the one-changed-byte views put in its place."""

from __future__ import annotations

from collections.abc import Iterable

SHOWN = {10: "⏎", 32: "␣"}  # bytes a label could not show as themselves


def to_bytes(text: str) -> list[int]:
    """The text's UTF-8 bytes: its token ids."""
    return list(text.encode("utf-8"))


def from_bytes(ids: Iterable[int]) -> str:
    """Token ids back to text; a cut multi-byte character becomes U+FFFD."""
    return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def show_byte(b: int) -> str:
    """One byte as a label: newline and space as visible signs, other unprintable bytes as \\xNN."""
    return SHOWN.get(b, chr(b) if 32 < b < 127 else f"\\x{b:02x}")


def printable(ids: Iterable[int]) -> str:
    """A block's tokens as one line of text (newlines as ⏎)."""
    return from_bytes(ids).replace("\n", "⏎")


def other_byte(b: int) -> int:
    """A visibly different byte: flip an ASCII letter's case, step a digit (9 -> 0), anything else -> 'X'."""
    c = chr(b) if b < 128 else ""
    if c.isalpha():
        return ord(c.swapcase())
    if c.isdigit():
        return ord(str((int(c) + 1) % 10))
    return ord("X")
