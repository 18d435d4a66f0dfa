"""The seeds' decode-cost numbers (Decode cost page), recomputed with the simulator's own counters and worded in
either language (moved here from sim/cost/decode.py)."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.decode import kv_rows_computed, score_entries
from sim.cost.opcount import ShapeSpec, step_flops
from sim.words import text

# The seeds' own words for each claim (shared/seeds/<seed>_*.txt, quoted verbatim)
ORIGINALS = {
    "5050": "순진한 방식은 O(N²) = 5050, 캐싱 방식은 O(N) = 100입니다.",
    "n2": "단계당 n 제곱, 답 전체로는 n 세제곱의 연산인데, 정작 앞부분 단어들은 전혀 바뀌지 않는다.",
    "n3": "단계당 n 제곱, 답 전체로는 n 세제곱의 연산인데, 정작 앞부분 단어들은 전혀 바뀌지 않는다.",
    "4k": "4K 토큰짜리 응답이라면 1,600만 번의 어텐션 연산(operation)이 일어나고, 그 대부분은 중복(redundant)된 "
          "계산입니다.",
    "qkv": "QKV projection: $O(ND^2)\\to O(D^2)$",
    "attn": "Attention: $O(N^2D)\\to O(ND)$",
}


def seed_claims(shape: ShapeSpec, lang: str = "en") -> tuple[Claim, ...]:
    """The seeds' decode-cost numbers, recomputed with the simulator's own counters: each claim's
    `computed` names what is counted and its naive and cached values. `statement` is English and `original`
    the seed's Korean; `claimed`, `computed` and `why` are worded in `lang`."""
    n, long = 100, 4096
    naive_step, cached_step = step_flops(shape, n, n), step_flops(shape, 1, n)

    def say(key: str, **fields: object) -> str:
        return text(lang, f"decode.claim.{key}", **fields)

    def counted(what: str, naive: int, cached: int) -> str:
        return say("counted", what=what, naive=f"{naive:,}", cached=f"{cached:,}")

    def claim(key: str, seed: str, computed: str, verdict: Verdict, why: str, value: float) -> Claim:
        return Claim(text("en", f"decode.claim.{key}.statement"), seed, say(f"{key}.claimed"),
                     computed, verdict, why, original=ORIGINALS[key], value=value)

    attn_naive = naive_step["attn_scores"] + naive_step["attn_v"]
    attn_cached = cached_step["attn_scores"] + cached_step["attn_v"]
    big = kv_rows_computed(long, "naive")
    return (
        claim("5050", "002", counted(say("5050.what"), kv_rows_computed(n, "naive"), kv_rows_computed(n, "cached")),
              Verdict.NEEDS_CONTEXT, say("5050.why", n=f"{n:,}", dots=f"{score_entries(n, 'cached'):,}"),
              kv_rows_computed(n, "naive")),
        claim("n2", "000", counted(say("n2.what", n=f"{n:,}"), n * n, n), Verdict.RIGHT, say("n2.why"), n * n),
        claim("n3", "000", counted(say("n3.what", n=f"{n:,}"), score_entries(n, "naive"), score_entries(n, "cached")),
              Verdict.RIGHT, say("n3.why"), score_entries(n, "naive")),
        claim("4k", "002", counted(say("4k.what", n=f"{long:,}"), big, kv_rows_computed(long, "cached")),
              Verdict.CLOSE, say("4k.why", n=f"{long:,}", square=f"{long * long / 1e6:.1f}", kv=f"{big / 1e6:.1f}",
                                 dots=f"{score_entries(long, 'naive') / 1e9:.1f}"), big),
        claim("qkv", "004", counted(say("qkv.what", n=f"{n:,}"), naive_step["qkv_proj"], cached_step["qkv_proj"]),
              Verdict.RIGHT, say("qkv.why", n=f"{n:,}", ratio=f"{naive_step['qkv_proj'] / cached_step['qkv_proj']:,.0f}"),
              naive_step["qkv_proj"] / cached_step["qkv_proj"]),
        claim("attn", "004", counted(say("attn.what", n=f"{n:,}"), attn_naive, attn_cached), Verdict.RIGHT,
              say("attn.why"), attn_naive / attn_cached),
    )
