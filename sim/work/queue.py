"""Sharing one server among many users: a FIFO queue for heavy work, a result cache, and the
measured rates that turn a job's size into an estimate of its seconds.

Plain Python (threading only): the app keeps one of each per server process, and every session's
heavy real-model work passes through the same queue, so thirty students opening the same link
wait in line instead of splitting two cores thirty ways.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class WorkQueue:
    """First come, first served admission: at most `num_slots` jobs run at once.

    `slot(on_wait)` blocks until this caller's turn; while it waits it calls `on_wait(num_ahead)`
    about every `poll_s` seconds (jobs running plus jobs queued in front of it). `on_wait` may raise
    (a Streamlit script being stopped does): the ticket is then withdrawn and nobody is blocked.

    `slot(exclusive=True)` runs alone: work that changes process-wide state (forcing torch's SDPA
    backend is a global switch, not a per-thread one) or that times the machine must not overlap
    any other job. Order stays first come, first served for both kinds.
    """

    def __init__(self, num_slots: int, poll_s: float = 0.25) -> None:
        if num_slots < 1:
            raise ValueError(f"a work queue needs at least 1 slot, got {num_slots}")
        self.num_slots = num_slots
        self.poll_s = poll_s
        self._cond = threading.Condition()
        self._waiting: deque[tuple[object, bool]] = deque()
        self._num_running = 0
        self._exclusive_running = False

    @property
    def num_running(self) -> int:
        with self._cond:
            return self._num_running

    @property
    def num_waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    def _try_admit(self, entry: tuple[object, bool]) -> int:
        """0 when admitted (the caller now holds a slot), else how many jobs are ahead."""
        position = self._waiting.index(entry)
        exclusive = entry[1]
        if exclusive:
            fits = position == 0 and self._num_running == 0
        else:
            ahead_exclusive = any(e for _, e in list(self._waiting)[:position])
            fits = not self._exclusive_running and not ahead_exclusive and position < self.num_slots - self._num_running
        if fits:
            self._waiting.remove(entry)
            self._num_running += 1
            self._exclusive_running = exclusive
            return 0
        return self._num_running + position

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None, exclusive: bool = False) -> Iterator[None]:
        entry = (object(), exclusive)
        admitted = False
        with self._cond:
            self._waiting.append(entry)
        try:
            while True:
                with self._cond:
                    ahead = self._try_admit(entry)
                    if ahead == 0:
                        admitted = True
                        break
                if on_wait is not None:
                    on_wait(ahead)  # outside the lock: it may draw, or raise
                with self._cond:
                    self._cond.wait(self.poll_s)
            yield
        finally:
            with self._cond:
                if admitted:
                    self._num_running -= 1
                    if exclusive:
                        self._exclusive_running = False
                else:
                    self._waiting.remove(entry)
                self._cond.notify_all()


class ResultCache:
    """A thread-safe LRU map from a job's key to its (read-only) result, shared by every session."""

    def __init__(self, max_entries: int = 128) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


@dataclass
class _Rate:
    factor: float = 1.0
    num_runs: int = 0


class RateBook:
    """How far each kind of job's estimates are off on this server, learned from its own runs.

    An estimate is `prior_s` (from a cost model) times the kind's correction factor, an
    exponential moving average of measured ÷ predicted seconds (clamped to 0.1..10 per run, so one
    run disturbed by other work cannot wreck it).
    """

    def __init__(self, weight: float = 0.5) -> None:
        if not 0 < weight <= 1:
            raise ValueError(f"weight must be in (0, 1], got {weight}")
        self.weight = weight
        self._lock = threading.Lock()
        self._rates: dict[str, _Rate] = {}

    def estimate(self, kind: str, prior_s: float) -> float:
        with self._lock:
            rate = self._rates.get(kind)
            return prior_s * (rate.factor if rate else 1.0)

    def observe(self, kind: str, prior_s: float, measured_s: float) -> None:
        if prior_s <= 0 or measured_s < 0:
            return
        ratio = min(10.0, max(0.1, measured_s / prior_s))
        with self._lock:
            rate = self._rates.setdefault(kind, _Rate())
            rate.factor = ratio if rate.num_runs == 0 else (1 - self.weight) * rate.factor + self.weight * ratio
            rate.num_runs += 1

    def factor(self, kind: str) -> float:
        with self._lock:
            rate = self._rates.get(kind)
            return rate.factor if rate else 1.0
