"""The server-wide queue: FIFO, bounded slots, nobody blocked by a caller that gave up."""

import threading
import time

import pytest

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
