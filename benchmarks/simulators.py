"""How fast the simulators behind the pages run (a page rerun must feel instant).

    python -m benchmarks.simulators

Each figure is the median of a few runs in this one process. The last line is a contract; each
simulator issue appends its fields to it:
    paging_default_ms=<ms> paging_100k_ms=<ms>
"""

from __future__ import annotations

import statistics
import time


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up (imports, first allocations)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def paging_fields() -> dict[str, float]:
    from sim import paging as pg

    default = pg.make_workload(pg.WorkloadConfig())
    big = pg.make_workload(pg.WorkloadConfig(num_requests=100_000))
    serving = pg.ServingConfig()
    return {
        "paging_default_ms": median_ms(lambda: pg.compare_policies(default, serving), 5),
        "paging_100k_ms": median_ms(lambda: pg.compare_policies(big, serving), 3),
    }


def main() -> None:
    fields = {}
    fields.update(paging_fields())
    for name, ms in fields.items():
        print(f"{name:<24} {ms:10.1f} ms")
    print(" ".join(f"{k}={v:.1f}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
