"""KV memory calculator: exact byte counts worked out by hand, config.json parsing (good, missing,
hostile), GPU capacity, the seeds' claims, and measured == formula on the real tiny model."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.claims import Verdict
from sim.cost.arch import ArchPreset, estimate_active_params, estimate_num_params
from sim.cost.capacity import GpuConfig, capacity, dtype_table, max_context
from sim.cost.gpus import load_gpus
from sim.cost.hf_config import parse_hf_config, parse_hf_config_with_notes
from sim.cost.memory import (
    GROUP_SIZES,
    KV_DTYPES,
    GiB,
    MemoryConfig,
    fmt_bytes,
    fmt_decimal,
    kv_grid,
    kv_memory,
    request_bytes,
    token_layer_bytes,
    variant_curves,
    vector_bytes,
    weight_bytes,
)
from sim.cost.presets import MODELS_JSON, load_presets, tiny_model_configs
from sim.model.measure import measure_tiny_cache, untrained_tiny_model
from sim.msg import Msg
from sim.words.kv_claims import seed_claims

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"
P = load_presets()
G = load_gpus()


def _en(notes):
    """The parser's notes (message values) in English, as the command line prints them."""
    from sim.words import say

    return [say("en", n) for n in notes]



def kv(key_or_arch, context, batch=1, dtype="fp16", **kw) -> int:
    arch = P[key_or_arch] if isinstance(key_or_arch, str) else key_or_arch
    return kv_memory(MemoryConfig(arch, batch=batch, context=context, kv_dtype=dtype, **kw)).total_bytes


def per_token(key, dtype="fp16", **kw) -> int:
    return kv_memory(MemoryConfig(P[key], context=1, kv_dtype=dtype, **kw)).bytes_per_token


# --- presets -----------------------------------------------------------------------------------


def test_presets_cover_the_issue_and_carry_sources():
    wanted = {"llama-2-7b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mistral-7b-v0.1", "mixtral-8x7b",
              "qwen2.5-7b", "qwen2.5-72b", "gemma-2-9b", "deepseek-v2-lite", "deepseek-v3", "falcon-7b", "gpt2",
              "tiny-mha", "tiny-gqa", "tiny-mqa"}
    assert wanted <= set(P)
    for key, p in P.items():
        assert p.key == key and p.source, key
        if not key.startswith("tiny-"):
            assert p.source.startswith("https://huggingface.co/"), key
    kinds = {k: P[k].attention for k in ("llama-2-7b", "llama-3.1-8b", "falcon-7b", "deepseek-v3", "gpt2")}
    assert kinds == {"llama-2-7b": "MHA", "llama-3.1-8b": "GQA", "falcon-7b": "MQA", "deepseek-v3": "MLA", "gpt2": "MHA"}


def test_preset_shapes_are_the_published_ones():
    p = P["llama-3.1-70b"]
    assert (p.n_layers, p.d_model, p.n_heads, p.n_kv_heads, p.head_dim, p.d_ff, p.vocab_size) == \
        (80, 8192, 64, 8, 128, 28672, 128256)
    g2 = P["gemma-2-9b"]
    assert (g2.head_dim, g2.sliding_window, g2.layer_pattern, g2.num_local_layers, g2.num_global_layers) == \
        (256, 4096, "LG", 21, 21)
    assert g2.layer_kinds[:4] == ("L", "G", "L", "G")  # even layers local, as transformers' Gemma2
    g3 = P["gemma-3-27b"]
    assert g3.layer_pattern == "LLLLLG" and g3.num_global_layers == 10
    assert [i for i, k in enumerate(g3.layer_kinds) if k == "G"] == list(range(5, 62, 6))
    m = P["mistral-7b-v0.1"]
    assert m.sliding_window == 4096 and m.num_local_layers == 32
    assert P["qwen2.5-7b"].sliding_window == 0  # use_sliding_window is false in the file
    assert P["mixtral-8x7b"].sliding_window == 0 and P["mixtral-8x7b"].num_experts == 8
    ds = P["deepseek-v3"]
    assert (ds.kv_lora_rank, ds.qk_rope_head_dim, ds.head_dim, ds.v_dim, ds.q_lora_rank) == (512, 64, 192, 128, 1536)
    assert P["falcon-7b"].n_kv_heads == 1 and P["falcon-7b"].head_dim == 64


