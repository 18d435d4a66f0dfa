"""Where a roofline example runs: how many GPUs of a kind hold its weights and every request's cache, counted by
the lab's memory functions (sim/cost/capacity.py, as the KV memory page counts them). A roofline is drawn for one
GPU; a model split across n GPUs by tensor parallelism gives each GPU 1/n of the weights, the FLOPs and the bytes,
so the intensity, the ridge and the bound are those of the whole step (the all-reduces between GPUs left out)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import GpuPreset
from sim.cost.memory import MAX_GPUS, MemoryConfig
from sim.cost.roofline import RooflineConfig

UTILIZATION = 0.9  # the share of a GPU's memory a server may use (vLLM's --gpu-memory-utilization default)


@dataclass(frozen=True)
class Fit:
    gpu: str  # its name
    weight_bytes: int
    kv_bytes: int  # every request's cache at the config's batch and context
    usable_per_gpu: int  # one GPU's memory × UTILIZATION
    num_gpus: int | None  # the fewest GPUs that hold it (None: more than MAX_GPUS)

    @property
    def need_bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes

    @property
    def fits_one(self) -> bool:
        return self.num_gpus == 1


def fit(cfg: RooflineConfig, gpu: GpuPreset, utilization: float = UTILIZATION) -> Fit:
    """The fewest `gpu`s whose usable memory holds cfg's weights and cfg.batch caches of cfg.context tokens."""
    mem = MemoryConfig(cfg.arch, batch=cfg.batch, context=cfg.context, kv_dtype=cfg.kv_dtype)
    one = capacity(mem, GpuConfig(gpu, 1, utilization, cfg.weight_dtype))
    n = next((k for k in range(1, MAX_GPUS + 1)
              if capacity(mem, GpuConfig(gpu, k, utilization, cfg.weight_dtype)).fits), None)
    return Fit(gpu.name, one.weight_bytes, one.kv_bytes, one.usable_bytes, n)


def max_batch_on(cfg: RooflineConfig, gpu: GpuPreset, num_gpus: int, utilization: float = UTILIZATION) -> int:
    """The most requests of cfg.context tokens that `num_gpus` of `gpu` hold beside the weights (0: none)."""
    mem = MemoryConfig(cfg.arch, batch=1, context=cfg.context, kv_dtype=cfg.kv_dtype)
    return capacity(mem, GpuConfig(gpu, num_gpus, utilization, cfg.weight_dtype)).max_requests
