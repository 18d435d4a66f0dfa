"""Seed 001's KV quantization claims: the seed's own words and the thresholds its quality claims are judged by
(the claims themselves, checked against the bits × scheme table and worded, are sim/words/quant_claims.py)."""

from __future__ import annotations

from sim.claims import Verdict

SEED = "001"
# The seed's own words for each claim (shared/seeds/001_*.txt, verbatim)
ORIGINAL = {
    "speed": "캐시가 절반이 되면 읽는 시간도 절반",
    "memory": "메모리는 절반이 된다",
    "int8": "거의 안전한 구간",
    "fp8": "FP8 또는 INT8 — 거의 안전한 구간이다",
    "int4": "K를 채널 축으로 묶고 그룹 크기를 작게 잡고 잔여 창을 두는 조합이면 쓸 만하고, 토큰 축으로 통째로 묶으면 무너진다",
    "int2": "2비트 — 연구 영역",
    "accumulate": "앞선 토큰의 오차가 뒤 토큰에 누적된다",
    "recent": "최근 토큰을 거칠게 저장하는 쪽이 훨씬 크게 다친다",
}


SAFE_AGREEMENT = 0.99  # "nearly safe": at least this share of next-token predictions unchanged
KL_GAP = 3.0  # a KL this many times another's is a real difference (the INT4 claim's threshold too)


def fp8_verdict(fp8, int8_token) -> tuple[Verdict, str]:
    """The seed puts FP8 with INT8 as "nearly safe, the difference hard to measure". FP8 e4m3 earns it only if
    it keeps SAFE_AGREEMENT of the top-1 predictions AND its KL is within KL_GAP of INT8 per-token's (the same
    placement: every token quantized on arrival, no full-precision window); otherwise the difference is
    measurable, and the verdict says so (rows of results_frame). -> (verdict, "holds" / "worse" / "flips")."""
    close = fp8["kl"] <= KL_GAP * int8_token["kl"]
    agrees = fp8["top1_agreement"] >= SAFE_AGREEMENT
    if close and agrees:
        return Verdict.RIGHT, "holds"
    return Verdict.WRONG, "worse" if not close else "flips"