def test_tiny_presets_read_without_torch_match_sim_model():
    from dataclasses import asdict

    from sim.model.transformer import PRESETS

    assert tiny_model_configs() == {k: asdict(v) for k, v in PRESETS.items()}
    for name, cfg in PRESETS.items():
        p = P[f"tiny-{name}"]
        assert (p.n_layers, p.n_heads, p.n_kv_heads, p.head_dim, p.max_position_embeddings) == \
            (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.max_seq_len)
        assert p.attention == cfg.attention_kind


def test_parameter_estimates_match_model_cards():
    # Llama 3.1 8B by hand: embeddings 2 · 128256 · 4096 = 1,050,673,152; per layer
    # q 4096² + k,v 2 · 4096 · 1024 + o 4096² + MLP 3 · 4096 · 14336 = 218,103,808, × 32 layers.
    assert estimate_num_params(P["llama-3.1-8b"]) == 1_050_673_152 + 32 * 218_103_808 == 8_029_995_008
    # Mixtral: 8 experts of 3 · 4096 · 14336 plus a 4096 × 8 router per layer; 2 experts active.
    attn = 2 * 4096 * 4096 + 2 * 4096 * 1024
    emb = 2 * 32000 * 4096
    assert estimate_num_params(P["mixtral-8x7b"]) == 32 * (attn + 8 * 3 * 4096 * 14336 + 4096 * 8) + emb
    assert estimate_active_params(P["mixtral-8x7b"]) == 32 * (attn + 2 * 3 * 4096 * 14336 + 4096 * 8) + emb
    entries = {e["key"]: e for e in json.loads(MODELS_JSON.read_text())["models"]}
    for key, p in P.items():
        if p.params_card:
            tolerance = entries[key].get("params_card_tolerance", 0.01)
            if tolerance > 0.01:  # wider only where the data says what the card counts that we leave out
                assert entries[key]["params_card_includes"], key
            assert abs(estimate_num_params(p) / (p.params_card * 1e9) - 1) < tolerance, key


# --- exact byte counts -------------------------------------------------------------------------


def test_llama_31_8b_seed_001_numbers():
    # 2 (K, V) · 8 KV heads · 128 · 2 B = 4,096 B per layer; × 32 layers = 131,072 B = 128 KiB per token
    m = kv_memory(MemoryConfig(P["llama-3.1-8b"], batch=16, context=32768))
    assert (m.bytes_per_token_per_layer, m.bytes_per_token) == (4096, 131_072)
    assert m.per_request_bytes == 131_072 * 32768 == 4 * GiB
    assert m.total_bytes == 64 * GiB == 68_719_476_736
    assert [s.bytes for s in m.steps] == [None, 4096, 131_072, 4 * GiB, 64 * GiB]
    assert m.steps[1].math == Msg("kvf.math.k_and_v", h=8, d=128, p=2, b=4096)
    assert m.steps[-1].math == Msg("kvf.math.all", per=4 * GiB, batch=16, b=64 * GiB, readable="64 GiB")
    assert [s.what.key for s in m.steps] == ["kvf.what.value", "kvf.what.token_layer", "kvf.what.token_all",
                                             "kvf.what.request", "kvf.what.all"]


