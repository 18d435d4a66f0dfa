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
