"""KV quantization and Shrink the cache in Korean: sentences built from known results, exact, with the same
numbers as the English ones; seed 001's claims keep the seed's own words; the models' labels come from the
catalog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.claims import SEEDS
from sim.cost.shrink import METHODS, CopyAbility, Score, offload_cost
from sim.model.quant_cache import make_scheme
from sim.model.quant_errors import PositionErrors
from sim.model.quant_setup import QuantSetup, prompt_problem
from sim.model.transformer import ModelConfig
from sim.msg import Msg
from sim.words import say, text
from sim.words.quant import (
    errors_short,
    exact_prefix_sentence,
    heatmap_takeaway,
    metric_grid,
    position_takeaway,
    short_of,
    title_of,
)
from sim.words.quant_claims import seed_claims
from sim.words.shrink_table import copy_ability_sentence, method_rows, offload_sentence, verdict

SEED_001 = next(iter(Path(__file__).resolve().parents[2].glob("shared/seeds/001_*.txt")), None)  # beside the repo


def errors(kind="kivi", bits=4, kl=(0.0, 0.0, 1e-3, 3e-3), loss_ref=0.5, loss_q=0.51) -> PositionErrors:
    s = make_scheme(kind, bits=bits, residual=128)
    kl = np.array(kl)
    return PositionErrors(key=s.key, bits=s.bits, delta_loss=np.full(len(kl), loss_q - loss_ref), agreement=np.ones(len(kl)), kl=kl,
                          loss_ref=loss_ref, loss_q=loss_q, bytes_per_token=600.0, window_delta_loss=np.array((0.01, 0.01)), residual=s.residual)


# --- KV quantization ------------------------------------------------------------------------------------------------

def test_scheme_names_in_korean_keep_r_and_english_is_unchanged():
    s = make_scheme("kivi", bits=4, residual=128)
    assert title_of(s) == "INT4 KIVI: K per-channel, V per-token, residual R=128"
    assert title_of(s, "ko") == "INT4 KIVI: K 채널별, V 토큰별, 잔여 창 R=128"
    assert short_of(make_scheme("token_first", bits=2, residual=64), "ko") == "토큰별 + 처음 64개 보존"
    assert errors_short(errors("token"), "ko") == "토큰별 (단순)" and errors_short(errors("token"), "en") == "per-token (naive)"


def test_position_takeaway_in_korean_has_the_english_numbers():
    kivi, naive = errors("kivi", kl=(1e-4, 1e-4, 1e-4, 1e-4)), errors("token", kl=(1e-2, 1e-2, 1e-2, 1e-2))
    en = position_takeaway(kivi, naive, "kl")
    ko = position_takeaway(kivi, naive, "kl", "ko")
    assert en == ("INT4 KIVI's KL averages 1.00e-04 nats per prediction over 4 positions, 100× below naive "
                  "per-token's 1.00e-02")
    assert ko == "위치 4개에 걸쳐 INT4 KIVI의 예측당 평균 KL은 1.00e-04 nats로, 단순 토큰별의 1.00e-02보다 100× 낮다"
    # the comparison flips with the numbers, in Korean too
    assert position_takeaway(naive, kivi, "kl", "ko").endswith("보다 100× 높다")


def test_heatmap_title_and_columns_in_korean():
    results = {("kivi", 4): errors("kivi", kl=(1e-4,) * 4), ("token", 4): errors("token", kl=(1e-2,) * 4)}
    grid = metric_grid(results, "kl", ["kivi", "token"], (8, 4), "ko")
    assert list(grid.columns) == ["8비트", "4비트"] and list(grid.index) == ["KIVI (R=128)", "토큰별 (단순)"]
    assert heatmap_takeaway(grid, "kl", "ko") == (
        "4비트에서 KL이 가장 낮은 것은 KIVI (R=128)로 1.00e-04 nats, 토큰별 (단순)의 1.00e-02 nats보다 100× 낮다")


def test_exact_prefix_and_setting_problems_in_korean():
    assert exact_prefix_sentence(errors(), 128, "ko") == (
        "KIVI의 KL은 처음 2개 위치에서 정확히 0이다(R=128: 그곳에서는 원본 정밀도의 키와 값만 읽는다). "
        "그래서 곡선이 0에서 시작한다.")
    bad = QuantSetup(chunk=32, residual=16)
    assert bad.setting_problem() == Msg("model.err.residual_groups", R=16, name="K", G=32, fix=32)  # the cache's
    assert say("en", bad.setting_problem()) == (
        "residual window R=16 is not a multiple of K's group of 32 tokens: a per-channel "
        "cache quantizes its residual in whole groups (try R = 32)")
    assert "R = 32" in say("ko", bad.setting_problem()) and QuantSetup().setting_problem() is None
    with pytest.raises(ValueError, match="not a multiple"):  # the cache itself still refuses it
        bad.schemes()
    assert say("ko", prompt_problem([])) == "프롬프트가 비어 있다: 한 글자 이상 입력하라."


def _table(**kl) -> pd.DataFrame:
    rows = [{"scheme": k, "bits": int(b), "delta_loss": 0.0, "kl": v, "top1_agreement": 1.0, "kl_first_quarter": v,
             "kl_last_quarter": 2 * v} for (k, b), v in ((tuple(key.rsplit("_", 1)), val) for key, val in kl.items())]
    return pd.DataFrame(rows)


def test_seed_claims_in_korean_keep_the_english_statement_and_the_seeds_words():
    t = _table(kivi_8=1e-8, token_8=1e-5, fp8_e4m3_8=1e-4, kivi_4=1e-6, token_4=1e-2, kivi_2=1e-5, token_2=0.3,
               token_res_4=1e-3, token_first_4=1e-1)
    en, ko = seed_claims(t, 4), seed_claims(t, 4, lang="ko")
    assert [c.statement for c in en.claims] == [c.statement for c in ko.claims]  # English in both
    assert [c.verdict for c in en.claims] == [c.verdict for c in ko.claims]
    assert [c.value for c in en.claims] == [c.value for c in ko.claims]
    by = {c.statement.split(":")[0]: c for c in ko.claims}
    assert by["INT8"].why == "작은 모델에서 성립한다: 둘 다 다음 토큰 1순위 예측의 99% 이상을 그대로 지킨다"
    assert by["INT8"].claimed == "거의 안전" and by["FP8"].claimed == "INT8처럼 거의 안전"
    assert by["FP8"].why.startswith("작은 모델에서는 성립하지 않는다: FP8의 KL은 INT8 토큰별의 10배, INT4 KIVI")
    int4 = by["INT4 works with K per channel, small groups and a residual window; per-token all the way collapses"]
    assert int4.why == "성립한다: 토큰별의 KL이 KIVI의 10,000배"
    assert int4.computed == ("INT4 KIVI: Δ손실 +0.00000, KL 1.0e-06, 일치율 100.00%; "
                             "INT4 K와 V 토큰별: Δ손실 +0.00000, KL 1.0e-02, 일치율 100.00%.")
    if SEED_001 is not None:  # the seeds sit beside the repository on the lab's machines
        seed = SEED_001.read_text(encoding="utf-8")
        assert all(c.original in seed for c in ko.claims), [c.original for c in ko.claims if c.original not in seed]
    short = seed_claims(_table(kivi_4=1e-6), 4, lang="ko")
    assert short.unmeasured_sentence().startswith("이 보기에서는 재지 않았다: INT8: 거의 안전; FP8: INT8처럼 거의 안전; ")


# --- Shrink the cache -----------------------------------------------------------------------------------------------

def _s(label, kind, frac, quote):
    return Score(label, label, kind, frac, 1.0, quote, 1.0)


def test_verdict_in_korean_has_the_english_branch_and_numbers():
    scores = [_s("INT4 KIVI", "blur", 0.3, 0.9), _s("H2O @ 25.0%", "discard", 0.27, 0.2)]
    assert verdict(scores, 1.0).startswith("Discarding hurt the exact quote more than blurring at about equal bytes")
    assert verdict(scores, 1.0, "ko") == (
        "바이트가 거의 같을 때 버리기가 흐리기보다 정확한 인용을 더 해쳤다, 강의의 말대로 (전체 캐시는 100.0% 인용): "
        "INT4 KIVI(바이트의 30%)는 90.0%를 인용하고, 바이트가 가장 가까운 버리는 캐시 중 최고(H2O @ 25.0%, 27%)는 20.0%.")
    cannot = verdict(scores, 0.05, "ko")
    assert cannot.split(":")[0] == "이 모델은 전체 캐시로도 5.0%만 인용하므로 검사로 캐시를 가를 수 없다"  # the chart's title
    assert "짝 1개 중 버리기가 정확한 인용을 더 해친 것이 1개, 덜 해친 것이 0개, 똑같은 것이 0개" in cannot


def test_byte_sentence_and_offload_in_korean():
    from sim.model.evict_cache import shrunk_bytes
    from sim.words.shrink import bytes_what, method_label

    cfg = ModelConfig()
    acct = shrunk_bytes(cfg, method="h2o", budget_tokens=25, num_tokens=100)
    assert bytes_what(acct, "ko") == (
        "H2O (헤비 히터 + 윈도우): 토큰 100개 중 25개를 둔다. K/V 51,200 B + 누적 점수 1,600 B + 남긴 위치 1,600 B "
        "= 54,400 B, 전체 FP16 캐시(204,800 B)의 26.6%.")
    assert method_label("int8", "ko") == "토큰별 INT8"
    cost = offload_cost(4 * 2**30, "pcie5", 3.35e12)
    en, ko = offload_sentence(cost), offload_sentence(cost, "ko")
    assert en.startswith("Bringing 4 GiB back over PCIe 5.0 x16 (63 GB/s) takes 68.2 ms per decode step")
    assert ko.startswith("4 GiB를 PCIe 5.0 x16(63 GB/s)로 다시 올리는 데 디코딩 스텝마다 68.2 ms가 걸린다.")
    assert f"{cost.transfer_s / cost.hbm_s:,.1f}배" in ko


def test_copy_abilities_and_the_methods_table_in_korean():
    shipped = CopyAbility("배포", 6, 128, 0, 50)
    trained = CopyAbility("복사", 64, 128, 25, 50)
    assert copy_ability_sentence([shipped, trained], "ko") == (
        "전체 캐시로 배포: 구절 바이트 128개 중 6개(5%) 인용, 사실 바이트 50개 중 0개(0%) 회상; 복사: 구절 바이트 128개 중 "
        "64개(50%) 인용, 사실 바이트 50개 중 25개(50%) 회상: 둘 다 절반 이상 베끼는 것은 복사뿐이라 검사는 기본으로 그 "
        "모델에서 돈다(배포는 그만큼 먼 곳에서 베끼지 못한다).")
    ko, en = method_rows("ko"), method_rows("en")
    assert [r["방법"] for r in ko] == [m.name_ko for m in METHODS] and ko[2]["무엇을 줄이나"] == "오래된 토큰을 아예 버려 $S$를 묶는다"
    assert ko[2]["영어 번역"] == "drops old tokens outright, bounding S / yes; but a dropped token cannot come back"
    assert en[2]["In the lecture"] == "오래된 토큰을 아예 버려 $S$를 묶는다 / 그렇다. 다만 버린 토큰은 되돌릴 수 없다"
    if SEED_001 is not None:
        seed = SEED_001.read_text(encoding="utf-8")
        assert all(f"{m.name_ko}\t{m.shrinks_ko}\t{m.stacks_ko}" in seed for m in METHODS)


def test_model_labels_come_from_the_catalog():
    from app.runs.shrink_cache import MODEL_NAMES, MODELS, model_label

    assert MODELS == {k: text("en", f"shrink.model.{k}") for k in MODEL_NAMES}
    assert MODELS["mha"] == "Tiny MHA (the shipped model)"
    assert model_label("mha_copy", "ko") == text("ko", "shrink.model.mha_copy") != MODELS["mha_copy"]
    assert SEEDS["001"][0] in text("ko", "shrink.intro", title_en=SEEDS["001"][1], title_ko=SEEDS["001"][0])