@pytest.mark.parametrize("key, expected", [
    ("llama-2-7b", 2 * 32 * 128 * 2 * 32),  # MHA: 524,288
    ("llama-3.1-70b", 2 * 8 * 128 * 2 * 80),  # 327,680
    ("llama-3.1-405b", 2 * 8 * 128 * 2 * 126),  # 516,096
    ("qwen2.5-7b", 2 * 4 * 128 * 2 * 28),  # 57,344
    ("falcon-7b", 2 * 1 * 64 * 2 * 32),  # MQA: 8,192
    ("gpt2", 2 * 12 * 64 * 2 * 12),  # 36,864
    ("deepseek-v3", (512 + 64) * 2 * 61),  # MLA: 70,272 — no ×2 for K and V, no heads
    ("deepseek-v2-lite", (512 + 64) * 2 * 27),  # 31,104
    ("tiny-mha", 2 * 4 * 32 * 2 * 4), ("tiny-gqa", 2 * 2 * 32 * 2 * 4), ("tiny-mqa", 2 * 1 * 32 * 2 * 4),
])
def test_per_token_bytes_fp16(key, expected):
    assert per_token(key) == expected


def test_mla_counts_one_latent_per_layer():
    # DeepSeek-V3, 1,000 tokens, 2 requests: 61 layers · 576 values · 2 B · 1,000 · 2
    assert kv("deepseek-v3", 1000, batch=2) == 61 * 576 * 2 * 1000 * 2 == 140_544_000
    m = kv_memory(MemoryConfig(P["deepseek-v3"], context=1000))
    assert m.steps[1].math == Msg("kvf.math.mla", expr="(d_c + d_R) × p = (512 + 64) × 2", b=1152, heads=128)
    assert m.steps[1].what == Msg("kvf.what.token_layer_mla") and m.steps[1].bytes == 1152


def test_sliding_window_caps_the_cache():
    # Mistral 7B v0.1: every layer keeps at most 4,096 tokens of 4,096 B each.
    assert kv("mistral-7b-v0.1", 1000) == 32 * 1000 * 4096 == 131_072_000
    assert kv("mistral-7b-v0.1", 10_000, batch=3) == 32 * 4096 * 4096 * 3 == 1_610_612_736
    assert kv("mistral-7b-v0.1", 32_768) == kv("mistral-7b-v0.1", 4096)


def test_hybrid_local_global_layers():
    # Gemma 2 9B: 2 · 8 · 256 · 2 = 8,192 B per layer; 21 global layers keep all 8,192 tokens,
    # 21 local layers keep min(8,192, 4,096).
    assert token_layer_bytes(P["gemma-2-9b"]) == 8192
    assert kv("gemma-2-9b", 8192) == 21 * 8192 * 8192 + 21 * 4096 * 8192 == 2_113_929_216
    assert kv("gemma-2-9b", 2000) == 42 * 2000 * 8192 == 688_128_000  # below the window: all 42 layers
    # Gemma 3 27B: 2 · 16 · 128 · 2 = 8,192 B; 10 global layers at 32,768 tokens, 52 local at 1,024.
    assert kv("gemma-3-27b", 32768) == 10 * 32768 * 8192 + 52 * 1024 * 8192 == 3_120_562_176
    groups = kv_memory(MemoryConfig(P["gemma-3-27b"], context=32768)).groups
    assert [(g.kind, g.num_layers, g.tokens_kept) for g in groups] == [("G", 10, 32768), ("L", 52, 1024)]


def test_quantized_dtypes_with_group_overhead():
    # int4, g = 128: a 128-value head vector is 64 B of data + one group × (2 B scale + 2 B zero) = 68 B
    assert vector_bytes(128, "int4", 128) == 68
    assert per_token("llama-3.1-8b", "int4", group_size=128) == 32 * 2 * 8 * 68 == 34_816
    assert per_token("llama-3.1-8b", "int8", group_size=128) == 32 * 2 * 8 * (128 + 4) == 67_584
    assert per_token("llama-3.1-8b", "int2", group_size=32) == 32 * 2 * 8 * (32 + 4 * 4) == 24_576
    assert per_token("llama-3.1-8b", "fp8") == 65_536 and per_token("llama-3.1-8b", "fp32") == 262_144
    assert per_token("llama-3.1-8b", "bf16") == per_token("llama-3.1-8b", "fp16")
    # MLA latent of 576 values in int4, g = 64: 288 B + 9 groups × 4 B = 324 B per layer
    assert per_token("deepseek-v3", "int4", group_size=64) == 61 * 324
    # the group size matters only to integer formats
    assert per_token("llama-3.1-8b", "fp8", group_size=16) == per_token("llama-3.1-8b", "fp8", group_size=256)


