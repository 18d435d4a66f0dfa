"""Where a roofline example runs: how many GPUs of a kind hold its weights and every request's cache, counted by
the lab's memory functions (sim/cost/capacity.py, as the KV memory page counts them). A roofline is drawn for one
GPU; a model split across n GPUs by tensor parallelism gives each GPU 1/n of the weights, the FLOPs and the bytes,
so the intensity, the ridge and the bound are those of the whole step (the all-reduces between GPUs left out)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import GpuPreset
from sim.cost.memory import MAX_GPUS, MemoryConfig, fmt_decimal
from sim.cost.roofline import RooflineConfig
from sim.i18n import text

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


def fit_sentence(f: Fit, model: str, lang: str = "en") -> str:
    """Where the example runs, in a sentence: one GPU, n of them (and why one GPU's roofline still holds), or more
    than the lab counts (shown for the arithmetic only)."""
    fields = dict(model=model, gpu=f.gpu, need=fmt_decimal(f.need_bytes), w=fmt_decimal(f.weight_bytes),
                  kv=fmt_decimal(f.kv_bytes), usable=fmt_decimal(f.usable_per_gpu), util=f"{UTILIZATION:.0%}")
    if f.num_gpus == 1:
        return text(lang, "roofline.fit.one", **fields)
    if f.num_gpus is None:
        return text(lang, "roofline.fit.none", max=f"{MAX_GPUS}", **fields)
    return text(lang, "roofline.fit.many", n=f"{f.num_gpus}", **fields)


def turn_fits(turns: dict[int, int | None], cfg: RooflineConfig, gpu: GpuPreset, lang: str = "en") -> str:
    """For each context whose decode turns compute-bound at some batch: how many GPUs that batch needs (the batch
    sweep calls a step compute-bound; this says what it takes to run it)."""
    parts = []
    for S, b in turns.items():
        if b is None:
            continue
        f = fit(replace(cfg, batch=b, context=S), gpu)
        key = "roofline.fit.turn_one" if f.num_gpus == 1 else "roofline.fit.turn_none" if f.num_gpus is None \
            else "roofline.fit.turn_many"
        parts.append(text(lang, key, S=f"{S:,}", b=f"{b:,}", need=fmt_decimal(f.need_bytes), gpu=f.gpu,
                          n=f"{f.num_gpus}", max=f"{MAX_GPUS}"))
    return text(lang, "roofline.fit.turn_sep").join(parts)
