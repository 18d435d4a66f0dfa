"""Seed 002's claims about serving, checked against the simulators: continuous batching's gain, speculative
decoding's tokens per pass, its best draft length and its speedups. Each verdict that compares is worded from
the numbers it compares."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.presets import load_presets
from sim.serving import readouts as ro
from sim.serving.comparison import BatchSweep, ServingComparison
from sim.serving.speculative import (
    MAX_SPEC_K,
    SpecBatchPoint,
    SpecTiming,
    batch_gain_sentence,
    expected_tokens_per_pass,
    optimal_k,
    speculative_speedup,
)

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


def _alphas(alphas: list[float]) -> str:
    return f"α = {alphas[0]:g}" if len(alphas) == 1 else f"α of {alphas[0]:g}–{alphas[-1]:g}"


def _verdict(num_holding: int, num_checked: int) -> Verdict:
    return Verdict.RIGHT if num_holding == num_checked else Verdict.NEEDS_CONTEXT if num_holding else Verdict.WRONG


def batching_claim(cmp: ServingComparison, sweep: BatchSweep | None = None) -> Claim:
    """`sweep`: the same comparison at several max batches, when the page ran it (its trend is then stated)."""
    setup, x = cmp.setup, cmp.speedup
    lo, hi = BATCHING_GAIN
    return Claim(
        "Continuous batching raises throughput on typical chat workloads", SEED, f"{lo:g}–{hi:g}×",
        f"{x:.2f}× here (max batch {setup.max_batch}, σ = {setup.workload.spread:g}, {setup.deployment.model} on "
        f"{setup.deployment.gpu})", Verdict.NEEDS_CONTEXT,
        f"{x:.2f}× is {_where(x, BATCHING_GAIN)} the range here, and it is a range with conditions: the gain comes "
        "from rows wasted waiting for the longest answer and from memory reserved for max_tokens, so it grows with "
        "the spread of output lengths, shrinks to nothing when every answer has the same length ('fixed' lengths), and "
        "depends on the max batch. "
        + (ro.batching_trend_sentence(sweep.batches, sweep.ratios) if sweep is not None else
           "Turn on the sweep to see by how much."),
        "일반적인 채팅(chat) 작업 부하(workload)에서 처리량(throughput)을 5~10배 끌어올립니다.", x)


def tokens_per_pass_claim(alpha: float = 0.8, k: int = 4) -> Claim:
    e = expected_tokens_per_pass(alpha, k)
    return Claim(
        "If k drafted tokens are accepted, one target pass did k tokens' work", SEED, "k tokens per target pass",
        f"k accepted → k + 1 tokens; on average E = {e:.2f} tokens per pass at α = {alpha:g}, k = {k}", Verdict.WRONG,
        ("Off by one, and optimistic: " if e < k else "Off by one: ")
        + f"the target always adds its own token (k accepted → k + 1), but drafts are rejected at the first miss, so "
        f"a pass yields {e:.2f} tokens on average at k = {k}, and the k draft steps are not free (k·c).",
        "검증에서 k개가 받아들여지면 큰 모델의 순방향 전파 1번으로 k개의 생성을 마친 셈입니다.", e)


def _near_best(alpha: float, c: float) -> str:
    best = optimal_k(alpha, c)
    top = speculative_speedup(alpha, best, c)
    near = [k for k in range(1, MAX_SPEC_K + 1) if speculative_speedup(alpha, k, c) >= (1 - ro.NEAR_BEST) * top]
    return ro.near_best_sentence(alpha, near, best)


def typical_k_claim(alphas: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8), c: float = DRAFT_C) -> Claim:
    best = {a: optimal_k(a, c) for a in alphas}
    lo, hi = TYPICAL_K
    holding = [a for a in alphas if lo <= best[a] <= hi]
    why = (f"Right for a draft about {1 / c:.0f}× cheaper than the target with {_alphas(holding)}." if holding else
           f"Not at c = {c:g}: the best k is outside {lo}–{hi} for every α here.")
    return Claim(
        f"Typical k is {lo}–{hi}", SEED, f"k = {lo}–{hi}",
        f"best k at c = {c:g}: " + ", ".join(f"α={a:g}: {best[a]}" for a in alphas)
        + f"; at α = 0.8 k = 4 gives {speculative_speedup(0.8, 4, c):.2f}× against "
        f"{speculative_speedup(0.8, optimal_k(0.8, c), c):.2f}× at the best k",
        _verdict(len(holding), len(alphas)),
        why + " " + _near_best(0.8, c) + " In practice acceptance falls further into the draft (the formula "
        "assumes every token is accepted with the same α), which favours the shorter end.",
        "코드와 산문 영역에서 일반적인 k는 3~5 정도입니다.")


def draft_head_claim(alpha: float = 0.8, k: int = 4, c: float = HEAD_C) -> Claim:
    s = speculative_speedup(alpha, k, c)
    where = _where(s, HEAD_GAIN)
    lo, hi = HEAD_GAIN
    return Claim(
        "EAGLE-2 / Medusa speed decoding up with no quality loss", SEED, f"{lo:g}–{hi:g}×",
        f"chain of k = {k}, α = {alpha:g}, c = {c:g} (a head on the target's hidden state): {s:.2f}×",
        Verdict.RIGHT if where == "within" else Verdict.NEEDS_CONTEXT,
        ("Consistent at batch 1. " if where == "within" else f"{s:.2f}× is {where} the range at batch 1. ")
        + "EAGLE-2 verifies a tree of drafts, which raises the tokens per pass beyond one chain's. Lossless with "
        "exact verification (greedy match or rejection sampling); Medusa's 'typical acceptance' variant trades "
        "exactness for speed.",
        "EAGLE 2 / Medusa. 검증 모델의 은닉 상태를 공유하는 통합 초안 헤드(integrated draft head)입니다. 품질 손실 없이 "
        "2~3배 속도 향상을 냅니다.", s)


def draft_model_claim(timing: SpecTiming, alphas: tuple[float, ...] = (0.6, 0.8, 0.9),
                      points: list[SpecBatchPoint] | None = None, alpha: float = 0.8, k: int = 4) -> Claim:
    """`points`: the same pair swept over the batch at `alpha`, `k` (the chart above), whose trend is stated."""
    presets = load_presets()
    gain = {a: float(timing.speedup(a, optimal_k(a, timing.c))) for a in alphas}
    lo, hi = DRAFT_GAIN
    within = [a for a in alphas if _where(gain[a], DRAFT_GAIN) == "within"]
    below = [a for a in alphas if gain[a] < lo]
    reach = [a for a in alphas if gain[a] >= hi]
    parts = [f"Within the range for {_alphas(within)} with a draft {1 / timing.c:.0f}× cheaper (c = {timing.c:.3f})"
             if within else f"Outside the range for every α here (c = {timing.c:.3f})"]
    if below:
        parts.append(f"below {lo:g}× at {_alphas(below)}")
    parts.append(f"{hi:g}× from α = {reach[0]:g}" if reach else
                 f"{hi:g}× is not reached even at α = {alphas[-1]:g} ({gain[alphas[-1]]:.2f}×)")
    return Claim(
        "A separate draft model speeds decoding up, even on consumer hardware", SEED, f"{lo:g}–{hi:g}×",
        f"{presets[timing.target].name} drafted by {presets[timing.draft].name}: c = {timing.c:.3f}; "
        + ", ".join(f"α={a:g}: {gain[a]:.2f}×" for a in alphas),
        _verdict(len(within), len(alphas)),
        "; ".join(parts) + "." + (" " + batch_gain_sentence(points, alpha, k) if points else ""),
        "초안 모델(draft model)을 사용하는 추측 디코딩. 소비자(consumer)용 하드웨어에서도 2~4배 속도 향상을 보입니다.")


def quality_claim(run) -> Claim:
    """`run`: a sim.model.speculative.SpecRun (greedy, on the real tiny model)."""
    return Claim(
        "Speculative decoding leaves the output unchanged", SEED, "no quality loss",
        f"real tiny model, greedy, {len(run.new_ids)} tokens: "
        + ("identical to the target alone" if run.identical else "DIFFERENT"),
        Verdict.RIGHT if run.identical else Verdict.NEEDS_CONTEXT,
        "Right for exact verification: greedy speculative decoding returns exactly the target's tokens." if
        run.identical else
        f"Exact in exact arithmetic; here, in {run.dtype} on {run.device}, a pass over k + 1 tokens rounded "
        f"differently from a one-token pass and greedy's choice flipped at token {run.first_difference}.",
        "품질 손실 없이")


def lookahead_claim() -> Claim:
    return Claim(
        "Lookahead decoding needs no draft model", SEED, "no draft model", "not simulated here", Verdict.RIGHT,
        "It guesses n-grams with Jacobi iterations of the target itself; its gains depend on how repetitive the "
        "text is.", "선행 디코딩(Lookahead decoding). 자코비(Jacobi) 반복(iteration)을 사용하는 방식입니다. 초안 모델이 "
        "필요 없지만")


def seed_claims(cmp: ServingComparison | None, timing: SpecTiming | None, run=None, sweep: BatchSweep | None = None,
                points: list[SpecBatchPoint] | None = None, alpha: float = 0.8, k: int = 4) -> tuple[Claim, ...]:
    """Every claim the page can check: the batching one when `cmp` ran (its trend over the max batch with
    `sweep`), the draft model's with roofline `timing` (its trend over the batch with `points`, the same pair at
    `alpha` and `k`), the quality one with a real-model `run`."""
    out = [batching_claim(cmp, sweep)] if cmp is not None else []
    out += [tokens_per_pass_claim(), typical_k_claim(), draft_head_claim()]
    if timing is not None:
        out.append(draft_model_claim(timing, points=points, alpha=alpha, k=k))
    if run is not None:
        out.append(quality_claim(run))
    out.append(lookahead_claim())
    return tuple(out)
