"""One short GPU check: the bundled model on CUDA, naive vs cached, eager vs SDPA backends.

    python benchmarks/gpu_check.py

Prints the device, tokens/s for each mode and the cached/naive ratio. Exits with a message
(not a traceback) on a machine without CUDA.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from sim.model.device import pick_dtype, probe_sdpa_backends  # noqa: E402
from sim.model.generate import first_difference, generate  # noqa: E402
from sim.model.transformer import load_model  # noqa: E402


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU (the CPU benchmark is python -m benchmarks.decode)")
        return 1
    device = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}, "
          f"{torch.cuda.get_device_properties(device).total_memory / 2**30:.0f} GiB")
    for dtype in (torch.float32, pick_dtype(device)):
        probes = probe_sdpa_backends(device, dtype)
        print(f"SDPA backends ({dtype}): " + ", ".join(f"{b.name}={'yes' if b.runs else 'no'}" for b in probes))
    prompt = list(b"ROMEO.\n")
    for name in ("mha", "gqa", "mqa"):
        for dtype in (torch.float32, pick_dtype(device)):
            model = load_model(name, device, dtype)
            for impl in ("eager", "sdpa"):
                generate(model, prompt, 16, "cached", attn_impl=impl)  # warm-up
                out = {}
                for mode in ("naive", "cached"):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    out[mode] = generate(model, prompt, 512, mode, attn_impl=impl)
                    torch.cuda.synchronize()
                    out[mode + "_s"] = time.perf_counter() - t0
                diff = first_difference(out["naive"].new_ids, out["cached"].new_ids)
                print(f"{name} {str(dtype).removeprefix('torch.'):>8} {impl:>5}: naive {512 / out['naive_s']:7.1f} tok/s, "
                      f"cached {512 / out['cached_s']:7.1f} tok/s, ratio {out['naive_s'] / out['cached_s']:5.1f}, "
                      f"tokens {'identical' if diff is None else f'differ from position {diff}'}")
    # Attention kernels at N = 8,192 in fp16: eager vs every SDPA backend that runs here.
    import subprocess

    subprocess.run([sys.executable, "-m", "benchmarks.attention", "--device", "cuda", "--dtype", "float16",
                    "--max-n", "8192"], cwd=Path(__file__).resolve().parent.parent, check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