def test_cross_layer_sharing():
    assert per_token("llama-3.1-8b", layers_per_kv=2) == 16 * 4096
    assert per_token("llama-3.1-8b", layers_per_kv=3) == 11 * 4096  # ⌈32 / 3⌉ layers store
    assert per_token("gemma-2-9b", layers_per_kv=2) == (11 + 11) * 8192  # per kind: ⌈21 / 2⌉ each


def test_formula_matches_opcount_for_tiny_models():
    from sim.cost.opcount import kv_cache_bytes
    from sim.model.transformer import PRESETS

    for name, cfg in PRESETS.items():
        for dtype, p in (("fp32", 4), ("fp16", 2)):
            assert kv(f"tiny-{name}", 777, batch=5, dtype=dtype) == kv_cache_bytes(cfg, 777, p, 5)


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(sorted(P)), batch=st.integers(1, 4096), context=st.integers(1, 1 << 20),
       dtype=st.sampled_from(list(KV_DTYPES)), group=st.sampled_from(GROUP_SIZES))
def test_invariants(key, batch, context, dtype, group):
    cfg = MemoryConfig(P[key], batch=batch, context=context, kv_dtype=dtype, group_size=group)
    m = kv_memory(cfg)
    assert m.total_bytes == batch * m.per_request_bytes == batch * request_bytes(cfg)
    tokens_part = m.per_request_bytes - m.state_bytes  # linear-attention / Mamba state is constant in S
    assert m.state_bytes == (kv_memory(replace(cfg, context=1)).state_bytes if P[key].num_state_layers else 0)
    assert tokens_part <= m.bytes_per_token * context  # windows only ever drop tokens
    if not P[key].sliding_window:
        assert tokens_part == m.bytes_per_token * context
    # growing never shrinks the peak (a chunked layer drops its chunk at a boundary: only its peak is monotone)
    assert request_bytes(cfg, context + 1, peak=True) >= request_bytes(cfg, peak=True) >= m.per_request_bytes
    assert m.steps[-1].bytes == m.total_bytes


def test_bad_inputs_raise_with_the_numbers():
    a = P["llama-3.1-8b"]
    with pytest.raises(ValueError, match="batch=0 is outside 1..65,536"):
        MemoryConfig(a, batch=0)
    with pytest.raises(ValueError, match="context=200,000,000 is outside"):
        MemoryConfig(a, context=200_000_000)
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        MemoryConfig(a, kv_dtype="fp4")
    with pytest.raises(ValueError, match="layers_per_kv=5 is outside 1..4"):
        MemoryConfig(P["tiny-mha"], layers_per_kv=5)
    with pytest.raises(ValueError, match="utilization must be within"):
        GpuConfig(G["h100-sxm"], utilization=1.5)
    with pytest.raises(ValueError, match="num_gpus=0"):
        GpuConfig(G["h100-sxm"], num_gpus=0)
    with pytest.raises(ValueError, match="not divisible by n_kv_heads=3"):
        replace(a, n_kv_heads=3, attention="")
    with pytest.raises(ValueError, match="contradicts the shape"):
        replace(a, attention="MHA")


# --- grids, variants, capacity ------------------------------------------------------------------


