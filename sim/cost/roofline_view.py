"""The roofline page's figures in the units it shows them in, computed here so the page only formats them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.cost.arch import ArchPreset
from sim.cost.roofline import Hardware, StepCost

MIN_PREFILL_CONTEXT = 128  # the prefill sweep reaches at least this far, whatever a config says its context is


@dataclass(frozen=True)
class StepFigures:
    ms: float  # the step's time in milliseconds
    tokens_per_s: float  # the tokens it produces per second


def step_figures(step: StepCost, hw: Hardware) -> StepFigures:
    seconds = step.time(hw)
    return StepFigures(seconds * 1e3, step.tokens / seconds)


def prefill_contexts(arch: ArchPreset, contexts: Sequence[int]) -> list[int]:
    """The sweep's prompt lengths this model takes (its context, at least MIN_PREFILL_CONTEXT)."""
    return [x for x in contexts if x <= max(arch.max_position_embeddings, MIN_PREFILL_CONTEXT)]


@dataclass(frozen=True)
class MachineFigures:
    gb_per_s: float  # copy bandwidth, 10⁹ bytes per second
    gflop_per_s: float  # matmul rate, 10⁹ FLOP per second
    ridge: float  # FLOP per byte where the two meet


def machine_figures(peak_flops: float, bandwidth: float) -> MachineFigures:
    """A probed machine's rates (FLOP/s, bytes/s) in the page's units."""
    return MachineFigures(bandwidth / 1e9, peak_flops / 1e9, peak_flops / bandwidth)
