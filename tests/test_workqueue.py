"""The server-wide queue: FIFO, bounded slots, nobody blocked by a caller that gave up."""

import threading
import time

import pytest

from sim.words import why
from sim.words.catalog import PSEUDO
from sim.work.queue import RateBook, ResultCache, WorkQueue


def test_one_slot_serves_in_arrival_order_and_reports_who_is_ahead():
    q = WorkQueue(1, poll_s=0.01)
    order, seen_ahead = [], {}
    release = threading.Event()

    def holder():
        with q.slot():
            order.append("holder")
            release.wait(5)

    def waiter(name):
        def on_wait(ahead):
            seen_ahead.setdefault(name, ahead)
        with q.slot(on_wait):
            order.append(name)

    t0 = threading.Thread(target=holder)
    t0.start()
    while q.num_running == 0:
        time.sleep(0.001)
    threads = []
    for name in ("a", "b", "c"):
        t = threading.Thread(target=waiter, args=(name,))
        t.start()
        threads.append(t)
        while q.num_waiting < len(threads):  # each is queued before the next arrives
            time.sleep(0.001)
    release.set()
    for t in [t0, *threads]:
        t.join(5)
    assert order == ["holder", "a", "b", "c"]
    assert seen_ahead == {"a": 1, "b": 2, "c": 3}  # the running job plus those queued in front
    assert q.num_running == 0 and q.num_waiting == 0


def test_a_waiter_that_gives_up_leaves_the_queue():
    q = WorkQueue(1, poll_s=0.01)

    class GaveUp(BaseException):  # a stopped Streamlit script raises a BaseException
        pass

    def on_wait(ahead):
        raise GaveUp

    with q.slot():
        with pytest.raises(GaveUp):
            with q.slot(on_wait):
                pass
        assert q.num_waiting == 0 and q.num_running == 1
    assert q.num_running == 0
    with q.slot():  # and the next caller gets the slot at once
        assert q.num_running == 1


def test_two_slots_run_two_at_once():
    q = WorkQueue(2, poll_s=0.01)
    with q.slot(), q.slot():
        assert q.num_running == 2
    with pytest.raises(ValueError, match="at least 1 slot"):
        WorkQueue(0)


def test_result_cache_is_lru():
    c = ResultCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # a is now the most recent
    c.put("c", 3)
    assert "b" not in c and c.get("a") == 1 and c.get("c") == 3 and len(c) == 2
    assert c.get("zz", "none") == "none"


def test_rate_book_learns_and_clamps():
    r = RateBook(weight=0.5)
    assert r.estimate("job", 2.0) == 2.0
    r.observe("job", 2.0, 4.0)  # first run: factor = measured / predicted
    assert r.factor("job") == 2.0 and r.estimate("job", 3.0) == 6.0
    r.observe("job", 1.0, 1.0)  # EMA: 0.5 · 2 + 0.5 · 1
    assert r.factor("job") == 1.5
    r.observe("job", 1.0, 1000.0)  # clamped to 10
    assert r.factor("job") == 0.5 * 1.5 + 0.5 * 10
    r.observe("job", 0.0, 1.0)  # no prior: ignored
    assert r.factor("job") == 5.75


def test_an_exclusive_job_runs_alone_and_keeps_its_place():
    q = WorkQueue(2, poll_s=0.01)
    order = []
    release = threading.Event()

    def job(name, exclusive, hold=False):
        with q.slot(exclusive=exclusive):
            order.append((name, q.num_running))
            if hold:
                release.wait(5)

    first = threading.Thread(target=job, args=("first", False, True))
    first.start()
    while q.num_running == 0:
        time.sleep(0.001)
    excl = threading.Thread(target=job, args=("exclusive", True))
    excl.start()
    while q.num_waiting == 0:
        time.sleep(0.001)
    # a free slot exists, but a normal job queued behind the exclusive one must not overtake it
    late = threading.Thread(target=job, args=("late", False))
    late.start()
    while q.num_waiting < 2:
        time.sleep(0.001)
    assert [name for name, _ in order] == ["first"]
    release.set()
    for t in (first, excl, late):
        t.join(5)
    assert order[0] == ("first", 1)
    assert order[1] == ("exclusive", 1)  # alone
    assert order[2][0] == "late"


def test_the_thread_count_says_why():
    from sim.work.threads import threads_message

    assert threads_message({}, cpu_count=2) == ("home.threads_why.auto", {"cores": "2"})
    assert threads_message({"KVLAB_THREADS": "3"}, cpu_count=2) == ("home.threads_why.env", {"n": "3"})


# --- identical work computed once (issue 39) -------------------------------------------------------


class GaveUp(BaseException):  # a stopped Streamlit script raises a BaseException
    pass


