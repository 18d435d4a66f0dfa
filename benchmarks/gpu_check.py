"""One short GPU check: the bundled model on CUDA, naive vs cached, eager vs CUDA-graph cached steps, the
launch-overhead floor, and eager attention vs the SDPA backends.

    python benchmarks/gpu_check.py [--tokens 512] [--device cuda]

For every model (MHA, GQA, MQA), dtype (fp32 and the device's half type) and attention (eager, sdpa) it prints
tokens/s naive, cached with eager steps and cached with the step captured in a CUDA graph, whether all three
gave the same tokens, and the floor that kernel launches alone put under an eager step: the kernels one step
launches (counted by torch.profiler) times the CPU cost of one launch (timed on an empty-ish kernel). On a
machine without CUDA it exits with a message (not a traceback); `--device cpu` runs the same table with the
graph's static-shape step run op by op, to check the script itself.
The last line: graph_vs_eager=<median ratio over the rows> launch_floor_us=<floor of the MHA fp32 eager step>
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from sim.model.device import pick_dtype, probe_sdpa_backends, synchronize  # noqa: E402
from sim.model.generate import decode_one_token, first_difference, generate, prefill  # noqa: E402
from sim.model.kvcache import ContiguousKVCache  # noqa: E402
from sim.model.transformer import load_model  # noqa: E402

PROMPT = list(b"ROMEO.\n")


def launch_us(device: torch.device, n: int = 2000) -> float:
    """CPU microseconds to launch one tiny kernel (the launches queue up; one sync at the end)."""
    x = torch.zeros(1, device=device)
    for _ in range(50):
        x.add_(1)
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    synchronize(device)
    return (time.perf_counter() - t0) / n * 1e6


@torch.inference_mode()
def kernels_per_step(model, attn_impl: str) -> int:
    """Device kernels one eager cached step launches (on a CPU: the operators it dispatches)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = model.device.type == "cuda"
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=65, device=model.device, dtype=model.dtype)
    ids = torch.arange(64, device=model.device)[None] % 200 + 32
    prefill(model, ids, cache, attn_impl=attn_impl)
    token = ids[:, -1:]
    decode_one_token(model, token, 64, cache=cache, attn_impl=attn_impl)  # warm-up
    cache.truncate(64)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        decode_one_token(model, token, 64, cache=cache, attn_impl=attn_impl)
        synchronize(model.device)
    if cuda:
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return sum(1 for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None)


def timed_generate(model, n: int, mode: str, attn_impl: str, step: str):
    synchronize(model.device)
    t0 = time.perf_counter()
    res = generate(model, PROMPT, n, mode=mode, attn_impl=attn_impl, count=False, step=step)
    synchronize(model.device)
    return res, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=512, help="new tokens per run (default 512)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    if not 16 <= args.tokens <= 1024 - len(PROMPT) + 1:
        print(f"--tokens must be 16..{1024 - len(PROMPT) + 1}, got {args.tokens}", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU (the CPU benchmark is python -m benchmarks.decode; "
              "--device cpu checks this script)")
        return 1
    device = torch.device(args.device)
    graph_step = "graph" if device.type == "cuda" else "static"
    n = args.tokens
    if device.type == "cuda":
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}, "
              f"{torch.cuda.get_device_properties(device).total_memory / 2**30:.0f} GiB")
    else:
        torch.set_num_threads(1)
        print(f"torch {torch.__version__}, CPU, 1 thread: the graph column is the static-shape step run op by op")
    dtypes = [torch.float32] + ([pick_dtype(device)] if pick_dtype(device) != torch.float32 else [])
    for dtype in dtypes:
        probes = probe_sdpa_backends(device, dtype)
        print(f"SDPA backends ({dtype}): " + ", ".join(f"{b.name}={'yes' if b.runs else 'no'}" for b in probes))
    launch = launch_us(device)
    print(f"one kernel launch (CPU side, {'queued' if device.type == 'cuda' else 'dispatch'}): {launch:.1f} us")
    print()
    print(f"{n} new tokens, tokens/s          naive  cached eager  cached {graph_step:<6}  graph/eager  "
          f"kernels/step  launch floor")
    ratios, floor_mha = [], None
    for name in ("mha", "gqa", "mqa"):
        for dtype in dtypes:
            model = load_model(name, device, dtype)
            for impl in ("eager", "sdpa"):
                label = f"{name} {str(dtype).removeprefix('torch.'):>8} {impl:>5}"
                try:
                    for step in ("eager", graph_step):  # warm-up: one-time kernel, allocator and capture costs
                        generate(model, PROMPT, 16, mode="cached", attn_impl=impl, count=False, step=step)
                    naive, t_naive = timed_generate(model, n, "naive", impl, "eager")
                    eager, t_eager = timed_generate(model, n, "cached", impl, "eager")
                    graph, t_graph = timed_generate(model, n, "cached", impl, graph_step)
                    kernels = kernels_per_step(model, impl)
                except (RuntimeError, ValueError) as exc:  # one configuration failing does not end the check
                    print(f"{label}: failed: {str(exc).strip().splitlines()[0]}")
                    continue
                floor_us = kernels * launch
                if name == "mha" and dtype == torch.float32 and impl == "eager":
                    floor_mha = floor_us
                ratios.append(t_eager / t_graph)
                same = (first_difference(naive.new_ids, eager.new_ids) is None
                        and first_difference(eager.new_ids, graph.new_ids) is None)
                print(f"{label:<26} {n / t_naive:>10.1f} {n / t_eager:>13.1f} {n / t_graph:>13.1f} "
                      f"{t_eager / t_graph:>11.2f}x {kernels:>13} {floor_us:>9.0f} us "
                      f"(<= {1e6 / floor_us:,.0f} tok/s)  tokens {'identical' if same else 'DIFFER'}")
    print()
    print("launch floor: the kernels an eager step launches x one launch's CPU cost; an eager step cannot be "
          "faster, a graph replay pays one launch instead")
    if device.type == "cuda":
        # Attention kernels at N = 8,192 in fp16: eager vs every SDPA backend that runs here.
        import subprocess

        subprocess.run([sys.executable, "-m", "benchmarks.attention", "--device", "cuda", "--dtype", "float16",
                        "--max-n", "8192"], cwd=Path(__file__).resolve().parent.parent, check=False)
    ratio = statistics.median(ratios) if ratios else float("nan")
    print(f"graph_vs_eager={ratio:.2f} launch_floor_us={floor_mha if floor_mha is not None else float('nan'):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
