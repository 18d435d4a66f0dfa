"""The KV memory page in Korean: its sentences built from known results (exact strings, the same numbers as the
English ones), sim.cost.memory's tables worded in Korean, and the page switching language with its tab kept."""

from __future__ import annotations

import re

import pytest

from sim.cost.arch import estimate_num_params
from sim.cost.capacity import GpuConfig, capacity, dtype_table
from sim.cost.gpus import load_gpus
from sim.cost.hf_config import parse_hf_config_with_notes
from sim.cost.kv_engine import KVEngineConfig, engine_allocation, vllm_command
from sim.cost.memory import KV_DTYPES, MemoryConfig, kv_memory
from sim.cost.presets import load_presets
from sim.msg import Msg
from sim.words import cost as say
from sim.words import say as say_msg
from sim.words import text, why
from sim.words.capacity import fit_message, fit_takeaway
from sim.words.catalog import PSEUDO
from sim.words.kv_claims import seed_claims

P, G = load_presets(), load_gpus()
SEED_001 = MemoryConfig(P["llama-3.1-8b"], batch=16, context=32768)  # 16 requests of 32k on an H100 at 0.9
H100 = GpuConfig(G["h100-sxm"])
# Latin words a Korean sentence keeps: identifiers, units, model and GPU names
IDENTIFIERS = {"KiB", "MiB", "GiB", "TiB", "MLA", "GQA", "MHA", "MQA", "Mamba", "dtype", "min", "bf16", "fp16",
               "fp32", "NVIDIA", "SXM", "vLLM", "CUDA", "FP8", "FP32", "INT8", "FP16", "config", "json", "Gated", "DeltaNet"}


def _numbers(s: str) -> list[str]:
    return re.findall(r"\d+(?:[.,]\d+)*", s)


def test_english_catalog_keeps_the_labels_it_replaced():
    from app.controls.kv_memory import TABS

    assert {k: text("en", f"kvmem.dtype.{k}") for k in KV_DTYPES} == {k: d.label for k, d in KV_DTYPES.items()}
    assert list(TABS) == ["formula", "engine", "prefix_hit", "log", "grid", "variants", "dtypes", "measured",
                          "claims", "presets"]
    assert TABS == {slug: text("en", f"kvmem.tab.{slug}") for slug in TABS}


def test_fit_sentence_and_chart_title_in_korean():
    """64 GiB of KV, 14.96 GiB of bf16 weights, 72 GiB usable (0.9 × 80 GiB): 6.957 GiB over; 14 requests fit."""
    kv, cap = kv_memory(SEED_001), capacity(SEED_001, H100)
    params = estimate_num_params(SEED_001.arch)
    kind, ko = fit_message(kv, cap, H100, "H100 SXM", params, "ko")
    assert kind == "over" and ko == (
        "들어가지 않는다: 캐시에는 64 GiB가 필요하지만 가중치 14.96 GiB를 빼면 57.04 GiB만 남는다. "
        "32,768토큰에서는 요청이 최대 14개, 배치 16에서는 최대 29,206토큰까지 들어간다.")
    _, en = fit_message(kv, cap, H100, "H100 SXM", params)
    assert sorted(_numbers(ko)) == sorted(_numbers(en))
    assert fit_takeaway(cap, "H100 SXM", "ko") == (
        "들어가지 않는다: 가중치 14.96 GiB + KV 64 GiB는 H100 SXM에서 쓸 수 있는 72 GiB보다 6.957 GiB 넘친다")


def test_metrics_read_the_same_numbers_in_both():
    kv, cap = kv_memory(SEED_001), capacity(SEED_001, H100)
    en, ko = say.kv_metrics(kv, cap, H100), say.kv_metrics(kv, cap, H100, "ko")
    assert [m.label for m in ko] == ["토큰당", "요청당", "전체 요청", "KV에 쓸 공간", "최대 요청 수", "최대 컨텍스트"]
    assert [m.value for m in ko] == [m.value for m in en] == ["128 KiB", "4 GiB", "64 GiB", "57.04 GiB", "14",
                                                               "29,206"]
    assert (ko[4].delta, ko[5].help) == ("S = 32,768에서", "이 배치에서 캐시가 들어가는 가장 긴 컨텍스트(메모리가 한계)")


