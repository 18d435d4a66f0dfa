"""The serving simulators' refusals are the lab's one user-facing error, sim.refusal.Refusal (kept importable here
for the modules that name it so)."""

from __future__ import annotations

from sim.refusal import Refusal, why

__all__ = ["Refusal", "why"]
