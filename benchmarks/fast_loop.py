"""The lab's one fast counting loop (sim.serving.counting) against the loops it replaced, at the pages' largest sizes.

    python -m benchmarks.fast_loop [--before REV] [--repeats 3] [--scheduler]

Until December 2026 three fast loops counted the same two policies: `simulate_paged_fast` (the Paging page, up to
100,000 requests), `replay_continuous` (the Serving page's continuous batching and the paging page's block-grid
snapshots, "grid": every block named up to the grid's last frame; "named": every block named to the end) and
`simulate_static` in closed form (the Serving page's static batching, up to 5,000 requests; "batch_sweep": both
policies at the six batch sizes the Serving page sweeps). This
script runs the same workloads at git revision REV (default: the last commit before they became one), from a copy of
that revision's tree in its own process, then with the one loop here; it checks that both give the same integers and
times (a digest of each result's values) and prints the ratio. Each time is the best of --repeats runs.
--scheduler adds the Scheduler stepping the same runs (the reference; about half a minute on 100,000 requests).
The last line is the contract: paging_100k_s=<s> serving_5k_static_s=<s> serving_5k_continuous_s=<s> (the one loop).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BEFORE = "1e8907a"  # main just before the three fast loops became one
ROOT = Path(__file__).resolve().parent.parent


def digest(result) -> str:
    """SHA-256 of a result's values in field order (names left out, so a renamed field still compares): arrays by
    their bytes, nested results and dicts by their values."""
    h = hashlib.sha256()

    def feed(x) -> None:
        if isinstance(x, np.ndarray):
            h.update(np.ascontiguousarray(x, dtype=np.float64 if x.dtype.kind == "f" else np.int64).tobytes())
        elif hasattr(x, "__dataclass_fields__"):
            for f in x.__dataclass_fields__:
                feed(getattr(x, f))
        elif isinstance(x, dict):
            for k in sorted(x):
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                feed(v)
        else:
            h.update(repr(x).encode())

    feed(result)
    return h.hexdigest()


# The same runs at the old revision, in its own tree and process (its modules and names as they were then). Prints
# {row: [best seconds, digest]} as JSON; the digest function is this file's, passed in as source.
BEFORE_SCRIPT = """
import json, sys, time
import numpy as np
from sim.alloc.paged_schedule import simulate_paged_fast, simulate_paged_stepwise
from sim.alloc.pool_views import pool_frames
from sim.alloc.schedule import ServingConfig
from sim.alloc.workload import LengthWorkloadConfig, make_workload
from sim.serving import comparison as cp
from sim.serving import schedulers as sch
from sim.serving.engine import EngineConfig
exec(sys.argv[2])
repeats = int(sys.argv[1])
paging_wl, paging = make_workload(LengthWorkloadConfig(num_requests=100_000)), ServingConfig()
setup = cp.ServingSetup(workload=LengthWorkloadConfig(num_requests=sch.MAX_REQUESTS))
cost = setup.deployment.cost()
slots = setup.deployment.kv_budget(cost)[2]
serving_wl = make_workload(setup.workload)
sched = EngineConfig(setup.max_batch, slots, setup.block_size, setup.watermark, setup.max_num_batched_tokens,
                     chunked=False)
steps = pool_frames(simulate_paged_fast(paging_wl, paging).makespan).distinct_steps
until = max(steps)
rows = {
    "paging_100k": lambda: simulate_paged_fast(paging_wl, paging),
    "paging_100k_grid": lambda: simulate_paged_stepwise(paging_wl, paging, steps, lazy=True, until=until).snapshots,
    "paging_100k_named": lambda: simulate_paged_stepwise(paging_wl, paging, lazy=True).result,
    "serving_5k_static": lambda: sch.simulate_static(serving_wl, sched, cost),
    "serving_5k_continuous": lambda: sch.simulate_continuous(serving_wl, sched, cost),
    "serving_5k_batch_sweep": lambda: cp.sweep_max_batch(setup),
}
out = {}
for name, fn in rows.items():
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = fn()
        best = min(best, time.perf_counter() - t0)
    out[name] = [best, digest(r)]