def test_engine_tab_sentences_in_korean():
    """gpt-oss-20b at 32,768 tokens: 12 full layers × 2,048 blocks + 12 sliding layers × 521 blocks."""
    cfg = MemoryConfig(P["gpt-oss-20b"], batch=4, context=32768)
    kv, alloc = kv_memory(cfg), engine_allocation(cfg, KVEngineConfig())
    assert say.engine_takeaway(kv, alloc, "gpt-oss-20b", "ko") == (
        "gpt-oss-20b, 32,768토큰: vLLM v0.24.0은 요청당 963.4 MiB를 예약한다, 공식의 771 MiB의 1.25×; "
        "늘어난 192.4 MiB의 대부분은 슬라이딩 윈도 W = 128 레이어 몫이다")
    assert say.engine_caption(kv, alloc, "ko").startswith(
        "레이어 슬롯 12개짜리 KV 캐시 그룹 2개, 페이지 크기는 하나(레이어당 32,768 B, 어텐션 토큰 16개): 블록 id 하나에 "
        "393,216 B가 든다; 요청 하나에 전체 어텐션 그룹 1개 × 블록 2,048개 + 슬라이딩 윈도 그룹 1개 × 블록 521개 = "
        "블록 2,569개가 필요하다.")
    frame = say.engine_frame(alloc, "ko")
    assert list(frame.columns) == ["KV 캐시 그룹", "종류", "레이어", "레이어 슬롯", "예약 토큰", "요청당 블록",
                                   "요청당 바이트"]
    assert frame["요청당 블록"].tolist() == say.engine_frame(alloc)["Blocks per request"].tolist() == [2048, 521]
    en_rows, ko_rows = say.group_rows(kv, alloc), say.group_rows(kv, alloc, "ko")
    assert [r["Group"] for r in ko_rows] == ["전체 어텐션", "슬라이딩 윈도 W = 128"]
    assert [r["Per request (B)"] for r in ko_rows] == [r["Per request (B)"] for r in en_rows]


def test_engine_and_command_notes_in_korean():
    cfg = MemoryConfig(P["gpt-oss-20b"], batch=1, context=32768, kv_dtype="int4", layers_per_kv=2)
    alloc = engine_allocation(cfg, KVEngineConfig(hybrid=False))
    assert alloc.notes == (Msg("kvmem.eng.as_full", n=12, spec=Msg("kvmem.r.spec.sliding"), s=32768, w=128,
                               word=Msg("kvmem.r.word.window")),)
    assert tuple(say_msg("ko", n) for n in alloc.notes) == ("하이브리드 관리자가 없으면 슬라이딩 윈도 레이어 12개를 전체 어텐션으로 예약한다: "
                           "128토큰 윈도 대신 각각 토큰 32,768개",)
    _, notes = vllm_command(cfg.arch, kv_memory(cfg), alloc, 0.9, 1)
    assert notes == (Msg("kvmem.eng.no_dtype", dtype="INT4"), Msg("kvmem.eng.no_sharing", n=2))
    assert tuple(say_msg("ko", n) for n in notes) == ("vLLM에는 INT4 KV 캐시가 없다; 명령은 가장 가까운 fp8을 쓴다(이 화면은 그룹 스케일을 포함한 INT4로 센다)",
                     "vLLM에는 레이어 2개가 K/V 하나를 나눠 쓰게 하는 스위치가 없다; 모델이 그렇게 만들어져야 한다")
    assert say_msg(PSEUDO, alloc.notes[0]) == (
        'kvmem.eng.as_full(n=12, spec=kvmem.r.spec.sliding, s=32,768, word=kvmem.r.word.window, '
        'w=128)')


@pytest.mark.parametrize("key", list(P))
def test_formula_steps_in_korean_keep_only_identifiers(key):
    """Every preset, its layer kinds and dtypes: each step's name and arithmetic worded in Korean, the numbers the
    same as the English steps'."""
    dtype = "int4" if key.startswith(("qwen", "gemma")) else "fp16"
    kv = kv_memory(MemoryConfig(P[key], batch=2, context=100_000, kv_dtype=dtype, layers_per_kv=1))
    ko, en = say.steps_frame(kv, "ko"), say.steps_frame(kv)
    assert list(ko.columns) == ["단계", "지금 값으로"] and list(en.columns) == ["Step", "With your numbers"]
    for (name, math), (_, en_math) in zip(ko.itertuples(index=False), en.itertuples(index=False), strict=True):
        left = set(re.findall(r"[A-Za-z]{3,}", name + " " + math)) - IDENTIFIERS
        assert not left, (name, math)
        assert sorted(_numbers(math)) == sorted(_numbers(en_math)), (math, en_math)


def test_layer_descriptions_in_korean():
    assert say.layers_described(P["gpt-oss-20b"], "ko") == "슬라이딩 12개(128토큰 윈도) + 전체 어텐션 12개 레이어, 패턴 LG"
    assert say.layers_described(P["qwen3-next-80b-a3b"]) == P["qwen3-next-80b-a3b"].describe_layers()
    assert say.layers_described(P["qwen3-next-80b-a3b"], "ko") == "전체 어텐션 12개 + 선형 어텐션(Gated DeltaNet) 36개 레이어"
    assert say.group_name("R", P["qwen3-next-80b-a3b"], "ko") == "선형 어텐션(Gated DeltaNet) 상태"


