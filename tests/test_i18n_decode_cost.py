"""Decode cost in Korean: each sentence worded from a result worked by hand, exact, with the same numbers as the
English; the seed claims quote the seeds' Korean; the page's modes (the run, the profile tab, the CUDA-graph
choice and its reason without CUDA) in Korean with ?lang=ko."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.work import SHOWN_KEY
from sim.cost.decode import computed_grid
from sim.model.step_profile import CATEGORIES, StepProfile
from sim.model.transformer import PRESETS
from sim.words import decode as dw
from sim.words.catalog import PSEUDO
from sim.words.decode import (
    formula_agreement,
    grid_takeaway,
    parts_takeaway,
    per_step_takeaway,
    scale_takeaway,
    speedup_caption,
    wall_time_caption,
)
from sim.words.decode_claims import seed_claims
from sim.words.profile import profile_takeaway
from tests.conftest import run_page
from tests.test_takeaways_generation import CACHED, NAIVE, parts, point, rec, timed

SEEDS_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "seeds"
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def numbers(s: str) -> list[str]:
    return sorted(NUMBER.findall(s))


def test_chart_titles_in_korean():
    assert per_step_takeaway(NAIVE, CACHED, "ko") == (
        "스텝 2에서 순진한 방식의 스텝은 캐시 방식 스텝의 3.2×에 달하는 FLOPs를 썼다: 162 kFLOP 대 51 kFLOP")
    assert per_step_takeaway(NAIVE[:2], CACHED, "ko") == (
        "스텝 1(순진한 방식이 시간 예산을 다 쓰기 전 마지막 스텝)에서 순진한 방식의 스텝은 캐시 방식 스텝의 2.1×에 달하는 "
        "FLOPs를 썼다: 101 kFLOP 대 49 kFLOP")
    assert parts_takeaway(NAIVE, CACHED, "ko") == (
        "스텝 1부터 스텝 2까지, 캐시 방식에서는 어텐션 점수 QKᵀ, 어텐션 · V 부분만 커진다(최대 1.5×), 반면 나머지 부분 "
        "4개는 그대로다; 순진한 방식에서는 LM 헤드 외의 모든 부분이 커진다 (가장 빠른 것은 어텐션 점수 QKᵀ, 2.4×)")
    assert parts_takeaway(NAIVE[:2], CACHED, "ko").startswith("스텝 2개로는 비교할 디코딩 스텝이 두 개가 되지 않는다")
    naive, cached = computed_grid(2, 3, "naive"), computed_grid(2, 3, "cached")
    assert grid_takeaway(naive, cached, "ko") == (
        "처음 스텝 3개 동안 순진한 방식은 Q, K, V를 9번 계산하고, 캐시 방식은 4번(2.2× 적게) 계산한다; 그 대신 캐시에서 "
        "K, V를 5번 읽는다")
    growing = [point(128, 1_000, 10, 50_000, 1_000), point(4096, 1_000_000, 50, 10**9, 40_000)]
    assert scale_takeaway(growing, 4096, False, "M", "ko") == (
        "M, N = 4,096: 순진한 방식의 스텝은 캐시 방식 스텝의 20,000×에 달하는 FLOPs를 쓴다; 순진한 방식/캐시 방식 비율은 "
        "N에 따라 커진다(N = 128에서 100×, N = 4,096에서 20,000×)")
    assert scale_takeaway(growing, 128, True, "M", "ko").startswith(
        "M, 토큰 128개: 순진한 생성은 캐시 생성의 50.0×에 달하는 FLOPs를 쓴다")


def test_captions_in_korean():
    assert formula_agreement({"naive": [1, 2, 1_003], "cached": [1, 2, 1]},
                             {"naive": [1, 2, 3], "cached": [1, 1, 1]}, "ko") == (
        "순진한 방식 스텝 3개 중 1개, 캐시 방식 스텝 3개 중 1개에서 어긋나며, 차이는 최대 1,000 FLOP이다.")
    assert formula_agreement({"naive": [1]}, {"naive": [1]}, "ko") == "두 실행의 스텝 1개 모두에서 정확히 일치한다."
    cached = [rec(s, parts(1_000, 0, 0, 0, 0, 0), 2e-3) for s in range(3)]
    fast = [rec(s, parts(1_000, 5_000, 0, 0, 0, 0), 4e-3) for s in range(3)]
    assert speedup_caption(fast, cached, "ko") == (
        "측정한 속도 향상(2.0×)은 왜 FLOP 비율(6.0×)보다 작을까? FLOP당으로 보면 캐시 방식이 순진한 방식의 3.0×만큼 "
        "시간을 썼다. 이렇게 작은 모델은 토큰당 산술이 적다: 캐시 방식 스텝 하나에 2.00 ms(중앙값)가 걸렸다. 그 대부분은 "
        "연산마다 드는 고정 비용이고, 순진한 방식 스텝의 늘어난 FLOPs는 N이 커져야 비로소 시간을 지배한다. 토큰 512개로 해 보라.")
    assert wall_time_caption(timed(90, 1, 1, 2, 2, 3, 4, 5, 6), "ko") == (
        "이 머신에서 이번 실행으로 잰 값: 캐시 방식 스텝 하나가 초반(스텝 1–2, 중앙값)에는 1.00 ms, 후반(스텝 7–8)에는 "
        "5.50 ms 걸렸다. N에 따라 5.5× 커진다. 길어진 캐시에 대한 어텐션이 연산마다 드는 고정 오버헤드보다 무거워지기 "
        "시작하기 때문이다.")
    assert dw.step_caption("graph", 29, "ko").endswith("스텝마다 캐시 슬롯 29개 전체에 어텐션하고 아직 쓰지 않은 슬롯은 "
                                                     "마스크하므로, 어텐션 FLOPs는 키 29개 분량이다.")
    assert dw.step_caption("eager", 29, "ko") == ""


def test_every_sentence_states_the_same_numbers_in_both_languages():
    cached = [rec(s, parts(1_000, 0, 0, 0, 0, 0), 2e-3) for s in range(3)]
    for say in (lambda lg: per_step_takeaway(NAIVE, CACHED, lg), lambda lg: grid_takeaway(
            computed_grid(2, 3, "cached"), computed_grid(2, 3, "naive"), lg),
            lambda lg: speedup_caption([rec(s, parts(1_000, 5_000, 0, 0, 0, 0), 40e-3) for s in range(3)], cached, lg),
            lambda lg: wall_time_caption(timed(90, 2, 2, 2, 2, 2, 2, 2, 2.1), lg),
            lambda lg: dw.step_caption("static", 1024, lg)):
        assert numbers(say("ko")) == numbers(say("en")), say("ko")


def test_profile_title_in_korean():
    cats = dict.fromkeys(CATEGORIES, 0.0) | {"matmuls": 300e-6, "views and copies": 200e-6}
    p = StepProfile(context=256, wall_s=1500e-6, profiled_s=1000e-6, category_s=cats, num_calls=800.0, flops=2_300_000, matmul_flops_per_s=1e11)
    assert profile_takeaway(p, "ko") == (
        "토큰 256개에서 캐시 방식 스텝 하나가 2.30 MFLOP에 1,500 µs 걸렸다. 이 머신의 행렬곱 속도라면 23.0 µs면 되는 "
        "양이다(65×): 오버헤드가 지배한다; 연산자 호출 800번, 가장 큰 몫은 연산자 밖 (Python, 디스패치): 50%")
    assert profile_takeaway(p, "en") == profile_takeaway(p)


def test_seed_claims_quote_the_seed_and_word_the_rest_in_korean():
    en, ko = seed_claims(PRESETS["mha"]), seed_claims(PRESETS["mha"], "ko")
    assert [c.statement for c in ko] == [c.statement for c in en]  # the English translation, in both
    assert [c.original for c in ko] == [c.original for c in en] and all(c.original for c in en)
    assert [(c.seed, c.verdict, c.value) for c in ko] == [(c.seed, c.verdict, c.value) for c in en]
    assert ko[0].computed == "계산한 K/V 벡터 수, 모든 스텝의 합: 순진한 방식 5,050, 캐시 방식 100"
    assert ko[3].why.startswith("개수가 아니라 자릿수다: 4,096² = 16.8 M. 정확히 세면 K/V 벡터 8.4 M개")
    for e, k in zip(en, ko, strict=True):
        assert re.search("[\uac00-\ud7a3]", k.computed) and re.search("[\uac00-\ud7a3]", k.why)
        assert numbers(k.computed) == numbers(e.computed)
    if SEEDS_DIR.is_dir():  # each original is the seed's own words, verbatim
        for c in en:
            seed_text = next(SEEDS_DIR.glob(f"{c.seed}_*.txt")).read_text(encoding="utf-8")
            assert c.original in seed_text, c.original


def test_comparison_titles_in_korean():
    from sim.model.generate import DecodeComparison

    res = DecodeComparison(naive=NAIVE, cached=CACHED, num_requested=3, naive_budget_s=None)
    assert dw.flops_takeaway(res, "ko") == (
        "토큰 3개 전체에서 순진한 방식은 캐시 방식의 2.1×에 달하는 FLOPs를 썼다: 316 kFLOP 대 153 kFLOP")
    stopped = DecodeComparison(naive=NAIVE[:2], cached=CACHED, num_requested=3, naive_budget_s=1.0)
    assert dw.wall_time_takeaway(stopped, "ko") == (
        "스텝 1(순진한 방식이 시간 예산을 다 쓰기 전 마지막 스텝)에서 캐시 방식과 순진한 방식의 스텝은 둘 다 1.00 ms 걸렸다")
    assert dw.wall_time_takeaway(stopped, lang=PSEUDO) == 'decode.s.wall_at.same(at=decode.s.at.last(at=decode.s.at.step(step=1)), c=1.00 ms)'


def _titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_page_in_korean_runs_profiles_and_explains_the_graph_choice():
    import torch

    for tab in ("wall", "cumulative"):
        at = run_page("decode_cost", {"lang": "ko", "n": "12", "step": "graph", "tab": tab}, timeout=300)
        assert not at.exception
        res = at.session_state[SHOWN_KEY]["decode_cost.compare"]
        # the wall-time title's wording follows the times measured in this run (which step was faster), so it
        # is taken from that result; the FLOP title's is exact
        title = dw.wall_time_takeaway(res, "ko") if tab == "wall" else dw.flops_takeaway(res, "ko")
        assert title.startswith("스텝 11에서" if tab == "wall" else "토큰 12개 전체에서 순진한 방식은")
        assert title in _titles(at)
    at = run_page("decode_cost", {"lang": "ko", "n": "12", "step": "graph", "tab": "profile"}, timeout=300)
    assert not at.exception
    assert at.success[0].value == "같은 토큰: 순진한 디코딩과 캐시 디코딩의 토큰 12개가 모두 일치한다."
    if not torch.cuda.is_available():
        reason = "이 머신에는 CUDA 장치가 없다 \\(torch\\.cuda\\.is\\_available\\(\\)가 False\\)"
        assert at.warning[0].value == (f"링크가 CUDA 그래프 캐시 스텝을 요청했지만 {reason}: 캐시 방식 스텝은 eager로 "
                                       "돈다.")
        radio = at.radio(key="step")
        assert radio.disabled and radio.options == ["eager (연산자 하나씩)", "CUDA 그래프"]
        assert f"CUDA 그래프를 쓸 수 없음: {reason}." in [c.value for c in at.caption]
    next(b for b in at.button if b.label == "캐시 스텝 하나 프로파일링").click().run()
    assert not at.exception
    context = len(at.session_state["prompt"].encode()) + 12 - 1  # the prompt and every fed token in the cache
    assert any(t.startswith(f"토큰 {context}개에서 캐시 방식 스텝 하나가") for t in _titles(at))
    assert any(c.value.startswith("몫은 프로파일러 아래에서 돈 실행") for c in at.caption)


def test_page_messages_in_korean():
    at = run_page("decode_cost", {"lang": "ko", "prompt": "y" * 250, "n": "1024", "budget": "1"}, timeout=300)
    assert not at.exception
    assert at.warning[0].value.startswith(
        "프롬프트 토큰 250개 + 새 토큰 1024개는 모델이 학습한 1024토큰 컨텍스트를 넘습니다. 대신 775개를 생성합니다")
    k = at.session_state[SHOWN_KEY]["decode_cost.compare"].compared
    assert f"순진한 디코딩은 토큰 775개 중 {k}개에서 멈췄다" in at.info[0].value
    at.text_area(key="prompt").set_value("가" * 100)  # 100 characters, 300 bytes: the limit counts bytes
    at.button[0].click().run()
    assert at.error[0].value == "프롬프트가 300바이트입니다. 한도는 256바이트이니 줄여 주세요."
