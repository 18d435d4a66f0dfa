"""Naive vs cached decoding on the bundled model, and ours vs Hugging Face generate().

    python -m benchmarks.decode [--preset mha] [--repeats 3]

Single thread (stable ratios on a noisy machine), greedy, the same weights everywhere. Every ratio compares
medians of the same number of runs, the two sides taking turns (so a change in the machine's load falls on
both). The last line is a contract:
    cached_vs_naive_1024=<ratio> ours_vs_hf=<ratio>
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from sim.cost.opcount import generation_flops, step_flops  # noqa: E402
from sim.model.generate import decode_one_token, generate, prefill  # noqa: E402
from sim.model.kvcache import ContiguousKVCache  # noqa: E402
from sim.model.transformer import hf_twin, load_model  # noqa: E402

PROMPT = [10]  # one byte ("\n"): leaves the whole 1,024-token context for generation


def seconds(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def paired(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median wall seconds of each function over `repeats` rounds, the functions taking turns in every round."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(seconds(fn))
    return {name: statistics.median(ts) for name, ts in times.items()}


def total_flops(cfg, n: int, mode: str) -> int:
    return sum(sum(s.values()) for s in generation_flops(cfg, len(PROMPT), n, mode))


@torch.inference_mode()
def shortest_step_s(model, repeats: int = 200) -> float:
    """Median time of the cheapest cached step there is: one token against a cache of one position."""
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=2)
    token = torch.tensor([PROMPT])
    prefill(model, token, cache)
    times = []
    for _ in range(repeats + 10):
        cache.truncate(1)
        times.append(seconds(lambda: decode_one_token(model, token, 1, cache=cache)))
    return statistics.median(times[10:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="mha", choices=["mha", "gqa", "mqa"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    torch.set_num_threads(1)
    model = load_model(args.preset)
    cfg = model.cfg
    print(f"model {args.preset}: {model.num_params():,} params, torch {torch.__version__}, 1 thread, sdpa attention, "
          f"median of {args.repeats} runs per side, sides taking turns")

    def run(n: int, mode: str, **kw) -> Callable[[], object]:
        return lambda: generate(model, PROMPT, n, mode=mode, attn_impl="sdpa", count=False, **kw)

    for mode in ("naive", "cached"):  # warm-up: one-time kernel and allocator costs
        run(16, mode)()
    rows = {}
    for n in (256, 1024):
        t = paired({"naive": run(n, "naive"), "cached": run(n, "cached")}, args.repeats)
        rows[n] = (t["naive"], t["cached"], total_flops(cfg, n, "naive"), total_flops(cfg, n, "cached"))

    # What the 1,024-token ratio could be, from two things measured apart from the runs above: the matmul
    # rate of one 1,024-token forward (naive's largest step) and the cheapest cached step (context 1).
    ids = torch.randint(0, 256, (1, cfg.max_seq_len))
    prefill(model, ids, None, attn_impl="sdpa")
    t_big = statistics.median(seconds(lambda: prefill(model, ids, None, attn_impl="sdpa")) for _ in range(3))
    rate = sum(step_flops(cfg, cfg.max_seq_len, cfg.max_seq_len).values()) / t_big
    t_short = shortest_step_s(model)
    fixed = max(0.0, t_short - sum(step_flops(cfg, 1, 2).values()) / rate)  # a step's cost beyond its FLOPs
    t_naive, t_cached, f_naive, f_cached = rows[1024]
    measured = t_naive / t_cached
    bound = t_naive / (1024 * t_short)  # no cached step is cheaper than the one at context 1
    predicted = (f_naive / rate + 1024 * fixed) / (f_cached / rate + 1024 * fixed)

    hf = hf_twin(model, "sdpa")
    hf_ids = torch.tensor([PROMPT])

    def run_hf():
        with torch.inference_mode():
            hf.generate(hf_ids, max_new_tokens=256, min_new_tokens=256, do_sample=False)

    run_hf()  # warm-up
    t = paired({"ours": run(256, "cached"), "hf": run_hf, "counted": lambda: generate(
        model, PROMPT, 256, mode="cached", attn_impl="sdpa"), "static": run(256, "cached", step="static")}, args.repeats)

    print()
    print(f"{'new tokens':>10} {'naive tok/s':>12} {'cached tok/s':>13} {'speedup':>8} {'FLOP ratio':>11}")
    for n, (tn, tc, fn, fc) in rows.items():
        print(f"{n:>10} {n / tn:>12.1f} {n / tc:>13.1f} {tn / tc:>8.1f} {fn / fc:>11.1f}")
    print()
    print(f"achieved matmul rate (one 1,024-token forward): {rate / 1e9:.1f} GFLOP/s")
    print(f"cheapest cached step (context 1, median of 200): {t_short * 1e6:.0f} us, of which {fixed * 1e6:.0f} us "
          f"beyond its FLOPs at that rate")
    print(f"if time followed FLOPs, cached_vs_naive_1024 would be the FLOP ratio, {f_naive / f_cached:.1f}")
    print(f"bound: cached_vs_naive_1024 <= naive time / (1,024 x the cheapest cached step) = {bound:.1f} "
          f"(measured {measured:.2f}: {'within it' if measured <= bound else 'above it: the load changed'})")
    print(f"prediction (a model, not a bound): {predicted:.1f} from the matmul rate and the cheapest step's fixed "
          f"cost, both measured apart from the runs")
    print()
    print(f"{'256 new tokens':<48} {'tok/s':>8}")
    print(f"{'ours, cached':<48} {256 / t['ours']:>8.1f}")
    print(f"{'ours, cached + FLOP tally':<48} {256 / t['counted']:>8.1f}")
    print(f"{'ours, static-shape step (what a CUDA graph runs)':<48} {256 / t['static']:>8.1f}")
    print(f"{'HF LlamaForCausalLM.generate()':<48} {256 / t['hf']:>8.1f}")
    print(f"cached_vs_naive_1024={measured:.2f} ours_vs_hf={t['hf'] / t['ours']:.2f}")


if __name__ == "__main__":
    main()
