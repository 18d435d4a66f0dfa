"""Every modern layout read from its config.json: exact bytes for each shipped preset (worked out by hand in
the comments), sliding windows, chunked attention, linear-attention and Mamba state, MLA, the sparse-attention
indexer, cross-layer sharing, text_config nesting, and bad configs rejected with a message naming the field.
Then what a vLLM-style allocator reserves for the same models, also worked out by hand."""

import json
from dataclasses import replace

import pytest

from sim.cost.arch import STATE, with_kv_heads
from sim.cost.hf_config import parse_hf_config, parse_hf_config_with_notes
from sim.cost.kv_engine import KVEngineConfig, engine_allocation, vllm_command
from sim.cost.memory import MemoryConfig, kv_memory, layer_groups, request_bytes
from sim.cost.presets import MODELS_JSON, load_presets
from sim.msg import Msg

P = load_presets()
CONFIGS = MODELS_JSON.parent / "configs"


def _en(notes):
    """The parser's notes (message values) in English, as the command line prints them."""
    from sim.words import say

    return [say("en", n) for n in notes]



def total(key_or_arch, context, batch=1, dtype="bf16", **kw) -> int:
    arch = P[key_or_arch] if isinstance(key_or_arch, str) else key_or_arch
    return kv_memory(MemoryConfig(arch, batch=batch, context=context, kv_dtype=dtype, **kw)).total_bytes


def config(key: str) -> dict:
    return json.loads((CONFIGS / f"{key}.json").read_text())


