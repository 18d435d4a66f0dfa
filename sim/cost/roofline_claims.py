"""The seeds' roofline figures (seeds 000 and 002), recomputed with sim.cost.roofline: verdicts from the numbers."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.arch import ArchPreset
from sim.cost.gpus import GpuPreset
from sim.cost.roofline import RooflineConfig, context_trend, decode_step, hardware, prefill_step


def _within(value: float, target: float, tolerance: float) -> bool:
    return abs(value - target) <= tolerance * target


def roofline_claims(presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> tuple[Claim, ...]:
    l70, l8, h100_preset = presets["llama-3.1-70b"], presets["llama-3.1-8b"], gpus["h100-sxm"]
    seventy = decode_step(RooflineConfig(l70, 1, 1))
    h100, h100_fp8 = hardware(h100_preset), hardware(h100_preset, "fp8")
    trend = context_trend(l70)
    prefill = prefill_step(RooflineConfig(l8, 1, 4096))
    decode = decode_step(RooflineConfig(l8, 1, 4096))
    both_140 = _within(seventy.bytes_weights, 140e9, 0.15) and _within(seventy.flops, 140e9, 0.15)
    near_one = _within(trend.short, 1.0, 0.5)
    split = decode.bound(h100) == "memory" and prefill.bound(h100) == "compute"
    return (
        Claim("A 70B decode step reads ~140 GB of weights for ~140 billion operations", "000",
              "~140 GB, ~140 GFLOP",
              f"{seventy.bytes_weights / 1e9:,.0f} GB, {seventy.flops / 1e9:,.0f} GFLOP (Llama 3.1 70B, bf16)",
              Verdict.RIGHT if both_140 else Verdict.WRONG,
              "Counting a multiply-add as 2 FLOPs: 2 × 70B parameters ≈ 140 GFLOP.", value=seventy.flops),
        Claim("About 1 flop/byte", "000", "≈ 1 FLOP/B", f"{seventy.intensity:.2f} FLOP/B",
              (Verdict.RIGHT if _within(trend.long, 1.0, 0.5) else Verdict.NEEDS_CONTEXT) if near_one
              else Verdict.WRONG, trend.verdict, value=seventy.intensity),
        Claim("An H100 balances at about 300 flop/byte", "000", "≈ 300 FLOP/B", f"{h100.ridge:,.0f} FLOP/B",
              Verdict.RIGHT if _within(h100.ridge, 300, 0.1) else Verdict.WRONG,
              f"For dense BF16 ({h100.peak_flops / 1e12:,.0f} TFLOP/s ÷ {h100.bandwidth / 1e12:.2f} TB/s); FP8 "
              f"doubles it to ~{h100_fp8.ridge:,.0f}.", value=h100.ridge),
        Claim("Training is compute-bound, inference bandwidth-bound", "002", "inference: bandwidth-bound",
              f"prefill of 4,096 tokens: {prefill.intensity:,.0f} FLOP/B",
              Verdict.NEEDS_CONTEXT if split else Verdict.WRONG,
              "Decode is; prefill (like training) multiplies each weight by many tokens and is compute-bound.",
              value=prefill.intensity),
    )
