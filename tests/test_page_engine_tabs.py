"""The KV memory page's engine views (issue 38): the prefix-hit staircase tab, the engine-log tab, the per-GPU line
under tensor parallelism, and the vLLM version named under every figure attributed to vLLM."""

import json
from pathlib import Path

from sim.cost.kv_engine import KVEngineConfig
from sim.cost.memory import MemoryConfig
from sim.cost.prefix_hit import prefix_hit
from sim.cost.presets import load_presets
from sim.msg import Msg
from sim.words import say
from sim.words.engine import hit_advice
from tests.conftest import unescaped
from tests.test_page_kv_memory import run_page

P = load_presets()

LOGS = json.loads((Path(__file__).parent / "data" / "engine_logs.json").read_text())


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_prefix_hit_tab_on_a_hybrid_model():
    at = run_page({"tab": "prefix_hit", "model": "qwen3-next-80b-a3b", "plen": "2000"})
    m = metrics(at)
    # 544-token blocks (the state page): 2,000 tokens sent twice hit ⌊1,999 / 544⌋ × 544 = 1,632
    assert m["Engine block size"] == "544 tokens" and m["Shortest prompt that hits"] == "545 tokens"
    assert m["From the cache"] == "1,632 tokens"
    assert any(hit_advice(prefix_hit(MemoryConfig(P["qwen3-next-80b-a3b"]), KVEngineConfig(), 2000)) in md.value
               for md in at.markdown)
    assert "vLLM v0.24.0" in captions(at)
    assert [c.key for c in at.get("plotly_chart")] == ["breakdown", "staircase"]


def test_prefix_hit_tab_in_korean_and_a_prompt_too_short():
    at = run_page({"tab": "prefix_hit", "model": "nemotron-h-8b", "plen": "1000", "lang": "ko"})
    assert any("적중은 0이다" in md.value and "1,041토큰" in md.value for md in at.markdown)


def test_log_tab_reconciles_a_pasted_vllm_log():
    text = LOGS["vllm_v0_llama_3_1_8b"]["text"]
    at = run_page({"tab": "log", "model": "llama-3.1-8b", "kv": "bf16", "log": text})
    assert not at.error
    df = at.dataframe[0].value
    got = dict(zip(df["Figure"], df["The lab derives"], strict=True))
    assert got["GPU blocks"] == "1,950 blocks" and got["Maximum concurrency"] == "1.56x"
    kinds = dict(zip(df["Figure"], df["Kind"], strict=True))
    assert kinds["GPU blocks"] == "capacity" and kinds["Maximum concurrency"] == "derived"
    assert "max_model_len 20,000, 1 × NVIDIA H100 SXM 80GB" in captions(at)


def test_log_tab_with_no_kv_line_says_so_once():
    at = run_page({"tab": "log", "log": "INFO starting the server\nINFO loading weights"})
    assert len(at.error) == 1 and say("en", Msg("engine.log.nothing")) in unescaped(at.error[0].value)


def test_per_gpu_line_under_tensor_parallelism():
    at = run_page({"tab": "engine", "model": "llama-3.1-8b", "ngpu": "16", "batch": "1", "ctx": "1000", "kv": "bf16"})
    # 16 GPUs over 8 K/V heads: one head each, copied twice: 32 × 2 × 128 × 2 B × 1,000 = 16,384,000 B
    assert say("en", Msg("engine.tp.copies", c=2)) + ", 15.62 MiB" in captions(at)
    at = run_page({"tab": "engine", "model": "llama-3.1-8b", "ngpu": "3"})
    assert any("3 to divide the 8 K/V heads" in w.value for w in at.warning)