def test_grid_and_variants():
    cfg = MemoryConfig(P["llama-3.1-8b"], batch=4, context=1000)
    grid = kv_grid(cfg, batches=(1, 2, 4), contexts=(256, 1024))
    assert grid.total_bytes == ((256 * 131_072, 1024 * 131_072), (512 * 131_072, 2048 * 131_072),
                                (1024 * 131_072, 4096 * 131_072))
    df = grid.to_frame(kv_budget_bytes=100 * 2**20)
    assert len(df) == 6 and df["fits"].tolist() == [True, False, True, False, False, False]  # ≤ 100 MiB
    curves = variant_curves(cfg, contexts=(1000,))
    # MHA 32 heads, GQA 8, MQA 1, MLA with DeepSeek-V2's ratios (512 + 64 for head_dim 128)
    assert curves.name_to_token_bytes == {"MHA": 524_288, "GQA": 131_072, "MQA": 16_384, "MLA": 32 * 576 * 2}
    assert curves.name_to_bytes["GQA"] == (4 * 1000 * 131_072,)
    ds = variant_curves(MemoryConfig(P["deepseek-v3"]), contexts=(1,)).name_to_token_bytes
    assert ds["MLA"] == 70_272 and ds["MHA"] == 61 * 128 * (192 + 128) * 2


def test_capacity_llama_8b_on_h100():
    h100 = G["h100-sxm"]
    assert h100.memory_bytes == 80 * GiB and h100.bandwidth_bytes_per_s == 3_350 * 10**9
    cfg = MemoryConfig(P["llama-3.1-8b"], batch=16, context=32768)
    full = capacity(cfg, GpuConfig(h100, utilization=1.0, weight_dtype="fp16"))
    assert full.weight_bytes == 2 * 8_029_995_008
    assert full.kv_budget_bytes == 80 * GiB - 16_059_990_016 == 69_839_355_904
    assert full.max_requests == 16  # 69,839,355,904 // 4 GiB
    assert full.max_context == 69_839_355_904 // (16 * 131_072) == 33_302 and full.max_context_limited_by == "memory"
    assert full.fits and full.headroom_bytes == 69_839_355_904 - 64 * GiB
    part = capacity(cfg, GpuConfig(h100, utilization=0.9, weight_dtype="fp16"))
    assert part.usable_bytes == 77_309_411_328 and part.max_requests == 14 and not part.fits
    assert sum(b for _, b in part.breakdown()) == part.weight_bytes + part.kv_bytes + (80 * GiB - part.usable_bytes)


def test_capacity_edges():
    mistral = MemoryConfig(P["mistral-7b-v0.1"], batch=1, context=32768)
    cap = capacity(mistral, GpuConfig(G["h200-sxm"]))
    assert (cap.max_context, cap.max_context_limited_by) == (32768, "model")  # the window caps the cache
    huge = capacity(MemoryConfig(P["llama-3.1-405b"]), GpuConfig(G["h100-sxm"]))
    assert huge.kv_budget_bytes < 0 and huge.max_requests == 0 and huge.max_context == 0
    assert max_context(MemoryConfig(P["llama-3.1-8b"], batch=1), 131_072 * 100 + 5) == (100, "memory")


def test_int8_and_fp8_double_the_requests():
    cfg = MemoryConfig(P["llama-3.1-8b"], batch=16, context=32768)
    rows = {r.kv_dtype: r for r in dtype_table(cfg, GpuConfig(G["h100-sxm"], utilization=1.0, weight_dtype="fp16"))}
    assert rows["fp16"].max_requests == 16 and rows["fp8"].max_requests == 32
    assert rows["int8"].max_requests == 31  # per-group scales cost 4 B per 128 values
    assert rows["fp8"].vs_fp16 == 0.5 and rows["int8"].vs_fp16 == 132 / 256


def test_weight_bytes_by_dtype():
    n = estimate_num_params(P["llama-3.1-70b"])
    assert weight_bytes(P["llama-3.1-70b"], "bf16") == 2 * n
    assert weight_bytes(P["llama-3.1-70b"], "int4") == -(-n // 2)


def test_gpu_presets():
    assert set(G) == {"h100-sxm", "h200-sxm", "a100-40gb", "a100-80gb", "l4", "rtx-4090", "mi300x", "b200"}
    for g in G.values():
        assert g.memory_bytes > 0 and g.bandwidth_bytes_per_s > 0 and g.source
    assert G["h200-sxm"].memory_bytes == 141 * GiB and G["mi300x"].bandwidth_tb_s == 5.3


def test_formatting():
    assert fmt_bytes(512) == "512 B" and fmt_bytes(131_072) == "128 KiB" and fmt_bytes(4 * GiB) == "4 GiB"
    assert fmt_bytes(1_310_720_000) == "1.221 GiB" and fmt_decimal(1_310_720_000) == "1.311 GB"
    assert fmt_bytes(-3 * GiB) == "−3 GiB"


# --- config.json parsing -------------------------------------------------------------------


LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 128256,
}


