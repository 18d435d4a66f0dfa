"""FlexAttention, compiled and timed in a child process with a hard timeout.

Its compile can take tens of seconds on a small CPU; a child process is the only way to guarantee
it never hangs the caller. The parent (`time_flex`) starts

    python -m sim.attention.flex --flex-child

writes the request as JSON on its stdin and reads one result line (`FLEX_MARKER` + JSON) back.
The one-time compile cost is reported apart from the per-call time.

The child never outlives its parent: it is told the parent's pid and, from before it reads its request, a
watchdog thread kills the child's own process group (it and its compile workers) as soon as the parent is gone,
so a server killed with `kill -9` leaves no compile running on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from sim.attention.implementations import make_inputs, sdpa_attention
from sim.attention.measure import KernelTiming, Stats, first_line, max_abs_diff, run_measuring_peak, time_callable
from sim.attention.shapes import AttentionShape

ROOT = Path(__file__).resolve().parents[2]
FLEX_MARKER = "KVLAB_FLEX_RESULT "


def time_flex(shape: AttentionShape, device, budget_s: float = 0.25, timeout_s: float = 120.0,
              on_wait: Callable[[float], None] | None = None) -> KernelTiming:
    """Compile and time FlexAttention in a separate Python process (killed after `timeout_s`).

    on_wait(seconds so far) is called about once a second while the child works; if it raises (a
    user pressed Stop), the child and its compile workers are killed and the exception goes on."""
    import torch

    request = json.dumps({"shape": asdict(shape), "device": str(device), "budget_s": budget_s,
                          "threads": torch.get_num_threads()})
    proc = start_child()
    t0 = time.perf_counter()
    try:
        pending = request
        while True:
            elapsed = time.perf_counter() - t0
            try:
                stdout, stderr = proc.communicate(pending, timeout=max(0.01, min(1.0, timeout_s - elapsed)))
                break
            except subprocess.TimeoutExpired:
                pending = None  # sent once; communicate() may be retried without losing output
                elapsed = time.perf_counter() - t0
                if elapsed >= timeout_s:
                    _kill_group(proc)
                    return KernelTiming("flex", "timed out", f"compiling and timing FlexAttention took over "
                                        f"{timeout_s:.0f} s here and was stopped (torch.compile is slow on a small CPU)")
                if on_wait is not None:
                    on_wait(elapsed)
    finally:
        if proc.poll() is None:  # an exception other than the timeout
            _kill_group(proc)
    for line in reversed(stdout.splitlines()):
        if line.startswith(FLEX_MARKER):
            got = json.loads(line[len(FLEX_MARKER):])
            break
    else:
        tail = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return KernelTiming("flex", "failed", f"the FlexAttention process gave no result: {tail[:300]}")
    if got["status"] != "ok":
        return KernelTiming("flex", got["status"], got["reason"])
    return KernelTiming("flex", "ok", "", Stats(tuple(got["times_s"])), shape.flops, got["peak_bytes"],
                        got["max_abs_diff"], got["compile_s"])


def start_child(stdin=subprocess.PIPE) -> subprocess.Popen:
    """The FlexAttention child, in its own process group (so that a timeout also stops the compile workers
    torch.compile starts), told this process's pid (it exits when this process is gone)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "sim.attention.flex", "--flex-child", str(os.getpid())],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            start_new_session=True)


def exit_with_parent(parent_pid: int, poll_s: float = 0.2) -> threading.Thread:
    """Start a daemon thread that kills this process (and its process group, when it leads one: the compile
    workers) once its parent is no longer `parent_pid` (the parent died and the child was re-parented)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        if os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="flex-parent-watchdog", daemon=True)
    thread.start()
    return thread


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


def _flex_child(request: dict) -> dict:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from sim.model.device import synchronize

    shape = AttentionShape(**request["shape"])
    device = torch.device(request["device"])
    torch.set_num_threads(int(request["threads"]))
    q, k, v = make_inputs(shape, device)
    reference = sdpa_attention(q, k, v, shape.is_causal, "math")  # (B, H, Nq, D)
    offset = shape.num_keys - shape.num_queries  # query i sits at position offset + i

    def visible(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    t0 = time.perf_counter()
    block_mask = (create_block_mask(visible, None, None, shape.num_queries, shape.num_keys, device=str(device))
                  if shape.is_causal else None)
    compiled = torch.compile(flex_attention, dynamic=False)
    out = compiled(q, k, v, block_mask=block_mask)
    synchronize(device)
    first_s = time.perf_counter() - t0

    def fn():
        return compiled(q, k, v, block_mask=block_mask)

    _out, peak = run_measuring_peak(fn, device)
    stats = time_callable(fn, budget_s=float(request["budget_s"]), warmup=0)
    return {"status": "ok", "reason": "", "times_s": list(stats.times_s), "compile_s": max(0.0, first_s - stats.median_s),
            "peak_bytes": peak, "max_abs_diff": max_abs_diff(out, reference)}


def _flex_child_main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        result = _flex_child(request)
    except Exception as exc:  # noqa: BLE001 - any compile error is reported to the parent as text
        result = {"status": "failed", "reason": f"{type(exc).__name__}: {first_line(exc)}"}
    sys.stdout.write(FLEX_MARKER + json.dumps(result) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--flex-child" and sys.argv[2].isdigit():
        exit_with_parent(int(sys.argv[2]))  # before anything that can block: reading stdin, compiling
        _flex_child_main()
