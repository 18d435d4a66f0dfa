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

from sim.cost.gpus import GpuPreset
from sim.cost.presets import GLOBAL, LOCAL, ArchPreset, attention_variants, estimate_num_params, with_mla

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


# --- what fits on a GPU ------------------------------------------------------------------


@dataclass(frozen=True)
class GpuConfig:
    gpu: GpuPreset
    num_gpus: int = 1
    utilization: float = 0.9  # the fraction a server may use (vLLM's --gpu-memory-utilization)
    weight_dtype: str = "bf16"

    def __post_init__(self) -> None:
        _check_int("num_gpus", self.num_gpus, 1, MAX_GPUS)
        if not (isinstance(self.utilization, int | float) and math.isfinite(self.utilization)
                and 0.05 <= self.utilization <= 1.0):
            raise ValueError(f"utilization must be within 0.05..1.0, got {self.utilization!r}")
        if self.weight_dtype not in WEIGHT_DTYPE_BITS:
            raise ValueError(f"weight_dtype must be one of {', '.join(WEIGHT_DTYPE_BITS)}, got {self.weight_dtype!r}")

    @property
    def total_bytes(self) -> int:
        return self.gpu.memory_bytes * self.num_gpus

    @property
    def usable_bytes(self) -> int:
        return math.floor(self.total_bytes * self.utilization)


