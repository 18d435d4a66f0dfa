"""Quantizers for cached keys and values, with exact byte accounting.

A cached K or V tensor has tokens on dim -2 and channels on dim -1: (..., S, D). Values that share
one scale (and, asymmetric, one zero point) form a *group*, and the group runs along one axis:

    axis="token"    per-token: one scale per token for each run of `group_size` adjacent channels.
                    A token can be quantized the moment it arrives.
    axis="channel"  per-channel: one scale per channel for each run of `group_size` adjacent tokens.
                    A channel's scale needs `group_size` tokens first (KIVI's chunks of K).

Integer formats (8, 4, 3, 2 bits):
    asymmetric  zero = min, scale = (max - min) / (2^b - 1), code = round((x - zero) / scale) in 0..2^b-1
    symmetric   scale = max|x| / (2^(b-1) - 1),            code = round(x / scale) in ±(2^(b-1) - 1)
Scale and zero point are stored as fp16 (2 bytes each, as the KV memory page counts them); the
codes are computed against those stored fp16 numbers, so the round trip is what a kernel reading
the cache would see. The scale is rounded *up* to fp16, so the largest value never clips.
The error of every value is at most scale/2 (plus the fp16 rounding of the zero point, below
2^-11 of the group's minimum).

FP8 (e4m3fn, e5m2): each value is stored as fp8(x / scale), saturating at the format's largest
finite number, and read back as that fp8 number × scale, vLLM's convention for its k_scale and
v_scale. `scale` is one number for the whole tensor (per-tensor) or one per head (per-head, dim -3);
1.0 is vLLM's default when no scale is calibrated (kv_cache_dtype="fp8" alone). A scale is a layer's
constant, not part of the cache: it adds no bytes per token. Scaling by a power of two changes no
value's relative rounding (only which values fall below the smallest normal number or above the
largest), so on values well inside the range a scale barely matters (sim/model/quant_fp8.py measures
it). torch's float8 dtypes do the cast where this build has them; otherwise an exact emulation does,
and `fp8_backend()` says which.

Codes are held unpacked (one uint8 per value) for speed; `code_bytes` counts them bit-packed, as
a real cache stores them, and `packed()` really packs them (a test checks the two agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from sim.refusal import Misuse

INT_BITS = (8, 4, 3, 2)
AXES = ("token", "channel")
KINDS = ("int", "e4m3", "e5m2")
SCALE_BYTES = 2  # fp16 scale per group
ZERO_BYTES = 2  # fp16 zero point per group (asymmetric only)
FP16_MAX = 65504.0


@dataclass(frozen=True, kw_only=True)
class Fp8Format:
    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_finite: float
    torch_dtype_name: str

    @property
    def min_normal_exp(self) -> int:
        return 1 - self.bias


FP8_FORMATS: dict[str, Fp8Format] = {
    "e4m3": Fp8Format(name="e4m3", exponent_bits=4, mantissa_bits=3, bias=7, max_finite=448.0, torch_dtype_name="float8_e4m3fn"),
    "e5m2": Fp8Format(name="e5m2", exponent_bits=5, mantissa_bits=2, bias=15, max_finite=57344.0, torch_dtype_name="float8_e5m2"),
}


def fp8_backend(kind: str) -> str:
    """"torch" when this torch build has the float8 dtype for `kind`, else "emulated"."""
    return "torch" if hasattr(torch, FP8_FORMATS[kind].torch_dtype_name) else "emulated"


@dataclass(frozen=True, kw_only=True)
class QuantSpec:
    """How one tensor (K or V) is quantized. `bits` is 8 for the FP8 kinds."""

    kind: str = "int"  # "int", "e4m3", "e5m2"
    bits: int = 4
    axis: str = "token"
    group_size: int = 32  # channels per group (axis="token") or tokens per group (axis="channel")
    symmetric: bool = False
    scale: float | tuple[float, ...] = 1.0  # FP8 only: per-tensor, or one per head (see the module docstring)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise Misuse(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == "int" and self.bits not in INT_BITS:
            raise Misuse(f"integer bits must be one of {INT_BITS}, got {self.bits}")
        if self.kind != "int" and self.bits != 8:
            raise Misuse(f"FP8 ({self.kind}) has 8 bits, got bits={self.bits}")
        if self.axis not in AXES:
            raise Misuse(f"axis must be 'token' or 'channel', got {self.axis!r}")
        scales = self.scale if isinstance(self.scale, tuple) else (self.scale,)
        if not scales or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
                                 for x in scales):
            raise Misuse(f"scale must be a positive finite number or a tuple of them, got {self.scale!r}")
        if self.kind == "int" and self.scale != 1.0:
            raise Misuse("integer formats compute their own group scales; scale is for FP8 only")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or not 1 <= self.group_size <= 4096:
            raise Misuse(f"group_size must be a whole number in 1..4096, got {self.group_size!r}")

    @property
    def is_fp8(self) -> bool:
        return self.kind != "int"

    @property
    def qmax(self) -> int:
        """Largest code: 2^b - 1 (asymmetric) or 2^(b-1) - 1 (symmetric, codes in ±qmax)."""
        return (1 << (self.bits - 1)) - 1 if self.symmetric else (1 << self.bits) - 1

    @property
    def levels(self) -> int:
        return 2 * self.qmax + 1 if self.symmetric else self.qmax + 1

    @property
    def short(self) -> str:
        if self.is_fp8:
            return f"FP8 {self.kind}"
        return f"INT{self.bits}"

    @property
    def label(self) -> str:
        if self.is_fp8:
            if isinstance(self.scale, tuple):
                return f"FP8 {self.kind}, one scale per head"
            return f"FP8 {self.kind}, per-tensor scale {self.scale:.6g}"
        unit = "channels" if self.axis == "token" else "tokens"
        kind = "sym" if self.symmetric else "asym"
        return f"INT{self.bits} {kind}, per-{self.axis} (groups of {self.group_size} {unit})"


@dataclass(kw_only=True)
class QuantizedTensor:
    """A quantized (..., S, D) tensor: codes plus per-group fp16 scale (and zero point)."""

    spec: QuantSpec
    shape: tuple[int, ...]
    codes: torch.Tensor | None  # uint8, the original shape (int kinds); offset by qmax when symmetric
    scale: torch.Tensor | None  # fp16, one per group (int kinds)
    zero: torch.Tensor | None  # fp16, one per group (asymmetric int)
    values: torch.Tensor | None = None  # FP8: the fp8 numbers stored (before × scale), held as float32

    @property
    def num_values(self) -> int:
        return math.prod(self.shape)

    @property
    def num_groups(self) -> int:
        return 0 if self.scale is None else self.scale.numel()

    @property
    def code_bytes(self) -> int:
        return -(-self.num_values * self.spec.bits // 8)

    @property
    def scale_bytes(self) -> int:
        return 0 if self.scale is None else self.scale.numel() * self.scale.element_size()

    @property
    def zero_bytes(self) -> int:
        return 0 if self.zero is None else self.zero.numel() * self.zero.element_size()

    @property
    def nbytes(self) -> int:
        return self.code_bytes + self.scale_bytes + self.zero_bytes

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        if self.spec.is_fp8:
            return (self.values * _fp8_scale(self.spec, self.shape, self.values.device)).to(dtype)
        codes = self.codes.float()
        if self.spec.symmetric:
            codes = codes - self.spec.qmax
        g, dim = _grouped(codes, self.spec)
        deq = g * self.scale.float().unsqueeze(dim)
        if self.zero is not None:
            deq = deq + self.zero.float().unsqueeze(dim)
        return deq.reshape(self.shape).to(dtype)

    def packed(self) -> np.ndarray:
        """The codes bit-packed, `bits` per value, as a cache would store them (uint8 array)."""
        b = self.spec.bits
        if self.spec.is_fp8:
            return _fp8_bits(self.values, self.spec.kind).numpy().reshape(-1)
        flat = self.codes.reshape(-1).numpy().astype(np.uint8)
        bits = np.unpackbits(flat[:, None], axis=1)[:, 8 - b:]  # (n, b), most significant first
        return np.packbits(bits.reshape(-1))


def unpack_codes(packed: np.ndarray, bits: int, num_values: int) -> np.ndarray:
    """Inverse of QuantizedTensor.packed for the integer kinds."""
    flat = np.unpackbits(packed)[: num_values * bits].reshape(num_values, bits)
    full = np.zeros((num_values, 8), dtype=np.uint8)
    full[:, 8 - bits:] = flat
    return np.packbits(full, axis=1).reshape(-1)


# --- grouping --------------------------------------------------------------------------------


def _check_groups(shape: tuple[int, ...], spec: QuantSpec) -> None:
    if len(shape) < 2:
        raise Misuse(f"need a (..., tokens, channels) tensor, got shape {tuple(shape)}")
    S, D = shape[-2], shape[-1]
    if spec.is_fp8:
        if isinstance(spec.scale, tuple) and (len(shape) < 3 or shape[-3] != len(spec.scale)):
            raise Misuse(f"{len(spec.scale)} per-head scales for a tensor of shape {tuple(shape)} (heads on dim -3)")
        return
    if spec.axis == "token" and D % spec.group_size:
        raise Misuse(f"per-token groups of {spec.group_size} channels do not divide the {D} channels")
    if spec.axis == "channel" and S % spec.group_size:
        raise Misuse(f"per-channel groups of {spec.group_size} tokens do not divide the {S} tokens")


def _grouped(x: torch.Tensor, spec: QuantSpec) -> tuple[torch.Tensor, int]:
    """A view of (..., S, D) with each group along one dim, and that dim: (..., S, D/g, g) and -1
    per-token, (..., S/g, g, D) and -2 per-channel. Reshaping back to (..., S, D) undoes it."""
    *lead, S, D = x.shape
    g = spec.group_size
    if spec.axis == "token":
        return x.reshape(*lead, S, D // g, g), -1
    return x.reshape(*lead, S // g, g, D), -2


def _fp16_up(s: torch.Tensor) -> torch.Tensor:
    """The smallest fp16 number >= s (s >= 0, fp32)."""
    h = s.to(torch.float16)
    low = h.float() < s
    if bool(low.any()):
        h = torch.where(low, torch.nextafter(h, torch.full_like(h, float("inf"))), h)
    return h


# --- the quantizers --------------------------------------------------------------------------


def _check_values(xf: torch.Tensor) -> float:
    amax = float(xf.abs().max()) if xf.numel() else 0.0  # NaN when any value is NaN
    if not math.isfinite(amax):
        raise Misuse("cannot quantize a tensor holding inf or NaN")
    return amax


def _int_codes(g: torch.Tensor, dim: int, spec: QuantSpec, amax: float):
    """Grouped fp32 values (groups along `dim`) -> (codes as fp32 integers, fp16 scale, fp16 zero
    point or None), scale and zero with `dim` reduced away. Symmetric codes are signed here."""
    if amax > FP16_MAX / 2:
        raise Misuse(f"values up to {amax:.4g} are too large for fp16 scales (at most {FP16_MAX / 2:g})")
    if spec.symmetric:
        scale = _fp16_up(g.abs().amax(dim) / spec.qmax)  # fp16, one per group
        s = scale.float().unsqueeze(dim)
        codes = torch.where(s > 0, torch.round(g / torch.where(s > 0, s, 1.0)), 0.0).clamp(-spec.qmax, spec.qmax)
        return codes, scale, None
    zero = g.amin(dim).to(torch.float16)  # one per group
    z = zero.float().unsqueeze(dim)
    scale = _fp16_up((g.amax(dim, keepdim=True) - z).clamp(min=0).squeeze(dim) / spec.qmax)
    s = scale.float().unsqueeze(dim)
    codes = torch.where(s > 0, torch.round((g - z) / torch.where(s > 0, s, 1.0)), 0.0).clamp(0, spec.qmax)
    return codes, scale, zero


def quantize(x: torch.Tensor, spec: QuantSpec) -> QuantizedTensor:
    """Quantize a (..., S, D) tensor. ValueError for groups that do not divide it, or for values
    an fp16 scale cannot describe."""
    return quantize_with_values(x, spec)[0]


def quantize_with_values(x: torch.Tensor, spec: QuantSpec) -> tuple[QuantizedTensor, torch.Tensor]:
    """quantize(x) and its dequantized values (in x's dtype), computed together."""
    shape = tuple(x.shape)
    _check_groups(shape, spec)
    xf = x.detach().float()
    amax = _check_values(xf)
    if spec.is_fp8:
        s = _fp8_scale(spec, shape, xf.device)
        values = fp8_round(xf / s, spec.kind)
        return QuantizedTensor(spec=spec, shape=shape, codes=None, scale=None, zero=None, values=values), (values * s).to(x.dtype)
    g, dim = _grouped(xf, spec)
    codes, scale, zero = _int_codes(g, dim, spec, amax)
    deq = codes * scale.float().unsqueeze(dim)
    if zero is not None:
        deq = deq + zero.float().unsqueeze(dim)
    stored = (codes + spec.qmax) if spec.symmetric else codes  # symmetric codes are stored unsigned
    return QuantizedTensor(spec=spec, shape=shape, codes=stored.reshape(shape).to(torch.uint8), scale=scale, zero=zero), deq.reshape(shape).to(x.dtype)


def fake_quantize(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """quantize then dequantize, in x's dtype (the same numbers, without building the codes)."""
    shape = tuple(x.shape)
    _check_groups(shape, spec)
    xf = x.detach().float()
    amax = _check_values(xf)
    if spec.is_fp8:
        s = _fp8_scale(spec, shape, xf.device)
        return (fp8_round(xf / s, spec.kind) * s).to(x.dtype)
    g, dim = _grouped(xf, spec)
    codes, scale, zero = _int_codes(g, dim, spec, amax)
    deq = codes * scale.float().unsqueeze(dim)
    if zero is not None:
        deq = deq + zero.float().unsqueeze(dim)
    return deq.reshape(shape).to(x.dtype)


def quantized_bytes(shape: tuple[int, ...], spec: QuantSpec) -> dict[str, int]:
    """Exact bytes of quantize(x, spec) for an x of this shape, without quantizing anything."""
    _check_groups(shape, spec)
    n = math.prod(shape)
    codes = -(-n * spec.bits // 8)
    groups = 0 if spec.is_fp8 else n // spec.group_size
    scales = groups * (0 if spec.is_fp8 else SCALE_BYTES)
    zeros = groups * (0 if spec.is_fp8 or spec.symmetric else ZERO_BYTES)
    return {"codes": codes, "scales": scales, "zero_points": zeros, "total": codes + scales + zeros}


# --- FP8 -------------------------------------------------------------------------------------


def _fp8_scale(spec: QuantSpec, shape: tuple[int, ...], device) -> torch.Tensor:
    """The spec's scale as a tensor that broadcasts over a (..., H, S, D) tensor: a scalar, or (H, 1, 1)."""
    if not isinstance(spec.scale, tuple):
        return torch.tensor(float(spec.scale), dtype=torch.float32, device=device)
    if len(shape) < 3 or shape[-3] != len(spec.scale):
        raise Misuse(f"{len(spec.scale)} per-head scales for a tensor of shape {tuple(shape)} (heads on dim -3)")
    return torch.tensor(spec.scale, dtype=torch.float32, device=device).view(-1, 1, 1)



def fp8_round_emulated(x: torch.Tensor, kind: str) -> torch.Tensor:
    """Round fp32 values to the nearest fp8 number (ties to even), saturating at ±max_finite."""
    f = FP8_FORMATS[kind]
    a = x.float().abs().clamp(max=f.max_finite)
    _, e = torch.frexp(a)  # a = m · 2^e, m in [0.5, 1): floor(log2 a) = e - 1
    exp = (e - 1).clamp(min=f.min_normal_exp)  # subnormals share the smallest normal exponent
    step = torch.ldexp(torch.ones_like(a), exp - f.mantissa_bits)
    r = (torch.round(a / step) * step).clamp(max=f.max_finite)
    return torch.copysign(r, x.float())


def fp8_round(x: torch.Tensor, kind: str) -> torch.Tensor:
    f = FP8_FORMATS[kind]
    xf = x.float().clamp(-f.max_finite, f.max_finite)  # saturate, as serving engines do
    if fp8_backend(kind) == "torch":
        return xf.to(getattr(torch, f.torch_dtype_name)).float()
    return fp8_round_emulated(xf, kind)


def _fp8_bits(values: torch.Tensor, kind: str) -> torch.Tensor:
    """The uint8 bit pattern of values that are already fp8 numbers."""
    f = FP8_FORMATS[kind]
    v = values.float()
    a = v.abs()
    _, e = torch.frexp(a)
    exp = (e - 1).clamp(min=f.min_normal_exp)
    normal = a >= 2.0 ** f.min_normal_exp
    biased = torch.where(normal, exp + f.bias, torch.zeros_like(exp))
    mant = torch.where(normal, a / torch.ldexp(torch.ones_like(a), exp) - 1, a / 2.0 ** f.min_normal_exp)
    m = torch.round(mant * (1 << f.mantissa_bits)).to(torch.int32)
    sign = (torch.signbit(v)).to(torch.int32) << 7
    return (sign | (biased.to(torch.int32) << f.mantissa_bits) | m).to(torch.uint8)
