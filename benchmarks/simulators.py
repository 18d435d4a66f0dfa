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
    from sim.alloc.policies import compare_policies
    from sim.alloc.schedule import PoolConfig
    from sim.alloc.workload import LengthWorkloadConfig, make_workload

    default = make_workload(LengthWorkloadConfig())
    big = make_workload(LengthWorkloadConfig(num_requests=100_000))
    serving = PoolConfig()
    return {
        "paging_default_ms": median_ms(lambda: compare_policies(default, serving), 5),
        "paging_100k_ms": median_ms(lambda: compare_policies(big, serving), 3),
    }


def prefix_fields() -> dict[str, float]:
    """prefix_default_ms: the default workload drawn and run through the prefix cache (one page rerun's
    simulation); prefix_page_ms: everything the Prefix caching page simulates on a cold start (both layouts,
    every workload, the capacity and block-size sweeps, the tree)."""
    from sim.alloc import prefix_sweeps as ps
    from sim.alloc.prefix_cache import CacheConfig, simulate_prefix_cache
    from sim.alloc.workload import PrefixWorkloadConfig, make_trace

    cfg, cache = PrefixWorkloadConfig(), CacheConfig()

    def page() -> None:
        ps.run_both_layouts(cfg, cache)
        ps.compare_workloads(cfg, cache)
        ps.sweep_both_layouts(cfg, cache)
        ps.tree_view(cfg, cache.block_size, 8)

    return {
        "prefix_default_ms": median_ms(lambda: simulate_prefix_cache(make_trace(cfg), cache), 5),
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
