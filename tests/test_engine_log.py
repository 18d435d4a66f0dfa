"""Reconcile an engine's startup log (sim/cost/engine_log.py) with the lab's count, on excerpts quoted in public
issues (tests/data/engine_logs.json, each with its source). Expected values are worked out by hand."""

import json
from pathlib import Path

import pytest

from sim.cost.engine_log import parse_engine_log, reconcile
from sim.cost.hf_config import parse_hf_config
from sim.cost.kv_engine import KVEngineConfig, engine_allocation
from sim.cost.memory import GiB, MemoryConfig, kv_memory
from sim.cost.presets import load_presets
from sim.refusal import Refusal
from sim.words import why

LOGS = json.loads((Path(__file__).parent / "data" / "engine_logs.json").read_text())
# Qwen3-235B-A22B's config.json facts that decide its cache (94 layers, 4 K/V heads of 128)
QWEN3_235B = json.dumps({"model_type": "qwen3_moe", "hidden_size": 4096, "num_hidden_layers": 94,
                         "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
                         "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128,
                         "num_experts_per_tok": 8, "vocab_size": 151936, "max_position_embeddings": 40960,
                         "torch_dtype": "bfloat16"})


def rows(rec) -> dict:
    return {r.figure: r for r in rec.rows}


def test_every_fixture_names_its_source():
    for name, entry in LOGS.items():
        if not name.startswith("_"):
            assert entry["source"].startswith("https://github.com/"), name


def test_vllm_v0_llama_8b_blocks_and_concurrency():
    log = parse_engine_log(LOGS["vllm_v0_llama_3_1_8b"]["text"])
    assert (log.engine, log.available_gib, log.gpu_blocks, log.concurrency_len, log.concurrency) == \
        ("vllm", 3.81, 1952, 20000, 1.56)
    cfg = MemoryConfig(load_presets()["llama-3.1-8b"], context=20000, kv_dtype="bf16")
    rec = reconcile(log, kv_memory(cfg), engine_allocation(cfg, KVEngineConfig()), 1, 0)
    r = rows(rec)
    # a block: 16 tokens × 32 layers × 2 × 8 heads × 128 × 2 B = 2,097,152 B; 3.81 GiB holds ⌊3.81 × 512⌋ = 1,950
    assert rec.block_bytes_per_gpu == 2_097_152
    assert r["gpu_blocks"].lab == 1950 and r["gpu_blocks"].residual == 2 and r["gpu_blocks"].kind == "capacity"
    # a request of 20,000 tokens needs 1,250 blocks: 1,950 / 1,250 = 1.56
    assert r["concurrency"].lab == 1950 / 1250 and f"{r['concurrency'].lab:.2f}" == "1.56"
    assert r["concurrency"].kind == "derived"


def test_vllm_and_sglang_on_qwen3_235b_tp4():
    arch = parse_hf_config(QWEN3_235B)
    cfg = MemoryConfig(arch, context=40960, kv_dtype="bf16")
    kv, alloc = kv_memory(cfg), engine_allocation(cfg, KVEngineConfig())
    # TP 4 over 4 K/V heads: one head a GPU: 94 layers × 2 × 128 × 2 B = 48,128 B a token, 770,048 B a block
    v = reconcile(parse_engine_log(LOGS["vllm_v1_qwen3_235b_tp4"]["text"]), kv, alloc, 4, 0)
    assert (v.token_bytes_per_gpu, v.block_bytes_per_gpu) == (48_128, 770_048)
    blocks = int(8.11 * GiB) // 770_048
    assert blocks == 11_308
    tokens = rows(v)["tokens"]
    # derived: concurrency (11,308 / 2,560 blocks a 40,960-token request) × 40,960 = 180,928 slots
    assert tokens.lab == int(blocks / 2560 * 40960) == 180_928 and tokens.engine == 178_880
    assert tokens.residual == -2048 and tokens.kind == "derived"
    s = reconcile(parse_engine_log(LOGS["sglang_qwen3_235b_tp4"]["text"]), kv, alloc, 4, 0)
    got = rows(s)["sglang_tokens"]
    # SGLang's GB are GiB: (8.23 + 8.23) GiB ÷ 48,128 B = 367,224.7 token slots, against its 367,404: the residual,
    # 179.3 slots, is within what the two-decimal GiB hide (0.01 GiB = 223 slots)
    assert got.lab == (8.23 + 8.23) * GiB / 48_128 and round(got.residual) == 179 and got.kind == "capacity"
    assert rows(s)["sglang_kv"].lab == 367_404 * 48_128 / GiB