def _start(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_a_run_looks_in_the_result_cache_again_when_its_turn_comes():
    from sim.work.queue import SharedRuns

    q = WorkQueue(1, poll_s=0.01)
    shared = SharedRuns(q, ResultCache(8), poll_s=0.01)
    release, queued = threading.Event(), threading.Event()
    calls, got = [], {}

    def holder():
        with q.slot():
            release.wait(30)

    def asker():
        got["b"] = shared.run("k", lambda: calls.append("b") or "computed by b", on_wait=lambda n: queued.set())

    h = _start(holder)
    while q.num_running == 0:
        time.sleep(0.001)
    b = _start(asker)
    assert queued.wait(30)  # b waits for its turn ...
    shared.results.put("k", "computed elsewhere")  # ... while the same result lands in the cache
    release.set()
    for t in (h, b):
        t.join(30)
    assert got["b"] == ("computed elsewhere", False) and calls == []


def test_identical_work_in_flight_is_computed_once_and_shared():
    from sim.work.queue import SharedRuns

    shared = SharedRuns(WorkQueue(2, poll_s=0.01), ResultCache(8), poll_s=0.01)
    started, joined, release = threading.Event(), threading.Event(), threading.Event()
    calls, got = [], {}

    def compute_a():
        calls.append("a")
        started.set()
        release.wait(30)
        return "result"

    def a():
        got["a"] = shared.run("k", compute_a)

    def b():
        got["b"] = shared.run("k", lambda: calls.append("b") or "again", on_same=lambda n: joined.set())

    ta = _start(a)
    assert started.wait(30)
    assert shared.in_flight("k")
    tb = _start(b)
    assert joined.wait(30)  # b waits for a's run instead of queueing its own (a free slot was there)
    release.set()
    for t in (ta, tb):
        t.join(30)
    assert calls == ["a"]
    assert got == {"a": ("result", True), "b": ("result", False)}
    assert not shared.in_flight("k") and shared.results.get("k") == "result"
    assert shared.run("k", lambda: "never") == ("result", False)


def test_when_the_first_asker_gives_up_the_next_one_computes():
    from sim.work.queue import SharedRuns

    q = WorkQueue(1, poll_s=0.01)
    shared = SharedRuns(q, ResultCache(8), poll_s=0.01)
    release, joined, b_queued = threading.Event(), threading.Event(), threading.Event()
    got = {}

    def holder():
        with q.slot():
            release.wait(30)

    def a_waits(n):
        assert joined.wait(30)
        raise GaveUp  # a user pressed Stop while a waited in the queue

    def a():
        try:
            shared.run("k", lambda: "by a", on_wait=a_waits)
        except GaveUp:
            got["a"] = "gave up"

    def b():
        got["b"] = shared.run("k", lambda: "by b", on_same=lambda n: joined.set(), on_wait=lambda n: b_queued.set())

    h = _start(holder)
    while q.num_running == 0:
        time.sleep(0.001)
    ta = _start(a)
    while not shared.in_flight("k"):
        time.sleep(0.001)
    tb = _start(b)
    assert b_queued.wait(30)  # a left; b took its place in the queue
    release.set()
    for t in (h, ta, tb):
        t.join(30)
    assert got == {"a": "gave up", "b": ("by b", True)}
    assert q.num_running == 0 and q.num_waiting == 0 and not shared.in_flight("k")


def test_the_result_cache_bounds_bytes_keys_included():
    import numpy as np

    mib = 2**20
    c = ResultCache(100, max_bytes=int(2.5 * mib))
    c.put("a", np.zeros(mib, np.uint8))
    c.put("b", np.zeros(mib, np.uint8))
    assert len(c) == 2
    c.put("c", np.zeros(mib, np.uint8))  # 3 MiB in all: the least recently used goes
    assert "a" not in c and "b" in c and "c" in c and c.num_bytes <= c.max_bytes
    assert c.put(b"x" * (2 * mib), 1)  # a key of 2 MiB (a whole trace) counts as much as a value
    assert len(c) == 1 and c.num_bytes <= c.max_bytes
    assert not c.put("huge", np.zeros(3 * mib, np.uint8)) and "huge" not in c  # never kept


def test_the_queue_is_bounded_and_a_full_queue_refuses_without_queueing():
    from sim.refusal import Refusal
    from sim.work.queue import QueueFull

    q = WorkQueue(1, poll_s=0.01, max_waiting=1)
    release, waiting = threading.Event(), threading.Event()

    def holder():
        with q.slot():
            release.wait(30)

    def waiter():
        with q.slot(lambda n: waiting.set()):
            pass

    h = _start(holder)
    while q.num_running == 0:
        time.sleep(0.001)
    w = _start(waiter)
    assert waiting.wait(30) and q.num_waiting == 1
    with pytest.raises(QueueFull) as info:
        with q.slot():
            raise AssertionError("a full queue must not admit")
    assert isinstance(info.value, Refusal) and info.value.fields == {"waiting": "1", "running": "1"}
    assert why(info.value, PSEUDO) == 'work.queue_full(waiting=1, running=1)'
    assert q.num_waiting == 1  # the refused call left nothing behind
    release.set()
    for t in (h, w):
        t.join(30)
    assert q.num_waiting == 0 and q.num_running == 0


def test_the_queue_bound_is_a_setting_refused_by_name_when_wrong():
    from app.work import max_queue
    from sim.work.queue import MAX_WAITING

    assert max_queue({}) == MAX_WAITING == 64 and max_queue({"KVLAB_MAX_QUEUE": "200"}) == 200
    for bad in ("0", "-3", "many", "1e3", "10001"):
        with pytest.raises(ValueError, match="KVLAB_MAX_QUEUE must be a whole number 1..10,000"):
            max_queue({"KVLAB_MAX_QUEUE": bad})
