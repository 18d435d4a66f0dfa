"""One number as a page shows it (torch-free): the `Metric` that sim/ results hand to the app's
`show_metrics`, so every page draws its readouts the same way."""

from __future__ import annotations

from dataclasses import dataclass


def times(ratio: float, whole_from: float = 10) -> str:
    """A ratio as the lab's sentences write it: '3.2×', whole numbers with separators from `whole_from` on."""
    return f"{ratio:,.1f}×" if ratio < whole_from else f"{ratio:,.0f}×"


def small_change(x: float) -> str:
    """How far a value moved: '0' exactly, 3 significant digits, e-notation when under 1e-3."""
    return "0" if x == 0 else f"{x:.3g}" if x >= 1e-3 else f"{x:.1e}"


@dataclass(frozen=True)
class Metric:
    """A label, the formatted value, a descriptive delta (never coloured as good or bad), a help line."""

    label: str
    value: str
    delta: str | None = None
    help: str | None = None
