"""The seeds' roofline figures (seeds 000 and 002), recomputed with sim.cost.roofline: verdicts from the numbers.
`claimed`, `computed` and `why` are worded in the page language; `statement` is the English translation of the
seed's words, `original` the seed's own (Korean) sentence."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.arch import ArchPreset
from sim.cost.gpus import GpuPreset
from sim.cost.roofline import RooflineConfig, context_trend, decode_step, hardware, prefill_step
from sim.words import text
from sim.words.roofline import trend_verdict

# The seeds' own sentences, quoted verbatim (shared/seeds/000_*.txt and 002_*.txt).
ORIGINAL_70B = "70B 모델 한 단계는 약 140GB의 가중치를 고대역폭 메모리에서 불러오면서 약 1,400억 번의 유용한 연산을 한다."
ORIGINAL_ONE = "바이트와 연산이 비슷해 산술 강도가 약 1 flop/byte인데"
ORIGINAL_RIDGE = "H100의 균형점은 약 300 flop/byte라 코어가 데이터를 기다리며 논다."
ORIGINAL_TRAIN = ("훈련(training)은 병렬적이고 연산량(FLOP) 한계(bound)에 부딪힙니다. 추론(inference)은 직렬적이고 메모리 "
                  "대역폭 한계에 부딪힙니다.")


def _within(value: float, target: float, tolerance: float) -> bool:
    return abs(value - target) <= tolerance * target


def roofline_claims(presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset], lang: str = "en") -> tuple[Claim, ...]:
    l70, l8, h100_preset = presets["llama-3.1-70b"], presets["llama-3.1-8b"], gpus["h100-sxm"]
    seventy = decode_step(RooflineConfig(l70, 1, 1))
    h100, h100_fp8 = hardware(h100_preset), hardware(h100_preset, "fp8")
    trend = context_trend(l70)
    prefill = prefill_step(RooflineConfig(l8, 1, 4096))
    decode = decode_step(RooflineConfig(l8, 1, 4096))
    both_140 = _within(seventy.bytes_weights, 140e9, 0.15) and _within(seventy.flops, 140e9, 0.15)
    near_one = _within(trend.short, 1.0, 0.5)
    split = decode.bound(h100) == "memory" and prefill.bound(h100) == "compute"

    def t(key: str, **fields: str) -> str:
        return text(lang, f"roofline.c.{key}", **fields)

    def statement(key: str) -> str:
        return text("en", f"roofline.c.{key}.statement")

    return (
        Claim(statement("70b"), "000", t("70b.claimed"),
              t("70b.computed", gb=f"{seventy.bytes_weights / 1e9:,.0f}", gflop=f"{seventy.flops / 1e9:,.0f}"),
              Verdict.RIGHT if both_140 else Verdict.WRONG, t("70b.why"), original=ORIGINAL_70B, value=seventy.flops),
        Claim(statement("one"), "000", t("one.claimed"), t("flop_b", x=f"{seventy.intensity:.2f}"),
              (Verdict.RIGHT if _within(trend.long, 1.0, 0.5) else Verdict.NEEDS_CONTEXT) if near_one
              else Verdict.WRONG, trend_verdict(trend, lang), original=ORIGINAL_ONE, value=seventy.intensity),
        Claim(statement("ridge"), "000", t("ridge.claimed"), t("flop_b", x=f"{h100.ridge:,.0f}"),
              Verdict.RIGHT if _within(h100.ridge, 300, 0.1) else Verdict.WRONG,
              t("ridge.why", tflops=f"{h100.peak_flops / 1e12:,.0f}", tbs=f"{h100.bandwidth / 1e12:.2f}",
                fp8=f"{h100_fp8.ridge:,.0f}"), original=ORIGINAL_RIDGE, value=h100.ridge),
        Claim(statement("train"), "002", t("train.claimed"), t("train.computed", x=f"{prefill.intensity:,.0f}"),
              Verdict.NEEDS_CONTEXT if split else Verdict.WRONG, t("train.why"), original=ORIGINAL_TRAIN,
              value=prefill.intensity),
    )