def test_a_bad_config_is_explained_in_korean():
    with pytest.raises(ValueError) as ko:
        parse_hf_config_with_notes('{"num_hidden_layers": "lots"}')
    assert why(ko.value, "ko") == (
        "config.json: num_hidden_layers는 정수여야 한다, 받은 값: 'lots' (str); 필드 hidden_size / n_embd / d_model이(가) "
        "없다; 필드 num_attention_heads / n_head이(가) 없다; 필드 vocab_size이(가) 없다")
    with pytest.raises(ValueError, match=r"^config.json: num_hidden_layers must be a whole number, got 'lots' \(str\)"):
        parse_hf_config_with_notes('{"num_hidden_layers": "lots"}')


def test_seed_claims_in_korean_keep_verdicts_and_values():
    en, ko = seed_claims(P, G), seed_claims(P, G, "ko")
    assert [(c.statement, c.original, c.verdict, c.value, c.seed) for c in ko] == \
        [(c.statement, c.original, c.verdict, c.value, c.seed) for c in en]
    assert ko[1].why == ("두 배 높다: 토큰당 320 KiB(80 레이어 × KV 헤드 8개 × 128 × 2 × 2 B) × 4,000 = 1.311 GB. "
                         "2.5 GB가 되려면 토큰이 약 7,600개 있거나 fp32(2.621 GB)여야 한다.")
    for e, k in zip(en, ko, strict=True):
        assert sorted(_numbers(k.computed)) == sorted(_numbers(e.computed)), (k.computed, e.computed)
        assert re.search("[\uac00-\ud7a3]", k.why) or e.why == "4 GiB × 16.", k.why  # a product, no words


def test_dtypes_caption_and_title_in_korean():
    rows = dtype_table(SEED_001, H100)
    assert say.dtypes_caption(128, "ko").startswith("여기서 FP8은 텐서마다 스케일 하나를 둔다")
    assert "INT8은 FP16의 0.5배가 아니라 0.5156배다" in say.dtypes_caption(128, "ko")
    assert say.dtypes_takeaway(rows, "fp16", 32768, "ko") == (
        "FP16은 32,768토큰에서 요청 14개가 들어간다; 가장 작은 KV dtype인 INT2은 101개(7.2×)")


def test_switching_language_keeps_the_open_tab():
    from tests.conftest import run_in_app

    at = run_in_app("kv_memory", {"tab": "dtypes", "kv": "int8"}, timeout=300)
    assert not at.exception and at.query_params["tab"] == "dtypes"
    at.radio(key="lang").set_value("ko").run()
    assert not at.exception
    assert at.title[0].value == "KV 메모리" and at.query_params["tab"] == "dtypes"
    assert [t.label for t in at.tabs][6] == "KV dtype"
    assert say.dtypes_caption(128, "ko") in [c.value for c in at.caption]
    at.radio(key="lang").set_value("en").run()
    assert not at.exception and at.query_params["tab"] == "dtypes"
    assert say.dtypes_caption(128) in [c.value for c in at.caption]


def _english_reworded(monkeypatch, keys):
    """Every English entry of `keys` replaced by other words: Korean that still read the English would change."""
    from sim.words.catalog import catalog

    for key in keys:
        monkeypatch.setitem(catalog("en"), key, "REWORDED " + catalog("en")[key])


def test_formula_steps_korean_is_the_korean_catalog_filled_and_never_reads_the_english(monkeypatch):
    from sim.msg import Msg
    from sim.words import say as word
    from sim.words.catalog import catalog

    kv = kv_memory(MemoryConfig(P["qwen3-next-80b-a3b"], batch=2, context=100_000, kv_dtype="int4", layers_per_kv=2))
    token_all = kv.steps[2].math
    assert token_all.key == "kvf.math.token_all" and token_all.fields["share"] == Msg(
        "kvf.colon_semi", a=Msg("kvf.math.storing", storing=6, of=12, notes=Msg("kvf.math.adjacent", n=2)),
        b=Msg("kvf.math.no_kv", n=36, name=Msg("kvmem.r.state.gated_deltanet")))
    before = [(word("ko", s.what), word("ko", s.math)) for s in kv.steps]
    assert before[2][1].endswith(": 어텐션 레이어 12개 중 6개가 K/V를 저장한다 (인접한 레이어 2개가 하나를 나눠 쓴다); "
                                 "선형 어텐션(Gated DeltaNet) 레이어 36개는 K/V를 남기지 않는다")
    assert before[2][1] == catalog("ko")["kvf.math.token_all"].format(
        body=word("ko", token_all.fields["body"]), b=token_all.fields["b"], readable=token_all.fields["readable"],
        share=word("ko", token_all.fields["share"]))
    english = [(word(PSEUDO, s.what), word(PSEUDO, s.math)) for s in kv.steps]
    _english_reworded(monkeypatch, [k for k in catalog("en") if k.startswith(("kvf.", "kvmem.r.state."))])
    assert [(word("ko", s.what), word("ko", s.math)) for s in kv.steps] == before
    assert word("en", kv.steps[0].what) == "REWORDED Bytes per value p"
    assert english[0] == ('kvf.what.value', 'kvf.math.value_grouped(bits=4, p=0.5, scale=2, zero=2, g=128)')
