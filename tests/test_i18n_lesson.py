"""The Lesson in Korean: every step opens with ?lang=ko with no exception and mostly Hangul, its claims and
titles are worded from the same numbers as the English ones, the quiz answers in Korean (typed answers still
parsed, a Markdown link kept as text), and the links to the full pages keep lang=ko."""

import json

import pytest

from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware, prefill_step
from sim.lesson import quiz
from sim.lesson.steps import STEPS
from sim.words import lesson as say
from sim.words import say as word
from sim.words import text
from sim.words.catalog import PSEUDO
from sim.words.lesson import step_label, step_title
from sim.words.roofline import roofline_takeaway
from tests.conftest import run_page, unescaped
from tests.test_i18n import hangul_share, rendered_text


def lesson_ko(params=None):
    return run_page("lesson", {"lang": "ko", **(params or {})}, timeout=300)


@pytest.mark.parametrize("k", range(1, len(STEPS) + 1))
def test_every_step_renders_in_korean(k):
    at = lesson_ko({"step": str(k)})
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and not at.warning, [e.value for e in [*at.error, *at.warning]]
    assert at.title[0].value == text("ko", "page.lesson.title")
    assert at.header[0].value == step_title(STEPS[k - 1], "ko")
    texts = rendered_text(at)
    share = hangul_share(texts)
    print(f"lesson step {k}: {share:.1%} Hangul")
    assert share >= 0.60, (k, share)
    links = [m.value for m in at.markdown if m.value.startswith("[")]  # the full page's link (page run alone)
    assert links and all("lang=ko" in v for v in links), links
    assert [b.label for b in at.button if b.key in ("back_top", "next_top")] == ["이전", "다음"]


def test_step_picker_and_titles_in_korean():
    assert step_label(1, "ko") == "12단계 중 1단계: 생성은 같은 일을 되풀이한다"
    assert step_label(1, lang=PSEUDO) == 'lesson.step_label(k=1, n=12, title=lesson.step.repeat.title)'
    assert [s.title.key for s in STEPS] == [f"lesson.step.{s.slug}.title" for s in STEPS]


def test_claims_in_korean_keep_the_numbers_and_the_branches():
    assert say.share_claim(0.98, 0.2, 30.0, 7.5, lang="ko") == (
        "페이지 블록은 확보한 메모리의 98.0%를 실제 토큰에 쓰고, 요청마다 최대 길이를 예약하면 20.0%에 그친다. "
        "그래서 동시에 도는 요청이 평균 7.5개가 아니라 30.0개다.")
    assert say.share_claim(0.5, 0.6, 3.0, 4.0, lang="ko") == (
        "최대 길이를 예약하는 쪽이 확보한 메모리를 실제 토큰에 더 많이 쓴다(60.0% 대 페이지 블록 50.0%). "
        "그런데도 동시에 도는 요청은 평균 더 적다(3.0개 대 4.0개).")
    assert say.repeat_claim(256, 76_300_000_000, 554_000_000, 20_000_000_000, 270_000_000, lang="ko") == (
        "토큰 256개를 캐시 없이 생성하는 연산량은 76.3 GFLOP, 캐시를 쓴 디코딩(554 MFLOP)의 138×에 이른다. "
        "길이를 128에서 두 배로 늘리자 캐시 없는 총량은 3.8×, 캐시를 쓴 총량은 2.1×로 늘었다.")
    assert say.batching_claim({512: 156, 131072: None}, lang="ko") == (
        "배치는 읽은 가중치를 여러 요청이 나눠 써서 디코딩 단계의 바이트당 FLOP를 높인다: 컨텍스트 512 토큰에서는 "
        "배치 156부터 연산 병목이 된다; 컨텍스트 131,072 토큰에서는 배치 4,096까지 내내 메모리 병목이다.")
    assert say.layout_claim(0.2, 0.2, lang="ko") == "이 워크로드에서는 두 순서 모두 프롬프트 토큰의 20.0%를 캐시에서 내준다."
    assert "1.25× 느리다" in say.speculate_claim(0.1, 8, 1.1, 0.8, lang="ko")
    assert say.filling_sentence(0, 28, 28, 4, 28 * 4096, 4096, lang="ko") == (
        "레이어 4개 모두에서, 프리필이 프롬프트의 K·V 행 28개를 한 번에 썼다. 이제 캐시는 레이어마다 28행을 담는다: "
        "28 × 토큰당 4 KiB = 112 KiB.")
    assert say.mask_title([0.0, 0.0], [1.5, 3.25], lang="ko") == (
        "인과 마스크가 있으면 앞선 출력이 전혀 움직이지 않고, 없으면 최대 3.25까지 움직인다")
    assert say.mask_caption(0.0, 0.0, lang="ko").startswith("인과 마스크가 있으면 앞선 모든 위치의 K와 V가 비트 단위까지")
    assert say.smallest_title("M", {"MHA": 4096, "GQA": 1024, "MQA": 256}, "MHA", lang="ko") == (
        "M: 가장 작은 것은 MQA, 토큰당 256 B로 MHA의 4 KiB보다 16.0× 적다")


