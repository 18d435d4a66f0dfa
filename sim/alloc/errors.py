"""The allocator simulations' refusals are the lab's one user-facing error, sim.refusal.Refusal: `WordedError` is
its name here (kept so the modules that name it need not change at once); sim.words.why words it."""

from __future__ import annotations

from sim.refusal import Refusal as WordedError

__all__ = ["WordedError"]
