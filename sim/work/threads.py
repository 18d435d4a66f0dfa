"""How many CPU threads the lab's torch work uses, and the environment variables that choose the
device, without importing torch: the server-wide work queue has one slot per thread, and pages
that never touch the model must not pay torch's import."""

from __future__ import annotations

import os

from sim.refusal import Refusal

DEVICE_ENV = "KVLAB_DEVICE"
THREADS_ENV = "KVLAB_THREADS"


def pick_num_threads(env: dict[str, str] | None = None, cpu_count: int | None = None) -> int:
    """Half the cores, at least 1 and at most 8. A Streamlit server shares its machine (other
    sessions, the browser, here a test runner): torch's OpenMP threads that must wait for a busy
    core spin, and on a loaded 2-core machine two threads made a page 5x slower than one. The
    tiny model's decode steps are too small to gain from more than a few threads anyway."""
    env = os.environ if env is None else env
    raw = env.get(THREADS_ENV, "").strip()
    if raw:
        # set by whoever starts the server: anything but a whole number >= 1 is refused by name, with its value
        if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
            raise Refusal("work.err.threads", name=THREADS_ENV, got=repr(raw[:40]))
        return int(raw)
    cpu_count = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    return max(1, min(cpu_count // 2, 8))


def threads_message(env: dict[str, str] | None = None, cpu_count: int | None = None) -> tuple[str, dict[str, str]]:
    """Why the server runs the number of threads it does, as a message value (key, fields) for the words layer:
    set by KVLAB_THREADS, or half the cores as `pick_num_threads` chooses."""
    env = os.environ if env is None else env
    if env.get(THREADS_ENV, "").strip():
        return "home.threads_why.env", {"n": f"{pick_num_threads(env)}"}
    return "home.threads_why.auto", {"cores": f"{cpu_count if cpu_count is not None else (os.cpu_count() or 1)}"}
