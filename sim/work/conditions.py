"""Under what load a time was measured: a measured time is a fact about this machine at that moment, never about
the model alone. A page shows it beside every timing it reports, and says so when the machine was too busy for
the timing to mean much."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass


def load_now() -> float:
    """The 1-minute load average: runnable tasks, averaged (NaN where the system has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return math.nan


@dataclass(frozen=True)
class Conditions:
    started_at: float  # seconds since the epoch
    load_before: float  # 1-minute load average when the measurement started
    load_after: float  # ... and when it ended
    num_cpus: int

    @property
    def load(self) -> float:
        """The higher of the two readings (NaN only when neither exists)."""
        known = [x for x in (self.load_before, self.load_after) if not math.isnan(x)]
        return max(known) if known else math.nan

    @property
    def busy(self) -> bool:
        """More runnable tasks than cores at either end of the run: each ran part of the time only, so its
        wall time says as much about the machine's other work as about the model."""
        return not math.isnan(self.load) and self.load > self.num_cpus


class Measuring:
    """`with Measuring() as m: ...` then `m.conditions`: the load before and after the block."""

    def __enter__(self) -> Measuring:
        self._start, self._before = time.time(), load_now()
        return self

    def __exit__(self, *exc) -> None:
        self.conditions = Conditions(self._start, self._before, load_now(), os.cpu_count() or 1)