def weight_bytes(arch: ArchPreset, weight_dtype: str) -> int:
    return -(-estimate_num_params(arch) * WEIGHT_DTYPE_BITS[weight_dtype] // 8)


@dataclass(frozen=True)
class Capacity:
    total_bytes: int  # every GPU's memory
    usable_bytes: int  # × utilization
    weight_bytes: int
    kv_bytes: int  # the cache at the chosen batch and context
    max_requests: int  # at the chosen context
    max_context: int  # at the chosen batch, up to the model's trained context
    max_context_limited_by: str  # "memory" or "model"

    @property
    def kv_budget_bytes(self) -> int:
        """What is left for the cache after the weights (negative: the weights alone do not fit)."""
        return self.usable_bytes - self.weight_bytes

    @property
    def headroom_bytes(self) -> int:
        return self.kv_budget_bytes - self.kv_bytes

    @property
    def fits(self) -> bool:
        return self.headroom_bytes >= 0

    def breakdown(self) -> list[tuple[str, int]]:
        """(part, bytes) stacking up to the total: weights, KV, free, reserved (or over)."""
        parts = [("Weights", self.weight_bytes), ("KV cache", self.kv_bytes)]
        if self.headroom_bytes >= 0:
            parts.append(("Free for more KV", self.headroom_bytes))
        return parts + [("Kept aside (1 − utilization)", self.total_bytes - self.usable_bytes)]


def max_context(cfg: MemoryConfig, kv_budget: int) -> tuple[int, str]:
    """Largest context (≤ the model's trained context) whose cache for cfg.batch requests fits in
    kv_budget bytes, and what limits it ("memory" or "model")."""
    limit = cfg.arch.max_position_embeddings
    if kv_budget <= 0:
        return 0, "memory"
    if cfg.batch * request_bytes(cfg, limit) <= kv_budget:
        return limit, "model"
    lo, hi = 0, limit  # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cfg.batch * request_bytes(cfg, mid) <= kv_budget:
            lo = mid
        else:
            hi = mid
    return lo, "memory"


def capacity(cfg: MemoryConfig, gpu: GpuConfig) -> Capacity:
    w = weight_bytes(cfg.arch, gpu.weight_dtype)
    per_request = request_bytes(cfg)
    budget = gpu.usable_bytes - w
    max_req = budget // per_request if budget > 0 else 0
    ctx, limited = max_context(cfg, budget)
    return Capacity(gpu.total_bytes, gpu.usable_bytes, w, per_request * cfg.batch, max_req, ctx, limited)


@dataclass(frozen=True)
class DtypeRow:
    kv_dtype: str
    bytes_per_token: int
    per_request_bytes: int
    total_bytes: int
    max_requests: int
    vs_fp16: float  # per-request bytes relative to fp16


def dtype_table(cfg: MemoryConfig, gpu: GpuConfig) -> tuple[DtypeRow, ...]:
    """Every KV dtype for the same model, batch, context and GPU: what a smaller format buys."""
    fp16 = request_bytes(replace(cfg, kv_dtype="fp16"))
    rows = []
    for name in KV_DTYPES:
        c = replace(cfg, kv_dtype=name)
        m = kv_memory(c)
        cap = capacity(c, gpu)
        rows.append(DtypeRow(name, m.bytes_per_token, m.per_request_bytes, m.total_bytes, cap.max_requests,
                             m.per_request_bytes / fp16))
    return tuple(rows)


def dtype_frame(rows: tuple[DtypeRow, ...]):
    import pandas as pd

    return pd.DataFrame([{
        "KV dtype": r.kv_dtype, "Per token (B)": r.bytes_per_token, "Per request (B)": r.per_request_bytes,
        "All requests (B)": r.total_bytes, "All requests": fmt_bytes(r.total_bytes),
        "Max concurrent requests": r.max_requests, "Size vs FP16": round(r.vs_fp16, 4),
    } for r in rows])


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


# --- the seeds' figures, recomputed ----------------------------------------------------------

CORRECT, CLOSE, WRONG, AMBIGUOUS, UNDERSTATED = "correct", "close", "wrong", "ambiguous", "understated"
VERDICTS = (CORRECT, CLOSE, WRONG, AMBIGUOUS, UNDERSTATED)


@dataclass(frozen=True)
class SeedClaim:
    seed: str  # "001" = shared/seeds/001_*.txt
    claim: str  # in English
    original: str  # the seed's own words
    seed_says: str
    we_compute: str
    verdict: str
    why: str
    our_bytes: int | None = None


def _share_of_gpu(nbytes: int, gpu: GpuPreset) -> str:
    """'more than an L4's 24 GiB' or '67% of an L4's 24 GiB', from the numbers."""
    short = gpu.name.removeprefix("NVIDIA ").split(" ")[0]
    article = "an" if short[:1] in "AEFHILMNORSX" else "a"
    held = f"{article} {short}'s {fmt_bytes(gpu.memory_bytes)}"
    return f"more than {held}" if nbytes > gpu.memory_bytes else f"{nbytes / gpu.memory_bytes:.0%} of {held} for one request"


def seed_claims(presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> tuple[SeedClaim, ...]:
    """Every KV-size figure seeds 000, 001, 002 and 004 state, recomputed with this module."""
    l70, l8, l7 = presets["llama-3.1-70b"], presets["llama-3.1-8b"], presets["llama-2-7b"]
    falcon, ds3 = presets["falcon-7b"], presets["deepseek-v3"]
    h100 = gpus["h100-sxm"]

    def kv(arch, context, batch=1, dtype="fp16", **kw) -> int:
        return kv_memory(MemoryConfig(arch, batch=batch, context=context, kv_dtype=dtype, **kw)).total_bytes

    def per_token(arch, dtype="fp16") -> int:
        return kv_memory(MemoryConfig(arch, context=1, kv_dtype=dtype)).bytes_per_token

    t70, t8, t7 = per_token(l70), per_token(l8), per_token(l7)
    c = []
    c.append(SeedClaim(
        "000", "Total bytes = 2 (K, V) × layers × KV heads × sequence length × head dim × bytes per element",
        "총 바이트는 2(K·V) × 층 수 × KV 헤드 수 × 시퀀스 길이 × 헤드 차원 × 원소당 바이트",
        "the formula", "the same formula (this page's)", CORRECT,
        "Right, for one request; multiply by the number of concurrent requests for a server."))
    b = kv(l70, 4000)
    c.append(SeedClaim(
        "000", "Llama 3 70B in half precision: about 2.5 GB of cache at a 4,000-token context",
        "Llama 3 70B를 반정밀도로 쓰면 4,000 토큰 문맥에 약 2.5GB", "≈ 2.5 GB", fmt_both(b), WRONG,
        f"Twice too high: {fmt_bytes(t70)} per token (80 layers × 8 KV heads × 128 × 2 × 2 B) × 4,000 = "
        f"{fmt_decimal(b)}. 2.5 GB would take ~{round(2.5e9 / t70, -2):,.0f} tokens, or fp32 "
        f"({fmt_decimal(kv(l70, 4000, dtype='fp32'))}).", b))
    b = kv(l70, 32000)
    c.append(SeedClaim(
        "000", "… and about 20 GB per user at 32,000 tokens",
        "32,000 토큰이면 사용자당 무려 20GB", "≈ 20 GB", fmt_both(b), WRONG,
        f"Twice too high again: {fmt_decimal(b)}. Seed 002 gets ~10.4 GB for the same model and length.", b))
    b = kv(l70, 131072)
    over_20gb = -(-20 * 10**9 // t70)
    c.append(SeedClaim(
        "000", "The cache reaches tens of GB per user",
        "캐시 자체가 사용자당 수십 GB에 이르는", "tens of GB", f"{fmt_both(b)} at 131,072 tokens", AMBIGUOUS,
        f"Only for long contexts: Llama 3 70B passes 20 GB at {over_20gb:,} tokens; at 4k it is ~1.3 GB.", b))

    b = per_token(l8)
    c.append(SeedClaim(
        "001", "8B model (32 layers, 8 KV heads, head dim 128, FP16): 2×32×8×128×2 = 131,072 B = 128 KiB per token",
        "2 \\times 32 \\times 8 \\times 128 \\times 2 = 131{,}072 \\ \\text{바이트} = 128 \\ \\text{KiB}", "128 KiB", fmt_both(b), CORRECT,
        "Exactly the formula for Llama 3.1 8B's shape.", b))
    b = kv(l8, 32768)
    c.append(SeedClaim(
        "001", "A 32k context takes 4 GiB per request", "문맥 32k를 열면 요청 하나당 4 GiB", "4 GiB", fmt_both(b), CORRECT,
        "With 32k = 32,768 tokens: 131,072 B × 32,768 = 2^32 B.", b))
    b = kv(l8, 32768, batch=16)
    c.append(SeedClaim(
        "001", "16 concurrent requests take 64 GiB", "동시 요청 16건이면 64 GiB", "64 GiB", fmt_both(b), CORRECT,
        "4 GiB × 16.", b))
    w = weight_bytes(l8, "fp16")
    cap_full = capacity(MemoryConfig(l8, batch=16, context=32768), GpuConfig(h100, utilization=1.0, weight_dtype="fp16"))
    cap_09 = capacity(MemoryConfig(l8, batch=16, context=32768), GpuConfig(h100, utilization=0.9, weight_dtype="fp16"))
    c.append(SeedClaim(
        "001", "Add 16 GiB of FP16 weights and an 80 GiB GPU is exactly full",
        "FP16 가중치 16 GiB를 더하면 80 GiB짜리 GPU가 정확히 꽉 찬다", "64 + 16 = 80 GiB",
        f"weights {fmt_both(w)}; with 64 GiB of KV: {fmt_bytes(w + b)} of 80 GiB", CLOSE,
        f"The weights are 16 GB, not 16 GiB (8.03 B params × 2 B), so ~1 GiB is left. But a server never gets "
        f"all 80 GiB: at vLLM's default utilization of 0.9 only {cap_09.max_requests} of the 16 requests fit "
        f"({cap_full.max_requests} at 1.0).", w + b))
    int8_grouped = kv(l8, 32768, batch=16, dtype="int8")
    fp8 = kv(l8, 32768, batch=16, dtype="fp8")
    g_fp16 = GpuConfig(h100, utilization=1.0, weight_dtype="fp16")
    r16 = capacity(MemoryConfig(l8, context=32768), g_fp16).max_requests
    r8 = capacity(MemoryConfig(l8, context=32768, kv_dtype="fp8"), g_fp16).max_requests
    r8g = capacity(MemoryConfig(l8, context=32768, kv_dtype="int8"), g_fp16).max_requests
    c.append(SeedClaim(
        "001", "Switch the KV cache to INT8: 32 GiB freed at once, and twice the concurrent requests",
        "KV 캐시를 INT8로 바꾸면 그 자리에서 32 GiB가 비고 동시 요청을 두 배로", "−32 GiB, ×2 requests",
        f"8-bit, one scale per tensor: {fmt_bytes(fp8)} (frees {fmt_bytes(b - fp8)}), {r8} vs {r16} requests on "
        f"80 GiB; INT8 with a scale + zero point per 128 values: {fmt_bytes(int8_grouped)}, {r8g} requests", CORRECT,
        "Right for a per-tensor scale (FP8, or INT8 as vLLM does it); per-group scales cost ~3% more and one request.",
        fp8))

    c.append(SeedClaim(
        "002", "bytes_per_token_per_layer = 2 * d_head * dtype_size",
        "bytes_per_token_per_layer = 2 * d_head * dtype_size",
        "2 × d_head × dtype_size", "per token per layer = 2 × H_kv × d_head × dtype_size", AMBIGUOUS,
        "The text says 'per head' but the name says per token per layer; the examples that follow then drop H_kv."))
    b = token_layer_bytes(l7)
    c.append(SeedClaim(
        "002", "7B model (32 layers, 32 heads, d_head 128, fp16): per token per layer = 2·128·2 = 512 bytes",
        "per token per layer = 2 * 128 * 2 = 512 bytes", "512 B", fmt_both(b), WRONG,
        "Omits the 32 heads: 512 B is one head's K and V. Per layer it is 2 × 32 × 128 × 2 = 16 KiB.", b))
    c.append(SeedClaim(
        "002", "… per token (32 layers) = 16 KB", "per token (32 layers) = 16 KB", "16 KB", fmt_both(t7), WRONG,
        "32× too small (the heads again): 16 KiB is one layer's share. Llama 2 7B stores 512 KiB per token.", t7))
    b = kv(l7, 32768)
    c.append(SeedClaim(
        "002", "… per 32K context = 512 MB", "per 32K context = 512 MB", "512 MB", fmt_both(b), WRONG,
        f"32× too small: a 32K context of a 32-head MHA 7B model is {fmt_bytes(b)}, "
        + _share_of_gpu(b, gpus["l4"]) + ".", b))
    b = token_layer_bytes(l70)
    c.append(SeedClaim(
        "002", "Llama 3 70B (80 layers, GQA with 8 KV heads, d_head 128): per token per layer = 2·8·128·2 = 4,096 B",
        "per token per layer = 2 * 8 * 128 * 2 = 4096 bytes (4 KB)", "4,096 B", fmt_both(b), CORRECT,
        "Right, and here the KV heads are counted.", b))
    b = kv(l70, 32768)
    c.append(SeedClaim(
        "002", "… per 32K context = 10.4 GB", "per 32K context = 10.4 GB", "10.4 GB", fmt_both(b), CLOSE,
        f"3% low: 32,768 tokens make {fmt_decimal(b)}, exactly 10 GiB ({fmt_decimal(kv(l70, 32000))} for 32,000).", b))
    b = kv(l70, 131072)
    a100 = gpus["a100-40gb"]
    c.append(SeedClaim(
        "002", "So Llama 3 70B at 128K context takes a large part of a 40 GB A100 at batch size 1, with KV cache alone",
        "배치 크기(batch size) 1에서도 40 GB짜리 A100의 상당 부분을 KV 캐시만으로 차지", "a large part of 40 GB",
        f"{fmt_both(b)} = {b / a100.memory_bytes:.0%} of the A100 40GB", UNDERSTATED,
        f"It is all of it — and the {fmt_decimal(weight_bytes(l70, 'bf16'))} of bf16 weights need at least two "
        "80 GB GPUs anyway.", b))
    mha70 = attention_variants(l70)["MHA"]
    b = kv(mha70, 32768)
    c.append(SeedClaim(
        "002", "With standard 64-head MHA it would need 32 GB (at 32K)", "64 헤드짜리 표준 다중 헤드 어텐션(Multi-Head Attention; MHA)이었다면 32 GB가 필요",
        "32 GB", fmt_both(b), WRONG,
        f"MHA keeps 64 K/V heads instead of 8: 8× the GQA cache, {fmt_bytes(b)}. 32 KiB is MHA's per-token, "
        "per-layer size; 32 GB matches nothing.", b))
    mla70 = with_mla(l70)
    b = kv(mla70, 32768)
    c.append(SeedClaim(
        "002", "MLA compresses it further", "잠재(Multi-head Latent) 어텐션(MLA)은 이를 더 압축",
        "smaller than GQA",
        f"Llama 3 70B's shape with DeepSeek-V2's MLA sizes (512 + 64 per layer): {fmt_both(b)}; DeepSeek-V3 itself "
        f"(61 layers): {fmt_bytes(kv(ds3, 32768))} at 32K", CORRECT,
        f"{kv(l70, 32768) / b:.1f}× below GQA: one 576-value latent per layer instead of 8 heads × 128 × 2.", b))

    mha_falcon = attention_variants(falcon)["MHA"]
    b, m = per_token(falcon), per_token(mha_falcon)
    c.append(SeedClaim(
        "004", "MQA: K and V get one head each, shared by every query head; the cache shrinks by 1/h",
        "KV Cache 용량이 기존 대비 $\\frac{1}{h}$만큼 감소", "−1/h",
        f"Falcon 7B (h = 71): {fmt_bytes(b)} per token vs {fmt_bytes(m)} as MHA", AMBIGUOUS,
        "'Decreases by 1/h' reads as losing 1/h of it; the cache becomes 1/h of MHA's (it loses (h−1)/h).", b))
    mha8 = attention_variants(l8)["MHA"]
    c.append(SeedClaim(
        "004", "GQA: groups of query heads share one K/V head; much smaller cache, close to MHA quality",
        "KV Cache 용량을 크게 줄이면서도", "much smaller than MHA",
        f"Llama 3.1 8B (8 of 32 heads): {fmt_bytes(t8)} per token vs {fmt_bytes(per_token(mha8))} as MHA",
        CORRECT, "The cache scales with H_kv: it is H_kv / H = 1/4 of MHA's here.", t8))
    return tuple(c)


def claims_frame(claims: tuple[SeedClaim, ...]):
    import pandas as pd

    return pd.DataFrame([{
        "Seed": x.seed, "Claim": x.claim, "As written": x.original, "Seed says": x.seed_says,
        "We compute": x.we_compute, "Verdict": x.verdict, "Why": x.why,
    } for x in claims])
