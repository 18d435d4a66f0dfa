"""Every rule the lab attributes to vLLM, against a number worked out by hand from that rule (issue 38). The rules
and the release they are stated for live in sim/cost/vllm_rules.py."""

import re
from pathlib import Path

from sim.cost import vllm_rules
from sim.cost.kv_engine import KVEngineConfig, engine_allocation, vllm_command
from sim.cost.memory import MemoryConfig, kv_memory, state_layer_bytes, token_layer_bytes
from sim.cost.presets import load_presets
from sim.cost.tensor_parallel import tp_split
from sim.msg import Msg
from sim.words import say

P = load_presets()
ROOT = Path(__file__).resolve().parent.parent


def test_one_version_named_everywhere():
    assert re.fullmatch(r"\d+\.\d+\.\d+", vllm_rules.VLLM_VERSION)
    assert vllm_rules.version_label() == f"vLLM v{vllm_rules.VLLM_VERSION}"
    # no other file in sim/ or app/ spells a vLLM release number of its own
    for path in [*ROOT.glob("sim/**/*.py"), *ROOT.glob("app/**/*.py")]:
        if path.name == "vllm_rules.py":
            continue
        assert not re.search(r"vLLM v?0\.\d+\.\d+", path.read_text()), path


def test_deepseek_v32_fp8_is_fp8_ds_mla_656_bytes():
    a = P["deepseek-v3.2-exp"]
    assert (a.kv_lora_rank, a.qk_rope_head_dim) == (512, 64)
    assert vllm_rules.FP8_DS_MLA_TOKEN_BYTES == 512 * 1 + 4 * 4 + 64 * 2 == 656
    assert token_layer_bytes(a, "fp8") == 576  # a plain FP8 latent: what the formula counts
    alloc = engine_allocation(MemoryConfig(a, context=4096, kv_dtype="fp8"), KVEngineConfig(block_size=64))
    index = 128 + 4  # the indexer key: 128 FP8 values and one FP32 scale
    assert alloc.block_bytes == 64 * (656 + index) * 61  # 61 attention layers, one group
    assert Msg("kvmem.eng.fp8_ds_mla", b=656, plain=576) in alloc.notes
    # bf16 is unchanged: 576 values × 2 B
    assert engine_allocation(MemoryConfig(a, context=4096), KVEngineConfig(block_size=64)).page_bytes == 64 * 1152