# Per attention layer and token, BF16: 2 (K, V) · H_kv · d_h · 2 B.
GPT_OSS = 2 * 8 * 64 * 2  # 2,048
GEMMA3_4B = 2 * 4 * 256 * 2  # 4,096
GEMMA3_27B = 2 * 16 * 128 * 2  # 8,192
QWEN3 = 2 * 8 * 128 * 2  # 4,096 (8B and 32B alike: head_dim 128 is explicit in both)
QWEN3_NEXT = 2 * 2 * 256 * 2  # 2,048
LLAMA4 = 2 * 8 * 128 * 2  # 4,096
MISTRAL_SMALL = 2 * 8 * 128 * 2  # 4,096 (head_dim 128, not 5120 / 32 = 160)
NEMOTRON = 2 * 8 * 128 * 2  # 4,096
JAMBA = 2 * 8 * (4096 // 32) * 2  # 4,096
MLA = (512 + 64) * 2  # 1,152: one latent + one RoPE key, no ×2, no ×heads
INDEX = 128 + 4  # 132: FP8 key of 128 + one FP32 scale per 128
# States per layer and request, BF16:
QWEN3_NEXT_STATE = ((2 * 16 * 128 + 32 * 128) * (4 - 1) + 32 * 128 * 128) * 2  # conv (8192, 3) + (32, 128, 128)
NEMOTRON_STATE = ((128 * 64 + 2 * 8 * 128) * (4 - 1) + 128 * 64 * 128) * 2  # conv (10240, 3) + (128, 64, 128)
JAMBA_STATE = (2 * 4096 * (4 - 1) + 2 * 4096 * 16) * 2  # conv (8192, 3) + (8192, 16)


def expected(key: str, S: int) -> int:
    """Each shipped preset's bytes for one request of S tokens, BF16, from its published shape."""
    return {
        "gpt-oss-20b": 12 * S * GPT_OSS + 12 * min(S, 128) * GPT_OSS,  # 12 full + 12 sliding (W 128)
        "gpt-oss-120b": 18 * S * GPT_OSS + 18 * min(S, 128) * GPT_OSS,
        "gemma-3-4b": 5 * S * GEMMA3_4B + 29 * min(S, 1024) * GEMMA3_4B,  # 34 layers, every 6th global
        "gemma-3-27b": 10 * S * GEMMA3_27B + 52 * min(S, 1024) * GEMMA3_27B,  # 62 layers, every 6th global
        "qwen3-8b": 36 * S * QWEN3,
        "qwen3-32b": 64 * S * QWEN3,
        "qwen3-next-80b-a3b": 12 * S * QWEN3_NEXT + 36 * QWEN3_NEXT_STATE,  # every 4th layer full attention
        "llama-4-scout": 12 * S * LLAMA4 + 36 * min(S, 8192) * LLAMA4,  # every 4th layer global, the rest chunked
        "deepseek-v3": 61 * S * MLA,
        "deepseek-v3.2-exp": 61 * S * (MLA + INDEX),
        "mistral-small-3": 40 * S * MISTRAL_SMALL,
        "nemotron-h-8b": 4 * S * NEMOTRON + 24 * NEMOTRON_STATE,  # 4 attention, 24 Mamba-2, 24 MLP-only
        "jamba-v0.1": 4 * S * JAMBA + 28 * JAMBA_STATE,  # attention at 4, 12, 20, 28
    }[key]


NEW_PRESETS = ["gpt-oss-20b", "gpt-oss-120b", "gemma-3-4b", "gemma-3-27b", "qwen3-8b", "qwen3-32b",
               "qwen3-next-80b-a3b", "llama-4-scout", "deepseek-v3", "deepseek-v3.2-exp", "mistral-small-3",
               "nemotron-h-8b", "jamba-v0.1"]


@pytest.mark.parametrize("key", NEW_PRESETS)
@pytest.mark.parametrize("context", [4096, 131072])
def test_each_preset_exact_bytes(key, context):
    assert total(key, context) == expected(key, context)
    assert total(key, context, batch=3) == 3 * expected(key, context)


def test_a_few_of_those_numbers_written_out():
    assert QWEN3_NEXT_STATE == 1_097_728 and NEMOTRON_STATE == 2_158_592 and JAMBA_STATE == 311_296
    assert expected("gpt-oss-20b", 131072) == 3_224_371_200  # 12·131,072·2,048 + 12·128·2,048
    assert expected("qwen3-next-80b-a3b", 4096) == 100_663_296 + 39_518_208
    assert expected("deepseek-v3.2-exp", 4096) == 61 * 4096 * 1284 == 320_815_104


def test_every_preset_config_says_where_it_comes_from():
    entries = json.loads(MODELS_JSON.read_text())["models"]
    assert {e["key"] for e in entries} >= set(NEW_PRESETS)
    for e in entries:
        body = config(e["key"])
        assert body["_comment"].startswith(f"Fields of {e['source'].split(' ')[0]}"), e["key"]
        assert e["source"].startswith("https://huggingface.co/") and e["config_file"] == f"configs/{e['key']}.json"


def test_layouts_read_from_each_kind_of_field():
    assert P["gpt-oss-20b"].layer_kinds[:4] == ("L", "G", "L", "G")  # layer_types, sliding first
    qn = P["qwen3-next-80b-a3b"]  # full_attention_interval 4: layers 3, 7, ..., 47 are full
    assert [i for i, k in enumerate(qn.layer_kinds) if k == "G"] == list(range(3, 48, 4))
    assert (qn.state_kind, qn.state_conv_shape, qn.state_ssm_shape) == ("gated_deltanet", (8192, 3), (32, 128, 128))
    l4 = P["llama-4-scout"]  # no_rope_layers: 0 marks the NoPE (global) layers
    assert l4.local_attention == "chunked" and l4.sliding_window == 8192 and l4.layer_pattern == "LLLG"
    jamba = P["jamba-v0.1"]  # attn_layer_period 8, offset 4
    assert [i for i, k in enumerate(jamba.layer_kinds) if k == "G"] == [4, 12, 20, 28]
    nh = P["nemotron-h-8b"]  # hybrid_override_pattern: M → state, * → attention, - → MLP only
    assert (nh.num_global_layers, nh.num_state_layers, nh.layer_kinds.count("F")) == (4, 24, 24)
    assert [i for i, k in enumerate(nh.layer_kinds) if k == "G"] == [7, 18, 29, 40]
    assert P["deepseek-v3.2-exp"].index_head_dim == 128


def test_sliding_cap_at_window_minus_one_window_and_plus_one():
    # Mistral 7B v0.1: every one of 32 layers keeps at most W = 4,096 tokens; 2·8·128·2 = 4,096 B per token-layer
    per = 32 * 4096
    assert [total("mistral-7b-v0.1", s) for s in (4095, 4096, 4097)] == [per * 4095, per * 4096, per * 4096]
    # gpt-oss-20b's 12 sliding layers (W = 128) stop at 128 while its 12 full ones go on
    g = [total("gpt-oss-20b", s) for s in (127, 128, 129)]
    assert g == [24 * 127 * GPT_OSS, 24 * 128 * GPT_OSS, 12 * 129 * GPT_OSS + 12 * 128 * GPT_OSS]
    assert g[2] - g[1] == 12 * GPT_OSS  # past the window one token adds only the full layers' share


def test_chunked_layers_keep_at_most_a_chunk():
    # Llama 4 Scout: 36 chunked layers hold the current chunk of 8,192: (S − 1) mod 8,192 + 1 tokens (vLLM frees
    # the blocks before the chunk); at 8,193 a new chunk holds 1 token. Their peak on the way is min(S, 8,192).
    b = [total("llama-4-scout", s) for s in (8191, 8192, 8193, 40_000)]
    assert b == [48 * 8191 * LLAMA4, 48 * 8192 * LLAMA4, (12 * 8193 + 36 * 1) * LLAMA4,
                 (12 * 40_000 + 36 * 7232) * LLAMA4]  # 40,000 = 4 × 8,192 + 7,232
    peak = request_bytes(MemoryConfig(P["llama-4-scout"], context=40_000), peak=True)
    assert peak == (12 * 40_000 + 36 * 8192) * LLAMA4
    # "min(S, C)" at 40,000 tokens overstates what the layers hold by 774,912 / 740,352 − 1 = 4.67%
    assert (12 * 40_000 + 36 * 8192) * 100_000 // (12 * 40_000 + 36 * 7232) == 104_668


def test_linear_attention_grows_only_with_its_full_attention_layers():
    qn = P["qwen3-next-80b-a3b"]
    one, two = total(qn, 10_000), total(qn, 20_000)
    assert two - one == 12 * 10_000 * QWEN3_NEXT  # 12 of 48 layers keep K/V
    state = [g for g in layer_groups(MemoryConfig(qn, context=10_000)) if g.kind == STATE][0]
    assert state.bytes_per_request == 36 * QWEN3_NEXT_STATE == 39_518_208  # the same at any context
    assert total(qn, 1) == 12 * QWEN3_NEXT + 36 * QWEN3_NEXT_STATE
    # an FP8 cache halves the K/V, not the state (vLLM keeps the state in its own dtype)
    assert total(qn, 10_000, dtype="fp8") == 12 * 10_000 * QWEN3_NEXT // 2 + 36 * QWEN3_NEXT_STATE
    # a calculator that took all 48 layers as attention would say 4× the K/V
    assert total(replace(qn, layer_pattern="", state_kind="", state_conv_shape=(), state_ssm_shape=()), 10_000) \
        == 48 * 10_000 * QWEN3_NEXT
    # an FP32 recurrent state (vLLM's --mamba-ssm-cache-dtype) doubles the 32 × 128 × 128 state, not the conv
    assert total(qn, 1, state_dtype="fp32") == 12 * QWEN3_NEXT + 36 * (QWEN3_NEXT_STATE + 32 * 128 * 128 * 2)


def test_mla_has_no_two_and_no_heads():
    ds = P["deepseek-v3"]
    m = kv_memory(MemoryConfig(ds, context=1000, kv_dtype="bf16"))
    assert m.bytes_per_token_per_layer == (512 + 64) * 2 == 1152
    mha = with_kv_heads(ds, 128)  # a K of 192 and a V of 128 for every one of 128 heads
    assert kv_memory(MemoryConfig(mha, context=1000)).bytes_per_token_per_layer == 128 * (192 + 128) * 2 == 81_920
    assert total(ds, 1000, dtype="fp8") == 61 * 1000 * 576


def test_explicit_head_dim_wins_over_hidden_over_heads():
    p, notes = parse_hf_config_with_notes((CONFIGS / "qwen3-32b.json").read_text())
    assert p.head_dim == 128 and any("5120 / 64 = 80" in n for n in _en(notes))
    derived = {k: v for k, v in config("qwen3-32b").items() if k not in ("head_dim", "_comment")}
    assert parse_hf_config(json.dumps(derived)).head_dim == 80  # what a calculator without head_dim gets: −37.5%
    assert total(parse_hf_config(json.dumps(derived)), 1000) * 128 == total("qwen3-32b", 1000) * 80


def test_text_config_nesting_reads_the_language_model():
    nested = config("gemma-3-27b")
    flat = dict(nested["text_config"])
    a, b = parse_hf_config(json.dumps(nested)), parse_hf_config(json.dumps(flat))
    assert replace(a, name="x") == replace(b, name="x")
    for wrapper in ("llm_config", "language_config"):
        c = parse_hf_config(json.dumps({"model_type": "wrapper", wrapper: flat}))
        assert replace(c, name="x", family="x") == replace(b, name="x", family="x")
    scout = config("llama-4-scout")
    assert parse_hf_config(json.dumps(scout)).layer_pattern == "LLLG"


def test_kv_sharing_declared_in_the_config():
    # a Gemma 3n-like text config: 35 layers (4 sliding, 1 full) × 7, the last 15 reuse earlier layers' K/V
    cfg = {"model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35, "num_attention_heads": 8,
           "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 16384, "vocab_size": 262400,
           "sliding_window": 512, "num_kv_shared_layers": 15,
           "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7}
    p = parse_hf_config(json.dumps(cfg))
    per = 2 * 2 * 256 * 2  # 2,048
    # layers 0-19 store: 16 sliding + 4 full
    assert total(p, 10_000) == per * (16 * 512 + 4 * 10_000)
    g = {x.kind: x for x in layer_groups(MemoryConfig(p, context=10_000))}
    assert (g["L"].num_layers, g["L"].num_storing_layers, g["G"].num_layers, g["G"].num_storing_layers) == (28, 16, 7, 4)


def test_mamba_and_granite_style_fields():
    granite = {"model_type": "granitemoehybrid", "hidden_size": 1536, "num_hidden_layers": 4,
               "num_attention_heads": 12, "num_key_value_heads": 4, "vocab_size": 100352, "intermediate_size": 512,
               "layer_types": ["mamba", "mamba", "mamba", "attention"], "mamba_n_heads": 48, "mamba_d_head": 64,
               "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2}
    p = parse_hf_config(json.dumps(granite))
    assert (p.state_kind, p.state_conv_shape, p.state_ssm_shape) == ("mamba2", (48 * 64 + 2 * 128, 3), (48, 64, 128))
    assert total(p, 100) == 100 * 2 * 4 * 128 * 2 + 3 * ((3328 * 3) + 48 * 64 * 128) * 2
    pure = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280,
            "state_size": 16, "conv_kernel": 4, "expand": 2, "intermediate_size": 1536}
    m = parse_hf_config(json.dumps(pure))
    assert m.num_state_layers == 24 and total(m, 1) == total(m, 100_000) == 24 * (1536 * 3 + 1536 * 16) * 2


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["linear_attention", "full_attention"] * 2}, "needs linear_num_key_heads"),
    ({"linear_key_head_dim": "128"}, "linear_key_head_dim must be a whole number, got '128'"),
    ({"linear_num_value_heads": 10**9}, "linear_num_value_heads=1,000,000,000 is outside"),
    ({"layer_types": ["full_attention"] * 3}, "layer_types must be a list of 4 entries"),
    ({"layer_types": ["sliding_attention", "weird", "full_attention", "full_attention"]}, "an entry 'weird'"),
    ({"layer_types": ["chunked_attention"] * 3 + ["full_attention"]}, "attention_chunk_size is missing"),
    ({"layer_types": ["sliding_attention", "chunked_attention", "full_attention", "full_attention"],
      "sliding_window": 8, "attention_chunk_size": 8}, "mixes sliding_attention and chunked_attention"),
    ({"layer_types": ["sliding_attention"] * 4}, "sliding_window is missing or 0"),
    ({"full_attention_interval": "4"}, "full_attention_interval must be a whole number"),
    ({"num_kv_shared_layers": 4}, "num_kv_shared_layers=4 is outside 0..3"),
    ({"hybrid_override_pattern": "M*M"}, "hybrid_override_pattern must be 4 letters"),
    ({"index_head_dim": -1}, "index_head_dim=-1 is outside"),
    ({"mamba_ssm_dtype": "float8"}, "mamba_ssm_dtype must be one of"),
])
def test_bad_configs_name_the_field(change, message):
    base = {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "full_attention_interval": 2,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
            "linear_value_head_dim": 32}
    cfg = {**base, **change}
    if "needs linear" in message:
        cfg = {k: v for k, v in cfg.items() if not k.startswith("linear_")} | {"model_type": "custom"}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_hf_config(json.dumps(cfg))