def test_parse_a_real_config():
    p, notes = parse_hf_config_with_notes(json.dumps(LLAMA_31_8B, indent=2))
    assert notes == []
    assert (p.n_layers, p.n_heads, p.n_kv_heads, p.head_dim, p.attention, p.name) == \
        (32, 32, 8, 128, "GQA", "LlamaForCausalLM")
    assert kv(p, 32768, batch=16) == 64 * GiB
    assert estimate_num_params(p) == estimate_num_params(P["llama-3.1-8b"])


def test_parse_variants_of_the_format():
    gemma2 = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096,
              "vocab_size": 256000, "max_position_embeddings": 8192}
    p, notes = parse_hf_config_with_notes(json.dumps(gemma2))
    assert p.head_dim == 256 and p.layer_pattern == "LG"
    assert any("head_dim=256" in n and "3584 / 16 = 224" in n for n in _en(notes))
    nested = {"model_type": "gemma3", "text_config": {**gemma2, "model_type": "gemma3_text", "sliding_window": 1024,
                                                       "num_hidden_layers": 12}}
    p, notes = parse_hf_config_with_notes(json.dumps(nested))
    assert p.layer_pattern == "LLLLLG" and any("default of 6" in n for n in _en(notes))
    types = dict(gemma2, layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 14)
    assert parse_hf_config(json.dumps(types)).layer_pattern == "LLG"
    falcon40 = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_hidden_layers": 60,
                "new_decoder_architecture": True, "num_kv_heads": 8, "vocab_size": 65024}
    p, notes = parse_hf_config_with_notes(json.dumps(falcon40))
    assert p.n_kv_heads == 8 and not p.mlp_gated and p.d_ff == 4 * 8192 and p.max_position_embeddings == 2048
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257}
    assert per_token("gpt2") == kv(parse_hf_config(json.dumps(gpt2)), 1)
    qwen = {**LLAMA_31_8B, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False}
    p, notes = parse_hf_config_with_notes(json.dumps(qwen))
    assert p.sliding_window == 0 and any("use_sliding_window is false" in n for n in _en(notes))
    mla = {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "vocab_size": 102400, "intermediate_size": 10944, "max_position_embeddings": 163840}
    assert kv(parse_hf_config(json.dumps(mla)), 100) == 27 * 576 * 2 * 100


@pytest.mark.parametrize("change, message", [
    ({"num_hidden_layers": None}, "missing field num_hidden_layers"),
    ({"vocab_size": None}, "missing field vocab_size"),
    ({"num_key_value_heads": 5}, "num_attention_heads=32 is not divisible by num_key_value_heads=5"),
    ({"num_key_value_heads": 64}, "num_key_value_heads=64 is more than num_attention_heads=32"),
    ({"hidden_size": 4100}, "hidden_size=4100 is not divisible by num_attention_heads=32"),
    ({"multi_query": True}, "multi_query is true but num_key_value_heads=8"),
    ({"kv_lora_rank": 512}, "missing field qk_rope_head_dim"),
    ({"sliding_window": 1024, "layer_types": ["full_attention"] * 3}, "layer_types must be a list of 32 entries"),
])
def test_parse_missing_and_contradictory_fields(change, message):
    cfg = {k: v for k, v in {**LLAMA_31_8B, **change}.items() if not (v is None and k in change)}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_hf_config(json.dumps(cfg))


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("not json", "not valid JSON"),
    ("[1, 2, 3]", "must be a JSON object"),
    ("[" * 100_000, "nested too deeply|not valid JSON"),
    ('{"a": "' + "x" * 300_000 + '"}', "longer than the 200,000 allowed"),
    ('{"num_hidden_layers": ' + "9" * 5000 + "}", "not valid JSON"),
])
def test_parse_hostile_text(text, message):
    with pytest.raises(ValueError, match=message):
        parse_hf_config(text)


