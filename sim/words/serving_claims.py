"""Seed 002's claims about serving, checked against the simulators: continuous batching's gain, speculative
decoding's tokens per pass, its best draft length and its speedups. Each verdict that compares is worded from
the numbers it compares."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.presets import load_presets
from sim.serving.comparison import BatchSweep, ServingComparison
from sim.serving.speculative import (
    MAX_SPEC_K,
    SpecBatchPoint,
    SpecTiming,
    expected_tokens_per_pass,
    optimal_k,
    speculative_speedup,
)
from sim.words import serving_readouts as ro
from sim.words import text
from sim.words.speculative import batch_gain_sentence

SEED = "002"
BATCHING_GAIN = (5.0, 10.0)  # the seed's "5–10×"
TYPICAL_K = (3, 5)
HEAD_GAIN = (2.0, 3.0)  # EAGLE-2 / Medusa
DRAFT_GAIN = (2.0, 4.0)  # a separate draft model
HEAD_C = 0.05  # a draft head on the target's hidden state costs about this much of a target step
DRAFT_C = 0.1  # a draft model about ten times cheaper than its target


def _where(x: float, span: tuple[float, float]) -> str:
    lo, hi = span
    return "below" if x < lo else "above" if x > hi else "within"


def _alphas(alphas: list[float], lang: str) -> str:
    if len(alphas) == 1:
        return text(lang, "serving.cl.alpha_one", a=f"{alphas[0]:g}")
    return text(lang, "serving.cl.alpha_span", lo=f"{alphas[0]:g}", hi=f"{alphas[-1]:g}")


def _verdict(num_holding: int, num_checked: int) -> Verdict:
    return Verdict.RIGHT if num_holding == num_checked else Verdict.NEEDS_CONTEXT if num_holding else Verdict.WRONG


def batching_claim(cmp: ServingComparison, sweep: BatchSweep | None = None, lang: str = "en") -> Claim:
    """`sweep`: the same comparison at several max batches, when the page ran it (its trend is then stated)."""
    setup, x = cmp.setup, cmp.speedup
    lo, hi = BATCHING_GAIN
    return Claim(
        "Continuous batching raises throughput on typical chat workloads", SEED, f"{lo:g}–{hi:g}×",
        text(lang, "serving.cl.batching.computed", x=f"{x:.2f}", batch=f"{setup.max_num_seqs}",
             sigma=f"{setup.workload.spread:g}", model=setup.deployment.model, gpu=setup.deployment.gpu),
        Verdict.NEEDS_CONTEXT,
        text(lang, "serving.cl.batching.why", x=f"{x:.2f}", where=text(lang, f"serving.cl.{_where(x, BATCHING_GAIN)}"))
        + (ro.batching_trend_sentence(sweep.batches, sweep.ratios, lang) if sweep is not None else
           text(lang, "serving.cl.batching.sweep")),
        "일반적인 채팅(chat) 작업 부하(workload)에서 처리량(throughput)을 5~10배 끌어올립니다.", x)


def tokens_per_pass_claim(alpha: float = 0.8, k: int = 4, lang: str = "en") -> Claim:
    e = expected_tokens_per_pass(alpha, k)
    return Claim(
        "If k drafted tokens are accepted, one target pass did k tokens' work", SEED,
        text(lang, "serving.cl.tpp.claimed"),
        # the seed's condition is k accepted: that pass yields k + 1 tokens (the bonus token), so the seed
        # undercounts slightly; the average E below k is a different question from the one it states
        text(lang, "serving.cl.tpp.computed", e=f"{e:.2f}", a=f"{alpha:g}", k=f"{k}"), Verdict.UNDERSTATED,
        text(lang, "serving.cl.tpp.off") + text(lang, "serving.cl.tpp.why", e=f"{e:.2f}", k=f"{k}"),
        "검증에서 k개가 받아들여지면 큰 모델의 순방향 전파 1번으로 k개의 생성을 마친 셈입니다.", e)


def _near_best(alpha: float, c: float, lang: str) -> str:
    best = optimal_k(alpha, c)
    top = speculative_speedup(alpha, best, c)
    near = [k for k in range(1, MAX_SPEC_K + 1) if speculative_speedup(alpha, k, c) >= (1 - ro.NEAR_BEST) * top]
    return ro.near_best_sentence(alpha, near, best, lang)


def typical_k_claim(alphas: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8), c: float = DRAFT_C, lang: str = "en") -> Claim:
    best = {a: optimal_k(a, c) for a in alphas}
    lo, hi = TYPICAL_K
    holding = [a for a in alphas if lo <= best[a] <= hi]
    why = (text(lang, "serving.cl.k.right", x=f"{1 / c:.0f}", alphas=_alphas(holding, lang)) if holding else
           text(lang, "serving.cl.k.not", c=f"{c:g}", lo=f"{lo}", hi=f"{hi}"))
    return Claim(
        f"Typical k is {lo}–{hi}", SEED, f"k = {lo}–{hi}",
        text(lang, "serving.cl.k.computed", c=f"{c:g}", best=", ".join(f"α={a:g}: {best[a]}" for a in alphas),
             s4=f"{speculative_speedup(0.8, 4, c):.2f}", sbest=f"{speculative_speedup(0.8, optimal_k(0.8, c), c):.2f}"),
        _verdict(len(holding), len(alphas)),
        why + " " + _near_best(0.8, c, lang) + text(lang, "serving.cl.k.practice"),
        "코드와 산문 영역에서 일반적인 k는 3~5 정도입니다.")


def draft_head_claim(alpha: float = 0.8, k: int = 4, c: float = HEAD_C, lang: str = "en") -> Claim:
    s = speculative_speedup(alpha, k, c)
    where = _where(s, HEAD_GAIN)
    lo, hi = HEAD_GAIN
    return Claim(
        "EAGLE-2 / Medusa speed decoding up with no quality loss", SEED, f"{lo:g}–{hi:g}×",
        text(lang, "serving.cl.head.computed", k=f"{k}", a=f"{alpha:g}", c=f"{c:g}", s=f"{s:.2f}"),
        Verdict.RIGHT if where == "within" else Verdict.NEEDS_CONTEXT,
        (text(lang, "serving.cl.head.consistent") if where == "within" else
         text(lang, "serving.cl.head.outside", s=f"{s:.2f}", where=text(lang, f"serving.cl.{where}")))
        + text(lang, "serving.cl.head.why"),
        "EAGLE 2 / Medusa. 검증 모델의 은닉 상태를 공유하는 통합 초안 헤드(integrated draft head)입니다. 품질 손실 없이 "
        "2~3배 속도 향상을 냅니다.", s)


def draft_model_claim(timing: SpecTiming, alphas: tuple[float, ...] = (0.6, 0.8, 0.9),
                      points: list[SpecBatchPoint] | None = None, alpha: float = 0.8, k: int = 4,
                      lang: str = "en") -> Claim:
    """`points`: the same pair swept over the batch at `alpha`, `k` (the chart above), whose trend is stated."""
    presets = load_presets()
    gain = {a: float(timing.speedup(a, optimal_k(a, timing.c))) for a in alphas}
    lo, hi = DRAFT_GAIN
    within = [a for a in alphas if _where(gain[a], DRAFT_GAIN) == "within"]
    below = [a for a in alphas if gain[a] < lo]
    reach = [a for a in alphas if gain[a] >= hi]
    parts = [text(lang, "serving.cl.draft.within", alphas=_alphas(within, lang), x=f"{1 / timing.c:.0f}",
                  c=f"{timing.c:.3f}") if within else text(lang, "serving.cl.draft.outside", c=f"{timing.c:.3f}")]
    if below:
        parts.append(text(lang, "serving.cl.draft.below", lo=f"{lo:g}", alphas=_alphas(below, lang)))
    parts.append(text(lang, "serving.cl.draft.reach", hi=f"{hi:g}", a=f"{reach[0]:g}") if reach else
                 text(lang, "serving.cl.draft.not_reached", hi=f"{hi:g}", a=f"{alphas[-1]:g}",
                      g=f"{gain[alphas[-1]]:.2f}"))
    return Claim(
        "A separate draft model speeds decoding up, even on consumer hardware", SEED, f"{lo:g}–{hi:g}×",
        text(lang, "serving.cl.draft.computed", target=presets[timing.target].name, draft=presets[timing.draft].name,
             c=f"{timing.c:.3f}", gains=", ".join(f"α={a:g}: {gain[a]:.2f}×" for a in alphas)),
        _verdict(len(within), len(alphas)),
        "; ".join(parts) + "." + (" " + batch_gain_sentence(points, alpha, k, lang) if points else ""),
        "초안 모델(draft model)을 사용하는 추측 디코딩. 소비자(consumer)용 하드웨어에서도 2~4배 속도 향상을 보입니다.")


def quality_claim(run, lang: str = "en") -> Claim:
    """`run`: a sim.model.speculative.SpecRun (greedy, on the real tiny model)."""
    return Claim(
        "Speculative decoding leaves the output unchanged", SEED, text(lang, "serving.cl.quality.claimed"),
        text(lang, "serving.cl.quality.computed", n=f"{len(run.new_ids)}",
             what=text(lang, "serving.cl.quality.identical" if run.identical else "serving.cl.quality.different")),
        Verdict.RIGHT if run.identical else Verdict.NEEDS_CONTEXT,
        text(lang, "serving.cl.quality.right") if run.identical else
        text(lang, "serving.cl.quality.flip", dtype=f"{run.dtype}", device=f"{run.device}",
             at=f"{run.first_difference}"),
        "품질 손실 없이")


def lookahead_claim(lang: str = "en") -> Claim:
    return Claim(
        "Lookahead decoding needs no draft model", SEED, text(lang, "serving.cl.look.claimed"),
        text(lang, "serving.cl.look.computed"), Verdict.RIGHT, text(lang, "serving.cl.look.why"),
        "선행 디코딩(Lookahead decoding). 자코비(Jacobi) 반복(iteration)을 사용하는 방식입니다. 초안 모델이 필요 없지만")


def seed_claims(cmp: ServingComparison | None, timing: SpecTiming | None, run=None, sweep: BatchSweep | None = None,
                points: list[SpecBatchPoint] | None = None, alpha: float = 0.8, k: int = 4,
                lang: str = "en") -> tuple[Claim, ...]:
    """Every claim the page can check: the batching one when `cmp` ran (its trend over the max batch with
    `sweep`), the draft model's with roofline `timing` (its trend over the batch with `points`, the same pair at
    `alpha` and `k`), the quality one with a real-model `run`; `claimed`, `computed` and `why` worded in `lang`."""
    return batching_claims(cmp, sweep, lang) + spec_claims(timing, run, points, alpha, k, lang)


def batching_claims(cmp: ServingComparison | None, sweep: BatchSweep | None = None,
                    lang: str = "en") -> tuple[Claim, ...]:
    """The claims the batching tab checks: continuous against static batching, when `cmp` ran."""
    return (batching_claim(cmp, sweep, lang),) if cmp is not None else ()


def spec_claims(timing: SpecTiming | None, run=None, points: list[SpecBatchPoint] | None = None, alpha: float = 0.8,
                k: int = 4, lang: str = "en") -> tuple[Claim, ...]:
    """The claims the speculative-decoding tab checks (see seed_claims)."""
    out = [tokens_per_pass_claim(lang=lang), typical_k_claim(lang=lang), draft_head_claim(lang=lang)]
    if timing is not None:
        out.append(draft_model_claim(timing, points=points, alpha=alpha, k=k, lang=lang))
    if run is not None:
        out.append(quality_claim(run, lang))
    out.append(lookahead_claim(lang))
    return tuple(out)
