"""FP8's scale, measured: is a missing scale why an FP8 KV cache costs more than INT8 on the tiny model?

vLLM (the version the lab follows, sim.cost.vllm_rules.VLLM_VERSION) stores an fp8 cache
(kv_cache_dtype="fp8", i.e. fp8_e4m3) as fp8(x / k_scale) and reads it back × k_scale (v_scale for V).
Its documentation names three ways to get the scales: none, every scale 1.0 (the default); estimated once
from a warm-up batch (calculate_kv_scales=True); or calibrated on a dataset by llm-compressor, one scale per
tensor or one per attention head (the recommended way). The lab's FP8 cache (quant_cache.make_scheme) is the
default: per-tensor scale 1.0.

This module calibrates the other two the way a dataset calibration does, on text the model was trained on
(never the held-out text it is then measured on): per layer, K and V apart, scale = the largest |value| seen
÷ the format's largest finite number (448 for e4m3), over the whole tensor or per KV head. Then, on the
held-out windows, each scale's
  - per-value error on the model's own K and V (RMS of the error ÷ RMS of the values), and
  - teacher-forced KL and top-1 agreement (quant_errors.evaluate_scheme),
next to INT8 per-token (an fp16 scale and zero point per 32 values) for contrast, and where the values sit
in e4m3's range: below its smallest normal number (2^-6, where steps stop shrinking) or above 448.

A scale that is a power of two moves every value's exponent and changes no relative rounding, so a scale
can only help values that fall outside the normal range; e4m3 keeps 3 mantissa bits whatever the scale, a
rounding error of up to 1/16 of each value. Numbers and message values only (sim.msg): the words layer
words them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from sim.cost.vllm_rules import VLLM_VERSION
from sim.model.quant import FP8_FORMATS, QuantSpec, fake_quantize
from sim.model.quant_cache import FULL, CacheScheme, make_scheme
from sim.model.quant_errors import PositionErrors, evaluate_scheme, reference_logits
from sim.model.quant_forward import teacher_forced_logits
from sim.model.transformer import Llama
from sim.msg import Msg
from sim.refusal import Misuse

SCALINGS = ("one", "tensor", "head")  # scale 1.0 (vLLM's default, the lab's cache), calibrated per tensor, per head
CALIBRATION_TOKENS = 1024  # training-text tokens the scales are calibrated on


def calibration_ids(num_tokens: int = CALIBRATION_TOKENS) -> torch.Tensor:
    """(1, num_tokens) byte ids from the start of the tiny models' training split (never the held-out text)."""
    from sim.model.train import load_corpus

    train, _ = load_corpus()
    if not 16 <= num_tokens <= len(train):
        raise Misuse(f"calibrate on 16..{len(train)} tokens, got {num_tokens}")
    return train[:num_tokens].unsqueeze(0)


