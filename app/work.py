"""Bounded work per click, fair across users.

Every page hands its heavy work (real-model runs, large simulations) to `run_job`, with an estimate
of its seconds from a cost model. Work estimated at `AUTO_RUN_S` or less runs as soon as the page
opens; longer work waits for a button, shows a progress bar, and can be stopped. Real-model work
from every session of the server goes through one FIFO queue with as many slots as torch threads,
and a waiting user sees how many runs are ahead, and can leave the queue (Stop). Results are kept server-wide by
(kind, params), so a second visit, or a second student with the same settings, gets them at once; a run asked for
while the same run is queued or running is not queued again: it waits for that one's result (sim/work/queue.py's
SharedRuns). Work that needs the machine to itself (`once`: timing the model, probing the machine) waits in the same
queue, showing its place and a Stop button, like every other wait.

Every message here (why a run waits, Run / Stop, the queue's "runs ahead") is worded in the page language from
core.json's `work.*`; `what` and a page's own `button` label come worded from the page.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

import streamlit as st

from app.i18n import lang
from sim.msg import Msg
from sim.refusal import Refusal
from sim.words import say, text
from sim.work.queue import MAX_WAITING, MISSING, QueueFull, RateBook, ResultCache, SharedRuns, WorkQueue, remaining_s
from sim.work.threads import pick_num_threads

AUTO_RUN_S = 3.0  # one job that starts when a page opens is estimated at no more than this
PAGE_AUTO_S = 5.0  # and all the jobs one page run starts by itself at no more than this
QUEUE_ENV = "KVLAB_MAX_QUEUE"  # jobs the server's queue may hold waiting (one bounded queue per server process)
AUTO_ENV = "KVLAB_AUTO_RUN_S"  # overrides AUTO_RUN_S (page tests raise it so every section runs)
BUDGET_KEY = "_work.auto_left"  # reset at the start of every page run (UrlState does it)
SHOWN_KEY = "_work.shown"  # job kind -> the result run_job last handed this session (what its page drew)
PROGRESS_EVERY_S = 0.1  # redraw the bar at most this often (each redraw is also where a Stop lands)
WAIT_REDRAW_S = 2.0  # while queued, redraw "k runs ahead" when k changes, else this often
RESULT_BYTES = 64 * 2**20  # the shared result cache holds at most this much (keys included)
LOG_ENV = "KVLAB_WORK_LOG"  # "1": log why a run waits for its button (benchmarks/classroom.py reads it)
_LOG = logging.getLogger("kvlab.work")

T = TypeVar("T")
Progress = Callable[[float, str], None]
_IMPORT_LOCK = threading.Lock()


def import_shared_libraries() -> None:
    """numpy and pandas wholly imported before any page runs. plotly looks pandas up in sys.modules without
    importing it (to check whether a value is a Series), so when thirty sessions arrived at once one session's
    figure was validated while another's thread was still halfway through importing pandas: "partially initialized
    module 'pandas' has no attribute 'Series'" on 24 of 30 pages. The first run imports them under a lock; the
    others wait for it, then find them complete."""
    with _IMPORT_LOCK:
        import numpy  # noqa: F401
        import pandas  # noqa: F401


@dataclass
class Server:
    queue: WorkQueue
    results: ResultCache
    rates: RateBook
    shared: SharedRuns  # run_job's results, each computed once
    measured: SharedRuns  # once()'s: measurements of this machine, kept apart from the jobs' LRU

    @staticmethod
    def make(num_slots: int) -> Server:
        queue, results = WorkQueue(num_slots, max_waiting=max_queue()), ResultCache(128, RESULT_BYTES)
        return Server(queue, results, RateBook(), SharedRuns(queue, results), SharedRuns(queue, ResultCache(64)))


def max_queue(env: dict[str, str] | None = None) -> int:
    """How many jobs the server's queue holds waiting (KVLAB_MAX_QUEUE, default MAX_WAITING); a bad value is
    refused by name."""
    raw = (os.environ if env is None else env).get(QUEUE_ENV, "").strip()
    if not raw:
        return MAX_WAITING
    if not raw.isdigit() or not 1 <= int(raw) <= 10_000:
        raise Refusal("work.bad_queue", name=QUEUE_ENV, got=repr(raw[:40]))
    return int(raw)


@st.cache_resource(show_spinner=False)
def server() -> Server:
    """One per server process, shared by every session."""
    if os.environ.get(LOG_ENV) == "1" and not _LOG.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s kvlab.work %(message)s"))
        _LOG.addHandler(handler)
        _LOG.setLevel(logging.INFO)
    return Server.make(pick_num_threads())


def work_clock() -> Callable[[], float]:
    """The clock a run's cost is counted on. With one torch thread (pick_num_threads: a 2-core machine) all of a
    run's work is done by the thread that runs it, so its CPU time (time.thread_time) is the run's cost, and other
    processes' load does not count: measured by wall time while thirty browsers loaded two cores, a 0.2-s Decode
    cost run was estimated at 3.2 s and held for a button nobody pressed. With more threads, wall time."""
    return time.thread_time if pick_num_threads() == 1 else time.perf_counter


def fmt_seconds(s: float, lang: str = "en") -> str:
    if s < 1:
        return text(lang, "work.under_a_second")
    if s < 90:
        return text(lang, "work.about_s", s=f"{s:.0f}")
    return text(lang, "work.about_min", m=f"{s / 60:.1f}")


def auto_limits() -> tuple[float, float]:
    """(seconds one job may start unasked, seconds one page run may start unasked)."""
    raw = os.environ.get(AUTO_ENV, "").strip()
    try:
        one = float(raw) if raw else AUTO_RUN_S
    except ValueError:
        one = AUTO_RUN_S
    one = max(0.0, one)
    return one, one * PAGE_AUTO_S / AUTO_RUN_S


def begin_page_run() -> None:
    """A page run starts: it may start a few seconds of work without a button."""
    st.session_state[BUDGET_KEY] = auto_limits()[1]


def estimate_basis(kind: str, prior_s: float, lang: str = "en") -> str:
    """Where a job's estimate comes from: the page's cost model, and how this server's own runs of the kind have
    corrected it."""
    rates = server().rates
    n = rates.num_runs(kind)
    if n == 0:
        return text(lang, "work.basis.model", prior=fmt_seconds(prior_s, lang))
    return text(lang, "work.basis.learned", prior=fmt_seconds(prior_s, lang), factor=f"{rates.factor(kind):.2f}",
                n=f"{n:,}")


def job_seconds(kind: str, params: Hashable) -> float | None:
    """How long the job with these params took when it ran on this server (None: not run, or evicted)."""
    done = server().results.get((kind, params))
    return None if done is None else done[1]


def _flag(kind: str, what: str) -> str:
    return f"_work.{what}.{kind}"


def _set(key: str) -> None:
    st.session_state[key] = True


def run_job(kind: str, params: Hashable, estimate_s: float, fn: Callable[[Progress], T], *, what: str,
            go: bool | None = None, real_model: bool = True, button: str | None = None, auto: bool = True) -> T | None:
    """The job's result, computed now or earlier; None while it waits for its button.

    kind: the job's name, unique across pages (it keys the result cache and the learned rates);
    params: everything the result depends on; estimate_s: the cost model's seconds for it;
    fn(progress): does the work, calling progress(fraction, text) now and then;
    go: whether the page's own button (labelled `button`) was pressed this run; None: run_job draws
    its own `button` (None: "Run" in the page language); auto: False makes it wait for the button however short it is (a grid of runs
    that a link should never start). The same run already queued or running for another session is joined
    without a button: waiting for its result costs this server nothing.
    """
    srv = server()
    lg = lang()
    button = button or text(lg, "work.run")
    key = (kind, params)
    done = srv.results.get(key)
    if done is not None:
        return _shown(kind, done[0])
    ss = st.session_state
    stopped = ss.pop(_flag(kind, "stopped"), False)
    own_button = go is None
    go = bool(go) or ss.pop(_flag(kind, "go"), False)
    joining = srv.shared.in_flight(key)
    estimate = srv.rates.estimate(kind, estimate_s)
    one, page_total = auto_limits()
    left = ss.get(BUDGET_KEY, page_total)
    if not go and (stopped or (not joining and (not auto or estimate > min(one, left)))):
        _LOG.log(logging.INFO, "gated=%s estimate_s=%.3f prior_s=%.3f factor=%.2f limit_s=%.3f stopped=%s",
                  kind, estimate, estimate_s, srv.rates.factor(kind), min(one, left), stopped)
        took = fmt_seconds(estimate, lg)
        why = (text(lg, "work.stopped") if stopped else
               text(lg, "work.takes", t=took) if not auto else
               text(lg, "work.would_take", t=took) if estimate > one
               else text(lg, "work.budget_spent", t=took, spent=fmt_seconds(page_total - left, lg)))
        st.info(text(lg, "work.press", why=why, what=what, button=button) + " " + estimate_basis(kind, estimate_s, lg),
                icon=":material/play_circle:")
        if own_button:
            st.button(button, key=_flag(kind, "button"), type="primary", on_click=_set, args=(_flag(kind, "go"),))
        return None

    status, bar_slot, stop_slot = st.empty(), st.empty(), st.empty()
    stop_slot.button(text(lg, "work.stop"), key=_flag(kind, "stop"), on_click=_set, args=(_flag(kind, "stopped"),),
                     help=text(lg, "work.stop_help"))

    wait = _waiting_message(status, text(lg, "work.waiting_model"), lg)
    same = _same_run_message(status, what, lg)

    head = f"{what} ({fmt_seconds(estimate, lg)}: {estimate_basis(kind, estimate_s, lg)})"
    last, began = [0.0], [time.perf_counter()]

    def progress(fraction: float, note: str | Msg = "") -> None:
        """`note` is words, or a message value worded here in the language of the page that started the run."""
        now = time.perf_counter()
        if now - last[0] >= PROGRESS_EVERY_S or fraction >= 1:
            last[0] = now
            elapsed, f = now - began[0], min(1.0, max(0.0, fraction))
            pace = text(lg, "work.pace", elapsed=f"{elapsed:,.0f}", left=fmt_seconds(remaining_s(elapsed, f, estimate), lg))
            line = f"{what} — {pace}" if elapsed >= 1 and f < 1 else head  # the estimate corrected as the run goes
            shown = say(lg, note) if isinstance(note, Msg) else note
            bar_slot.progress(f, text=f"{line} — {shown}" if shown else line)

    clock = work_clock()

    def compute() -> tuple[T, float]:
        status.empty()
        bar_slot.progress(0.0, text=head)
        began[0] = time.perf_counter()  # the wall clock the user waits by; the rates learn from the work clock
        t0 = clock()
        out = fn(progress)
        spent = clock() - t0
        srv.rates.observe(kind, estimate_s, spent)
        return out, spent

    def clear() -> None:
        for slot in (status, bar_slot, stop_slot):
            slot.empty()

    try:
        (result, spent), computed = srv.shared.run(key, compute, use_queue=real_model, on_wait=wait, on_same=same)
    except QueueFull as exc:  # the queue is full: say so, queue nothing; the page's button runs it later
        clear()
        st.warning(say(lg, exc.msg), icon=":material/hourglass_disabled:")
        return None
    except Exception:
        clear()
        raise
    clear()
    _LOG.log(logging.INFO, "%s=%s seconds=%.3f", "computed" if computed else "shared", kind, spent)
    if computed and not go:  # what it was expected to cost, or what it did cost if more
        ss[BUDGET_KEY] = left - max(estimate, spent)
    return _shown(kind, result)


def _shown(kind: str, result: T) -> T:
    """Keep the result a page is about to draw under its job's kind (tests read what the page drew from here)."""
    st.session_state.setdefault(SHOWN_KEY, {})[kind] = result
    return result


