"""Roofline numbers worked out by hand."""

from dataclasses import replace

import pytest

from sim.cost.arch import estimate_num_params
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import (
    Hardware,
    RooflineConfig,
    batch_sweep,
    decode_step,
    hardware,
    memory_bound_until,
    prefill_step,
    what_helps,
)
from sim.model.probe import probe_machine
from sim.words import say
from sim.words.catalog import PSEUDO
from sim.words.roofline import tiny_verdict, trend_verdict

P = load_presets()
G = load_gpus()


def test_ridge_points_are_peak_over_bandwidth():
    for gpu in G.values():
        hw = hardware(gpu, "bf16")
        assert hw.ridge == pytest.approx(gpu.bf16_dense_tflops * 1e12 / gpu.bandwidth_bytes_per_s, rel=1e-12)
    assert hardware(G["h100-sxm"]).ridge == pytest.approx(989e12 / 3.35e12)  # ≈ 295: seed 000's "about 300"


def test_seed_000_70b_decode_is_about_one_flop_per_byte():
    """Seed 000: a 70B decode step reads ~140 GB of weights for ~140 billion operations."""
    arch = P["llama-3.1-70b"]
    c = decode_step(RooflineConfig(arch, batch=1, context=1))
    params = estimate_num_params(arch)
    assert c.bytes_weights == params * 2  # bf16 weights, every one read once
    matmul_params = params - arch.vocab_size * arch.d_model  # the input embedding is a gather
    assert c.flops_linear == 2 * matmul_params
    assert 135e9 < c.flops < 145e9 and 135e9 < c.bytes < 145e9
    assert c.intensity == pytest.approx(0.98, abs=0.01)
    assert c.bound(hardware(G["h100-sxm"])) == "memory"


def test_decode_by_hand_on_a_toy_shape():
    """Tiny MHA preset (d=128, L=4, H=4, D=32, ff=384, V=256), batch 2, 100 cached tokens, fp16 KV."""
    arch = P["tiny-mha"]
    c = decode_step(RooflineConfig(arch, batch=2, context=100, weight_dtype="fp32", kv_dtype="fp16"))
    per_layer = 4 * 128 * 128 + 3 * 128 * 384  # q, k, v, o + gate, up, down
    assert c.flops_linear == 2 * 2 * (4 * per_layer + 256 * 128)  # layers + LM head, per request
    assert c.flops_attention == 2 * (2 * 4 * 100 * (32 + 32)) * 4  # batch · (2·H·S·(Dk+Dv)) · layers
    assert c.bytes_kv == 2 * 100 * (2 * 4 * 4 * 32 * 2)  # batch · S · (K+V · layers · heads · D · 2 bytes)
    assert c.bytes_weights == (4 * per_layer + 2 * 256 * 128) * 4
    hw = Hardware("toy", peak_flops=1e12, bandwidth=1e11)
    assert c.time(hw) == max(c.flops / 1e12, c.bytes / 1e11)


