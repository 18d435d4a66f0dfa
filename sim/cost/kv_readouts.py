"""What the KV memory page says with numbers, built from its results: the metric row
(`sim.readout.Metric`s), the warnings and captions around the calculator, and tables made safe for
Arrow. Names that came from the user are passed in already escaped (`name_md`); nothing here knows
Markdown beyond that."""

from __future__ import annotations

from sim.cost.arch import ArchPreset
from sim.cost.capacity import Capacity, GpuConfig, int8_vs_fp16
from sim.cost.memory import KvMemory, MemoryConfig, fmt_bytes
from sim.readout import Metric

ARROW_INT_LIMIT = 1 << 62  # past this a Python int column cannot be sent as Arrow int64


def gpu_label(gpu: GpuConfig) -> str:
    """'H100 SXM' for one GPU, '2 × L4' for several."""
    return f"{gpu.num_gpus} × {gpu.gpu.name}" if gpu.num_gpus > 1 else gpu.gpu.name


def kv_metrics(kv: KvMemory, cap: Capacity, gpu: GpuConfig) -> list[Metric]:
    """Per token, per request, all requests; the room left for KV; the most requests and the longest context."""
    cfg = kv.config
    windows = (f" while the context fits every window; averaged over these {cfg.context:,} tokens it is "
               f"{fmt_bytes(kv.avg_bytes_per_token)}") if kv.per_request_bytes < kv.bytes_per_token * cfg.context else ""
    budget = cap.kv_budget_bytes
    return [
        Metric("Per token", fmt_bytes(kv.bytes_per_token), help=f"{kv.bytes_per_token:,} B, all layers{windows}"),
        Metric("Per request", fmt_bytes(kv.per_request_bytes), help=f"{kv.per_request_bytes:,} B"),
        Metric("All requests", fmt_bytes(kv.total_bytes), help=f"{kv.total_bytes:,} B"),
        Metric("Room for KV", fmt_bytes(budget) if budget > 0 else "none",
               help=f"{gpu_label(gpu)}: {fmt_bytes(cap.total_bytes)} × {gpu.utilization:g} − weights "
                    f"{fmt_bytes(cap.weight_bytes)} = {budget:,} B"),
        Metric("Max requests", f"{cap.max_requests:,}", f"at S = {cfg.context:,}",
               "Concurrent requests whose cache fits at this context"),
        Metric("Max context", f"{cap.max_context:,}", f"at B = {cfg.batch:,}",
               "Limited by the model's trained context" if cap.max_context_limited_by == "model"
               else "Longest context whose cache fits for this batch (limited by memory)"),
    ]


def beyond_trained_context(cfg: MemoryConfig, name_md: str) -> str | None:
    """A warning when the chosen context is past what the model was trained on (None: it is not)."""
    trained = cfg.arch.max_position_embeddings
    if cfg.context <= trained:
        return None
    return (f"{cfg.context:,} tokens is beyond {name_md}'s trained context of {trained:,}: the bytes are still "
            "counted, the model would not cope.")


def replicated_heads_note(arch: ArchPreset, gpu: GpuConfig) -> str | None:
    """With more GPUs than K/V heads tensor parallelism copies heads; the count leaves the copies out."""
    if gpu.num_gpus <= arch.n_kv_heads or arch.attention == "MLA":
        return None
    return (f"With {gpu.num_gpus} GPUs and {arch.n_kv_heads} K/V heads, tensor parallelism would copy some K/V heads "
            "onto several GPUs; those copies are not counted here.")


def shape_caption(arch: ArchPreset, name_md: str) -> str:
    """The architecture under the formula: attention, heads, layers (the source follows it on the page)."""
    return (f"{name_md}: {arch.attention}, {arch.n_heads} query heads, {arch.n_kv_heads} K/V heads of "
            f"{arch.head_dim}, {arch.describe_layers()}.")


def config_read(arch: ArchPreset, name_md: str) -> str:
    """What a pasted or uploaded config.json was read as."""
    return (f"Read {name_md}: {arch.attention}, {arch.n_layers} layers, {arch.n_kv_heads} K/V heads of "
            f"{arch.head_dim}, {arch.describe_layers()}.")


def dtypes_caption(group_size: int) -> str:
    """Under the KV dtypes table: what FP8 and the integer formats carry besides their values."""
    return (f"FP8 here carries one scale per tensor (a few bytes per layer, not counted). The integer formats store "
            f"a 2-byte scale and a 2-byte zero point for every g = {group_size} values, so INT8 is "
            f"{int8_vs_fp16(group_size):.4g}× FP16, not 0.5×. Halving the bytes per value doubles the requests that "
            "fit only when the weights stay the same: they do, the weight dtype is a separate choice.")


def arrow_safe(df):
    """Byte counts past 2^62 (absurd configs only) cannot go through Arrow: those columns as text."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object and any(isinstance(v, int) and abs(v) >= ARROW_INT_LIMIT for v in out[col]):
            out[col] = [f"{v:,}" for v in out[col]]
    return out