def _waiting_message(slot, what: str, lang: str = "en") -> Callable[[int], None]:
    """on_wait for the queue: says how many runs are ahead, redrawn only when that changes (or every
    WAIT_REDRAW_S, each redraw being where a Stop or a rerun can land): thirty waiting sessions
    must not flood their browsers."""
    last = {"ahead": None, "at": 0.0}

    def wait(num_ahead: int) -> None:
        now = time.perf_counter()
        if num_ahead != last["ahead"] or now - last["at"] >= WAIT_REDRAW_S:
            last.update(ahead=num_ahead, at=now)
            slot.info(text(lang, "work.ahead.one" if num_ahead == 1 else "work.ahead.many", what=what, n=f"{num_ahead:,}"),
                      icon=":material/hourglass_top:")

    return wait


def _same_run_message(slot, what: str, lang: str = "en") -> Callable[[int], None]:
    """on_same for SharedRuns: another session's identical run is queued (that many runs ahead of it) or running;
    redrawn as _waiting_message is."""
    last = {"ahead": None, "at": 0.0}

    def wait(num_ahead: int) -> None:
        now = time.perf_counter()
        if num_ahead != last["ahead"] or now - last["at"] >= WAIT_REDRAW_S:
            last.update(ahead=num_ahead, at=now)
            key = ("work.same.running" if num_ahead == 0 else
                   "work.same.one" if num_ahead == 1 else "work.same.many")
            slot.info(text(lang, key, what=what, n=f"{num_ahead:,}"), icon=":material/hourglass_top:")

    return wait


