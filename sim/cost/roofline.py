"""The roofline: how long one prefill or decode step must take on given hardware.

A step does F FLOPs and moves M bytes. It cannot finish faster than F / peak_flops (compute) or
M / bandwidth (memory); the model predicts the larger of the two. Arithmetic intensity I = F / M.
The ridge point peak / bandwidth is the intensity at which both take equally long: below it a
step is memory-bound, above it compute-bound.

FLOPs are matmul FLOPs (2 per multiply-add). Bytes are the least a step must move: every weight
it uses once, the whole KV cache of every request it decodes, and the matmul inputs and outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sim.cost.arch import ArchPreset, estimate_active_params, estimate_num_params, with_kv_heads
from sim.cost.memory import WEIGHT_DTYPE_BITS, MemoryConfig, request_bytes
from sim.msg import Msg
from sim.refusal import Misuse, Refusal

PHASES = ("prefill", "decode")
COMPUTE_DTYPES = ("bf16", "fp8")
ACT_BYTES = 2  # activations in bf16/fp16


@dataclass(frozen=True)
class Hardware:
    name: str
    peak_flops: float  # for the chosen compute dtype, dense
    bandwidth: float  # bytes/s
    source: str = ""

    @property
    def ridge(self) -> float:
        """FLOPs per byte at which compute time equals memory time."""
        return self.peak_flops / self.bandwidth


def hardware(gpu, compute_dtype: str = "bf16") -> Hardware:
    """From a GpuPreset; fp8 needs the preset's fp8 figure (an A100 has no FP8 tensor cores): a Refusal when it
    has none."""
    if compute_dtype not in COMPUTE_DTYPES:
        raise Misuse(f"compute dtype must be one of {COMPUTE_DTYPES}, got {compute_dtype!r}")
    tflops = gpu.bf16_dense_tflops if compute_dtype == "bf16" else getattr(gpu, "fp8_dense_tflops", None)
    if not tflops:
        raise Refusal("roofline.s.no_dtype", gpu=gpu.name, dtype=compute_dtype.upper())
    return Hardware(gpu.name, tflops * 1e12, gpu.bandwidth_bytes_per_s, gpu.source)


@dataclass(frozen=True)
class RooflineConfig:
    arch: ArchPreset
    batch: int = 1
    context: int = 4096  # tokens already in each request's cache (decode) / prompt length (prefill)
    weight_dtype: str = "bf16"
    kv_dtype: str = "fp16"

    def __post_init__(self) -> None:
        # the roofline page's batch and context are stops inside these bounds, its dtypes choices
        if not 1 <= self.batch <= 4096:
            raise Misuse(f"batch must be 1..4,096, got {self.batch}")
        if not 1 <= self.context <= 1 << 20:
            raise Misuse(f"context must be 1..1,048,576 tokens, got {self.context}")
        if self.weight_dtype not in WEIGHT_DTYPE_BITS:
            raise Misuse(f"weight dtype must be one of {', '.join(WEIGHT_DTYPE_BITS)}, got {self.weight_dtype!r}")


@dataclass(frozen=True)
class StepCost:
    phase: str
    flops_linear: float
    flops_attention: float
    bytes_weights: float
    bytes_kv: float
    bytes_activations: float
    tokens: int  # tokens this step produces (decode: batch; prefill: batch, the first token each)

    @property
    def flops(self) -> float:
        return self.flops_linear + self.flops_attention

    @property
    def bytes(self) -> float:
        return self.bytes_weights + self.bytes_kv + self.bytes_activations

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    def time_compute(self, hw: Hardware) -> float:
        return self.flops / hw.peak_flops

    def time_memory(self, hw: Hardware) -> float:
        return self.bytes / hw.bandwidth

    def time(self, hw: Hardware) -> float:
        return max(self.time_compute(hw), self.time_memory(hw))

    def bound(self, hw: Hardware) -> str:
        return "compute" if self.time_compute(hw) >= self.time_memory(hw) else "memory"

    def attainable_flops(self, hw: Hardware) -> float:
        return min(hw.peak_flops, self.intensity * hw.bandwidth)


def _matmul_params(arch: ArchPreset, active: bool) -> int:
    """Weights a token multiplies by: the active ones, less the input embedding (a gather)."""
    n = estimate_active_params(arch) if active else estimate_num_params(arch)
    return n - (0 if arch.tie_word_embeddings else arch.vocab_size * arch.d_model)


def _attention_flops(arch: ArchPreset, keys_global: float, keys_local: float) -> float:
    """q·k and weights·v, summed over layers, for queries that see `keys_global` keys in a
    full-attention layer and `keys_local` in a sliding-window one (totals over the queries)."""
    if arch.attention == "MLA":  # absorbed form: scores and values in the latent space
        per_key = 2 * arch.n_heads * (2 * arch.kv_lora_rank + arch.qk_rope_head_dim)
    else:
        per_key = 2 * arch.n_heads * (arch.head_dim + arch.v_dim)
    return per_key * (arch.num_global_layers * keys_global + arch.num_local_layers * keys_local)


def _keys_decode(arch: ArchPreset, S: int) -> tuple[int, int]:
    return S, min(S, arch.sliding_window or S)


def _keys_prefill(arch: ArchPreset, S: int) -> tuple[int, int]:
    """Σ over the S causal queries of the keys each sees: S(S+1)/2, or capped at the window."""
    w = arch.sliding_window or S
    local = S * (S + 1) // 2 if S <= w else w * (w + 1) // 2 + (S - w) * w
    return S * (S + 1) // 2, local


def _activation_bytes_per_token(arch: ArchPreset) -> float:
    """Inputs and outputs of each matmul of every layer, once each."""
    d, q, kv = arch.d_model, arch.n_heads * arch.head_dim, 2 * arch.n_kv_heads * arch.head_dim
    ff = (arch.moe_d_ff or arch.d_ff) * (arch.num_experts_per_tok + arch.num_shared_experts) if arch.is_moe else arch.d_ff
    mats = 3 if arch.mlp_gated else 2
    per_layer = (d + q + kv) + (q + d) + (d + (mats - 1) * ff) + (ff + d)
    return arch.n_layers * per_layer * ACT_BYTES


def _weight_bytes_read(arch: ArchPreset, weight_dtype: str, tokens: int) -> float:
    """Every dense weight once; of the routed experts, those the tokens touch (uniform routing:
    E·(1 − (1 − k/E)^tokens) distinct experts per MoE layer)."""
    bits = WEIGHT_DTYPE_BITS[weight_dtype]
    total = estimate_num_params(arch)
    if not arch.is_moe:
        return total * bits / 8
    E, k = arch.num_experts, arch.num_experts_per_tok
    mats = 3 if arch.mlp_gated else 2
    per_expert = mats * arch.d_model * (arch.moe_d_ff or arch.d_ff)
    moe_layers = arch.n_layers - arch.first_dense_layers
    all_experts = moe_layers * E * per_expert
    touched = E * (1 - (1 - k / E) ** tokens)
    return (total - all_experts + moe_layers * touched * per_expert) * bits / 8


def decode_step(cfg: RooflineConfig) -> StepCost:
    """One new token for each of `batch` requests that already hold `context` tokens."""
    a, B, S = cfg.arch, cfg.batch, cfg.context
    kv_per_request = request_bytes(MemoryConfig(a, 1, S, cfg.kv_dtype), S)
    return StepCost(
        "decode",
        flops_linear=2 * _matmul_params(a, True) * B,
        flops_attention=_attention_flops(a, *_keys_decode(a, S)) * B,
        bytes_weights=_weight_bytes_read(a, cfg.weight_dtype, B),
        bytes_kv=kv_per_request * B,
        bytes_activations=_activation_bytes_per_token(a) * B,
        tokens=B,
    )


def prefill_step(cfg: RooflineConfig) -> StepCost:
    """A `context`-token prompt for each of `batch` requests, all at once; causal attention does
    half the square (kernels such as FlashAttention skip the masked half)."""
    a, B, S = cfg.arch, cfg.batch, cfg.context
    lm_head = 2 * a.vocab_size * a.d_model
    kv_written = request_bytes(MemoryConfig(a, 1, S, cfg.kv_dtype), S) * B
    return StepCost(
        "prefill",
        flops_linear=(2 * _matmul_params(a, True) - lm_head) * B * S + lm_head * B,
        flops_attention=_attention_flops(a, *_keys_prefill(a, S)) * B,
        bytes_weights=_weight_bytes_read(a, cfg.weight_dtype, B * S),
        bytes_kv=kv_written,
        bytes_activations=_activation_bytes_per_token(a) * B * S,
        tokens=B,
    )


def step(cfg: RooflineConfig, phase: str) -> StepCost:
    if phase not in PHASES:
        raise Misuse(f"phase must be one of {PHASES}, got {phase!r}")
    return decode_step(cfg) if phase == "decode" else prefill_step(cfg)


@dataclass(frozen=True)
class SweepPoint:
    batch: int
    context: int
    intensity: float
    time_s: float
    tokens_per_s: float
    bound: str


def batch_sweep(cfg: RooflineConfig, hw: Hardware, batches: list[int], contexts: list[int]) -> list[SweepPoint]:
    out = []
    for S in contexts:
        for B in batches:
            c = decode_step(replace(cfg, batch=B, context=S))
            t = c.time(hw)
            out.append(SweepPoint(B, S, c.intensity, t, B / t, c.bound(hw)))
    return out


def memory_bound_until(cfg: RooflineConfig, hw: Hardware, max_batch: int = 4096) -> int | None:
    """Smallest batch at which the decode step turns compute-bound (None: never, up to max_batch)."""
    lo, hi = 1, max_batch
    if decode_step(replace(cfg, batch=hi)).bound(hw) == "memory":
        return None
    if decode_step(replace(cfg, batch=lo)).bound(hw) == "compute":
        return 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decode_step(replace(cfg, batch=mid)).bound(hw) == "compute":
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class Lever:
    name: Msg  # the change, a message value (roofline.lever.<key>)
    bytes_per_step: float
    tokens_per_s: float
    note: Msg | str  # why it helps ("" for the configuration as chosen)


def what_helps(cfg: RooflineConfig, hw: Hardware) -> list[Lever]:
    """Each change on its own against the chosen configuration, for the decode step (sim/words/roofline.py words
    the names)."""
    def lever(key, c, **fields):
        s = decode_step(c)
        note = Msg(f"roofline.lever.{key}.why") if key != "chosen" else ""
        return Lever(Msg(f"roofline.lever.{key}", **fields), s.bytes, c.batch / s.time(hw), note)

    out = [lever("chosen", cfg)]
    if cfg.weight_dtype not in ("int4",):
        out.append(lever("weights_int4", replace(cfg, weight_dtype="int4")))
    if cfg.kv_dtype not in ("int4", "int2"):
        out.append(lever("kv_int4", replace(cfg, kv_dtype="int4")))
    if cfg.arch.attention in ("MHA", "GQA") and cfg.arch.n_kv_heads > 1:
        out.append(lever("mqa", replace(cfg, arch=with_kv_heads(cfg.arch, 1))))
    bigger = min(4096, cfg.batch * 8)  # the largest batch the config allows
    if bigger > cfg.batch:
        out.append(lever("batch", replace(cfg, batch=bigger), k=bigger // cfg.batch, n=bigger))
    return out


def decode_intensity_limit(cfg: RooflineConfig) -> float:
    """The decode step's FLOPs per byte as the batch grows without end: the weights' bytes are shared (bounded),
    each request's FLOPs, KV cache and activations are its own, so the intensity tends to their ratio."""
    one = decode_step(replace(cfg, batch=1))
    return one.flops / (one.bytes_kv + one.bytes_activations)


