"""Paged KV blocks and Prefix caching in Korean: sentences built from known results (exact strings, the same
numbers as the English), the seeds' Korean words quoted verbatim, request labels and settings errors in the page
language, and no bold span the Markdown renderer would leave as raw asterisks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.alloc.block_pool import simulate_parallel_sampling
from sim.alloc.policies import compare_policies
from sim.alloc.prefix_sweeps import change_one_byte
from sim.alloc.schedule import PoolConfig, check_fits
from sim.alloc.workload import (
    LAYOUT_LABELS,
    PREFIX_WORKLOAD_LABELS,
    LengthWorkloadConfig,
    make_workload,
    workload_from_lengths,
)
from sim.refusal import Refusal
from sim.words import paging, text
from sim.words import why as worded
from sim.words.catalog import PSEUDO
from sim.words.paging import sharing_takeaway
from sim.words.prefix import (
    change_takeaway,
    demo_block_table,
    demo_finding,
    demo_summary,
    layout_text_in,
    tree_branching_sentence,
)
from sim.words.prefix_claims import ORIGINAL, prefix_claims
from sim.words.prefix_run import kv_change_text, kv_takeaway

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"
NUMBERS = re.compile(r"\d[\d,]*(?:\.\d+)?")


def same_numbers(en: str, ko: str) -> bool:
    return sorted(NUMBERS.findall(en)) == sorted(NUMBERS.findall(ko))


def test_sharing_takeaway_in_korean():
    # 4 branches hold 10 blocks of 16 against 16 unshared: 1 - 10/16 = 37.5% -> 38%
    ko = sharing_takeaway(4, 10, 16, 2, 16, lang="ko")
    assert ko == ("공유로 38%를 아낀다: 공유하지 않은 사본이면 블록 16개가 필요하지만 가지 4개가 16토큰 블록 10개만 "
                  "쓰고, 블록 2개는 아직 공유된다")
    en = sharing_takeaway(4, 10, 16, 2, 16)
    assert sharing_takeaway(4, 10, 16, 2, 16, lang=PSEUDO) == (
        'paged.s.share.saves(sharing=paged.s.share.bare, saved=38%, who=paged.s.share.who(n=4), '
        'held=paged.s.share.held(n=10, bs=16, bytes=), copies=paged.s.share.copies(n=16, '
        'bytes=), shared=paged.s.share.still.other(n=2))')
    assert same_numbers(en, ko)


def test_fork_summary_and_title_in_korean():
    # a 40-token prompt in blocks of 16: 3 blocks, the last one partly full, so 4 of 5 branches copy it
    fork = simulate_parallel_sampling(40, 5, 24, 16)
    assert paging.fork_summary(fork, lang="ko") == (
        "프롬프트는 블록 3개에 한 번 프리필된다. 포크하면 모든 가지가 같은 블록 테이블을 받고, 블록마다 **ref_cnt**가 "
        "5(으)로 오른다. 프롬프트의 마지막 블록은 일부만 차 있으므로, 각 가지가 처음 거기에 쓸 때 블록을 복사한다"
        "(copy-on-write: 2→3, 2→4, 2→5, 2→6). 마지막 가지는 ref_cnt가 1이므로 그 자리에 쓴다. 블록 2개는 계속 "
        "공유된다(×n 표시).")
    assert paging.fork_grid_title(fork, "ko").startswith("가지마다 토큰 24개를 쓴 뒤 공유로 40%를 아낀다")
    assert same_numbers(paging.fork_grid_title(fork), paging.fork_grid_title(fork, "ko"))


def test_comparison_sentences_keep_their_numbers_in_korean():
    cmp = compare_policies(make_workload(LengthWorkloadConfig(num_requests=60)), PoolConfig())
    for name in ("drawn_caption", "memory_summary", "memory_takeaway", "concurrency_takeaway",
                 "concurrency_summary"):
        en, ko = getattr(paging, name)(cmp), getattr(paging, name)(cmp, "ko")
        assert re.search("[\uac00-\ud7a3]", ko), name
        assert same_numbers(en, ko), (name, en, ko)


def test_results_table_in_korean_keeps_its_values():
    cmp = compare_policies(make_workload(LengthWorkloadConfig(num_requests=30)), PoolConfig())
    frame = cmp.results_frame()
    ko = paging.results_table(frame, "ko")
    assert paging.results_table(frame) is frame  # English: the CSV's own identifiers
    assert list(ko.columns)[0] == "할당 정책" and ko.iloc[0, 0] == "페이징 블록 (vLLM)"
    np.testing.assert_array_equal(ko.iloc[:, 1:].to_numpy(), frame.iloc[:, 1:].to_numpy())


def test_change_takeaway_in_korean():
    assert change_takeaway(20, "a", "A", 16, 1, 3, lang="ko") == (
        "바이트 20 변경 (a → A, 블록 1): B의 블록 0 적중 유지(토큰 16개), 블록 1–2 다시 계산 필요")
    assert change_takeaway(20, "a", "A", 16, 1, 3, lang=PSEUDO) == (
        'prefix.s.change.some.one(head=prefix.s.change.head(pos=20, before=a, after=A, block=1), '
        'hit=prefix.s.block(b=0), tokens=16, rest=prefix.s.blocks(lo=1, hi=2))')


def test_demo_table_and_summary_in_korean():
    demo = change_one_byte(list(b"abcdefghijklmnopqrstuvwxyz0123456789"), 20, 16)  # blocks 0..15, 16..31, 32..35
    table = demo_block_table(demo, "ko")
    assert list(table.columns) == ["요청", "블록", "토큰", "텍스트", "해시", "부모 해시", "처리"]
    assert set(table["처리"]) <= {"적중", "계산한 뒤 캐시", "다시 계산: 마지막 프롬프트 토큰을 담음",
                                 "계산, 덜 찬 블록: 캐시하지 않음"}
    assert "뿌리" in set(table["부모 해시"])
    assert list(demo_block_table(demo).columns) == ["request", "block", "tokens", "text", "hash", "parent hash", "fate"]
    assert same_numbers(demo_summary(demo), demo_summary(demo, "ko"))
    assert demo_finding(demo, "ko") == "36바이트 중 바이트 20 변경: 블록 3개 중 1개 재사용 가능 (1절)"


def test_tree_branching_sentence_in_korean():
    one_root = pd.DataFrame({"parent": [np.nan], "requests": [(0, 1, 2)]})
    assert tree_branching_sentence(one_root, 3, "ko") == (
        "여기서는 그린 요청 3개 모두가 첫 블록을 공유한다: 더 아래에서 갈라지거나, 아예 갈라지지 않는다.")


def test_kv_sentences_in_korean():
    paragraph, finding = kv_change_text([1, 5, 5], 3, 8, 0, "ko")
    assert paragraph.startswith("위치 3 앞의 위치들은 모든 레이어에서 **정확히** 그대로다")
    assert paragraph.endswith("seed 000의 요점을 잰 결과다.")
    assert finding == "바이트 3 변경: 위치 3부터의 5곳 중 레이어 0은 1곳, 레이어 1–2: 5곳 모두 바뀐다 (5절)"
    assert kv_takeaway([1, 5, 5], 3, 8, 0, "a", "A", "ko") == (
        "바이트 3 변경 (a → A): 위치 0–2 — 레이어 3개 모두에서 정확히 그대로다. 위치 3부터의 5곳 중 레이어 0은 "
        "1곳이 바뀐다; 레이어 1–2: 5곳 모두 바뀐다")
    en_paragraph, en_finding = kv_change_text([1, 5, 5], 3, 8, 0)
    assert same_numbers(en_paragraph, paragraph) and same_numbers(en_finding, finding)


def test_request_labels_and_prompt_parts_in_korean():
    from sim.msg import Msg
    from sim.words import say

    assert say("ko", Msg("prefix.label.system", a=2, b=7)) == "시스템 프롬프트 2, 요청 7"
    assert say("ko", Msg("prefix.label.step", a=3, b=0)) == "에이전트 실행 3, 단계 0"
    assert say("ko", Msg("wl.label.request", n=3)) == "요청 3"
    assert say("en", Msg("prefix.label.system", a=2, b=7)) == "system prompt 2, request 7"
    assert layout_text_in((("tool descriptions", 500), ("task", 64)), "ko") == "[도구 설명 500] [과제 64]"
    assert layout_text_in((("tool descriptions", 1500),)) == "[tool descriptions 1,500]"


def test_the_english_labels_are_the_catalog_s():
    assert {w: text("en", f"prefix.workload.{w}") for w in PREFIX_WORKLOAD_LABELS} == PREFIX_WORKLOAD_LABELS
    assert {x: text("en", f"prefix.layout.{x}") for x in LAYOUT_LABELS} == LAYOUT_LABELS


def test_settings_errors_in_both_languages():
    wl = workload_from_lengths([10], [10], max_model_len=4096)
    with pytest.raises(Refusal) as got:
        check_fits(wl, PoolConfig(capacity_tokens=2048))
    assert worded(got.value, PSEUDO) == 'alloc.err.capacity(cap=2,048, max_len=4,096)'
    assert worded(got.value, "ko") == (
        "KV 용량 토큰 슬롯 2,048개로는 최대 길이 4,096인 요청 하나도 담을 수 없다: 용량을 늘리거나 최대 길이를 줄인다")
    assert worded(ValueError("plain"), "ko") == "plain"
    assert got.value.key == "alloc.err.capacity" and got.value.fields == {"cap": 2048, "max_len": 4096}
    with pytest.raises(Refusal) as got:
        LengthWorkloadConfig(max_model_len=2048, max_tokens=4096)
    assert got.value.key == "alloc.err.max_tokens" and got.value.fields == {"hi": 2047, "max_len": 2048, "got": 4096}
    assert worded(got.value, "ko") == text("ko", "alloc.err.max_tokens", hi=2047, max_len=2048, got=4096)


def test_claims_quote_the_seeds_and_word_the_rest_in_korean():
    seeds = {p.name[:3]: p.read_text(encoding="utf-8") for p in SEEDS.glob("*.txt")} if SEEDS.is_dir() else {}
    claims = prefix_claims(None, None, 10.0, lang="ko")
    for claim, key in zip(claims, ("one_byte", "layout", "reuse", "agent", "branch"), strict=True):
        assert claim.original == ORIGINAL[key]
        if seeds:
            assert claim.original in seeds[claim.seed], key
        assert re.search("[\uac00-\ud7a3]", claim.claimed) and re.search("[\uac00-\ud7a3]", claim.why)
        assert not re.search("[\uac00-\ud7a3]", claim.statement)  # the English translation
    assert claims[4].computed == "실제 모델을 켠다 (5절)"
    assert prefix_claims(None, None, 10.0, lang=PSEUDO)[4].computed == "prefix.claim.not_run"


@pytest.mark.parametrize("area", ["paged_blocks", "prefix_caching"])
def test_korean_bold_spans_close(area):
    """CommonMark does not close `**…%**` when a Hangul particle follows it (the `%` makes the closing run
    not right-flanking), so the asterisks would show: a bold span never ends in punctuation before a letter."""
    ko = json.loads((ROOT / "assets" / "i18n" / "ko" / f"{area}.json").read_text(encoding="utf-8"))
    bad = {k: v for k, v in ko.items() if re.search(r"[%)\]]\*\*[\w\uac00-\ud7a3]", v)}
    assert bad == {}


def test_generated_request_labels_are_message_values_never_english_read_back(monkeypatch):
    """Every workload labels its requests with a message value; Korean is the Korean catalog's entry filled with
    the same numbers, whatever the English entry says."""
    from sim.alloc.workload import PREFIX_WORKLOADS, PrefixWorkloadConfig, make_trace
    from sim.msg import Msg
    from sim.words import say
    from sim.words.catalog import catalog

    keys = {"system_prompt": "prefix.label.system", "timestamp": "prefix.label.system", "few_shot": "prefix.label.task",
            "chat": "prefix.label.turn", "agent": "prefix.label.step", "rag": "prefix.label.question",
            "random": "wl.label.request"}
    labels = {w: [r.label for r in make_trace(PrefixWorkloadConfig(workload=w, num_requests=12)).requests]
              for w in PREFIX_WORKLOADS}
    assert {w: {m.key for m in ms} for w, ms in labels.items()} == {w: {k} for w, k in keys.items()}
    assert labels["random"][:2] == [Msg("wl.label.request", n=0), Msg("wl.label.request", n=1)]
    korean = {w: [say("ko", m) for m in ms] for w, ms in labels.items()}
    for ms, words in zip(labels.values(), korean.values(), strict=True):
        assert words == [catalog("ko")[m.key].format(**m.fields) for m in ms]
        assert not any(re.search("[A-Za-z]", w) for w in words)
    for key in set(keys.values()):
        monkeypatch.setitem(catalog("en"), key, "REWORDED")
    assert {w: [say("ko", m) for m in ms] for w, ms in labels.items()} == korean
