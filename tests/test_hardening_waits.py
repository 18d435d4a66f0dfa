"""Issue 39, item 4: every wait shows its place in the queue and can be left, work that needs the machine to itself
(Roofline's probe of this machine) included. The queue is held by another 'session' (a thread) until the page has
shown its place: no timing, only events."""

import threading

import pytest
from streamlit.testing.v1 import AppTest

from app import work
from sim.work.queue import ResultCache, SharedRuns
from tests.conftest import PAGES_DIR


@pytest.fixture
def fresh_server(monkeypatch):
    """The server's queue with nothing measured yet (earlier tests in this process measured this machine)."""
    srv = work.server()
    monkeypatch.setattr(srv, "measured", SharedRuns(srv.queue, ResultCache(64)))
    return srv


@pytest.fixture
def seen(monkeypatch):
    """(what, runs ahead) for every queue position a page drew, and the Stop buttons it drew while waiting; the
    first drawing sets `drawn`."""
    record = {"ahead": [], "stops": [], "drawn": threading.Event()}
    real_message, real_stop = work._waiting_message, work._Wait._stop

    def message(slot, what, lang="en"):
        inner = real_message(slot, what, lang)

        def wait(num_ahead):
            inner(num_ahead)
            record["ahead"].append((what, num_ahead))
            record["drawn"].set()
        return wait

    def stop(self):
        record["stops"].append(self.button_key)
        real_stop(self)

    monkeypatch.setattr(work, "_waiting_message", message)
    monkeypatch.setattr(work._Wait, "_stop", stop)
    return record


def _hold_queue_until(srv, event: threading.Event) -> threading.Thread:
    entered = threading.Event()

    def holder():  # the machine to itself: every slot taken, however many torch threads the queue has slots for
        with srv.queue.slot(exclusive=True):
            entered.set()
            event.wait(60)

    t = threading.Thread(target=holder, daemon=True)
    t.start()
    assert entered.wait(30)
    return t


def test_the_machine_probe_shows_its_place_and_a_stop_while_another_run_holds_the_machine(fresh_server, seen):
    from sim.words import text

    holder = _hold_queue_until(fresh_server, seen["drawn"])
    at = AppTest.from_file(str(PAGES_DIR / "roofline.py"), default_timeout=300)
    at.query_params["probe"] = "1"
    at.run()
    holder.join(60)
    assert not at.exception, [e.value for e in at.exception]
    probing = text("en", "roofline.probing")
    assert (probing, 1) in seen["ahead"], seen["ahead"]  # before the fix: a silent wait (no place, no Stop)
    assert "_work.leave.once.roofline.probe" in seen["stops"]
    assert fresh_server.measured.results.get(("roofline.probe", ())) is not None  # then it ran, once


def test_a_wait_that_was_left_stays_left_until_run_is_pressed(fresh_server):
    at = AppTest.from_file(str(PAGES_DIR / "roofline.py"), default_timeout=300)
    at.query_params["probe"] = "1"
    at.session_state["_work.left.once.roofline.probe"] = True  # what the Stop button's click sets
    at.run()
    assert not at.exception
    assert any("You left the queue" in i.value for i in at.info), [i.value for i in at.info]
    assert [b for b in at.button if b.key == "_work.again.once.roofline.probe"]
    assert fresh_server.measured.results.get(("roofline.probe", ())) is None  # nothing ran
    at.button(key="_work.again.once.roofline.probe").click().run()
    assert not at.exception and fresh_server.measured.results.get(("roofline.probe", ())) is not None


def _short_queued_work():
    import streamlit as st

    from app.work import queued

    st.write(f"answer {queued(lambda: 41 + 1, 'Adding')}")


def test_short_queued_work_shows_its_place_and_a_stop(fresh_server, seen):
    holder = _hold_queue_until(fresh_server, seen["drawn"])
    at = AppTest.from_function(_short_queued_work, default_timeout=120).run()
    holder.join(60)
    assert not at.exception
    assert [n for _, n in seen["ahead"]][:1] == [1]
    assert seen["stops"] == ["_work.leave.queued.Adding"]
    assert at.markdown[-1].value == "answer 42"
