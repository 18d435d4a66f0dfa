"""FP8 with vLLM's scale convention (stored fp8(x / scale), read × scale), per-tensor or per-head, calibrated per
layer; and the measurement that says whether a scale is why FP8 costs more than INT8."""

import pytest
import torch

from sim.model.quant import FP8_FORMATS, QuantSpec, fake_quantize, fp8_round, quantize, quantize_with_values
from sim.model.quant_cache import QuantizedKVCache, make_scheme
from sim.model.quant_errors import EvalConfig, heldout_windows
from sim.model.quant_forward import cache_logits, teacher_forced_logits
from sim.model.quant_fp8 import calibrated, calibration_ids, fp8_scale_check, kv_of
from sim.model.transformer import load_model
from sim.msg import Msg
from sim.words import say
from tests.test_quant import random_model


def test_scale_one_is_the_plain_cast_bit_for_bit():
    """The lab's FP8 cache (vLLM's default, scale 1.0) stores exactly what the unscaled cast did: the recorded
    real-model grid's FP8 cells stay valid."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 17, 8) * 5
    for kind in FP8_FORMATS:
        spec = QuantSpec(kind=kind, bits=8, axis="token", group_size=1)
        assert torch.equal(fake_quantize(x, spec), fp8_round(x, kind))
        q, deq = quantize_with_values(x, spec)
        assert torch.equal(deq, fp8_round(x, kind)) and torch.equal(q.dequantize(), deq)


def test_a_scale_divides_before_the_cast_and_multiplies_after():
    x = torch.tensor([[[1.0, 3.0, -1000.0, 0.001]]])  # (1, 1, 4)
    spec = QuantSpec(kind="e4m3", bits=8, axis="token", group_size=1, scale=0.5)
    q = quantize(x, spec)
    assert q.values.tolist() == fp8_round(x / 0.5, "e4m3").tolist()  # what the cache stores: fp8 numbers
    assert q.dequantize().tolist() == [[[1.0, 3.0, -224.0, 0.0009765625]]]  # -2000 saturates at -448 → × 0.5
    assert q.nbytes == 4  # a scale is the layer's constant, not the cache's: one byte a value
    # per head: heads on dim -3, one scale each
    xh = torch.tensor([[[[10.0]], [[10.0]]]])  # (1, 2, 1, 1)
    per_head = fake_quantize(xh, QuantSpec(kind="e4m3", bits=8, axis="token", group_size=1, scale=(1.0, 1 / 128)))
    assert per_head.flatten().tolist() == [10.0, 3.5]  # 10 × 128 = 1,280 saturates at 448 → ÷ 128
    with pytest.raises(ValueError, match="2 per-head scales"):
        fake_quantize(torch.ones(1, 3, 2, 2), QuantSpec(kind="e4m3", bits=8, axis="token", group_size=1, scale=(1.0, 2.0)))
    for bad in (0.0, -1.0, float("nan"), (), (1.0, 0.0)):
        with pytest.raises(ValueError, match="scale"):
            QuantSpec(kind="e4m3", bits=8, axis="token", group_size=1, scale=bad)
    with pytest.raises(ValueError, match="FP8 only"):
        QuantSpec(kind="int", bits=4, axis="token", group_size=32, scale=2.0)


def test_a_power_of_two_scale_changes_no_normal_values_relative_rounding():
    """Why a scale cannot rescue FP8 on values inside its range: ×2^k moves the exponent only."""
    torch.manual_seed(1)
    x = (torch.rand(1, 1, 64, 8) + 0.1) * 4  # every value well inside e4m3's normal range, before and after
    plain = fake_quantize(x, QuantSpec(kind="e4m3", bits=8, axis="token", group_size=1))
    scaled = fake_quantize(x, QuantSpec(kind="e4m3", bits=8, axis="token", group_size=1, scale=1 / 16))
    assert torch.equal(plain, scaled)


def test_calibrated_scales_reach_every_layer_and_both_paths_agree():
    """Per-layer calibrated scales: the one-pass teacher-forced logits equal the token-by-token cache's, and the
    cache's stores hold each layer's own scales."""
    torch.manual_seed(5)
    model = random_model(2)
    ids = torch.randint(0, 256, (1, 40))
    kv = kv_of(model, torch.randint(0, 256, (1, 64)))
    base = make_scheme("fp8_e4m3")
    for per in ("tensor", "head"):
        scheme = calibrated(base, kv, per)
        assert len(scheme.layer_scales) == model.cfg.n_layers
        k0 = kv[0][0]
        want = float(k0.abs().max()) / 448 if per == "tensor" else tuple(
            float(a) / 448 for a in k0.abs().amax(dim=(0, 2, 3)))
        assert scheme.layer_scales[0][0] == want
        cache = QuantizedKVCache(model.cfg, scheme=scheme, batch_size=1, max_seq_len=40)
        assert [s[0].spec.scale for s in cache.stores] == [ks for ks, _ in scheme.layer_scales]
        assert torch.allclose(teacher_forced_logits(model, ids, scheme, prefill_len=7), cache_logits(model, ids, scheme, prefill_len=7),
                              atol=2e-3)
    assert calibrated(base, kv, "one") is base
    with pytest.raises(ValueError, match="only an FP8 scheme"):
        calibrated(make_scheme("kivi", bits=4), kv, "tensor")
    with pytest.raises(ValueError, match="layers"):
        QuantizedKVCache(model.cfg, scheme=calibrated(base, kv[:1], "tensor"), batch_size=1, max_seq_len=40)


def test_calibration_text_is_training_text_not_the_held_out_windows():
    from sim.model.train import load_corpus

    train, val = load_corpus()
    ids = calibration_ids(256)
    assert torch.equal(ids[0], train[:256])
    with pytest.raises(ValueError, match="calibrate on"):
        calibration_ids(8)


def test_scale_check_on_the_tiny_model():
    """The measurement the page shows: every row's numbers are the ones the sim computes, and its sentence says
    whether a calibrated scale moved FP8's KL by more than 3× (the seed claims' threshold for a real gap)."""
    model = load_model("mha")
    windows = heldout_windows(EvalConfig(1, 128))
    check = fp8_scale_check(model, windows, calib_ids=calibration_ids(256))
    assert [r.key for r in check.rows] == ["one", "tensor", "head", "int8"]
    assert check.num_tokens == 128 and check.calibration_tokens == 256
    one, i8 = check.row("one"), check.row("int8")
    # scale 1.0 is the lab's FP8 cache: the same teacher-forced numbers as the page's FP8 row
    from sim.model.quant_errors import evaluate_scheme

    plain = evaluate_scheme(model, windows, make_scheme("fp8_e4m3"))
    assert one.kl == plain.mean_kl and one.agreement == plain.mean_agreement
    # e4m3's 3 mantissa bits: an error of at most 1/16 of each normal value; INT8 with group scales is finer
    assert 0 < one.k_error < 1 / 16 and 0 < one.v_error < 1 / 16
    assert i8.k_error < one.k_error and i8.v_error < one.v_error
    assert 0 <= check.below_normal < 1 and check.above_max == 0.0
    ratio = max(r.kl for r in check.rows[:3]) / min(r.kl for r in check.rows[:3])
    assert check.scale_matters == (ratio > 3)
    msg = check.sentence()
    assert isinstance(msg, Msg) and msg.fields["one_kl"] == one.kl and msg.fields["i8_kl"] == i8.kl
    for lang in ("en", "ko"):
        words = say(lang, msg)
        assert "0.24.0" in words and f"{one.kl:.1e}" in words
    rows = check.frame_rows()
    assert [r["kl"] for r in rows] == [r.kl for r in check.rows]