class _Wait:
    """A wait with its place on the page: where it is in the queue (or whose identical run it waits for), and a
    Stop button that leaves the queue. A session that left sees so, and a Run button, and the page stops there
    (what follows needs this work) until Run is pressed."""

    def __init__(self, name: str, what: str, lang: str, waiting: str | None = None) -> None:
        self.flag, self.button_key, self.what, self.lang = f"_work.left.{name}", f"_work.leave.{name}", what, lang
        ss = st.session_state
        if ss.pop(self.flag, False):
            st.info(text(lang, "work.left", what=what, button=text(lang, "work.run")), icon=":material/play_circle:")
            st.button(text(lang, "work.run"), key=f"_work.again.{name}", type="primary")
            st.stop()
        self.status, self.stop_slot = st.empty(), st.empty()
        self._queue = _waiting_message(self.status, waiting or what, lang)
        self._same = _same_run_message(self.status, what, lang)
        self._stop_shown = False

    def _stop(self) -> None:
        if not self._stop_shown:
            self._stop_shown = True
            self.stop_slot.button(text(self.lang, "work.stop"), key=self.button_key, on_click=_set, args=(self.flag,),
                                  help=text(self.lang, "work.leave_help"))

    def queue(self, num_ahead: int) -> None:
        self._stop()
        self._queue(num_ahead)

    def same(self, num_ahead: int) -> None:
        self._stop()
        self._same(num_ahead)

    def clear(self) -> None:
        self.status.empty()
        self.stop_slot.empty()


