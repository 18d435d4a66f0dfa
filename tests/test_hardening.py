"""Issue 39, the small ones: a FlexAttention compile child dies with its parent; presenter mode's `present=`
is checked like every other URL value; the shared result cache bounds bytes."""

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

SPAWN = ("import sys, time\n"
         "from sim.attention.flex import start_child\n"
         "p = start_child(stdin=int(sys.argv[1]))\n"
         "print(p.pid, flush=True)\n"
         "time.sleep(600)\n")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_flex_child_does_not_outlive_a_server_killed_with_sigkill():
    """The child waits on a stdin that this test keeps open (as a compile keeps it busy): when its parent, the
    'server', is killed with SIGKILL, the child must go too instead of compiling on for half a minute."""
    r, w = os.pipe()
    server = subprocess.Popen([sys.executable, "-c", SPAWN, str(r)], pass_fds=(r,), stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    child = None
    try:
        child = int(server.stdout.readline())
        assert _alive(child)
        server.kill()
        server.wait()
        for _ in range(600):  # up to a minute, never a hang; the watchdog polls every 0.2 s
            if not _alive(child):
                break
            time.sleep(0.1)
        assert not _alive(child), "the FlexAttention child outlived its parent's kill -9"
    finally:
        os.close(r)
        os.close(w)
        if server.poll() is None:
            server.kill()
        if child is not None and _alive(child):
            os.kill(child, 9)


def test_model_rates_count_the_work_not_the_wait_for_a_core(monkeypatch):
    """Issue 39, item 9: rates timed by wall clock while thirty browsers loaded two cores made a 0.2-s Decode cost
    run look like 3.2 s, above the 3-s limit, so it waited for a button nobody pressed. On the work clock (one torch
    thread: the thread's CPU time) time spent waiting for a core does not count. Here a forward pass that only
    waits (sleeps 50 ms, next to no CPU) must fit at a tenth of what the wall clock gives, 50 ms a call, at most."""
    import sim.model.generate as generate
    from app.work import work_clock
    from sim.model.measure import measure_rates
    from tests.conftest import random_model

    monkeypatch.setenv("KVLAB_THREADS", "1")
    assert work_clock() is time.thread_time
    monkeypatch.setenv("KVLAB_THREADS", "2")
    assert work_clock() is time.perf_counter

    monkeypatch.setattr(generate, "prefill", lambda *args, **kwargs: time.sleep(0.05))
    # The rates are timed on the clock they are given, never the wall clock: a clock that moves 1 µs a reading, what
    # a thread's CPU time does around a call that only waits, whatever the load (no measured time in this test).
    readings = iter(range(10**9))
    rates = measure_rates(random_model(), attn_impl="sdpa", repeats=1, clock=lambda: next(readings) * 1e-6)
    # the wall clock gives at least 0.05 s a call, 8.8 s for the 176 calls of the work below: ten times less at most
    assert rates.per_call_s < 0.005 and rates.seconds(generate_work()) < 0.88, rates


def generate_work():
    from sim.work.run_cost import cached_work, naive_work

    return cached_work(26, 88) + naive_work(26, 88)  # the classroom's slowest Decode cost link


def test_pandas_is_imported_whole_before_any_page_of_the_app_runs():
    """Issue 39, item 9: with thirty sessions starting at once, plotly (which reads pandas from sys.modules without
    importing it) met a half-imported pandas in 24 of 30 sessions. The app's entry imports numpy and pandas under one
    lock before its pages: in a fresh interpreter, after the entry's call, pandas is whole."""
    import ast

    tree = ast.parse((ROOT / "app" / "main.py").read_text())
    calls = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", "") == "import_shared_libraries"]
    page_imports = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and n.module in ("app.i18n", "app.present", "app.registry", "app.sidebar")]
    assert calls and min(calls) < min(page_imports)
    code = ("import sys\nfrom app.work import import_shared_libraries\nimport_shared_libraries()\n"
            "assert hasattr(sys.modules['pandas'], 'Series') and hasattr(sys.modules['numpy'], 'ndarray')\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