@pytest.mark.parametrize("field, value, message", [
    ("num_hidden_layers", 10**40, "num_hidden_layers=.* is outside 1..1,024"),
    ("num_hidden_layers", 1e308, "must be a whole number, got 1e\\+308"),
    ("num_hidden_layers", "32", "must be a whole number, got '32' \\(str\\)"),
    ("num_hidden_layers", True, "must be a whole number, got True \\(bool\\)"),
    ("num_hidden_layers", -4, "num_hidden_layers=-4 is outside"),
    ("hidden_size", [4096], "must be a whole number"),
    ("num_key_value_heads", {"a": 1}, "must be a whole number"),
    ("vocab_size", 2**200, "vocab_size=a number of 61 digits is outside"),
    ("tie_word_embeddings", "yes", "must be true or false"),
    ("max_position_embeddings", float("nan"), "must be a whole number"),
])
def test_parse_hostile_values(field, value, message):
    with pytest.raises(ValueError, match=message):
        parse_hf_config(json.dumps({**LLAMA_31_8B, field: value}))


def test_parse_rejects_non_text():
    with pytest.raises(ValueError, match="must be text"):
        parse_hf_config(b"{}")  # type: ignore[arg-type]


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True),
                         st.text(max_size=20))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
FIELDS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window", "kv_lora_rank",
          "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "num_local_experts", "num_experts_per_tok",
          "layer_types", "sliding_window_pattern", "multi_query", "text_config", "model_type", "n_head",
          "full_attention_interval", "linear_key_head_dim", "linear_num_value_heads", "hybrid_override_pattern",
          "attn_layer_period", "attention_chunk_size", "no_rope_layers", "num_kv_shared_layers", "index_head_dim",
          "mamba_d_state", "mamba_num_heads", "torch_dtype", "layers_block_type", "llm_config"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=8))
def test_parse_never_crashes(mutation):
    """Whatever a file holds, the parser returns a valid preset or raises ValueError."""
    text = json.dumps({**LLAMA_31_8B, **mutation})
    try:
        p = parse_hf_config(text)
    except ValueError as exc:
        assert str(exc)
        return
    assert isinstance(p, ArchPreset)
    kv_memory(MemoryConfig(p, context=4096))  # and the calculator takes it


# --- the seeds' claims ---------------------------------------------------------------------


def test_seed_claims_recomputed():
    claims = seed_claims(P, G)
    assert {c.seed for c in claims} == {"000", "001", "002", "004"}
    assert all(isinstance(c.verdict, Verdict) and c.why for c in claims)
    by_text = {c.claimed: c for c in claims}
    assert by_text["128 KiB"].value == 131_072 and by_text["128 KiB"].verdict == Verdict.RIGHT
    assert by_text["512 B"].value == 16_384 and by_text["512 B"].verdict == Verdict.WRONG  # seed 002 omits the heads
    assert by_text["16 KB"].value == 524_288 and by_text["512 MB"].value == 16 * GiB
    assert by_text["≈ 2.5 GB"].value == 4000 * 327_680 and by_text["≈ 2.5 GB"].verdict == Verdict.WRONG
    assert by_text["≈ 20 GB"].value == 32000 * 327_680
    assert by_text["10.4 GB"].value == 10 * GiB and by_text["10.4 GB"].verdict == Verdict.CLOSE
    assert by_text["32 GB"].value == 80 * GiB and by_text["32 GB"].verdict == Verdict.WRONG
    assert by_text["4,096 B"].value == 4096 and by_text["4,096 B"].verdict == Verdict.RIGHT
    assert by_text["−32 GiB, ×2 requests"].value == 32 * GiB


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed articles are not next to this checkout")
def test_seed_claims_quote_the_seeds_verbatim():
    texts = {p.name[:3]: p.read_text() for p in SEEDS.glob("*.txt")}
    for c in seed_claims(P, G):
        assert c.original in texts[c.seed], c.original