print(json.dumps(out))
"""


def before_times(rev: str, repeats: int) -> dict[str, tuple[float, str]]:
    """Each row's best time and result digest at `rev`, run from a copy of that revision's tree."""
    import inspect

    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(["git", "archive", rev, "sim", "assets"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        src = "import hashlib\n" + inspect.getsource(digest)
        run = subprocess.run([sys.executable, "-c", BEFORE_SCRIPT, str(repeats), src], cwd=tree, capture_output=True,
                             text=True, check=True)
    return {k: (v[0], v[1]) for k, v in json.loads(run.stdout.strip().splitlines()[-1]).items()}


def _best(fns: dict, repeats: int) -> dict:
    """Best wall time of each callable, running them in turns; also the last result of each."""
    best, out = {k: float("inf") for k in fns}, {}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            out[k] = fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return {k: (best[k], out[k]) for k in fns}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fast_loop")
    ap.add_argument("--before", default=BEFORE, help=f"git revision holding the three loops (default {BEFORE})")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scheduler", action="store_true", help="also time the Scheduler on the same runs (slow)")
    args = ap.parse_args(argv)

    from sim.alloc.paged_schedule import simulate_paged_fast, simulate_paged_stepwise
    from sim.alloc.pool_views import pool_frames
    from sim.alloc.schedule import PoolConfig
    from sim.alloc.workload import LengthWorkloadConfig, make_workload
    from sim.serving import comparison as cp
    from sim.serving import schedulers as sch
    from sim.serving.config import EngineConfig

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; best of {args.repeats}", flush=True)
    try:
        before = before_times(args.before, args.repeats)
    except (subprocess.CalledProcessError, ValueError) as exc:  # report and time the one loop alone
        why = exc.stderr.strip().splitlines()[-1] if getattr(exc, "stderr", None) else str(exc)
        print(f"before ({args.before}): not runnable here ({why}); timing the one loop alone")
        before = {}
    paging_wl, paging = make_workload(LengthWorkloadConfig(num_requests=100_000)), PoolConfig()
    setup = cp.ServingSetup(workload=LengthWorkloadConfig(num_requests=sch.MAX_REQUESTS))
    cost = setup.deployment.cost()
    slots = setup.deployment.kv_budget(cost)[2]
    serving_wl = make_workload(setup.workload)
    sched = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=setup.block_size,
                         watermark=setup.watermark, max_num_batched_tokens=setup.max_num_batched_tokens,
                         enable_chunked_prefill=False)
    # the page's block grid: snapshots at its frames (up to GRID_MAX_STEP), every block named
    steps = pool_frames(simulate_paged_fast(paging_wl, paging).makespan).distinct_steps
    until = max(steps)
    rows = [  # (name, the one loop, the Scheduler)
        ("paging_100k", lambda: simulate_paged_fast(paging_wl, paging),
         lambda: simulate_paged_stepwise(paging_wl, paging).result),
        ("paging_100k_grid",
         lambda: simulate_paged_stepwise(paging_wl, paging, steps, lazy=True, until=until).snapshots, None),
        ("paging_100k_named", lambda: simulate_paged_stepwise(paging_wl, paging, [10**9], lazy=True).result, None),
        ("serving_5k_static", lambda: sch.simulate_static(serving_wl, sched, cost),
         lambda: sch.simulate_static_stepwise(serving_wl, sched, cost)),
        ("serving_5k_continuous", lambda: sch.simulate_continuous(serving_wl, sched, cost), None),
        ("serving_5k_batch_sweep", lambda: cp.sweep_max_batch(setup), None),
    ]
    last = {}
    for name, new, ref in rows:
        fns = {"one loop": new, **({"Scheduler": ref} if args.scheduler and ref else {})}
        got = _best(fns, 1 if args.scheduler and ref else args.repeats)
        t_new, r_new = got["one loop"]
        line = f"{name:24s} one loop {t_new:7.3f} s"
        if name in before:
            t_old, d_old = before[name]
            line += f" | before {t_old:7.3f} s, one loop / before {t_new / t_old:5.2f}x, same result: " \
                    f"{'yes' if digest(r_new) == d_old else 'NO'}"
        if "Scheduler" in got:
            t_ref, r_ref = got["Scheduler"]
            line += f" | Scheduler {t_ref:7.3f} s ({t_ref / t_new:5.1f}x the one loop), same result: " \
                    f"{'yes' if digest(r_new) == digest(r_ref) else 'NO'}"
        print(line, flush=True)
        last[name] = t_new
    print(f"fast_loop paging_100k_s={last['paging_100k']:.3f} serving_5k_static_s={last['serving_5k_static']:.3f} "
          f"serving_5k_continuous_s={last['serving_5k_continuous']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