def test_prefill_attention_is_half_the_square():
    arch = P["tiny-gqa"]
    c = prefill_step(RooflineConfig(arch, batch=1, context=10))
    assert c.flops_attention == 2 * 4 * (32 + 32) * 4 * (10 * 11 // 2)


def test_sliding_window_caps_decode_attention():
    arch = P["mistral-7b-v0.1"]
    assert arch.sliding_window == 4096
    short = decode_step(RooflineConfig(arch, context=4096)).flops_attention
    long = decode_step(RooflineConfig(arch, context=32768)).flops_attention
    assert short == long


def test_batching_shares_weights_not_kv():
    base = RooflineConfig(P["llama-3.1-8b"], batch=1, context=1024)
    one, many = decode_step(base), decode_step(replace(base, batch=64))
    assert many.bytes_weights == one.bytes_weights
    assert many.bytes_kv == 64 * one.bytes_kv
    hw = hardware(G["h100-sxm"])
    # long contexts never turn compute-bound: KV bytes grow with the batch as fast as FLOPs
    assert memory_bound_until(replace(base, context=32768), hw) is None
    b = memory_bound_until(replace(base, context=128), hw)
    assert b is not None and decode_step(replace(base, batch=b, context=128)).bound(hw) == "compute"
    assert decode_step(replace(base, batch=b - 1, context=128)).bound(hw) == "memory"
    sweep = batch_sweep(base, hw, [1, 8, 64], [128, 32768])
    assert [p.batch for p in sweep] == [1, 8, 64, 1, 8, 64]
    assert sweep[2].tokens_per_s > sweep[0].tokens_per_s


def test_moe_reads_only_the_experts_it_touches():
    arch = P["mixtral-8x7b"]
    one = decode_step(RooflineConfig(arch, batch=1, context=1))
    many = decode_step(RooflineConfig(arch, batch=4096, context=1))
    assert one.bytes_weights < many.bytes_weights <= estimate_num_params(arch) * 2


def test_levers_each_help():
    cfg = RooflineConfig(P["llama-3.1-8b"], batch=1, context=8192)
    levers = what_helps(cfg, hardware(G["h100-sxm"]))
    base = levers[0]
    for lv in levers[1:]:
        assert lv.tokens_per_s > base.tokens_per_s, lv.name


def test_bad_inputs():
    with pytest.raises(ValueError, match="batch must be 1..4,096, got 0"):
        RooflineConfig(P["gpt2"], batch=0)
    with pytest.raises(ValueError, match="has no dense FP8"):
        hardware(G["a100-80gb"], "fp8")


def test_machine_probe_measures_positive_figures():
    probe = probe_machine(device="cpu", copy_mib=8, matmul_n=128, repeats=2)
    assert probe.bandwidth > 0 and probe.peak_flops > 0 and (probe.copy_mib, probe.matmul_n, probe.repeats) == (8, 128, 2)
    assert say(PSEUDO, probe.method) == f"roofline.s.method(mib=8, moved=16, reps=2, n=128, dtype={probe.dtype}, reps_mm=2)"
    assert say("ko", probe.method) == ("대역폭: fp32 8 MiB 복사 (읽기 + 쓰기 = 16 MiB 이동), 2회 중 최고; 연산: "
                                       f"{probe.dtype}로 128×128 @ 128×128, 2·n³ FLOPs, 2회 중 최고")
    assert not {"bandwidth", "copy", "compute", "best"} & set(say("ko", probe.method).split())  # nothing read back
    with pytest.raises(ValueError, match="probe sizes out of range"):
        probe_machine(device="cpu", copy_mib=0)


def test_fp8_ridge_doubles_on_hopper():
    assert hardware(G["h100-sxm"], "fp8").ridge == pytest.approx(1979e12 / 3.35e12)


def test_the_context_trend_sentence_follows_the_numbers():
    from sim.cost.presets import load_presets
    from sim.cost.roofline import ContextTrend, context_trend

    p = load_presets()
    gqa = context_trend(p["llama-3.1-70b"])  # 8 query heads per K/V head: each cached byte feeds 8 heads
    assert gqa.long > 2 * gqa.short and gqa.group == 8
    assert f"rises as context grows ({gqa.short:.2f} at 1 token, {gqa.long:.2f} at 131,072 tokens)" in trend_verdict(gqa)
    mha = context_trend(p["llama-2-7b"])  # one query head per K/V head: a cached byte is read for ~1 FLOP
    assert "stays about there" in trend_verdict(mha) and "rises" not in trend_verdict(mha)
    falling = ContextTrend(1, 4096, 1.0, 0.5, 1)
    assert trend_verdict(falling, lang=PSEUDO) == (
        'roofline.s.trend.verdict(way=roofline.s.trend.falls(short=1.00, '
        'at_short=roofline.s.trend.token(n=1), long=0.50, '
        'at_long=roofline.s.trend.tokens(n=4,096)))')


def test_the_pages_tables_and_sentences():
    from sim.cost.roofline import TinyDecodePoint
    from sim.words.roofline import levers_frame, steps_frame, turning_points

    cfg, hw = RooflineConfig(P["llama-3.1-70b"], 1, 4096), hardware(G["h100-sxm"])
    dec, pre = decode_step(cfg), prefill_step(cfg)
    table = steps_frame([pre, dec], hw)
    assert table["Step"].tolist() == ["prefill", "decode"] and table["Bound"].tolist() == ["compute", "memory"]
    assert table["Memory time (ms)"].tolist() == [pre.bytes / hw.bandwidth * 1e3, dec.bytes / hw.bandwidth * 1e3]
    levers = what_helps(cfg, hw)
    shown = levers_frame(levers)
    assert shown["vs as chosen"].iloc[0] == "1.00×" and shown["Change"].tolist() == [say("en", x.name) for x in levers]
    assert turning_points({512: 64, 131072: None}, lang=PSEUDO) == 'roofline.s.turn.from(S=512, b=64) · roofline.s.turn.never(S=131,072)'
    # 2 MB and 1 MFLOP per step; the roof allows 50 µs, it took 500 µs: 10% of the roof, 120 operations
    tp = TinyDecodePoint(2e6, 1e6, 500e-6, 50e-6, 120, 0.5, 2e9, 1e9)
    assert tiny_verdict(tp, lang=PSEUDO) == (
        'roofline.s.tiny.said(mb=2.00, mflop=1.00, predicted=50, measured=500, '
        'share=10.0%)roofline.s.tiny.launch(ops=120)')
