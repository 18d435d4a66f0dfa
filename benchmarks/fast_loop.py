"""The lab's one fast counting loop (sim.serving.counting) against the loops it replaced, at the pages' largest sizes.

    python -m benchmarks.fast_loop [--before REV] [--repeats 3] [--scheduler]

Until December 2026 three fast loops counted the same two policies: `simulate_paged_fast` (the Paging page, up to
100,000 requests), `replay_continuous` (the Serving page's continuous batching and the paging page's block-grid
snapshots, "grid": every block named up to the grid's last frame; "named": every block named to the end) and
`simulate_static` in closed form (the Serving page's static batching, up to 5,000 requests; "batch_sweep": both
policies at the six batch sizes the Serving page sweeps). This
script loads those three from git revision REV (default: the last commit before they became one), runs each next to
the one loop on the same workloads in this one process, checks that both give the same integers and times, and
prints the ratio. Each time is the best of --repeats runs, taken in turns so that a busy machine slows both alike.
--scheduler adds the Scheduler stepping the same runs (the reference; about half a minute on 100,000 requests).
The last line is the contract: paging_100k_s=<s> serving_5k_static_s=<s> serving_5k_continuous_s=<s> (the one loop).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

BEFORE = "1e8907a"  # main just before the three fast loops became one
ROOT = Path(__file__).resolve().parent.parent


def _old_module(rev: str, path: str, name: str) -> types.ModuleType:
    """A module as it was at `rev`, loaded from git beside today's (its imports resolve to today's sim, except the
    old schedulers module, which resolves to its own old copy)."""
    src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    src = src.replace("from sim.serving.schedulers import", "from _before_schedulers import")
    mod = types.ModuleType(name)
    mod.__file__ = f"{rev}:{path}"
    sys.modules[name] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)  # noqa: S102 - our own file at an older commit
    return mod


def _best(fns: dict, repeats: int) -> dict:
    """Best wall time of each callable, running them in turns; also the last result of each."""
    best, out = {k: float("inf") for k in fns}, {}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            out[k] = fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return {k: (best[k], out[k]) for k in fns}


def _with(module, name: str, value, fn):
    """fn() with module.name set to value for the call."""
    kept = getattr(module, name)
    setattr(module, name, value)
    try:
        return fn()
    finally:
        setattr(module, name, kept)


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    for f in a.__dataclass_fields__:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, np.ndarray):
            if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                return False
        elif hasattr(x, "__dataclass_fields__") or isinstance(x, dict) and x and hasattr(
                next(iter(x.values())), "__dataclass_fields__"):
            if not _same(x, y):
                return False
        elif x != y:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fast_loop")
    ap.add_argument("--before", default=BEFORE, help=f"git revision holding the three loops (default {BEFORE})")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scheduler", action="store_true", help="also time the Scheduler on the same runs (slow)")
    args = ap.parse_args(argv)

    from sim.alloc.paged_schedule import simulate_paged_fast, simulate_paged_stepwise
    from sim.alloc.pool_views import pool_frames
    from sim.alloc.schedule import ServingConfig
    from sim.alloc.workload import LengthWorkloadConfig, make_workload
    from sim.serving import comparison as cp
    from sim.serving import schedulers as sch

    try:
        old_sch = _old_module(args.before, "sim/serving/schedulers.py", "_before_schedulers")
        old_paged = _old_module(args.before, "sim/alloc/paged_schedule.py", "_before_paged_schedule")
    except Exception as exc:  # noqa: BLE001 - report and time the one loop alone
        print(f"before ({args.before}): not loadable here ({type(exc).__name__}: {exc}); timing the one loop alone")
        old_sch = old_paged = None

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; best of {args.repeats}")
    paging_wl, paging = make_workload(LengthWorkloadConfig(num_requests=100_000)), ServingConfig()
    setup = cp.ServingSetup(workload=LengthWorkloadConfig(num_requests=sch.MAX_REQUESTS))
    cost = setup.deployment.cost()
    slots = setup.deployment.kv_budget(cost)[2]
    serving_wl = make_workload(setup.workload)
    from sim.serving.config import EngineConfig

    sched = EngineConfig(max_num_seqs=setup.max_num_seqs, capacity_tokens=slots, block_size=setup.block_size,
                         watermark=setup.watermark, max_num_batched_tokens=setup.max_num_batched_tokens,
                         enable_chunked_prefill=False)

    # the page's block grid: snapshots at its frames (up to GRID_MAX_STEP), every block named
    steps = pool_frames(simulate_paged_fast(paging_wl, paging).makespan).distinct_steps
    until = max(steps)
    rows = [  # (name, the one loop, the loop it replaced, the Scheduler)
        ("paging_100k", lambda: simulate_paged_fast(paging_wl, paging),
         old_paged and (lambda: old_paged.simulate_paged_fast(paging_wl, paging)),
         lambda: simulate_paged_stepwise(paging_wl, paging).result),
        ("paging_100k_grid", lambda: simulate_paged_stepwise(paging_wl, paging, steps, lazy=True, until=until).snapshots,
         old_paged and (lambda: old_paged.simulate_paged_stepwise(paging_wl, paging, steps, lazy=True,
                                                                  until=until).snapshots), None),
        ("paging_100k_named", lambda: simulate_paged_stepwise(paging_wl, paging, [10**9], lazy=True).result,
         old_paged and (lambda: old_paged.simulate_paged_stepwise(paging_wl, paging, lazy=True).result), None),
        ("serving_5k_static", lambda: sch.simulate_static(serving_wl, sched, cost),
         old_sch and (lambda: old_sch.simulate_static(serving_wl, sched, cost)),
         lambda: sch.simulate_static_stepwise(serving_wl, sched, cost)),
        ("serving_5k_continuous", lambda: sch.simulate_continuous(serving_wl, sched, cost),
         old_sch and (lambda: old_sch.simulate_continuous(serving_wl, sched, cost)), None),
        ("serving_5k_batch_sweep", lambda: cp.sweep_max_batch(setup),
         old_sch and (lambda: _with(cp, "simulate", old_sch.simulate, lambda: cp.sweep_max_batch(setup))), None),
    ]
    last = {}
    for name, new, old, ref in rows:
        fns = {"one loop": new}
        if old:
            fns["before"] = old
        if args.scheduler and ref:
            fns["Scheduler"] = ref
        got = _best(fns, 1 if args.scheduler and ref else args.repeats)
        t_new, r_new = got["one loop"]
        line = f"{name:24s} one loop {t_new:7.3f} s"
        if "before" in got:
            t_old, r_old = got["before"]
            line += f" | before {t_old:7.3f} s, one loop / before {t_new / t_old:5.2f}x, same result: " \
                    f"{'yes' if _same(r_new, r_old) else 'NO'}"
        if "Scheduler" in got:
            t_ref, r_ref = got["Scheduler"]
            line += f" | Scheduler {t_ref:7.3f} s ({t_ref / t_new:5.1f}x the one loop), same result: " \
                    f"{'yes' if _same(r_new, r_ref) else 'NO'}"
        print(line, flush=True)
        last[name] = t_new
    print(f"fast_loop paging_100k_s={last['paging_100k']:.3f} serving_5k_static_s={last['serving_5k_static']:.3f} "
          f"serving_5k_continuous_s={last['serving_5k_continuous']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