# --- what a vLLM-style allocator reserves ---------------------------------------------------------


def engine(key, context, batch=1, dtype="bf16", **kw):
    return engine_allocation(MemoryConfig(P[key], batch=batch, context=context, kv_dtype=dtype), KVEngineConfig(**kw))


def test_gpt_oss_20b_sliding_layers_reserve_the_window_plus_a_step():
    e = engine("gpt-oss-20b", 32768)
    # 12 full + 12 sliding layers: 12 < 1.25 × 12, so two groups of 12; one page = 16 tokens × 2,048 B
    assert (e.block_size, e.page_bytes, e.block_bytes, len(e.groups)) == (16, 32_768, 12 * 32_768, 2)
    # full: 32,768 / 16 = 2,048 blocks; sliding: min(127 + 8,192, 32,768) = 8,319 tokens → ⌈8,319/16⌉ + 1 = 521
    assert [g.blocks_per_request for g in e.groups] == [2048, 521]
    assert e.per_request_bytes == (2048 + 521) * 393_216 == 1_010_171_904
    assert kv_memory(e.config).per_request_bytes == 808_452_096  # the formula: 1.25× less
    off = engine("gpt-oss-20b", 32768, hybrid=False)  # sliding layers as full: 24 layers × 2,048 blocks
    assert off.per_request_bytes == 2048 * 24 * 32_768 == 1_610_612_736 and off.notes
    assert engine("gpt-oss-20b", 32768, max_num_batched_tokens=2048).groups[1].blocks_per_request == 137  # ⌈2,175/16⌉ = 136, + 1


