"""Sharing one server among many users: a FIFO queue for heavy work, a result cache, identical work computed
once (`SharedRuns`), and the measured rates that turn a job's size into an estimate of its seconds.

Plain Python (threading only): the app keeps one of each per server process, and every session's
heavy real-model work passes through the same queue, so thirty students opening the same link
wait in line instead of splitting two cores thirty ways, and wait for one run, not thirty copies of it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from sim.refusal import Misuse, Refusal

T = TypeVar("T")
MISSING = object()  # a result cache's "no such entry" (None may be a result)


MAX_WAITING = 64  # jobs one server's queue holds waiting; past that a request is refused (KVLAB_MAX_QUEUE)


class QueueFull(Refusal):
    """The queue already holds its most waiting jobs: this one is refused, nothing is queued."""


class WorkQueue:
    """First come, first served admission: at most `num_slots` jobs run at once.

    `slot(on_wait)` blocks until this caller's turn; while it waits it calls `on_wait(num_ahead)`
    about every `poll_s` seconds (jobs running plus jobs queued in front of it). `on_wait` may raise
    (a Streamlit script being stopped does): the ticket is then withdrawn and nobody is blocked.

    `slot(exclusive=True)` runs alone: work that changes process-wide state (forcing torch's SDPA
    backend is a global switch, not a per-thread one) or that times the machine must not overlap
    any other job. Order stays first come, first served for both kinds.
    """

    def __init__(self, num_slots: int, poll_s: float = 0.25, max_waiting: int = MAX_WAITING) -> None:
        # slots are pick_num_threads() (>= 1, or KVLAB_THREADS refused); KVLAB_MAX_QUEUE is refused by app/work.py
        if num_slots < 1:
            raise Misuse(f"a work queue needs at least 1 slot, got {num_slots}")
        if max_waiting < 1:
            raise Misuse(f"a work queue needs room for at least 1 waiting job, got {max_waiting}")
        self.num_slots = num_slots
        self.max_waiting = max_waiting
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
            if len(self._waiting) >= self.max_waiting:  # bounded: a full queue refuses, it never grows
                raise QueueFull("work.queue_full", waiting=f"{len(self._waiting):,}", running=f"{self._num_running:,}")
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


def approx_bytes(obj: Any, max_nodes: int = 200_000) -> int:
    """Roughly the memory `obj` holds: numpy arrays, bytes and strings by their length, containers, dataclasses
    and plain objects by what they hold (each object counted once; at most `max_nodes` visited, so sizing a
    result is always quick). What a cache bound needs: the size of a 2 MiB trace, not its last byte."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    visited = 0
    while stack and visited < max_nodes:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        visited += 1
        nbytes = getattr(o, "nbytes", None)  # numpy arrays, torch tensors' storage views, memoryview
        if isinstance(nbytes, int) and not isinstance(o, type):
            total += nbytes + 100
            continue
        if hasattr(o, "memory_usage") and hasattr(o, "columns"):  # a pandas DataFrame
            try:
                total += int(o.memory_usage(deep=True).sum())
                continue
            except Exception:  # noqa: BLE001 - sizing is best effort
                pass
        total += sys.getsizeof(o, 64)
        if isinstance(o, str | bytes | bytearray | int | float | complex | bool) or o is None:
            continue
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset | deque):
            stack.extend(o)
        elif dataclasses.is_dataclass(o) and not isinstance(o, type):
            stack.extend(getattr(o, f.name, None) for f in dataclasses.fields(o))
        else:
            d = getattr(o, "__dict__", None)
            if isinstance(d, dict):
                stack.append(d)
            for name in getattr(type(o), "__slots__", ()):
                stack.append(getattr(o, name, None))
    return total


