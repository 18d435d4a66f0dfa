"""Accelerator presets as data (assets/presets/gpus.json): memory, bandwidth, source.

The KV memory page uses the capacity; the Roofline page uses the bandwidth and throughput.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sim.refusal import Misuse

GPUS_JSON = Path(__file__).resolve().parents[2] / "assets" / "presets" / "gpus.json"
GIB = 1 << 30


@dataclass(frozen=True)
class GpuPreset:
    key: str
    name: str
    memory_bytes: int  # datasheet capacity, counted in GiB (see gpus.json "about")
    memory_type: str
    bandwidth_bytes_per_s: int  # peak, decimal as vendors state it
    bf16_dense_tflops: float  # peak dense BF16 tensor throughput, no sparsity
    source: str
    fp8_dense_tflops: float | None = None  # None: no FP8 tensor cores

    def __post_init__(self) -> None:
        if self.memory_bytes <= 0 or self.bandwidth_bytes_per_s <= 0 or self.bf16_dense_tflops <= 0:
            raise Misuse(f"GPU preset {self.key!r} needs positive memory, bandwidth and throughput")

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    @property
    def bandwidth_tb_s(self) -> float:
        return self.bandwidth_bytes_per_s / 1e12


@lru_cache(maxsize=1)
def load_gpus() -> dict[str, GpuPreset]:
    data = json.loads(GPUS_JSON.read_text())
    out = {}
    for g in data["gpus"]:
        out[g["key"]] = GpuPreset(
            key=g["key"], name=g["name"], memory_bytes=int(round(g["memory_gib"] * GIB)), memory_type=g["memory_type"],
            bandwidth_bytes_per_s=int(g["bandwidth_gb_s"]) * 10**9, bf16_dense_tflops=float(g["bf16_dense_tflops"]),
            source=g["source"], fp8_dense_tflops=g.get("fp8_dense_tflops"),
        )
    return out
