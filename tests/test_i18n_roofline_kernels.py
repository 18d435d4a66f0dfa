"""Roofline and Attention kernels in Korean: their sentences worded from known results (the same numbers as the
English), every Roofline tab and the timed parts of Attention kernels rendered with ?lang=ko, the seeds' claims
quoted in their own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.controls.roofline import TAB_SLUGS, TABS
from app.tabs import LazyTabs
from sim.attention.limits import Limits, check_shape
from sim.attention.shapes import AttentionShape
from sim.attention.timing import SweepResult
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import (
    ContextTrend,
    RooflineConfig,
    SweepPoint,
    TinyDecodePoint,
    decode_step,
    hardware,
    prefill_step,
    what_helps,
)
from sim.msg import Msg
from sim.refusal import Refusal
from sim.words import say, text, why
from sim.words.attention import (
    held_caption,
    reason_text,
    shape_label,
    stat_word,
    sweep_time_takeaway,
    timing_rows,
    timing_takeaway,
    traffic_takeaway,
)
from sim.words.catalog import PSEUDO
from sim.words.kernel_claims import kernel_claims
from sim.words.roofline import (
    batching_caption,
    bytes_takeaway,
    intensity_takeaway,
    levers_frame,
    roofline_takeaway,
    steps_frame,
    tiny_takeaway,
    tiny_verdict,
    tokens_takeaway,
    trend_verdict,
    turning_points,
)
from sim.words.roofline_claims import roofline_claims
from tests.conftest import run_in_app, run_page
from tests.test_attention_readouts import fake_result
from tests.test_i18n import hangul_share, rendered_text

SEEDS = Path(__file__).resolve().parent.parent.parent / "shared" / "seeds"
P, G = load_presets(), load_gpus()
CFG = RooflineConfig(P["llama-3.1-70b"], 1, 4096)  # the page's defaults: 1.05 FLOP/B against an H100's 295
H100 = hardware(G["h100-sxm"])


def _pt(batch: int, context: int, intensity: float, tokens_per_s: float = 1.0) -> SweepPoint:
    return SweepPoint(batch, context, intensity, 1.0, tokens_per_s, "")


# --- Roofline's sentences ----------------------------------------------------------------------------------------

def test_roofline_takeaway_in_korean_has_the_english_numbers():
    dec, pre = decode_step(CFG), prefill_step(CFG)
    assert roofline_takeaway(dec, pre, H100, PSEUDO) == (
        "roofline.s.takeaway(d=1.05, d_where=roofline.s.below_ridge(x=281×), ridge=295, p=2,508, "
        "p_where=roofline.s.above_ridge(x=8.5×))")
    assert roofline_takeaway(dec, pre, H100, "ko") == text(  # the Korean entries filled with the same numbers
        "ko", "roofline.s.takeaway", d="1.05", d_where=text("ko", "roofline.s.below_ridge", x="281×"), ridge="295",
        p="2,508", p_where=text("ko", "roofline.s.above_ridge", x="8.5×"))
    assert bytes_takeaway(dec, "ko") == text("ko", "roofline.s.bytes.weights", w="141.1 GB", kv="1.342 GB", share="99%")
    assert bytes_takeaway(dec, PSEUDO) == "roofline.s.bytes.weights(w=141.1 GB, kv=1.342 GB, share=99%)"


def test_batch_sweep_sentences_in_korean():
    rows = [_pt(1, 512, 1.0), _pt(64, 512, 120.0), _pt(4096, 512, 300.0),
            _pt(1, 8192, 1.0), _pt(64, 8192, 20.0), _pt(4096, 8192, 25.0)]
    assert intensity_takeaway(rows, 295.0, "ko") == (
        text("ko", "roofline.s.reach.some_one", ridge="295", reached=text("ko", "roofline.s.reach.item", S="512",
        b="4,096"), never="8,192", top="4,096"))
    assert intensity_takeaway(rows, 20.0, "ko") == (
        text("ko", "roofline.s.reach.all", ridge="20", reached=text("ko", "roofline.s.reach.item", S="512",
        b="64") + text("ko", "roofline.s.reach.sep") + text("ko", "roofline.s.reach.item", S="8,192", b="64")))
    assert intensity_takeaway(rows, 591.0, "ko") == (
        text("ko", "roofline.s.reach.none", ridge="591", top="4,096", peak="300", pc="512", pb="4,096"))
    three = rows + [_pt(1, 131072, 1.0), _pt(4096, 131072, 2.0)]
    assert "컨텍스트 8,192, 131,072에서는" in intensity_takeaway(three, 100.0, "ko")
    assert tokens_takeaway([_pt(1, 4096, 0, 23.5), _pt(4096, 4096, 0, 2395.0)], 4096, "ko") == (
        text("ko", "roofline.s.tok.only", S="4,096", B="4,096", gain="102×", lo="1", both=text("ko",
        "roofline.s.tok.both", hi="2,395", lo="23.5"), more="4,096×"))
    assert tokens_takeaway([_pt(1, 128, 0, 100.0), _pt(8, 128, 0, 700.0)], 128, "ko") == (
        text("ko", "roofline.s.tok.proportional", S="128", B="8", gain="7.0×", lo="1", both=text("ko",
        "roofline.s.tok.both", hi="700", lo="100"), more="8.0×"))
    assert turning_points({512: 64, 131072: None}, "ko") == (
        text("ko", "roofline.s.turn.from", S="512", b="64") + " · " + text("ko", "roofline.s.turn.never",
        S="131,072"))
    assert batching_caption(CFG, H100, lang="ko") == (
        text("ko", "roofline.s.batch.said", S="4,096", limit="110") + text("ko", "roofline.s.batch.below", x="2.7×",
        ridge="295"))
    assert "can never pass 110 FLOP/B" in batching_caption(CFG, H100) and "2.7× below the ridge of 295" in \
        batching_caption(CFG, H100)


def test_roofline_tables_levers_and_measured_point_in_korean():
    dec, pre = decode_step(CFG), prefill_step(CFG)
    table = steps_frame([pre, dec], H100, "ko")
    assert table["스텝"].tolist() == ["프리필", "디코딩"] and table["한계"].tolist() == ["연산", "메모리"]
    assert table["메모리 시간 (ms)"].tolist() == steps_frame([pre, dec], H100)["Memory time (ms)"].tolist()
    levers = what_helps(CFG, H100)
    assert [say("ko", x.name) for x in levers] == ["고른 그대로", "가중치를 INT4로", "KV 캐시를 INT4로", "MQA (KV 헤드 1개)",
                                        "배치 ×8 (8)"]
    assert [x.tokens_per_s for x in levers] == [x.tokens_per_s for x in what_helps(CFG, H100)]
    assert levers_frame(levers, "ko")["고른 설정 대비"].iloc[0] == "1.00×"
    tp = TinyDecodePoint(2e6, 1e6, 500e-6, 50e-6, 120, 0.5, 2e9, 1e9)
    assert tiny_takeaway(tp, "ko") == (
        text("ko", "roofline.s.tiny.takeaway", share="10.0%"))
    assert tiny_verdict(tp, "ko") == (
        text("ko", "roofline.s.tiny.said", mb="2.00", mflop="1.00", predicted="50", measured="500",
        share="10.0%") + text("ko", "roofline.s.tiny.launch", ops="120"))
    assert "약 120개 연산" in tiny_verdict(tp, "ko") and tiny_verdict(tp) == tiny_verdict(tp, "en")
    falling = ContextTrend(1, 4096, 1.0, 0.5, 1)
    assert trend_verdict(falling, "ko") == (
        text("ko", "roofline.s.trend.verdict", way=text("ko", "roofline.s.trend.falls", short="1.00",
        at_short=text("ko", "roofline.s.trend.token", n="1"), long="0.50", at_long=text("ko",
        "roofline.s.trend.tokens", n="4,096"))))
    with pytest.raises(Refusal) as refused:
        hardware(G["a100-80gb"], "fp8")
    assert refused.value.msg == Msg("roofline.s.no_dtype", gpu="NVIDIA A100 SXM 80GB", dtype="FP8")
    assert why(refused.value, "ko") == (
        text("ko", "roofline.s.no_dtype", gpu="NVIDIA A100 SXM 80GB", dtype="FP8"))


def _seed_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(SEEDS.glob("*.txt")))


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed articles are not beside this checkout")
def test_every_claim_quotes_its_seed_verbatim():
    seeds = _seed_text()
    for claim in (*roofline_claims(P, G), *kernel_claims()):
        assert claim.original and claim.original in seeds, claim.statement


def test_claims_are_worded_in_the_page_language_with_the_same_numbers_and_verdicts():
    en, ko = roofline_claims(P, G), roofline_claims(P, G, "ko")
    assert [c.statement for c in ko] == [c.statement for c in en]  # the English translation in both
    assert [(c.verdict, c.value) for c in ko] == [(c.verdict, c.value) for c in en]
    assert ko[0].computed == "141 GB, 139 GFLOP (Llama 3.1 70B, bf16)" == en[0].computed
    assert ko[2].why == (
        text("ko", "roofline.c.ridge.why", tflops="989", tbs="3.35", fp8="591"))
    sweep = SweepResult((fake_result(128), fake_result(256)), 1e12)
    measured = {c.statement: c for c in kernel_claims(sweep, "median", "ko")}
    speed = measured["FlashAttention: 24× wall-clock on A100, 510× on H100 in FP8"]
    assert speed.computed.endswith(text("ko", "kernels.c.measured_time", n="256", device="cpu",
                                        speed=text("ko", "kernels.c.faster", x="3.0"), stat=text("ko", "kernels.stat.median")))
    assert kernel_claims(sweep, lang=PSEUDO)[4].computed.endswith(
        "kernels.c.measured_time(n=256, device=cpu, speed=kernels.c.faster(x=3.0), stat=kernels.stat.median)")


# --- Attention kernels' sentences --------------------------------------------------------------------------------

def test_kernel_sentences_in_korean():
    r = fake_result(256)
    assert timing_takeaway(r, lang="ko") == (
        text("ko", "kernels.s.timing.peak_eager", said=text("ko", "kernels.s.faster.faster", a="FLASH", x="3.0×",
        b=text("ko", "kernels.eager"), where=text("ko", "kernels.s.where", n="256", device=text("ko",
        "kernels.device.cpu")), times=text("ko", "kernels.s.times", a="1", b="3", stat=text("ko",
        "kernels.stat.median"))), peak="1 MiB", x="64×", name="FLASH"))
    assert timing_takeaway(r, "fastest block", "ko") == (
        text("ko", "kernels.s.timing.peak_eager", said=text("ko", "kernels.s.faster.faster", a="FLASH", x="4.0×",
        b=text("ko", "kernels.eager"), where=text("ko", "kernels.s.where", n="256", device=text("ko",
        "kernels.device.cpu")), times=text("ko", "kernels.s.times", a="0.5", b="2", stat=text("ko",
        "kernels.stat.fastest_block"))), peak="1 MiB", x="64×", name="FLASH"))
    rows = timing_rows(r, "ko")
    assert [x["커널"] for x in rows] == ["eager", "MATH", "FLASH", "EFFICIENT"]
    assert [x["상태"] for x in rows] == ["정상", "정상", "정상", "쓸 수 없음 (위 표 참고)"]
    assert rows[1]["MATH 대비 최대 |Δ|"] == "0 (기준)"
    assert [list(a.values())[1:6] for a in rows] == [list(b.values())[1:6] for b in timing_rows(r)]  # same numbers
    sweep = SweepResult((fake_result(128), fake_result(256)), 1e12)
    assert sweep_time_takeaway(sweep, lang="ko") == (
        text("ko", "kernels.s.sweep_time.same", lo="128", hi="256", longer="2", e="1.0×", name="FLASH", o="1.0×",
        stat=text("ko", "kernels.stat.median")))
    shape = AttentionShape(batch=1, heads=1, seq_len=128, head_dim=16)
    assert shape_label(shape) == shape.label()
    assert shape_label(shape, "ko") == (
        text("ko", "kernels.shape.label", b="1", h="1", q="128", k="128", d="16", mask=text("ko",
        "kernels.shape.causal"), dtype="float32"))
    assert stat_word("fastest block", "ko") == "가장 빠른 블록"
    from sim.attention.online_softmax import hbm_traffic

    traffic = hbm_traffic(1, 1, 128, 128, 16, 4, 128, 128, True)
    assert traffic_takeaway(traffic, shape_label(shape, "ko"), "ko") == (
        text("ko", "kernels.s.traffic.standard_more", label=text("ko", "kernels.shape.label", b="1", h="1", q="128",
        k="128", d="16", mask=text("ko", "kernels.shape.causal"), dtype="float32"), s="288 KiB", x="8.9×",
        t="32.5 KiB"))
    assert held_caption(r, traffic, "ko") == (
        text("ko", "kernels.s.held.part", name="eager", x="16.0", what=text("ko", "kernels.held.eager"),
        peak="1 MiB", model="64 KiB") + text("ko", "clause.sep") + text("ko", "kernels.s.held.part", name="FLASH",
        x="1.0", what=text("ko", "kernels.held.flash"), peak="16 KiB", model="16.5 KiB") + "." + text("ko",
        "kernels.s.held.tail"))


def test_over_the_cap_and_why_not_in_korean():
    with pytest.raises(Refusal) as info:
        check_shape(AttentionShape(heads=64, seq_len=4096), Limits("cpu", 1 << 24, 1 << 33, 3 << 30))
    assert info.value.msg == Msg("kernels.err.entries", b=1, h=64, nq=4096, nk=4096, elems=1 << 30, cap=1 << 24,
                                 bits=24, bh=64, max_n=512)  # √(2^24 / 64)
    assert why(info.value, "ko") == (
        text("ko", "kernels.err.entries", b="1", h="64", nq=4096, nk=4096, elems=1073741824, cap=16777216, bits="24",
        bh="64", max_n=512))
    from sim.words.catalog import catalog

    missing = Msg("kernels.why.flex_missing", error="No module named x")
    assert reason_text(missing, PSEUDO) == "kernels.why.flex_missing(error=No module named x)"
    assert reason_text(missing, "ko") == catalog("ko")["kernels.why.flex_missing"].format(error="No module named x") == \
        "이 torch에는 FlexAttention이 없다 (No module named x)"
    # a CUDA-only backend on a CPU: the probe's reason is the message value, worded in either language; torch's own
    # messages stay as torch wrote them (no English is compared to find a key)
    assert reason_text(Msg("home.why.cpu_only"), "ko") == "torch에는 이 백엔드의 CPU 커널이 없다 (CUDA 전용)"
    assert reason_text(Msg("home.why.cpu_only"), PSEUDO) == "home.why.cpu_only"
    assert reason_text(text("en", "home.why.cpu_only"), "ko") == text("en", "home.why.cpu_only")
    assert reason_text("CUDA error: no kernel image", "ko") == "CUDA error: no kernel image"  # torch's own words


# --- the pages in Korean ------------------------------------------------------------------------------------------

def _korean_ok(at, label: str) -> float:
    assert not at.exception, (label, at.exception)
    assert not at.error and not at.warning, (label, [e.value for e in [*at.error, *at.warning]])
    share = hangul_share(rendered_text(at))
    assert share >= 0.60, (label, share)
    return share


@pytest.mark.parametrize("tab", TAB_SLUGS)
def test_every_roofline_tab_renders_in_korean(tab):
    params = {"lang": "ko", "tab": tab}
    if tab == "machine":
        params.update(gpu="this-machine", model="tiny-mha", context="128")
    at = run_page("roofline", params, timeout=300)
    _korean_ok(at, tab)
    assert at.query_params["tab"] == tab
    assert at.title[0].value == "루프라인"
    if tab == "machine":
        next(b for b in at.button if b.label == "여기서 작은 모델의 디코딩 스텝 재기").click().run()
        _korean_ok(at, "machine, measured")
        assert any("실제로는 **" in m.value for m in at.markdown)


def test_roofline_keeps_its_tab_when_the_language_changes():
    at = run_in_app("roofline", {"tab": "batching"})
    assert not at.exception and at.session_state[TABS.widget_key] == "Batching"
    at.radio(key="lang").set_value("ko").run()
    assert not at.exception and at.query_params["tab"] == "batching"
    assert at.session_state[TABS.widget_key] == "배치" and at.subheader[0].value == "배치: 가중치는 함께 쓰고, 캐시는 저마다"


def test_attention_kernels_timing_and_sweep_in_korean():
    at = run_page("attention_kernels", {"lang": "ko", "n": "128", "h": "1", "d": "16", "threads": "1",
                                        "sweep_max": "256"}, timeout=300)
    _korean_ok(at, "default")
    next(b for b in at.button if b.label == "이 커널들 시간 재기").click().run()
    _korean_ok(at, "timed")
    at.session_state[LazyTabs("attention_kernels", {}).widget_key] = "N에 따른 스윕"  # what a click on the tab sends
    at.run()
    next(b for b in at.button if b.label == "스윕 돌리기").click().run()
    _korean_ok(at, "sweep")
    sweep = at.session_state["ak_sweep"]
    assert sweep.lengths == [128, 256]
    ratio = next(m.value for m in at.metric if m.label == "N = 256에서 FLASH 대 eager 시간")
    at.session_state[LazyTabs("attention_kernels", {}).widget_key] = "시드 글의 숫자"
    at.run()
    _korean_ok(at, "claims")
    speed = at.table[-1].value.loc["FlashAttention: 24× wall-clock on A100, 510× on H100 in FP8"]
    said = " ".join(str(v) for v in speed.values)
    assert "이 페이지에서 cpu의 N = 256으로 잰 값: " in said
    if ratio not in ("1.0×", "0.9×"):  # faster or slower by the metric's own ratio
        assert f"FLASH가 eager보다 {ratio} 빠르다 (중앙값)." in said or "느리다 (중앙값)." in said


def test_traffic_legend_words_each_part_from_its_id_in_either_language(monkeypatch):
    """hbm_traffic names its parts by catalog ids; the legend is the catalog's word in each language (no English
    part name is read back), so Korean stays the same whatever the English says."""
    from app.figures.kernels import traffic_bars
    from sim.attention.online_softmax import hbm_traffic
    from sim.words.catalog import catalog

    t = hbm_traffic(1, 2, 64, 64, 16, 2, 16, 16, causal=True)
    assert list(t.standard_parts) == ["read_q_k", "write_s", "read_s", "write_p", "read_p", "read_v", "write_o"]
    assert list(t.tiled_parts) == ["read_q", "read_k", "read_v", "write_o", "write_row_stats"]
    parts = dict.fromkeys([*t.standard_parts, *t.tiled_parts])

    def legend(lang):
        return [tr.name for tr in traffic_bars(t, "title", lang).data if tr.showlegend]

    assert legend("en") == [catalog("en")[f"kernels.fig.part.{p}"] for p in parts]
    assert legend("en")[:2] == ["read Q, K", "write S"]
    korean = legend("ko")
    assert korean == [catalog("ko")[f"kernels.fig.part.{p}"] for p in parts]
    for p in parts:
        monkeypatch.setitem(catalog("en"), f"kernels.fig.part.{p}", "REWORDED")
    assert legend("ko") == korean


def test_flex_reasons_are_message_values_and_the_csv_words_them_in_english(monkeypatch):
    """FlexAttention's reasons are message values; the timing CSV words them in English and Korean reads only the
    Korean catalog (an English rewording changes no Korean)."""
    from sim.attention.measure import KernelTiming
    from sim.msg import Msg
    from sim.words.attention import timing_frame
    from sim.words.catalog import catalog

    result = fake_result(64)
    why = Msg("kernels.why.flex_device", device="mps")
    result = type(result)(**{**result.__dict__, "rows": (*result.rows, KernelTiming("flex", "unavailable", why))})
    frame = timing_frame(result)
    assert frame["reason"].tolist()[-2:] == ["not built for CPU", text("en", "kernels.why.flex_device", device="mps")]
    assert all(isinstance(r, str) for r in frame["reason"])
    korean = reason_text(why, "ko")
    monkeypatch.setitem(catalog("en"), "kernels.why.flex_device", "REWORDED {device}")
    assert reason_text(why, "ko") == korean == catalog("ko")["kernels.why.flex_device"].format(device="mps")
    assert timing_frame(result)["reason"].iloc[-1] == "REWORDED mps"  # the CSV follows the English catalog


def test_how_peaks_were_measured_is_a_message_value_worded_per_language(monkeypatch):
    from sim.attention.measure import memory_method
    from sim.words.attention import memory_method_text
    from sim.words.catalog import catalog

    result = fake_result(64)
    result = type(result)(**{**result.__dict__, "memory_method": memory_method("cuda")})
    assert memory_method("cuda") == Msg("kernels.method.cuda") and memory_method("cpu") == Msg("kernels.method.cpu")
    korean = memory_method_text(result, "ko")
    assert korean == catalog("ko")["kernels.method.cuda"]
    assert memory_method_text(result) == catalog("en")["kernels.method.cuda"]
    monkeypatch.setitem(catalog("en"), "kernels.method.cuda", "REWORDED")
    assert memory_method_text(result, "ko") == korean