def test_sliding_reservation_at_window_minus_one_window_plus_one():
    # Mistral 7B v0.1 (one uniform sliding group of 32 layers): ⌈S / 16⌉ + 1 blocks while S ≤ 4,095 + 8,192
    blocks = [engine("mistral-7b-v0.1", s).blocks_per_request for s in (4095, 4096, 4097)]
    assert blocks == [257, 257, 258]
    assert engine("mistral-7b-v0.1", 100_000).blocks_per_request == -(-(4095 + 8192) // 16) + 1 == 769


def test_gemma_3_groups_are_padded_to_one_size():
    e = engine("gemma-3-27b", 32768)
    # 52 sliding, 10 full: groups of 10 → 6 sliding groups (60 slots, 8 empty) + 1 full group
    assert (len(e.groups), e.padding_layers, e.block_bytes) == (7, 8, 10 * 16 * 8192)
    sliding = -(-(1023 + 8192) // 16) + 1  # 577
    assert e.blocks_per_request == 2048 + 6 * sliding and e.per_request_bytes == (2048 + 6 * 577) * 1_310_720


def test_mamba_pages_force_the_attention_block_size():
    # Qwen3-Next: the 1,097,728-B state needs 16 · ⌈1,097,728 / (16 · 2,048)⌉ = 544 tokens of attention per page
    # (vLLM logs the same 544), and the state is padded to 544 · 2,048 = 1,114,112 B
    e = engine("qwen3-next-80b-a3b", 32768)
    assert (e.block_size, e.page_bytes, e.state_padding_bytes) == (544, 1_114_112, 16_384)
    # 12 full + 36 state: groups of 12 → 1 full group of ⌈32,768/544⌉ = 61 blocks + 3 state groups of 1
    assert e.blocks_per_request == 61 + 3 and e.block_bytes == 12 * 1_114_112
    assert e.per_request_bytes == 64 * 13_369_344
    j = engine("jamba-v0.1", 4096)  # 311,296-B state, 4,096 B per token: 16 · ⌈311,296 / 65,536⌉ = 80
    assert (j.block_size, j.blocks_per_request) == (80, -(-4096 // 80) + 7)  # 4 attention, 28 state → 7 groups


def test_all_full_models_form_one_group_of_mixed_pages():
    e = engine("deepseek-v3.2-exp", 4096)
    # one group: a block is 16 tokens of 61 MLA pages (1,152 B/token) and 61 indexer pages (132 B/token)
    assert e.block_bytes == 16 * 61 * (1152 + 132) and e.blocks_per_request == 256
    assert e.per_request_bytes == kv_memory(e.config).per_request_bytes  # 4,096 is a whole number of blocks
    assert engine("llama-3.1-8b", 1000).per_request_bytes == 63 * 16 * 131_072  # ⌈1,000/16⌉ = 63 blocks


def test_max_concurrency_both_ways():
    e = engine("gpt-oss-20b", 32768)
    budget = 40 * (1 << 30)
    assert e.num_blocks(budget) == budget // 393_216 == 109_226
    assert e.max_requests(budget) == 109_226 // 2569 == 42
    assert budget // kv_memory(e.config).per_request_bytes == 53  # the formula fits more
    assert e.max_concurrency(budget) == pytest.approx(109_226 / 2569)


def test_the_vllm_command_matches_the_view():
    cfg = MemoryConfig(P["gpt-oss-20b"], batch=8, context=65536, kv_dtype="fp8")
    alloc = engine_allocation(cfg, KVEngineConfig(block_size=32))
    cmd, notes = vllm_command(cfg.arch, kv_memory(cfg), alloc, 0.85, 2)
    assert cmd.split(" \\\n  ") == ["vllm serve openai/gpt-oss-20b", "--kv-cache-dtype fp8", "--block-size 32",
                                    "--max-model-len 65536", "--gpu-memory-utilization 0.85", "--max-num-seqs 8",
                                    "--max-num-batched-tokens 8192", "--tensor-parallel-size 2"]
    assert notes == ()
    cfg4 = replace(cfg, kv_dtype="int4")
    cmd, notes = vllm_command(cfg.arch, kv_memory(cfg4), engine_allocation(cfg4, KVEngineConfig(hybrid=False)), 0.9, 1)
    assert "--kv-cache-dtype fp8" in cmd and "--disable-hybrid-kv-cache-manager" in cmd
    assert notes == (Msg("kvmem.eng.no_dtype", dtype="INT4"),)
    fp16 = replace(cfg, kv_dtype="fp16")
    cmd, _ = vllm_command(cfg.arch, kv_memory(fp16), engine_allocation(fp16), 0.9, 1)
    assert "--kv-cache-dtype auto \\\n  --dtype float16" in cmd  # the model is bf16; auto would store bf16
