"""Record the real model's Shrink-the-cache grid, with its provenance, for the page to show at once.

    python -m sim.model.record_shrink [--out assets/models/smollm2_shrink.json] [--threads 1]

Every cell of sim.model.real_recorded.RealShrinkSetup() (the full cache, four eviction policies at two budgets,
four quantizations) through the three checks of sim.model.real_checks, sized to finish in a few minutes on one
CPU thread (a 64-token long generation, three quote and three chat trials, 300 tokens of filler); its
provenance records the wall time it took.
Without the real model it exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from sim.model.real_recorded import RECORDED, RealShrinkSetup


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parents[2])
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10, cwd=Path(__file__).resolve().parents[2]).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=RECORDED)
    # one thread: on a machine shared with other jobs, two BLAS threads waiting on each other ran a prefill 6× slower
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if not 1 <= args.threads <= 64:
        ap.error(f"--threads must be in 1..64, got {args.threads}")
    import torch

    from sim.model.gguf_load import load_real_model
    from sim.model.real_checks import run_grid
    from sim.refusal import Refusal

    torch.set_num_threads(args.threads)
    try:
        real = load_real_model()
    except Refusal as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    setup = RealShrinkSetup()
    commit = _commit()  # the code that runs: taken before the run, not after it
    t0 = time.perf_counter()

    def progress(i: int, n: int, what: str) -> None:
        print(f"[{time.perf_counter() - t0:6.0f} s] cell {i + 1 if i < n else n}/{n}: {what}", file=sys.stderr,
              flush=True)

    rows = run_grid(real, setup, progress)
    for r in rows:
        r.pop("long_tokens")
    data = {
        "provenance": {
            "command": "python -m sim.model.record_shrink" + (f" --threads {args.threads}" if args.threads != 1 else ""),
            "commit": commit, "machine": f"{_cpu()}, {os.cpu_count()} CPUs, {platform.system()}",
            "torch": torch.__version__, "python": platform.python_version(), "threads": args.threads,
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "model": real.cfg.name,
            "gguf_sha256": real.sha256, "seconds": round(time.perf_counter() - t0, 1),
        },
        "setup": setup.to_dict(),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"wrote {args.out} ({len(rows)} cells, {data['provenance']['seconds']:,.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