def test_the_roofline_claim_is_the_roofline_pages_own_in_english():
    """The lesson words its memory-bound claim from its catalog; in English it is the roofline page's sentence."""
    arch, gpu = load_presets()["llama-3.1-70b"], load_gpus()["h100-sxm"]
    hw = hardware(gpu, "bf16")
    cfg = RooflineConfig(arch, 1, 4096)
    dec, pre = decode_step(cfg), prefill_step(cfg)
    assert say.roofline_takeaway(dec.intensity, pre.intensity, hw.ridge) == roofline_takeaway(dec, pre, hw)
    ko = say.roofline_takeaway(dec.intensity, pre.intensity, hw.ridge, lang="ko")
    assert ko.startswith(f"리지 {hw.ridge:,.0f} FLOP/B에 대해 디코딩은 {dec.intensity:,.2f} FLOP/B로 리지보다 ")
    assert "메모리 병목" in ko


def test_quiz_in_korean():
    q = quiz.kib_per_token("llama-3.1-8b", "bf16")
    assert q.answer == 128
    assert word("ko", q.prompt) == ("Llama 3.1 8B은(는) 레이어 32개, 값 128개짜리 K/V 헤드 8개를 가진다. "
                        "BF16에서 토큰 하나가 차지하는 KV 캐시는 몇 KiB인가?")
    assert q.check("128 KiB").correct and word("ko", q.check("128").message).startswith("정답이다. 2(K와 V) × 레이어 32개")
    hint = word("ko", q.check("64").message)
    assert hint.startswith("아쉽지만 아니다. 힌트: ") and "128" not in hint
    assert word("ko", q.reveal()) == ("정답은 128 KiB. 2(K와 V) × 레이어 32개 × K/V 헤드 8개 × 값 128개 × 2 B = "
                                      "131,072 B = 토큰당 128 KiB.")
    assert quiz.mqa_vs_mha().check("4배").correct  # a Korean unit after the number still parses
    q = quiz.better_layout("system_prompt")
    assert q.answer == "fixed" and q.check("fixed").correct
    assert word("ko", q.label(q.answer)) == "고정 내용을 먼저"
    assert word("ko", q.check("same").message).startswith("아쉽지만 아니다. 힌트: ")
    assert word("ko", q.reveal()).startswith("정답은 고정 내용을 먼저. 시스템 프롬프트 워크로드의 요청 100개로")


def test_quiz_in_the_korean_page_parses_typed_answers_and_keeps_a_link_as_text():
    at = lesson_ko({"step": "6"})
    box = "quiz_kib_llama-3.1-70b_bf16"
    for typed, kind, start in (("64", "warning", "아쉽지만 아니다. 힌트:"), ("320", "success", "정답이다. 2(K와 V)"),
                               ("[x](http://127.0.0.1:9/)", "warning", "숫자를 입력하세요")):
        at.text_input(key=box).set_value(typed).run()
        shown = [m.value for m in getattr(at, kind)]
        assert any(unescaped(v).startswith(start) for v in shown), shown
    assert "\\[x\\]" in shown[0]  # the link is shown as text, escaped


def test_korean_chart_titles_follow_the_control():
    def title(at):
        return json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"].replace("<br>", " ")

    a, b = title(lesson_ko({"step": "12", "workload": "system_prompt"})), title(lesson_ko({"step": "12",
                                                                                        "workload": "chat"}))
    assert a != b and a.startswith("고정 내용을 먼저 두면")


def test_dtype_names_in_english_are_the_memory_models_labels():
    from sim.cost.memory import KV_DTYPES

    assert {d: text("en", f"lesson.dtype.{d}") for d in KV_DTYPES} == {d: v.label for d, v in KV_DTYPES.items()}
    assert text("ko", "lesson.dtype.int4") == "INT4 + 그룹별 스케일"


def test_the_bytes_steps_formula_table_in_korean():
    at = lesson_ko({"step": "6"})
    table = at.table[0].value
    assert list(table.columns) == ["단계", "이 숫자로"]
    assert list(table["단계"])[0] == "값당 바이트 p" and list(table["이 숫자로"])[0] == "16비트 ÷ 8 = 2 B"
