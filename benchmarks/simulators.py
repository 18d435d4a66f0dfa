"""How fast the simulators behind the pages run (a page rerun must feel instant).

    python -m benchmarks.simulators

Each figure is the median of a few runs in this one process. The last line is a contract; each
simulator issue appends its fields to it:
    paging_default_ms=<ms> paging_100k_ms=<ms> prefix_default_ms=<ms> prefix_page_ms=<ms>
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
    from sim.alloc import paging as pg

    default = pg.make_workload(pg.WorkloadConfig())
    big = pg.make_workload(pg.WorkloadConfig(num_requests=100_000))
    serving = pg.ServingConfig()
    return {
        "paging_default_ms": median_ms(lambda: pg.compare_policies(default, serving), 5),
        "paging_100k_ms": median_ms(lambda: pg.compare_policies(big, serving), 3),
    }


def prefix_fields() -> dict[str, float]:
    """prefix_default_ms: the default workload drawn and run through the prefix cache (one page rerun's
    simulation); prefix_page_ms: everything the Prefix caching page simulates on a cold start (both layouts,
    every workload, the capacity and block-size sweeps, the tree)."""
    from dataclasses import replace

    from sim.alloc import prefix_cache as pc

    cfg, cache = pc.WorkloadConfig(), pc.CacheConfig()

    def page() -> None:
        for layout in pc.LAYOUTS:
            trace = pc.make_trace(replace(cfg, layout=layout))
            pc.simulate(trace, cache)
            pc.capacity_sweep(trace, cache)
            pc.block_size_sweep(trace, cache)
        pc.compare_workloads(cfg, cache)
        trace = pc.make_trace(cfg)
        pc.radix_view(trace, cache.block_size, 8)
        pc.radix_hit_tokens(trace, cache.block_size)
        room = sum(pc.cdiv(r.num_stored, cache.block_size) for r in trace.requests) * cache.block_size
        pc.simulate(trace, pc.CacheConfig(cache.block_size, room, 1))

    return {
        "prefix_default_ms": median_ms(lambda: pc.simulate(pc.make_trace(cfg), cache), 5),
        "prefix_page_ms": median_ms(page, 1),
    }


def main() -> None:
    fields = {}
    fields.update(paging_fields())
    fields.update(prefix_fields())
    for name, ms in fields.items():
        print(f"{name:<24} {ms:10.1f} ms")
    print(" ".join(f"{k}={v:.1f}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
