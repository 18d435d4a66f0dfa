"""Which device and dtype the lab runs on, chosen in one place.

`KVLAB_DEVICE` (cpu, cuda, cuda:1, ...) overrides the automatic choice (CUDA when present);
`KVLAB_THREADS` overrides the CPU thread count.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass

import torch

from sim.msg import Msg
from sim.refusal import Misuse, Refusal
from sim.work.threads import DEVICE_ENV, pick_num_threads

# The SDPA backends torch can be forced onto, in the order the pages list them.
SDPA_BACKEND_NAMES = ("math", "flash", "efficient", "cudnn")


def pick_device(env: dict[str, str] | None = None) -> torch.device:
    """CUDA when available, else CPU; the environment variable wins when it is set."""
    env = os.environ if env is None else env
    want = env.get(DEVICE_ENV, "").strip().lower()
    if want:
        if want.startswith("cuda") and not torch.cuda.is_available():
            raise Refusal("model.err.no_cuda", env=DEVICE_ENV, want=want)
        try:
            return torch.device(want)
        except RuntimeError as exc:
            raise Refusal("model.err.unknown_device", env=DEVICE_ENV, want=want, error=str(exc)) from exc
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def pick_dtype(device: torch.device) -> torch.dtype:
    """fp32 on CPU (exact comparisons, no slow bf16 paths); bf16 on CUDA when supported, else fp16."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (CUDA runs asynchronously; a CPU is always done)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Device-synced wall time of a block: `with Stopwatch(device) as sw: ...`, then `sw.seconds`."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds = math.nan
        self._t0 = 0.0

    def __enter__(self) -> Stopwatch:
        synchronize(self.device)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._t0


def configure_threads(env: dict[str, str] | None = None) -> int:
    n = pick_num_threads(env)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def sdpa_backend_enum(name: str):
    from torch.nn.attention import SDPBackend

    table = {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }
    if name not in table:
        raise Misuse(f"unknown SDPA backend {name!r}; choose one of {sorted(table)}")
    return table[name]


@dataclass(frozen=True)
class BackendProbe:
    name: str
    runs: bool
    reason: str | Msg  # "" when it runs; the error torch gave, or the lab's own reason (a message value)


def probe_sdpa_backends(device: torch.device, dtype: torch.dtype) -> list[BackendProbe]:
    """Run a tiny causal SDPA call forced onto each backend; report which ones really run."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    q = torch.randn(1, 2, 16, 32, device=device, dtype=dtype)  # (B, H, T, D)
    out = []
    for name in SDPA_BACKEND_NAMES:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(sdpa_backend_enum(name)):
                    F.scaled_dot_product_attention(q, q, q, is_causal=True)
                out.append(BackendProbe(name, True, ""))
                continue
            except RuntimeError as exc:
                error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # On CUDA torch warns with the real reason (arch, dtype, head dim); keep the first one.
        reasons = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
        if reasons:
            reason = reasons[0]
        elif device.type == "cpu":
            reason = Msg("home.why.cpu_only")
        else:
            reason = error
        out.append(BackendProbe(name, False, reason))
    return out


@dataclass(frozen=True, kw_only=True)
class DeviceInfo:
    torch_version: str
    device: str
    device_name: str
    dtype: str
    num_threads: int
    memory_bytes: int | None  # GPU memory; None on CPU
    backends: tuple[BackendProbe, ...]

    @property
    def memory_gib(self) -> float | None:
        return None if self.memory_bytes is None else self.memory_bytes / 2**30


def describe_device(device: torch.device | None = None) -> DeviceInfo:
    device = device if device is not None else pick_device()
    dtype = pick_dtype(device)
    threads = configure_threads()
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, mem = props.name, int(props.total_memory)
    else:
        import platform

        name, mem = platform.processor() or platform.machine() or "CPU", None
    return DeviceInfo(
        torch_version=torch.__version__,
        device=str(device),
        device_name=name,
        dtype=str(dtype).removeprefix("torch."),
        num_threads=threads,
        memory_bytes=mem,
        backends=tuple(probe_sdpa_backends(device, dtype)),
    )
