"""What each KV quantization scheme's cache weighs, counted exactly: the tiny model's cache by part,
bytes per token as the context grows, and at real-model scale how many requests fit on a GPU and the
bandwidth bound on a decode step."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sim.cost.arch import ArchPreset, estimate_num_params
from sim.cost.gpus import GpuPreset
from sim.model.quant_cache import FULL, FULL_BYTES, CacheScheme, scheme_bytes
from sim.model.transformer import ModelConfig
from sim.msg import Msg
from sim.refusal import Misuse

CURVE_KEYS = ("fp16", "kivi", "token", "kivi_nores", "fp8_e4m3")  # the schemes drawn against context


# --- the tiny model ------------------------------------------------------------------------------------


def fp16_bytes_per_token(cfg: ModelConfig) -> float:
    """Every layer's K and V of one token at 16 bits: 2 · L · H_kv · d_h · 2 B."""
    return float(scheme_bytes(FULL, num_tokens=1, n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim)["total"])


def bytes_per_value(cfg: ModelConfig, bytes_per_token: float) -> float:
    """Average bytes of one cached number: bytes per token over the 2 · L · H_kv · d_h numbers a token adds."""
    return bytes_per_token / (2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim)


def tiny_bytes_rows(cfg: ModelConfig, schemes: Sequence[CacheScheme], num_tokens: int) -> list[dict]:
    """The tiny model's cache after num_tokens tokens, by part, per scheme, FP16 first (16-bit residual; the
    words layer names them: sim.words.quant.named_bytes_rows)."""
    rows = []
    for s in [FULL, *schemes]:
        b = scheme_bytes(s, num_tokens=num_tokens, n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, full_bytes=FULL_BYTES)
        rows.append({"scheme": s.key, **b, "bytes_per_token": b["total"] / num_tokens})
    return rows


def context_curves(cfg: ModelConfig, key_to_scheme: Mapping[str, CacheScheme]
                   ) -> dict[str, tuple[CacheScheme, list[int], list[float]]]:
    """key -> (scheme, contexts 1, 2, 4 … up to the trained context, average bytes per token) for CURVE_KEYS: the
    residual window's cost fades as the context grows (sim.words.quant.bytes_curves names the schemes)."""
    xs = [n for n in (2**k for k in range(0, 11)) if n <= cfg.max_seq_len]
    curves = {}
    for key in CURVE_KEYS:
        s = FULL if key == "fp16" else key_to_scheme[key]
        curves[key] = (s, xs, [scheme_bytes(s, num_tokens=n, n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim)["total"] / n for n in xs])
    return curves


# --- at real-model scale ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ScaleRow:
    key: str
    scheme: CacheScheme  # named by the words layer (its title: the label with its integer width)
    bytes_per_token: float  # averaged over the context (the residual window included)
    per_request_bytes: int
    vs_fp16: float
    max_requests: int  # on the GPU, at the context, after the weights
    step_seconds: float  # bandwidth bound of one decode step at that batch: (weights + KV) / bandwidth
    tokens_per_s: float  # max_requests / step_seconds


def scale_rows(arch: ArchPreset, *, schemes: Sequence[CacheScheme], context: int, gpu_bytes: int, bandwidth: float,
               utilization: float = 0.9, weight_bytes_per_param: int = 2) -> list[ScaleRow]:
    """Per-request cache bytes of each scheme for a standard-attention preset, and what that buys on
    a GPU: the most requests that fit next to the weights and the bandwidth-bound decode rate.
    The first row is FP16."""
    if arch.attention == "MLA" or arch.sliding_window or arch.v_dim != arch.head_dim or not _every_layer_full(arch):
        raise Misuse(f"{arch.name}: only models whose every layer caches full K and V heads are shown here")
    if not 1 <= context <= arch.max_position_embeddings:
        raise Misuse(f"context must be in 1..{arch.max_position_embeddings:,}, got {context:,}")
    if not 0.05 <= utilization <= 1.0:
        raise Misuse(f"utilization must be in 0.05..1.0, got {utilization}")
    weights = estimate_num_params(arch) * weight_bytes_per_param
    budget = math.floor(gpu_bytes * utilization) - weights
    fp16 = scheme_bytes(FULL, num_tokens=context, n_layers=arch.n_layers, n_kv_heads=arch.n_kv_heads, head_dim=arch.head_dim)["total"]
    rows = []
    for s in [FULL, *schemes]:
        per = scheme_bytes(s, num_tokens=context, n_layers=arch.n_layers, n_kv_heads=arch.n_kv_heads, head_dim=arch.head_dim)["total"]
        n = max(0, budget // per) if budget > 0 else 0
        step = (weights + n * per) / bandwidth
        rows.append(ScaleRow(key=s.key, scheme=s, bytes_per_token=per / context, per_request_bytes=per, vs_fp16=per / fp16, max_requests=int(n), step_seconds=step,
                             tokens_per_s=n / step if n else 0.0))
    return rows


@dataclass(frozen=True, kw_only=True)
class ScaleView:
    """scale_rows for one preset on one GPU (sim.words.quant words its metrics, table and caption)."""

    arch: ArchPreset
    gpu: GpuPreset
    context: int
    utilization: float
    rows: list[ScaleRow]  # FP16 first

    def requests_vs_fp16(self, i: int) -> float:
        return self.rows[i].max_requests / max(1, self.rows[0].max_requests)

    def rate_vs_fp16(self, i: int) -> float:
        return self.rows[i].tokens_per_s / max(1e-9, self.rows[0].tokens_per_s)

def scale_presets(presets: Mapping[str, ArchPreset]) -> dict[str, ArchPreset]:
    """The presets a K/V cache scheme applies to as it is: full attention with K and V of one width (no MLA,
    no sliding window)."""
    return {k: p for k, p in presets.items() if p.attention != "MLA" and not p.sliding_window and p.v_dim == p.head_dim
            and _every_layer_full(p)}


def _every_layer_full(p: ArchPreset) -> bool:
    """Every layer stores its own K/V (no linear-attention / Mamba / MLP-only layers, no shared K/V, no indexer)."""
    return p.num_global_layers == p.n_layers and not p.kv_shared_layers and not p.index_head_dim


def context_for(arch: ArchPreset, context: int) -> tuple[int, Msg | None]:
    """The context counted per request (at most what the model was trained for), and a note when cut."""
    ctx = min(context, arch.max_position_embeddings)
    if ctx < context:
        return ctx, Msg("quant.s.context_cut", model=arch.name, max=arch.max_position_embeddings, ctx=ctx)
    return ctx, None


def scale_view(arch: ArchPreset, *, gpu: GpuPreset, schemes: Sequence[CacheScheme], context: int,
               utilization: float) -> ScaleView:
    rows = scale_rows(arch, schemes=schemes, context=context, gpu_bytes=gpu.memory_bytes, bandwidth=gpu.bandwidth_bytes_per_s, utilization=utilization)
    return ScaleView(arch=arch, gpu=gpu, context=context, utilization=utilization, rows=rows)