def test_token_line_is_concurrency_times_length():
    log = parse_engine_log(LOGS["vllm_v1_token_lines"]["text"])
    assert (log.tokens, log.concurrency_len, log.concurrency) == (2_042_016, 2048, 997.08)
    cfg = MemoryConfig(load_presets()["llama-3.1-8b"], context=2048)
    r = rows(reconcile(log, kv_memory(cfg), engine_allocation(cfg), 1, 0))["tokens"]
    assert r.lab == 997.08 * 2048 and round(r.residual, 2) == round(2_042_016 - 997.08 * 2048, 2)
    assert abs(r.residual) < 0.005 * 2048  # within the rounding of the printed concurrency
    # the hybrid log vLLM 0.19 printed: the two lines disagree by far more than rounding (vllm issue #40691)
    hy = parse_engine_log(LOGS["vllm_hybrid_qwen3_5"]["text"])
    cfg = MemoryConfig(load_presets()["qwen3-next-80b-a3b"], context=32768)
    r = rows(reconcile(hy, kv_memory(cfg), engine_allocation(cfg), 1, 0))["tokens"]
    assert r.lab == 33.04 * 32768 and r.residual < -700_000


def test_sglang_total_and_context():
    log = parse_engine_log(LOGS["sglang_total"]["text"])
    assert (log.engine, log.max_total_tokens, log.context_len) == ("sglang", 2_086_558, 256_000)


@pytest.mark.parametrize("text", ["", "INFO Starting server\nINFO Loading weights took 14 GB\n", "x" * 100])
def test_a_log_without_those_lines_is_one_clear_message(text):
    with pytest.raises(Refusal) as exc:
        parse_engine_log(text)
    assert exc.value.key == "engine.log.nothing" and "Available KV cache memory" in str(exc.value)
    assert "KV Cache is allocated" in why(exc.value, "ko")


def test_a_huge_log_is_refused_before_reading():
    with pytest.raises(Refusal, match="at most 200,000"):
        parse_engine_log("a" * 200_001)


def test_the_log_tab_reconciles_a_pasted_log_in_both_languages():
    """The page's log tab end to end (its engine allocation is the page's cached one, called as the tab calls it),
    and the table's words from sim/words/engine.py: the same residuals in English and Korean."""
    from sim.words.engine import reconciliation_frame, reconciliation_summary
    from tests.conftest import run_in_app

    text = LOGS["vllm_v0_llama_3_1_8b"]["text"]
    at = run_in_app("kv_memory", {"model": "llama-3.1-8b", "kv": "bf16", "tab": "log", "log": text})
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    cfg = MemoryConfig(load_presets()["llama-3.1-8b"], context=20000, kv_dtype="bf16")
    rec = reconcile(parse_engine_log(text), kv_memory(cfg), engine_allocation(cfg, KVEngineConfig()), 1, 0)
    en, ko = reconciliation_frame(rec), reconciliation_frame(rec, "ko")
    assert list(en.iloc[:, 2]) == list(ko.iloc[:, 2])  # the log's figures, worded the same way in both
    assert "1,952 blocks" in list(en.iloc[:, 2]) and "1,950 blocks" in list(en.iloc[:, 3])
    assert "20,000" in reconciliation_summary(rec, "Llama", "bf16", "RTX 3090") and \
        "20,000" in reconciliation_summary(rec, "Llama", "bf16", "RTX 3090", "ko")
    shown = at.dataframe[0].value
    assert shown.shape[0] == len(rec.rows)