class ResultCache:
    """A thread-safe LRU map from a job's key to its (read-only) result, shared by every session.

    Bounded twice: at most `max_entries` entries and at most `max_bytes` held in all, keys included (a key
    that is a whole uploaded trace counts as much as its result). The least recently used go first; a
    value larger than the whole bound is not kept at all."""

    def __init__(self, max_entries: int = 128, max_bytes: int = 64 * 2**20) -> None:
        if max_entries < 1:
            raise Misuse(f"max_entries must be >= 1, got {max_entries}")
        if max_bytes < 1:
            raise Misuse(f"max_bytes must be >= 1, got {max_bytes}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._num_bytes = 0

    @property
    def num_bytes(self) -> int:
        with self._lock:
            return self._num_bytes

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key][0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def put(self, key: Hashable, value: Any) -> bool:
        """Keep `value` under `key`; False when it is too large to keep at all."""
        size = approx_bytes((key, value))
        with self._lock:
            if key in self._data:
                self._num_bytes -= self._data.pop(key)[1]
            if size > self.max_bytes:
                return False
            self._data[key] = (value, size)
            self._num_bytes += size
            while len(self._data) > self.max_entries or self._num_bytes > self.max_bytes:
                self._num_bytes -= self._data.popitem(last=False)[1][1]
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


class _Flight:
    """One computation of a key in progress: its leader computes, everyone else waits for `done`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = MISSING
        self.ahead = 0  # how many jobs are ahead of the leader in the queue (0: it is running)


class SharedRuns:
    """Identical work is computed once, whoever asks: results are kept in `results`, and a key asked for while
    it is being computed (or queued to be) is not queued again: the later callers wait for the first one's
    result (`on_same(num_ahead_of_it)` about every `poll_s` seconds; it may raise, and that caller leaves).

    The one computing it goes through `queue` (unless `use_queue` is False) and, when its turn comes, looks in
    `results` again: another caller may have put the result there while it waited. If the one computing it
    fails or gives up, the next caller still waiting takes its place."""

    def __init__(self, queue: WorkQueue, results: ResultCache, poll_s: float = 0.25) -> None:
        self.queue = queue
        self.results = results
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._flights: dict[Hashable, _Flight] = {}

    def in_flight(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._flights

    def run(self, key: Hashable, compute: Callable[[], T], *, use_queue: bool = True, exclusive: bool = False,
            on_wait: Callable[[int], None] | None = None,
            on_same: Callable[[int], None] | None = None) -> tuple[T, bool]:
        """(the result, whether this call computed it)."""
        while True:
            hit = self.results.get(key, MISSING)
            if hit is not MISSING:
                return hit, False
            with self._lock:
                flight = self._flights.get(key)
                leader = flight is None
                if leader:
                    flight = self._flights[key] = _Flight()
            if leader:
                return self._lead(key, flight, compute, use_queue, exclusive, on_wait)
            while not flight.done.wait(self.poll_s):
                if on_same is not None:
                    on_same(flight.ahead)  # may raise: this caller leaves, the leader goes on
            if flight.value is not MISSING:
                return flight.value, False
            # the leader failed or gave up: look again, and lead if nobody else does

    def _lead(self, key, flight: _Flight, compute, use_queue: bool, exclusive: bool, on_wait) -> tuple[Any, bool]:
        def waiting(num_ahead: int) -> None:
            flight.ahead = num_ahead
            if on_wait is not None:
                on_wait(num_ahead)

        value, computed = MISSING, False
        try:
            with self.queue.slot(waiting, exclusive=exclusive) if use_queue else nullcontext():
                flight.ahead = 0
                value = self.results.get(key, MISSING)  # its turn: computed meanwhile by someone else?
                if value is MISSING:
                    value, computed = compute(), True
                    self.results.put(key, value)
        finally:
            flight.value = value
            with self._lock:
                del self._flights[key]
            flight.done.set()
        return value, computed


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
            raise Misuse(f"weight must be in (0, 1], got {weight}")
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

    def num_runs(self, kind: str) -> int:
        """How many of this kind's runs the correction has learned from (0: the cost model alone)."""
        with self._lock:
            rate = self._rates.get(kind)
            return rate.num_runs if rate else 0

    def factor(self, kind: str) -> float:
        with self._lock:
            rate = self._rates.get(kind)
            return rate.factor if rate else 1.0


def remaining_s(elapsed_s: float, fraction: float, estimate_s: float) -> float:
    """Seconds still to go, corrected while the run goes: at first the estimate less what has passed; once a
    tenth of the work is done, what the pace so far says (elapsed × (1 − f) / f), which a busy machine slows."""
    if fraction >= 0.1:
        return elapsed_s * (1 - fraction) / fraction
    return max(0.0, estimate_s - elapsed_s)