def test_mamba_ssm_dtype_changes_the_recurrent_state_only():
    a = P["nemotron-h-8b"]
    # Nemotron-H 8B: conv 10,240 × 3 (bf16), recurrent 128 × 64 × 128; attention 8 K/V heads × 128 × 2 × 2 B
    conv, ssm, bpl = 10240 * 3 * 2, 128 * 64 * 128, 2 * 8 * 128 * 2
    assert bpl == 4096
    fp32 = MemoryConfig(a, context=4096, state_dtype="fp32")
    assert state_layer_bytes(fp32) == conv + ssm * 4 == 4_255_744  # not (conv + ssm) × 4 = 4,317,184
    # the attention block: the least multiple of 16 whose page (× 4,096 B) holds the state
    assert 16 * -(-4_255_744 // (16 * bpl)) == 1040
    assert engine_allocation(fp32).block_size == 1040
    bf16 = MemoryConfig(a, context=4096, state_dtype="bf16")
    assert 16 * -(-(conv + ssm * 2) // (16 * bpl)) == 528 == engine_allocation(bf16).block_size
    command, _ = vllm_command(a, kv_memory(bf16), engine_allocation(bf16), 0.9, 1)
    assert "--mamba-ssm-cache-dtype bfloat16" in command and "--block-size 528" in command


def test_nemotron_h_ssm_default_is_fp32_and_version_dependent():
    a = P["nemotron-h-8b"]
    assert a.state_ssm_dtype == "bf16" and a.engine_ssm_dtype == "fp32"  # the config names none: vLLM's hook
    assert vllm_rules.NEMOTRON_H_SSM_HISTORY[-1] == (vllm_rules.VLLM_VERSION, "fp32")
    assert len({d for _, d in vllm_rules.NEMOTRON_H_SSM_HISTORY}) > 1  # it changed between releases
    alloc = engine_allocation(MemoryConfig(a, context=4096))
    assert alloc.block_size == 1040  # what the emitted command (no --mamba-ssm-cache-dtype) gets
    assert Msg("kvmem.eng.ssm_default", dtype="fp32", config="bf16") in alloc.notes
    assert any("fp32" in say("en", n) and vllm_rules.version_label() in say("en", n) for n in alloc.notes)
    command, _ = vllm_command(a, kv_memory(MemoryConfig(a, context=4096)), alloc, 0.9, 1)
    assert "--mamba-ssm-cache-dtype" not in command and "--block-size 1040" in command
    # the formula keeps the config's dtype: bf16 for both parts
    assert state_layer_bytes(MemoryConfig(a, context=4096)) == 10240 * 3 * 2 + 128 * 64 * 128 * 2
    # a config that names its SSM dtype keeps it (Qwen3-Next, Jamba: no hook)
    for key, bs in (("qwen3-next-80b-a3b", 544), ("jamba-v0.1", 80)):
        assert P[key].engine_ssm_dtype == "" and engine_allocation(MemoryConfig(P[key], context=4096)).block_size == bs


def test_chunked_attention_holds_the_current_chunk():
    assert [vllm_rules.chunked_tokens_held(s, 8192) for s in (1, 8191, 8192, 8193, 40_000)] == \
        [1, 8191, 8192, 1, 7232]


def test_admission_has_no_watermark_in_v1():
    from sim.serving.engine import EngineConfig as ServingEngineConfig

    assert vllm_rules.ADMISSION_WATERMARK == 0.0 and vllm_rules.V0_ADMISSION_WATERMARK == 0.01
    assert ServingEngineConfig().watermark == 0.0


def test_tensor_parallel_splits_heads_and_copies_past_them():
    a = P["llama-3.1-8b"]  # 8 K/V heads, 32 layers, head 128: 131,072 B a token in BF16
    kv = kv_memory(MemoryConfig(a, batch=2, context=1000, kv_dtype="bf16"))
    for tp, heads, copies in ((1, 8, 1), (2, 4, 1), (8, 1, 1), (16, 1, 2), (32, 1, 4)):
        s = tp_split(kv, tp)
        assert (s.kv_heads_per_gpu, s.copies) == (heads, copies)
        assert s.per_gpu_bytes == 2 * 32 * heads * 128 * 2 * 1000 * 2
        assert s.all_gpus_bytes == s.per_gpu_bytes * tp
    ds = P["deepseek-v3"]  # MLA: the 576-value latent whole on every rank
    kv = kv_memory(MemoryConfig(ds, context=1000))
    assert tp_split(kv, 8).per_gpu_bytes == kv.total_bytes == 61 * 576 * 2 * 1000
    assert tp_split(kv, 8).kv_heads_per_gpu == 1
    import pytest

    with pytest.raises(ValueError, match="divide the 8 K/V heads"):
        tp_split(kv_memory(MemoryConfig(a, context=10)), 3)


def test_batch_defaults_depend_on_the_gpu():
    from sim.cost.gpus import load_gpus

    g = load_gpus()
    assert vllm_rules.default_batch_limits(g["h100-sxm"].memory_bytes, g["h100-sxm"].name) == (8192, 1024)
    assert vllm_rules.default_batch_limits(80 << 30, "A100 SXM 80GB") == (2048, 256)
    assert vllm_rules.default_batch_limits(24 << 30, "L4") == (2048, 256)
    a = P["llama-3.1-8b"]
    cfg = MemoryConfig(a, context=4096)
    command, _ = vllm_command(a, kv_memory(cfg), engine_allocation(cfg), 0.9, 1)
    assert "--max-num-batched-tokens 8192" in command  # stated, not left to a GPU-dependent default


def test_int8_is_vllms_per_token_head_layout():
    a = P["llama-3.1-8b"]  # 8 K/V heads of 128
    # vLLM: INT8 values plus one FP32 scale per token and head, for K and V: 8 × (132 + 132) = 2,112 B
    assert vllm_rules.int8_token_layer_bytes(8, 128, 128) == 2112
    cfg = MemoryConfig(a, context=4096, kv_dtype="int8", group_size=32)
    # the formula's KIVI-style groups of 32: 8 × 2 × (128 + 4 × 4) = 2,304 B
    assert token_layer_bytes(a, "int8", 32) == 2304
    alloc = engine_allocation(cfg)
    assert alloc.block_bytes == 16 * 2112 * 32
    command, notes = vllm_command(a, kv_memory(cfg), alloc, 0.9, 1)
    assert "--kv-cache-dtype int8_per_token_head" in command
    assert notes == (Msg("kvmem.eng.int8", b=2112, g=32, lab=2304),)
    assert "2,112 B" in say("en", notes[0]) and "2,304 B" in say("en", notes[0]) and "2,112 B" in say("ko", notes[0])


def test_every_message_that_states_a_vllm_default_names_the_release():
    """A message that gives a vLLM default (a block size, a utilization, a flag's value) says which release's rule it
    is: it carries {vllm}, filled from sim.cost.vllm_rules (figures from the vLLM paper say 'vLLM paper')."""
    import json

    from tests.conftest import ROOT

    unnamed = []
    for path in sorted((ROOT / "assets" / "i18n" / "en").glob("*.json")):
        for key, message in json.loads(path.read_text(encoding="utf-8")).items():
            if "vLLM" in message and "default" in message and "{vllm}" not in message:
                unnamed.append(f"{path.name}:{key}")
    assert unnamed == []


def test_the_app_fills_the_release_into_its_messages():
    from streamlit.testing.v1 import AppTest

    from sim.cost.vllm_rules import version_label

    def page():
        import streamlit as st

        from app.i18n import t

        st.write(t("paged.c.block_size_help"))

    at = AppTest.from_function(page).run()
    assert at.markdown[0].value == say("en", Msg("paged.c.block_size_help", vllm=version_label()))