# --- measured on the real tiny model ------------------------------------------------------------


@pytest.mark.parametrize("name", ["mha", "gqa", "mqa"])
def test_measured_cache_equals_formula(name):
    model = untrained_tiny_model(name)
    r = measure_tiny_cache(model, batch=2, context=37, weights="untrained", preset=P[f"tiny-{name}"])
    n_kv = {"mha": 4, "gqa": 2, "mqa": 1}[name]
    expected = 2 * 4 * n_kv * 32 * 4 * 2 * 37  # 2 · L · H_kv · d_h · 4 B (fp32) · B · S
    assert r.measured_bytes == r.opcount_bytes == r.calculator_bytes == r.reserved_bytes == expected
    assert r.tensor_shape == (2, n_kv, 37, 32) and r.num_tensors == 8 and r.agree


def test_measured_cache_in_bf16_and_on_the_shipped_model():
    import torch

    from sim.model.errors import CheckpointError
    from sim.model.transformer import load_model

    model = untrained_tiny_model("gqa", dtype=torch.bfloat16)
    r = measure_tiny_cache(model, batch=3, context=100, preset=P["tiny-gqa"])
    assert r.dtype == "bf16" and r.measured_bytes == r.calculator_bytes == 2 * 4 * 2 * 32 * 2 * 3 * 100
    try:
        shipped = load_model("mha")
    except CheckpointError:
        pytest.skip("no trained checkpoint in assets/models")
    r = measure_tiny_cache(shipped, batch=1, context=1024, preset=P["tiny-mha"])
    assert r.agree and r.measured_bytes == 2 * 4 * 4 * 32 * 4 * 1024
    with pytest.raises(ValueError, match="context=1,025 is outside 1..1,024"):
        measure_tiny_cache(shipped, batch=1, context=1025)


def test_gpu_comparisons_in_claims_are_computed():
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.words.catalog import PSEUDO
    from sim.words.kv_claims import _share_of_gpu, seed_claims

    gpus = load_gpus()
    why = next(c.why for c in seed_claims(load_presets(), gpus) if "32K context of a 32-head" in c.why)
    assert f"16 GiB, {_share_of_gpu(16 * 2**30, gpus['l4'])}" in why  # 16 / 24; the old text said 'more than'
    assert _share_of_gpu(16 * 2**30, gpus["l4"], PSEUDO) == "kvmem.c.share_of(share=67%, held=kvmem.c.held(gpu=L4, mem=24 GiB))"
    assert _share_of_gpu(30 * 2**30, gpus["l4"]) == "more than an L4's 24 GiB"


def test_first_context_over_is_the_exact_crossing_both_plain_and_with_a_sliding_window():
    from sim.cost.memory import MemoryConfig, first_context_over, request_bytes
    from sim.cost.presets import load_presets

    presets = load_presets()
    cfg = MemoryConfig(presets["llama-3.1-8b"], batch=1, context=1, kv_dtype="bf16")  # 128 KiB a token
    limit = 15 * 2**30 + 1
    assert first_context_over(cfg, limit, 131_072) == limit // (128 * 1024) + 1 == 122_881
    assert first_context_over(cfg, limit, 100_000) is None  # not by the end of the range
    assert first_context_over(cfg, 0, 10) == 1
    for name in ("mistral-7b-v0.1", "gemma-2-9b"):  # windowed layers stop growing: still the first token past it
        cfg = MemoryConfig(presets[name], batch=1, context=1, kv_dtype="bf16")
        limit = request_bytes(cfg, 50_000) - 1
        over = first_context_over(cfg, limit, 131_072)
        assert request_bytes(cfg, over) > limit >= request_bytes(cfg, over - 1), name
