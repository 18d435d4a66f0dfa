"""How many bytes the KV cache takes, and what fits on a GPU.

    bytes = 2 · L · H_kv · d_h · p · B · S

2 for K and V, L layers, H_kv K/V heads of d_h values, p bytes per value, B concurrent requests,
S tokens of context each. The same count, generalised:

- MHA / GQA / MQA differ only in H_kv (n_heads, a divisor of it, 1).
- MLA (DeepSeek-V2/V3) caches one latent vector of d_c values plus one RoPE key of d_R values per
  token and layer, shared by K and V of every head: (d_c + d_R) · p, with no 2 and no H_kv.
- A sliding-window layer keeps at most W tokens: min(S, W) instead of S. Hybrid models mix
  such local layers with global ones (Gemma 2: 1:1, Gemma 3: 5:1).
- Cross-layer sharing: k adjacent layers of the same kind read one stored K/V (⌈L / k⌉ layers store).
- Integer formats store, per group of g values, a 2-byte scale and a 2-byte zero point.

Everything is exact integer arithmetic. Results are dataclasses; `to_frame()` gives tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sim.cost.arch import GLOBAL, LOCAL, ArchPreset, attention_variants, estimate_num_params

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


@dataclass(frozen=True)
class KvDtype:
    name: str
    bits: int
    grouped: bool  # integer formats: a scale and a zero point per group of values
    label: str


KV_DTYPES: dict[str, KvDtype] = {
    "fp32": KvDtype("fp32", 32, False, "FP32"),
    "fp16": KvDtype("fp16", 16, False, "FP16"),
    "bf16": KvDtype("bf16", 16, False, "BF16"),
    "fp8": KvDtype("fp8", 8, False, "FP8 (per-tensor scale)"),
    "int8": KvDtype("int8", 8, True, "INT8 + group scales"),
    "int4": KvDtype("int4", 4, True, "INT4 + group scales"),
    "int2": KvDtype("int2", 2, True, "INT2 + group scales"),
}
WEIGHT_DTYPE_BITS: dict[str, int] = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
GROUP_SIZES = (16, 32, 64, 128, 256)
SCALE_BYTES = 2  # an fp16 scale per group
ZERO_BYTES = 2  # an fp16 zero point per group (asymmetric quantization, as KIVI does)
MAX_TINY_BATCH = 32  # the real tiny model's cache, allocated on the KV memory page (sim/model/measure.py)
MAX_BATCH = 1 << 16
MAX_CONTEXT = 1 << 27
MAX_LAYERS_PER_KV = 8
MAX_GPUS = 64


def _check_int(name: str, value, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value:,} is outside {lo:,}..{hi:,}")


@dataclass(frozen=True)
class MemoryConfig:
    arch: ArchPreset
    batch: int = 1
    context: int = 4096
    kv_dtype: str = "fp16"
    group_size: int = 128  # only used by the integer formats
    layers_per_kv: int = 1  # cross-layer sharing: layers that read one stored K/V

    def __post_init__(self) -> None:
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("context", self.context, 1, MAX_CONTEXT)
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {', '.join(KV_DTYPES)}, got {self.kv_dtype!r}")
        _check_int("group_size", self.group_size, 1, 4096)
        _check_int("layers_per_kv", self.layers_per_kv, 1, min(MAX_LAYERS_PER_KV, self.arch.n_layers))

    @property
    def dtype(self) -> KvDtype:
        return KV_DTYPES[self.kv_dtype]


# --- the count ---------------------------------------------------------------------------------


def vector_bytes(length: int, kv_dtype: str, group_size: int = 128) -> int:
    """Bytes to store one cached vector of `length` values (one head's K, or one MLA latent)."""
    d = KV_DTYPES[kv_dtype]
    data = -(-length * d.bits // 8)
    if not d.grouped:
        return data
    return data + -(-length // group_size) * (SCALE_BYTES + ZERO_BYTES)


def token_layer_bytes(arch: ArchPreset, kv_dtype: str = "fp16", group_size: int = 128) -> int:
    """Bytes one token adds to one layer's cache."""
    if arch.attention == "MLA":
        return vector_bytes(arch.kv_lora_rank + arch.qk_rope_head_dim, kv_dtype, group_size)
    return arch.n_kv_heads * (vector_bytes(arch.head_dim, kv_dtype, group_size)
                              + vector_bytes(arch.v_dim, kv_dtype, group_size))


@dataclass(frozen=True)
class LayerGroup:
    kind: str  # "G" global (keeps every token) or "L" local (keeps the last `window` tokens)
    num_layers: int
    num_storing_layers: int  # after cross-layer sharing
    tokens_kept: int  # per request, at this context
    bytes_per_token_per_layer: int

    @property
    def bytes_per_request(self) -> int:
        return self.num_storing_layers * self.tokens_kept * self.bytes_per_token_per_layer


def layer_groups(cfg: MemoryConfig, context: int | None = None) -> tuple[LayerGroup, ...]:
    arch = cfg.arch
    S = cfg.context if context is None else context
    bpl = token_layer_bytes(arch, cfg.kv_dtype, cfg.group_size)
    out = []
    for kind, n in ((GLOBAL, arch.num_global_layers), (LOCAL, arch.num_local_layers)):
        if n:
            kept = S if kind == GLOBAL else min(S, arch.sliding_window)
            out.append(LayerGroup(kind, n, -(-n // cfg.layers_per_kv), kept, bpl))
    return tuple(out)


def request_bytes(cfg: MemoryConfig, context: int | None = None) -> int:
    """KV bytes of one request at `context` tokens (cfg.context when None)."""
    return sum(g.bytes_per_request for g in layer_groups(cfg, context))


@dataclass(frozen=True)
class FormulaStep:
    what: str
    math: str
    bytes: int | None  # None for a step that is not a byte count


@dataclass(frozen=True)
class KvMemory:
    config: MemoryConfig
    bytes_per_token_per_layer: int
    bytes_per_token: int  # every storing layer, while the context fits in every window
    groups: tuple[LayerGroup, ...]
    per_request_bytes: int
    total_bytes: int
    steps: tuple[FormulaStep, ...]

    def steps_frame(self):
        import pandas as pd

        return pd.DataFrame([{"Step": s.what, "With your numbers": s.math} for s in self.steps])

    @property
    def avg_bytes_per_token(self) -> float:
        """Per request divided by the context: below bytes_per_token once windows are full."""
        return self.per_request_bytes / self.config.context


def kv_memory(cfg: MemoryConfig) -> KvMemory:
    groups = layer_groups(cfg)
    bpl = token_layer_bytes(cfg.arch, cfg.kv_dtype, cfg.group_size)
    bpt = bpl * sum(g.num_storing_layers for g in groups)
    per_request = sum(g.bytes_per_request for g in groups)
    total = per_request * cfg.batch
    return KvMemory(cfg, bpl, bpt, groups, per_request, total, _steps(cfg, groups, bpl, bpt, per_request, total))


def _steps(cfg: MemoryConfig, groups, bpl: int, bpt: int, per_request: int, total: int) -> tuple[FormulaStep, ...]:
    a, d, g = cfg.arch, cfg.dtype, cfg.group_size
    steps = []
    if d.grouped:
        steps.append(FormulaStep(
            "Bytes per value p",
            f"{d.bits} bits ÷ 8 = {d.bits / 8:g} B, plus a {SCALE_BYTES} B scale and a {ZERO_BYTES} B zero point "
            f"per group of g = {g} values",
            None))
    else:
        steps.append(FormulaStep("Bytes per value p", f"{d.bits} bits ÷ 8 = {d.bits // 8} B", None))

    def vec(n: int) -> str:
        if not d.grouped:
            return f"{n} × {d.bits // 8}"
        return f"(⌈{n}·{d.bits}/8⌉ + ⌈{n}/{g}⌉·{SCALE_BYTES + ZERO_BYTES})"

    if a.attention == "MLA":
        n = a.kv_lora_rank + a.qk_rope_head_dim
        body = (f"(d_c + d_R) × p = ({a.kv_lora_rank} + {a.qk_rope_head_dim}) × {d.bits // 8}" if not d.grouped
                else f"{vec(n)}")
        steps.append(FormulaStep(
            "Per token, one layer (MLA)",
            f"{body} = {bpl:,} B — one latent serves K and V of all {a.n_heads} heads: no ×2, no ×H",
            bpl))
    elif a.v_dim != a.head_dim:
        steps.append(FormulaStep(
            "Per token, one layer",
            f"H_kv × (d_k + d_v) × p = {a.n_kv_heads} × ({vec(a.head_dim)} + {vec(a.v_dim)}) = {bpl:,} B", bpl))
    elif d.grouped:
        steps.append(FormulaStep(
            "Per token, one layer", f"2 (K and V) × H_kv × {vec(a.head_dim)} = 2 × {a.n_kv_heads} × "
            f"{vector_bytes(a.head_dim, cfg.kv_dtype, g)} = {bpl:,} B", bpl))
    else:
        steps.append(FormulaStep(
            "Per token, one layer",
            f"2 (K and V) × H_kv × d_h × p = 2 × {a.n_kv_heads} × {a.head_dim} × {d.bits // 8} = {bpl:,} B", bpl))

    storing = sum(x.num_storing_layers for x in groups)
    share = (f" (⌈{a.n_layers} / {cfg.layers_per_kv}⌉ = {storing} layers store K/V: {cfg.layers_per_kv} "
             "adjacent layers share one)") if cfg.layers_per_kv > 1 else ""
    if len(groups) == 2:
        gl, lo = groups
        layers = f"({gl.num_storing_layers} global + {lo.num_storing_layers} local)"
    else:
        layers = f"{storing}"
    steps.append(FormulaStep("Per token, all layers", f"{bpl:,} × {layers} layers{share} = {bpt:,} B ({fmt_bytes(bpt)})",
                             bpt))

    S = cfg.context
    if a.num_local_layers:
        parts = []
        for x in groups:
            t = f"{S:,}" if x.kind == GLOBAL else f"min({S:,}, {a.sliding_window:,})"
            parts.append(f"{x.num_storing_layers} × {t}")
        kept = " + ".join(f"{x.num_storing_layers * x.tokens_kept:,}" for x in groups)
        math_ = f"{bpl:,} × ({' + '.join(parts)}) = {bpl:,} × ({kept}) = {per_request:,} B ({fmt_bytes(per_request)})"
        steps.append(FormulaStep(f"Per request, S = {S:,} tokens (local layers keep at most W = {a.sliding_window:,})",
                                 math_, per_request))
    else:
        steps.append(FormulaStep(f"Per request, S = {S:,} tokens",
                                 f"{bpt:,} × {S:,} = {per_request:,} B ({fmt_bytes(per_request)})", per_request))
    steps.append(FormulaStep(f"All requests, B = {cfg.batch:,}",
                             f"{per_request:,} × {cfg.batch:,} = {total:,} B ({fmt_bytes(total)})", total))
    return tuple(steps)


# --- grids and curves ----------------------------------------------------------------------


def half_octaves(lo_exp: int, hi_exp: int) -> tuple[int, ...]:
    """Integers near 2^(k/2) for k in [2·lo_exp, 2·hi_exp], without duplicates."""
    return tuple(sorted({round(2 ** (k / 2)) for k in range(2 * lo_exp, 2 * hi_exp + 1)}))


def grid_axes(cfg: MemoryConfig) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(batches, contexts) covering the chosen point and the model's trained context."""
    top_ctx = max(cfg.context, cfg.arch.max_position_embeddings)
    ctx_hi = min(max(math.ceil(math.log2(top_ctx)) + 1, 14), 27)
    batch_hi = min(max(math.ceil(math.log2(cfg.batch)) + 1, 10), 16)
    return half_octaves(0, batch_hi), half_octaves(8, ctx_hi)


@dataclass(frozen=True)
class KvGrid:
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    total_bytes: tuple[tuple[int, ...], ...]  # [batch index][context index]

    def to_frame(self, kv_budget_bytes: int | None = None):
        import pandas as pd

        rows = []
        for i, b in enumerate(self.batches):
            for j, s in enumerate(self.contexts):
                row = {"batch": b, "context": s, "kv_bytes": self.total_bytes[i][j],
                       "kv_gib": self.total_bytes[i][j] / GiB}
                if kv_budget_bytes is not None:
                    row["fits"] = self.total_bytes[i][j] <= kv_budget_bytes
                rows.append(row)
        return pd.DataFrame(rows)


def kv_grid(cfg: MemoryConfig, batches=None, contexts=None) -> KvGrid:
    if batches is None or contexts is None:
        batches, contexts = grid_axes(cfg)
    per_request = [request_bytes(cfg, s) for s in contexts]
    return KvGrid(tuple(batches), tuple(contexts), tuple(tuple(b * r for r in per_request) for b in batches))


@dataclass(frozen=True)
class VariantCurves:
    contexts: tuple[int, ...]
    batch: int
    name_to_arch: dict[str, ArchPreset]
    name_to_bytes: dict[str, tuple[int, ...]]  # total KV bytes at each context
    name_to_token_bytes: dict[str, int]  # per token, all layers

    def to_frame(self):
        import pandas as pd

        rows = [{"attention": n, "context": s, "batch": self.batch, "kv_bytes": v}
                for n, vs in self.name_to_bytes.items() for s, v in zip(self.contexts, vs, strict=True)]
        return pd.DataFrame(rows)


def variant_curves(cfg: MemoryConfig, contexts=None) -> VariantCurves:
    """Total KV bytes vs context for the same model as MHA, GQA, MQA and MLA (same layers,
    windows, dtype and batch)."""
    contexts = tuple(contexts if contexts is not None else grid_axes(cfg)[1])
    name_to_arch = attention_variants(cfg.arch)
    out, per_token = {}, {}
    for name, arch in name_to_arch.items():
        c = replace(cfg, arch=arch)
        out[name] = tuple(cfg.batch * request_bytes(c, s) for s in contexts)
        per_token[name] = kv_memory(replace(c, context=1)).bytes_per_token
    return VariantCurves(contexts, cfg.batch, name_to_arch, out, per_token)


def weight_bytes(arch: ArchPreset, weight_dtype: str) -> int:
    return -(-estimate_num_params(arch) * WEIGHT_DTYPE_BITS[weight_dtype] // 8)


# --- formatting -----------------------------------------------------------------------------


def _trim(v: float) -> str:
    s = f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 10 else f"{v:.3f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def fmt_bytes(n: int | float) -> str:
    """Binary units: 131072 -> '128 KiB', 4294967296 -> '4 GiB'."""
    sign = "−" if n < 0 else ""
    n = abs(n)
    if n < KiB:
        return f"{sign}{n:,.0f} B"
    for unit, size in (("YiB", 1 << 80), ("ZiB", 1 << 70), ("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", TiB),
                       ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{sign}{_trim(n / size)} {unit}"
    raise AssertionError("unreachable")


def fmt_decimal(n: int | float) -> str:
    """Decimal units, as the seeds (and disk vendors) write them: 1310720000 -> '1.31 GB'."""
    sign = "−" if n < 0 else ""
    n = abs(n)
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{sign}{_trim(n / size)} {unit}"
    return f"{sign}{n:,.0f} B"


def fmt_both(n: int) -> str:
    return f"{n:,} B = {fmt_decimal(n)} = {fmt_bytes(n)}"


# --- tables the KV memory page shows ----------------------------------------------------------


def variant_rows(curves: VariantCurves, kv_dtype: str, group_size: int) -> list[dict]:
    """One row per attention kind: what one token stores in one layer, and in all of them."""
    rows = []
    for name, a in curves.name_to_arch.items():
        kv_part = (f"({a.kv_lora_rank} + {a.qk_rope_head_dim}) latent" if name == "MLA"
                   else f"2 × {a.n_kv_heads} × {a.head_dim}" if a.v_dim == a.head_dim
                   else f"{a.n_kv_heads} × ({a.head_dim} + {a.v_dim})")
        rows.append({"Attention": name, "K/V heads": str(a.n_kv_heads) if name != "MLA" else "1 latent",
                     "Values per token per layer": kv_part,
                     "Bytes per token per layer": token_layer_bytes(a, kv_dtype, group_size),
                     "Per token, all layers": fmt_bytes(curves.name_to_token_bytes[name])})
    return rows


def presets_frame(presets: dict[str, ArchPreset]):
    """Every preset's shape, FP16 KV bytes per token and parameter counts (estimated and from its card)."""
    import pandas as pd

    rows = []
    for key, a in presets.items():
        per_token = kv_memory(MemoryConfig(a, context=1)).bytes_per_token
        rows.append({"Model": a.name, "Attention": a.attention, "Layers": a.describe_layers(),
                     "Query heads": a.n_heads, "K/V heads": a.n_kv_heads, "Head dim": a.head_dim,
                     "KV per token, FP16": fmt_bytes(per_token), "KV per token (B)": per_token,
                     "Parameters (estimate)": f"{estimate_num_params(a) / 1e9:.4g} B",
                     "Parameters (model card)": f"{a.params_card:g} B" if a.params_card else "",
                     "Trained context": a.max_position_embeddings, "Source": a.source, "Key": key})
    return pd.DataFrame(rows)


ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def measurement_rows(r) -> list[dict]:
    """The tiny model's measured cache (sim.model.measure.TinyCacheMeasurement) next to the formulas."""
    B, H, S, D = r.tensor_shape
    p = ELEMENT_BYTES[r.dtype]
    rows = [
        {"Count": f"Measured: numel × element_size over the {r.num_tensors} filled K and V tensors",
         "Bytes": r.measured_bytes},
        {"Count": f"Formula 2·L·H_kv·d_h·p·B·S = 2·{r.num_tensors // 2}·{H}·{D}·{p}·{B}·{S} (sim/cost/opcount.py)",
         "Bytes": r.opcount_bytes},
        {"Count": "This page's calculator, from the preset", "Bytes": r.calculator_bytes},
    ]
    if r.cuda_allocated_delta is not None:
        rows.append({"Count": "torch.cuda.memory_allocated() after − before allocating", "Bytes": r.cuda_allocated_delta})
        rows.append({"Count": "Formula with each tensor rounded up to the allocator's 512 B", "Bytes": r.cuda_expected})
    return rows
