"""Seed 001's "FP8 or INT8 halves the memory": INT8 KIVI's ratio is per request, never against an FP16 total
already cut to the requests that fit (issue 38's audit)."""

from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.words.quant_claims import bandwidth_claims


def test_int8_kivi_is_0_563_of_fp16_at_32k_tokens_for_llama_8b():
    # by hand, Llama 3.1 8B: 32 layers, 8 K/V heads of 128, 32,768 tokens, one request
    fp16 = 2 * 32 * 8 * 128 * 2 * 32768
    assert fp16 == 4_294_967_296
    # KIVI 8-bit, groups of 32, R = 128. K is quantized per channel a whole R-token block at a time: 32,768 is
    # a multiple of 128, so every K token is quantized. V is quantized per token, the last R = 128 kept FP16.
    k_tok, v_tok = 32768, 32768 - 128
    codes = (k_tok + v_tok) * 128  # one byte a value, per head and layer
    groups = (k_tok // 32) * 128 + v_tok * (128 // 32)
    scales_zeros = groups * (2 + 2)  # an fp16 scale and an fp16 zero point a group
    full = 128 * 128 * 2  # V's last 128 tokens, FP16
    int8 = (codes + scales_zeros + full) * 32 * 8
    assert int8 == 2_419_589_120
    _speed, memory = bandwidth_claims(load_presets()["llama-3.1-8b"], load_gpus()["h100-sxm"])
    assert "0.563" in memory.computed and "12.7%" in memory.why
    assert f"{int8 / fp16:.3f}" == "0.563" and f"{int8 / fp16 / 0.5 - 1:.1%}" == "12.7%"
