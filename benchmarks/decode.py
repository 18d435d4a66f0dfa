"""Naive vs cached decoding on the bundled model, and ours vs Hugging Face generate().

    python -m benchmarks.decode [--preset mha] [--repeats 3]

Single thread (stable ratios on a noisy machine), greedy, the same weights everywhere. The last
line is a contract:
    cached_vs_naive_1024=<ratio> ours_vs_hf=<ratio>
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from sim.cost.opcount import generation_flops  # noqa: E402
from sim.model.generate import generate, prefill  # noqa: E402
from sim.model.transformer import hf_twin, load_model  # noqa: E402

PROMPT = [10]  # one byte ("\n"): leaves the whole 1,024-token context for generation


def timed(fn, repeats: int) -> float:
    """Median wall seconds of `repeats` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="mha", choices=["mha", "gqa", "mqa"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.preset)
    cfg = model.cfg
    print(f"model {args.preset}: {model.num_params():,} params, torch {torch.__version__}, 1 thread, sdpa attention")

    rows = {}
    for n in (256, 1024):
        reps = args.repeats if n == 256 else 1
        t_naive = timed(lambda n=n: generate(model, PROMPT, n, "naive", attn_impl="sdpa", count=False), reps)
        t_cached = timed(lambda n=n: generate(model, PROMPT, n, "cached", attn_impl="sdpa", count=False), args.repeats)
        flops_naive = sum(sum(s.values()) for s in generation_flops(cfg, len(PROMPT), n, "naive"))
        flops_cached = sum(sum(s.values()) for s in generation_flops(cfg, len(PROMPT), n, "cached"))
        rows[n] = (t_naive, t_cached, flops_naive, flops_cached)

    # The ceiling: how fast can a cached step be on this machine? Time one big naive step to get
    # the achieved FLOP rate, and a cached step at length 1 to get the fixed per-step overhead.
    ids = torch.randint(0, 256, (1, cfg.max_seq_len))
    t_big = timed(lambda: prefill(model, ids, None, "sdpa"), 3)
    rate = sum(generation_flops(cfg, cfg.max_seq_len, 1, "naive")[0].values()) / t_big
    t_naive, t_cached, f_naive, f_cached = rows[1024]
    overhead = (t_cached - f_cached / rate) / 1024
    predicted = (f_naive / rate + 1024 * overhead) / (f_cached / rate + 1024 * overhead)

    hf = hf_twin(model, "sdpa")
    hf_ids = torch.tensor([PROMPT])

    def run_hf():
        with torch.inference_mode():
            hf.generate(hf_ids, max_new_tokens=256, min_new_tokens=256, do_sample=False)

    t_hf = timed(run_hf, args.repeats)
    t_ours = rows[256][1]
    t_ours_counted = timed(lambda: generate(model, PROMPT, 256, "cached", attn_impl="sdpa"), args.repeats)

    print()
    print(f"{'new tokens':>10} {'naive tok/s':>12} {'cached tok/s':>13} {'speedup':>8} {'FLOP ratio':>11}")
    for n, (tn, tc, fn, fc) in rows.items():
        print(f"{n:>10} {n / tn:>12.1f} {n / tc:>13.1f} {tn / tc:>8.1f} {fn / fc:>11.1f}")
    print()
    print(f"achieved matmul rate (one 1,024-token forward): {rate / 1e9:.1f} GFLOP/s")
    print(f"fixed cost per cached step (measured, beyond its FLOPs): {overhead * 1e6:.0f} us")
    print(f"ceiling for cached_vs_naive_1024 on this machine: {f_naive / f_cached:.1f} if a step cost only its FLOPs; "
          f"{predicted:.1f} predicted with the measured per-step overhead")
    print()
    print(f"{'256 new tokens':<34} {'tok/s':>8}")
    print(f"{'ours, cached':<34} {256 / t_ours:>8.1f}")
    print(f"{'ours, cached + FLOP tally':<34} {256 / t_ours_counted:>8.1f}")
    print(f"{'HF LlamaForCausalLM.generate()':<34} {256 / t_hf:>8.1f}")
    print(f"cached_vs_naive_1024={t_naive / t_cached:.2f} ours_vs_hf={t_hf / t_ours:.2f}")


if __name__ == "__main__":
    main()