@torch.inference_mode()
def kv_of(model: Llama, ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every layer's cached (K, V) for ids (B, T), each (B, Hkv, T, D) fp32, as the cache receives them."""
    cap: list[dict] = []
    for i in range(0, ids.shape[1], model.cfg.max_seq_len):  # a calibration text longer than the context: in pieces
        part: list[dict] = []
        teacher_forced_logits(model, ids[:, i : i + model.cfg.max_seq_len].to(model.device), FULL, capture=part)
        cap = part if not cap else [{n: torch.cat([a[n], b[n]], dim=2) for n in ("k", "v")} for a, b in zip(cap, part, strict=True)]
    return [(c["k"].float().cpu(), c["v"].float().cpu()) for c in cap]


def calibrated(scheme: CacheScheme, kv: list[tuple[torch.Tensor, torch.Tensor]], per: str) -> CacheScheme:
    """The FP8 `scheme` with each layer's scales calibrated on `kv` (kv_of's list): amax ÷ the format's largest
    finite number, over the whole tensor (per="tensor") or per KV head (per="head"); per="one" gives 1.0."""
    if scheme.k is None or not scheme.k.is_fp8:
        raise Misuse(f"only an FP8 scheme takes FP8 scales, got {scheme.key}")
    if per not in SCALINGS:
        raise Misuse(f"per must be one of {', '.join(SCALINGS)}, got {per!r}")
    if per == "one":
        return scheme
    top = FP8_FORMATS[scheme.k.kind].max_finite

    def scale(x: torch.Tensor) -> float | tuple[float, ...]:
        if per == "tensor":
            return max(float(x.abs().max()), 1e-30) / top
        return tuple(max(float(a), 1e-30) / top for a in x.abs().amax(dim=(0, 2, 3)))  # (Hkv,)

    return replace(scheme, layer_scales=tuple((scale(k), scale(v)) for k, v in kv))


def relative_error(x: torch.Tensor, spec: QuantSpec) -> float:
    """RMS of the rounding error over RMS of the values."""
    return float((fake_quantize(x, spec) - x).pow(2).mean().sqrt() / x.pow(2).mean().sqrt().clamp(min=1e-30))


@dataclass(frozen=True, kw_only=True)
class ScaleRow:
    key: str  # "one", "tensor", "head" (FP8 e4m3 with that scale) or "int8" (INT8 per-token, for contrast)
    k_error: float  # RMS error ÷ RMS value, every layer's cached K on the held-out windows
    v_error: float
    result: PositionErrors  # teacher-forced, against full precision

    @property
    def kl(self) -> float:
        return self.result.mean_kl

    @property
    def agreement(self) -> float:
        return self.result.mean_agreement


@dataclass(frozen=True, kw_only=True)
class Fp8ScaleCheck:
    kind: str  # "e4m3"
    rows: tuple[ScaleRow, ...]  # SCALINGS in order, then "int8"
    below_normal: float  # share of K and V values below the format's smallest normal number (at scale 1)
    above_max: float  # share above its largest finite number (at scale 1: these saturate)
    calibration_tokens: int
    num_tokens: int  # held-out tokens measured (windows × window length)

    def row(self, key: str) -> ScaleRow:
        return next(r for r in self.rows if r.key == key)

    @property
    def scale_matters(self) -> bool:
        """Whether a calibrated scale changes FP8's KL by more than the factor of 3 the seed claims treat as a real
        gap (sim.model.quant_claims.KL_GAP), either way."""
        one = self.row("one").kl
        return any(max(r.kl, one) > 3 * max(min(r.kl, one), 1e-30) for r in self.rows if r.key in ("tensor", "head"))

    def sentence(self) -> Msg:
        """What the table shows: whether the scale explains FP8's cost, with every row's numbers."""
        one, ten, head, i8 = (self.row(k) for k in (*SCALINGS, "int8"))
        fmt = FP8_FORMATS[self.kind]
        return Msg("fp8.scale.sentence_matters" if self.scale_matters else "fp8.scale.sentence_same",
                   vllm=VLLM_VERSION, kind=self.kind, top=fmt.max_finite, calib=self.calibration_tokens,
                   one_k=one.k_error, one_v=one.v_error, one_kl=one.kl, ten_k=ten.k_error, ten_v=ten.v_error,
                   ten_kl=ten.kl, head_k=head.k_error, head_v=head.v_error, head_kl=head.kl, i8_k=i8.k_error,
                   i8_v=i8.v_error, i8_kl=i8.kl, x=one.kl / max(i8.kl, 1e-30), below=self.below_normal,
                   above=self.above_max, normal=2.0 ** fmt.min_normal_exp, mant=fmt.mantissa_bits,
                   step=2.0 ** -(fmt.mantissa_bits + 1))

    def frame_rows(self) -> list[dict]:
        """One row per scale (and INT8): its name as a Msg, the errors and the teacher-forced numbers."""
        return [{"scale": Msg(f"fp8.scale.row.{r.key}", kind=self.kind, top=FP8_FORMATS[self.kind].max_finite),
                 "k_error": r.k_error, "v_error": r.v_error, "kl": r.kl, "agreement": r.agreement} for r in self.rows]


def fp8_scale_check(model: Llama, windows: torch.Tensor, *, calib_ids: torch.Tensor, kind: str = "e4m3",
                    ref_logits: torch.Tensor | None = None) -> Fp8ScaleCheck:
    """windows (W, T + 1) held-out text, calib_ids (1, N) training text -> each FP8 scale against INT8 per-token."""
    if kind not in FP8_FORMATS:
        raise Misuse(f"kind must be one of {', '.join(FP8_FORMATS)}, got {kind!r}")
    fmt = FP8_FORMATS[kind]
    base = make_scheme(f"fp8_{kind}")
    calib = kv_of(model, calib_ids)
    held = kv_of(model, windows[:, :-1])
    if ref_logits is None:
        ref_logits = reference_logits(model, windows)
    rows = []
    for per in SCALINGS:
        scheme = calibrated(base, calib, per)
        layers = [scheme.for_layer(i) for i in range(len(held))]
        k_all = torch.cat([fake_quantize(k, s.k).flatten() - k.flatten() for (k, _), s in zip(held, layers, strict=True)])
        v_all = torch.cat([fake_quantize(v, s.v).flatten() - v.flatten() for (_, v), s in zip(held, layers, strict=True)])
        rows.append(ScaleRow(key=per, k_error=_rms(k_all) / _rms_of(held, 0), v_error=_rms(v_all) / _rms_of(held, 1),
                             result=evaluate_scheme(model, windows, scheme, ref_logits=ref_logits)))
    i8 = make_scheme("token", bits=8)
    k8 = torch.cat([fake_quantize(k, i8.k).flatten() - k.flatten() for k, _ in held])
    v8 = torch.cat([fake_quantize(v, i8.v).flatten() - v.flatten() for _, v in held])
    rows.append(ScaleRow(key="int8", k_error=_rms(k8) / _rms_of(held, 0), v_error=_rms(v8) / _rms_of(held, 1),
                         result=evaluate_scheme(model, windows, i8, ref_logits=ref_logits)))
    values = torch.cat([t.abs().flatten() for pair in held for t in pair])
    n = values.numel()
    return Fp8ScaleCheck(kind=kind, rows=tuple(rows), below_normal=float((values < 2.0 ** fmt.min_normal_exp).sum()) / n,
                         above_max=float((values > fmt.max_finite).sum()) / n, calibration_tokens=int(calib_ids.shape[1]),
                         num_tokens=int(windows.shape[0] * (windows.shape[1] - 1)))


def _rms(x: torch.Tensor) -> float:
    return math.sqrt(float(x.double().pow(2).mean()))


def _rms_of(kv: list[tuple[torch.Tensor, torch.Tensor]], which: int) -> float:
    return max(_rms(torch.cat([pair[which].flatten() for pair in kv])), 1e-30)
