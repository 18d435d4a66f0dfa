"""Measured on the real tiny model: its KV cache allocated and counted (bytes next to the formula),
and the per-call / per-token / per-pair rates of the cost model in sim/work/run_cost.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.cost.arch import ArchPreset
from sim.cost.memory import MAX_TINY_BATCH, MemoryConfig, _check_int, kv_memory
from sim.refusal import Misuse
from sim.work.run_cost import ModelRates, Work, fit_rates, prefill_work

# --- measured on the real tiny model -----------------------------------------------------------

TORCH_DTYPE_TO_KV = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
CUDA_BLOCK = 512  # PyTorch's caching allocator rounds every block up to a multiple of 512 bytes


@dataclass(frozen=True, kw_only=True)
class CacheMeasurement:
    model_name: str
    weights: str  # where the weights came from
    device: str
    dtype: str  # "fp32" / "fp16" / "bf16"
    batch: int
    context: int
    tensor_shape: tuple[int, int, int, int]  # (B, H_kv, S, D) of each of the 2·L tensors
    num_tensors: int
    measured_bytes: int  # sum of numel × element_size over the filled K and V tensors
    reserved_bytes: int  # the whole preallocated buffers (== measured when filled to the end)
    opcount_bytes: int  # sim.cost.opcount.kv_cache_bytes, the formula the other pages use
    calculator_bytes: int  # this module, from the preset
    cuda_allocated_delta: int | None  # torch.cuda.memory_allocated() after − before allocating the cache
    cuda_expected: int | None  # the formula with each tensor rounded up to the allocator's 512 B

    @property
    def agree(self) -> bool:
        ok = self.measured_bytes == self.opcount_bytes == self.calculator_bytes
        if self.cuda_allocated_delta is not None:
            ok = ok and self.cuda_allocated_delta == self.cuda_expected
        return ok

    @property
    def allocator_rounds_up(self) -> bool:
        """On a GPU the caching allocator took more than the tensors' bytes (its 512 B blocks)."""
        return self.cuda_allocated_delta is not None and self.cuda_allocated_delta != self.measured_bytes


def untrained_tiny_model(name: str, device=None, dtype=None):
    """The tiny model's architecture with seeded random weights (when no checkpoint is present:
    cache bytes depend on the shapes, not on the weights)."""
    import torch

    from sim.model.transformer import PRESETS, Llama

    if name not in PRESETS:
        raise Misuse(f"tiny model must be one of {', '.join(PRESETS)}, got {name!r}")
    torch.manual_seed(0)
    model = Llama(PRESETS[name])
    for p in model.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.08)
    return model.to(device=device or "cpu", dtype=dtype or torch.float32).eval().requires_grad_(False)


def measure_tiny_cache(model, *, batch: int, context: int, weights: str = "trained checkpoint",
                       preset: ArchPreset | None = None) -> CacheMeasurement:
    """Allocate a ContiguousKVCache for `batch` requests of `context` tokens on the model's device,
    fill it with a real prefill, and count its bytes three ways."""
    import torch

    from sim.cost.opcount import kv_cache_bytes
    from sim.cost.presets import tiny_preset
    from sim.model.device import synchronize
    from sim.model.generate import prefill
    from sim.model.kvcache import ContiguousKVCache

    cfg = model.cfg
    _check_int("batch", batch, 1, MAX_TINY_BATCH)
    _check_int("context", context, 1, cfg.max_seq_len)
    device, dtype = model.device, model.dtype
    kv_name = TORCH_DTYPE_TO_KV[str(dtype).removeprefix("torch.")]
    cuda = device.type == "cuda"
    if cuda:
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
    cache = ContiguousKVCache(cfg, batch_size=batch, max_seq_len=context, device=device, dtype=dtype)
    delta = None
    if cuda:
        synchronize(device)
        delta = torch.cuda.memory_allocated(device) - before
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (batch, context), generator=gen).to(device)  # (B, S)
    prefill(model, tokens, cache, attn_impl="sdpa")  # the same bytes; eager would hold B·H·S² scores
    assert cache.num_tokens == context
    element = torch.empty((), dtype=dtype).element_size()
    shape = (batch, cfg.n_kv_heads, context, cfg.head_dim)  # (B, H_kv, S, D)
    tensor_bytes = math.prod(shape) * element
    if preset is None:
        preset = tiny_preset(cfg.name, {"n_heads": cfg.n_heads, "d_model": cfg.d_model, "n_layers": cfg.n_layers,
                                        "n_kv_heads": cfg.n_kv_heads, "d_ff": cfg.d_ff, "vocab_size": cfg.vocab_size,
                                        "max_seq_len": cfg.max_seq_len})
    calc = kv_memory(MemoryConfig(preset, batch=batch, context=context, kv_dtype=kv_name)).total_bytes
    n_tensors = 2 * cfg.n_layers
    return CacheMeasurement(
        model_name=cfg.name, weights=weights, device=str(device), dtype=kv_name, batch=batch, context=context,
        tensor_shape=shape, num_tensors=n_tensors, measured_bytes=cache.used_bytes(),
        reserved_bytes=cache.reserved_bytes(), opcount_bytes=kv_cache_bytes(cfg, context, element, batch),
        calculator_bytes=calc, cuda_allocated_delta=delta,
        cuda_expected=n_tensors * -(-tensor_bytes // CUDA_BLOCK) * CUDA_BLOCK if cuda else None,
    )


def measure_rates(model, *, attn_impl: str = "sdpa", repeats: int = 3, clock=None) -> ModelRates:
    """Time forward passes of the real model at a few lengths and fit the three rates (~0.2 s on a CPU).

    clock: None times the device (synchronized wall time); a function of no arguments returning seconds (e.g.
    `time.thread_time`, this thread's CPU time) counts with it instead: on a CPU running torch on one thread, CPU
    time is the work itself, and a machine busy with other processes (thirty browsers on the same cores) does not
    inflate it the way it inflates wall time."""
    import torch

    from sim.model.device import Stopwatch
    from sim.model.generate import prefill

    cfg = model.cfg
    lengths = [1, 64, min(512, cfg.max_seq_len)]
    samples: list[tuple[Work, float]] = []
    for t in lengths:
        ids = torch.zeros(1, t, dtype=torch.long, device=model.device)  # (1, T)
        prefill(model, ids, None, attn_impl=attn_impl)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            if clock is None:
                with Stopwatch(model.device) as sw:
                    prefill(model, ids, None, attn_impl=attn_impl)
                seconds = sw.seconds
            else:
                t0 = clock()
                prefill(model, ids, None, attn_impl=attn_impl)
                seconds = clock() - t0
            best = min(best, seconds)
        samples.append((prefill_work(t), best))
    return fit_rates(samples)
