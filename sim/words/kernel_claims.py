"""Seed 002's claims about attention kernels, as `sim.claims.Claim`s. Where this page has run its
sweep, the FlashAttention memory and speed claims carry this machine's measured ratios; no number
measured elsewhere is quoted as this machine's. `claimed`, `computed` and `why` are worded in the page language;
`statement` is the English translation, `original` the seed's own sentence."""

from __future__ import annotations

from sim.attention.timing import SweepResult
from sim.claims import Claim, Verdict
from sim.words import text
from sim.words.attention import stat_word

# Seed 002's own sentences (shared/seeds/002_*.txt), quoted verbatim.
ORIGINAL = {
    "round_trips": "HBM 왕복이 세 번 일어납니다.",
    "memory": "전체 메모리 사용량(footprint)은 O(N²)에서 O(N)으로 줄어듭니다.",
    "per_tile": "타일 하나당 HBM 왕복은 한 번입니다.",
    "exact": ("근사(approximation)가 아닙니다. Flash Attention은 표준 어텐션과 비트(bit) 단위로 동일한 출력을 "
              "계산합니다(fp16 비결합성으로 인한 차이 정도만 있을 수 있습니다)."),
    "speedup": "A100에서는 24배, H100의 FP8에서는 510배의 실제 시간(wall-clock) 속도 향상을 줍니다.",
    "hbm_sram": ("H100 기준 HBM 대역폭(bandwidth)은 약 3 TB/s이고 SRAM은 약 30 TB/s입니다. HBM을 한 번 거치는 비용은 "
                 "칩(on-chip) 안에서 처리하는 것보다 약 10배 느립니다."),
}


def _measured(sweep: SweepResult | None, stat: str, lang: str = "en") -> tuple[str, str, float | None, float | None]:
    """(time sentence, memory sentence, time ratio, memory ratio) from the sweep's largest N, or blanks."""
    got = sweep.flash_vs_eager(stat) if sweep is not None else None
    if got is None:
        return "", "", None, None
    where = {"n": f"{got.num_keys:,}", "device": sweep.results[-1].device}
    r, m = got.time_ratio, got.memory_ratio
    speed = (text(lang, "kernels.c.faster", x=f"{r:,.1f}") if f"{r:,.1f}" != "1.0" and r > 1 else
             text(lang, "kernels.c.slower", x=f"{1 / r:,.1f}") if f"{1 / r:,.1f}" != "1.0" and r < 1 else
             text(lang, "kernels.c.same"))
    time_text = text(lang, "kernels.c.measured_time", speed=speed, stat=stat_word(stat, lang), **where)
    if m is None:
        mem_text = ""
    elif m >= 1:
        mem_text = text(lang, "kernels.c.measured_eager", x=f"{m:,.0f}", **where)
    else:
        mem_text = text(lang, "kernels.c.measured_flash", x=f"{1 / m:,.1f}", **where)
    return time_text, mem_text, got.time_ratio, got.memory_ratio


def kernel_claims(sweep: SweepResult | None = None, stat: str = "median", lang: str = "en") -> tuple[Claim, ...]:
    time_text, mem_text, time_ratio, mem_ratio = _measured(sweep, stat, lang)

    def claim(key: str, verdict: Verdict, computed_tail: str = "", value: float | None = None) -> Claim:
        def t(part: str) -> str:
            return text(lang, f"kernels.c.{key}.{part}")

        return Claim(text("en", f"kernels.c.{key}.statement"), "002", t("claimed"), t("computed") + computed_tail,
                     verdict, t("why"), original=ORIGINAL[key], value=value)

    return (
        claim("round_trips", Verdict.RIGHT),
        claim("memory", Verdict.RIGHT, mem_text, mem_ratio),
        claim("per_tile", Verdict.NEEDS_CONTEXT),
        claim("exact", Verdict.NEEDS_CONTEXT),
        claim("speedup", Verdict.WRONG, time_text, time_ratio),
        claim("hbm_sram", Verdict.CLOSE),
    )
