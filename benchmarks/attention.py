"""Eager attention vs SDPA's backends on this device: time and peak memory against N.

    python -m benchmarks.attention [--threads 2] [--max-n 4096] [--budget 1.0]
    python -m benchmarks.attention --device cuda --dtype float16 --max-n 8192   # on a GPU

The shape is the page's sweep base (B = 1, H = 1, d = 64, causal prefill), N doubling from 256.
Every number comes from one run of `sim.attention.timing.time_attention` (median of timed blocks after a
warm-up; peak memory from the CPU allocator's profiler events or CUDA's max_memory_allocated).
The last line is a contract:
    flash_vs_eager_time_4096=<ratio> flash_vs_eager_mem_4096=<ratio>
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch

from sim.attention.implementations import impl_statuses
from sim.attention.limits import device_limits, sweep_lengths
from sim.attention.measure import matmul_rate, matmul_size
from sim.attention.shapes import DTYPES, SHAPE_PRESETS, dtypes_for
from sim.attention.timing import time_attention
from sim.model.device import pick_device
from sim.work.threads import pick_num_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="cpu or cuda (default: the lab's choice)")
    ap.add_argument("--dtype", default=None, choices=DTYPES)
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores, at most 8)")
    ap.add_argument("--max-n", type=int, default=4096)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed calls per kernel and N")
    args = ap.parse_args()
    if args.max_n < 4096:
        ap.error("--max-n must be at least 4096: the last line reports N = 4,096")
    device = torch.device(args.device) if args.device else pick_device()
    dtype = args.dtype or dtypes_for(device.type)[0]
    threads = args.threads or pick_num_threads()
    limits = device_limits(device)
    base = replace(SHAPE_PRESETS["sweep"], dtype=dtype)
    ns = sweep_lengths(base, limits, n_min=256, n_max=args.max_n)
    if 4096 not in ns:
        raise SystemExit(f"N = 4,096 is over this device's caps for {base.label()}")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{threads} CPU thread(s)"
    print(f"torch {torch.__version__} on {device} ({name}); B=1, H=1, d=64, causal prefill, {dtype}")
    print("statuses: " + ", ".join(f"{s.impl}={'yes' if s.runs else 'no'}" for s in impl_statuses(device, dtype)))
    print()
    print(f"{'N':>6} {'kernel':>9} {'median ms':>10} {'IQR ms':>17} {'TFLOP/s':>8} {'peak MiB':>9} "
          f"{'vs eager':>8} {'mem ratio':>9} {'max|Δ| vs MATH':>14}")
    at = {}
    for n in ns:
        res = time_attention(replace(base, seq_len=n), device, limits, budget_s=args.budget, num_threads=threads)
        for r in res.rows:
            if not r.ok:
                continue
            s = r.stats
            speed, mem = res.speedup(r.impl), res.memory_ratio(r.impl)
            print(f"{n:>6} {r.impl:>9} {s.median_s * 1e3:>10.3f} {s.p25_s * 1e3:>8.3f}–{s.p75_s * 1e3:<8.3f} "
                  f"{r.tflops:>8.4f} {(r.peak_bytes or 0) / 2**20:>9.2f} {speed:>8.2f} {mem or float('nan'):>9.1f} "
                  f"{r.max_abs_diff:>14.2e}")
        at[n] = res
    rate = matmul_rate(device, dtype, num_threads=threads)
    print()
    size = matmul_size(device.type)
    print(f"one {size:,}³ matmul here: {rate / 1e12:.4f} TFLOP/s (the ceiling for attention's matmuls)")
    print(f"eager must hold one N² score matrix of {at[4096].shape.score_bytes / 2**20:.0f} MiB at N = 4,096 "
          f"(measured eager peak {at[4096].row('eager').peak_bytes / 2**20:.0f} MiB)")
    res = at[4096]
    print(f"flash_vs_eager_time_4096={res.speedup('flash'):.2f} flash_vs_eager_mem_4096={res.memory_ratio('flash'):.2f}")


if __name__ == "__main__":
    main()
