"""The serving simulators' refusals are the lab's one user-facing error, sim.refusal.Refusal (kept importable here
for the modules that name it so); sim.words.why words it."""

from __future__ import annotations

from sim.refusal import Refusal

__all__ = ["Refusal"]
