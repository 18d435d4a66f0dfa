"""One number as a page shows it (torch-free): the `Metric` that sim/ results hand to the app's
`show_metrics`, so every page draws its readouts the same way."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """A label, the formatted value, a descriptive delta (never coloured as good or bad), a help line."""

    label: str
    value: str
    delta: str | None = None
    help: str | None = None