def queued(fn: Callable[[], T], what: str) -> T:
    """Run short real-model work (well under a second) in its turn in the server's queue; while it waits the page
    shows its place and a Stop button."""
    lg = lang()
    wait = _Wait(f"queued.{what}", what, lg, text(lg, "work.what_waiting", what=what))
    try:
        with server().queue.slot(wait.queue):
            wait.clear()
            return fn()
    except QueueFull as exc:
        st.warning(say(lg, exc.msg), icon=":material/hourglass_disabled:")
        st.stop()
    finally:
        wait.clear()


def once(kind: str, params: Hashable, fn: Callable[[], T], *, what: str, exclusive: bool = True) -> T:
    """fn() computed once per server process and kept (a measurement of this machine or model): with the machine
    to itself when `exclusive` (a timing, or a process-wide switch such as forcing an SDPA backend), in its turn
    in the shared queue. While it waits the page shows its place and a Stop button; a session asking while it is
    computed waits for that result."""
    srv = server()
    key = (kind, params)
    hit = srv.measured.results.get(key, MISSING)
    if hit is not MISSING:
        return hit
    lg = lang()
    wait = _Wait(f"once.{kind}", what, lg)

    def compute() -> T:
        wait.clear()
        with st.spinner(what):
            return fn()

    try:
        value, _ = srv.measured.run(key, compute, exclusive=exclusive, on_wait=wait.queue, on_same=wait.same)
    except QueueFull as exc:
        st.warning(say(lg, exc.msg), icon=":material/hourglass_disabled:")
        st.stop()
    finally:
        wait.clear()
    return value
