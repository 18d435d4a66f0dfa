"""Closed-form counts, checked against numbers worked out by hand."""

import pytest

from sim.cost.opcount import generation_flops, kv_cache_bytes, param_counts, step_bytes, step_flops
from sim.model.transformer import PRESETS

MHA, MQA = PRESETS["mha"], PRESETS["mqa"]


def test_one_cached_step_by_hand():
    # d=128, L=4, H=4, Hkv=4, D=32, d_ff=384, V=256; one new token against 100 keys
    f = step_flops(MHA, num_new=1, kv_len=100)
    assert f["qkv_proj"] == 4 * 2 * 128 * (128 + 2 * 128)  # 393,216
    assert f["attn_scores"] == 4 * 2 * 4 * 100 * 32  # 102,400: grows with N
    assert f["attn_v"] == 102_400
    assert f["out_proj"] == 4 * 2 * 128 * 128  # 131,072
    assert f["mlp"] == 4 * 2 * 3 * 128 * 384  # 1,179,648
    assert f["lm_head"] == 2 * 128 * 256  # 65,536


def test_mqa_shrinks_only_the_kv_projection():
    a, b = step_flops(MHA, 1, 50), step_flops(MQA, 1, 50)
    assert a["qkv_proj"] - b["qkv_proj"] == 4 * 2 * 128 * 2 * (128 - 32)
    assert {k: v for k, v in a.items() if k != "qkv_proj"} == {k: v for k, v in b.items() if k != "qkv_proj"}


def test_seed_002_hundred_token_example():
    """Seed 002: generating 100 tokens naively computes K/V for 1+2+…+100 = 5,050 token
    positions; with a cache, 100."""
    for mode, expected in (("naive", 5050), ("cached", 100)):
        steps = generation_flops(MHA, prompt_len=1, num_new_tokens=100, mode=mode)
        per_token_qkv = step_flops(MHA, 1, 1)["qkv_proj"]
        assert sum(s["qkv_proj"] for s in steps) == expected * per_token_qkv


def test_naive_attention_grows_cubically_cached_quadratically():
    def attn_total(mode, n):
        return sum(s["attn_scores"] for s in generation_flops(MHA, 1, n, mode))

    # naive: sum_{k=1..n} k^2 ; cached: 1 + sum_{k=2..n} k  (scaled by 2·L·H·D = 1024)
    n = 64
    assert attn_total("naive", n) == 1024 * n * (n + 1) * (2 * n + 1) // 6
    assert attn_total("cached", n) == 1024 * (n * (n + 1) // 2)


def test_bytes():
    pc = param_counts(MHA)
    assert pc["layers"] == 4 * (128 * 384 + 128 * 128 + 3 * 128 * 384 + 256)
    assert kv_cache_bytes(MHA, 1, 4) == 2 * 4 * 4 * 32 * 4  # 4 KiB per token in fp32
    assert kv_cache_bytes(MQA, 1, 2) == 2 * 4 * 1 * 32 * 2
    b = step_bytes(MHA, 1, 10, 4, cached=True)
    assert b["kv"] == 10 * 4096
    assert step_bytes(MHA, 10, 10, 4, cached=False)["kv"] == 0


def test_bad_step_shape():
    with pytest.raises(ValueError, match="num_new=5, kv_len=3"):
        step_flops(MHA, 5, 3)


@pytest.mark.parametrize("prompt_len,new", [(1, 1), (1, 100), (7, 33), (50, 2)])
@pytest.mark.parametrize("mode", ["naive", "cached"])
def test_closed_form_totals_equal_the_step_sum(prompt_len, new, mode):
    from sim.cost.opcount import generation_totals

    for cfg in (MHA, MQA):
        steps = generation_flops(cfg, prompt_len, new, mode)
        summed = {p: sum(s[p] for s in steps) for p in steps[0]}
        assert generation_totals(cfg, prompt_len, new, mode) == summed
