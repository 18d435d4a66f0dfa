"""The allocator simulations' refusals are the lab's one user-facing error, sim.refusal.Refusal: `WordedError` is
its name here and `worded` its wording, both the same objects (kept so the modules that name them need not change
at once)."""

from __future__ import annotations

from sim.refusal import Refusal as WordedError
from sim.refusal import why as worded

__all__ = ["WordedError", "worded"]