def _reach_by_context(rows: list[SweepPoint], ridge: float) -> dict[int, int | None]:
    """{context: the first swept batch whose decode intensity is at or above the ridge, or None}."""
    out: dict[int, int | None] = {}
    for r in sorted(rows, key=lambda r: (r.context, r.batch)):
        out.setdefault(r.context, None)
        if out[r.context] is None and r.intensity >= ridge:
            out[r.context] = r.batch
    return out


# --- this machine, measured (by sim/model/probe.py, with torch) ---------------------------------


@dataclass(frozen=True)
class MachineProbe:
    bandwidth: float  # bytes/s, from a large tensor copy
    peak_flops: float  # FLOP/s, from a square matmul
    device: str
    dtype: str
    copy_mib: int  # the bandwidth test copies this many MiB of fp32 (read + write moves twice that)
    matmul_n: int  # the compute test multiplies two n×n matrices in `dtype`
    repeats: int  # each test's best of this many timed runs

    @property
    def method(self) -> Msg:
        """How the probe measured, as a message value (sim.words words it in either language)."""
        return Msg("roofline.s.method", mib=self.copy_mib, moved=2 * self.copy_mib, reps=self.repeats,
                   n=self.matmul_n, dtype=self.dtype, reps_mm=self.repeats)


@dataclass(frozen=True)
class TinyDecodePoint:
    bytes_per_step: float  # weights + KV read, per cached decode step (median step)
    flops_per_step: float
    measured_s: float  # median wall time of a cached decode step
    predicted_s: float  # the roofline's time on the measured machine
    num_ops: int  # tensor operations dispatched in one decode step
    intensity: float
    achieved_flops: float
    attainable_flops: float

    @property
    def fraction_of_roof(self) -> float:
        return self.predicted_s / self.measured_s


@dataclass(frozen=True)
class ContextTrend:
    """How a batch-1 decode step's arithmetic intensity moves from a short to a long context."""

    short_context: int
    long_context: int
    short: float  # FLOP/B
    long: float
    group: int  # query heads per K/V head


def context_trend(arch, short_context: int = 1, long_context: int | None = None) -> ContextTrend:
    """Decode intensity at batch 1 from a short to the model's longest context (131,072 at most)."""
    long_context = long_context or min(arch.max_position_embeddings, 131_072)
    s = decode_step(RooflineConfig(arch, 1, short_context))
    g = decode_step(RooflineConfig(arch, 1, long_context))
    return ContextTrend(short_context, long_context, s.intensity, g.intensity, max(1, arch.n_heads // arch.n_kv_heads))
