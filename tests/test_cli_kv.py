"""`python -m app.cli kv`: the per-group table, the last line's JSON equal to what sim/ computes, and exit code 2
with one stderr line for every kind of bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app import cli_kv
from sim.cost.hf_config import parse_hf_config
from sim.cost.kv_engine import KVEngineConfig, engine_allocation
from sim.cost.memory import MemoryConfig, kv_memory
from sim.cost.presets import MODELS_JSON

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = MODELS_JSON.parent / "configs"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_kv.main("kv", list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_gpt_oss_20b_json_is_the_formula_and_the_allocator(capsys):
    path = CONFIGS / "gpt-oss-20b.json"
    code, out, err = run(capsys, "--config", str(path), "--context", "32768", "--batch", "4")
    assert code == 0 and err == ""
    result = last_json(out)
    # formula: 12 full layers × 32,768 + 12 sliding × 128 tokens, 2,048 B each, × 4 requests
    assert result["total_bytes"] == 4 * 2048 * (12 * 32768 + 12 * 128) == 3_233_808_384
    # allocator: (2,048 + 521) blocks × 12 layers × 16 tokens × 2,048 B, × 4 (tests/test_hf_configs.py derives it)
    assert result["engine_bytes"] == 4 * 2569 * 393_216 == 4_040_687_616
    assert [(g["kind"], g["layers"], g["bytes"]) for g in result["groups"]] == [
        ("full", 12, 4 * 12 * 32768 * 2048), ("local", 12, 4 * 12 * 128 * 2048)]
    assert isinstance(result["total_bytes"], int) and result["engine"]["blocks_per_request"] == 2569
    table = out.splitlines()
    assert table[2].split()[:2] == ["group", "layers"] and "sliding window W = 128" in out


@pytest.mark.parametrize("key", ["qwen3-next-80b-a3b", "deepseek-v3.2-exp", "nemotron-h-8b", "llama-4-scout"])
@pytest.mark.parametrize("dtype", ["fp16", "fp8", "int4"])
def test_every_hybrid_matches_sim(capsys, key, dtype):
    path = CONFIGS / f"{key}.json"
    code, out, _ = run(capsys, "--config", str(path), "--context", "100000", "--batch", "3", "--kv-dtype", dtype)
    assert code == 0
    cfg = MemoryConfig(parse_hf_config(path.read_text()), batch=3, context=100_000, kv_dtype=dtype)
    result = last_json(out)
    assert result["total_bytes"] == kv_memory(cfg).total_bytes
    assert result["engine_bytes"] == engine_allocation(cfg, KVEngineConfig()).total_bytes
    assert sum(g["bytes"] for g in result["groups"]) == result["total_bytes"]


def test_engine_options(capsys):
    path = str(CONFIGS / "gpt-oss-20b.json")
    _, out, _ = run(capsys, "--config", path, "--context", "32768", "--no-hybrid")
    assert last_json(out)["engine_bytes"] == 2048 * 24 * 32768 == 1_610_612_736  # sliding layers as full
    _, out, _ = run(capsys, "--config", path, "--context", "32768", "--block-size", "32",
                    "--max-num-batched-tokens", "2048")
    e = last_json(out)["engine"]
    assert (e["block_size"], e["blocks_per_request"]) == (32, 1024 + (-(-2175 // 32) + 1))
    _, out, _ = run(capsys, "--config", str(CONFIGS / "qwen3-next-80b-a3b.json"), "--context", "1",
                    "--state-dtype", "fp32")
    # --state-dtype is vLLM's --mamba-ssm-cache-dtype: the 32 × 128 × 128 recurrent state doubles, the conv does not
    assert last_json(out)["total_bytes"] == 12 * 2048 + 36 * (1_097_728 + 32 * 128 * 128 * 2)


@pytest.mark.parametrize("make, argv, message", [
    (None, ["--config", "/no/such/config.json", "--context", "10"], "cannot read /no/such/config.json"),
    ("not json", ["--context", "10"], "not valid JSON"),
    ('{"hidden_size": "4096"}', ["--context", "10"], "hidden_size must be a whole number"),
    ('{"model_type": "llama"}', ["--context", "10"], "missing field num_hidden_layers"),
    ('{"num_hidden_layers": 1e400}', ["--context", "10"], "whole number"),
    (b"\xff\xfe{", ["--context", "10"], "not UTF-8"),
    ("good", ["--context", "0"], "context=0 is outside 1..134,217,728"),
    ("good", ["--context", "10", "--batch", "9999999"], "batch=9,999,999 is outside"),
    ("good", ["--context", "ten"], "invalid int value: 'ten'"),
    ("good", ["--context", "10", "--kv-dtype", "fp4"], "invalid choice: 'fp4'"),
    ("good", [], "the following arguments are required: --context"),
])
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, make, argv, message):
    if make is not None:
        f = tmp_path / "config.json"
        if make == "good":
            f.write_text((CONFIGS / "llama-3.1-8b.json").read_text())
        elif isinstance(make, bytes):
            f.write_bytes(make)
        else:
            f.write_text(make)
        argv = ["--config", str(f), *argv]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("kv: ") and message in err, err


def test_a_directory_is_not_a_config(capsys, tmp_path):
    code, _, err = run(capsys, "--config", str(tmp_path), "--context", "10")
    assert code == 2 and "is not a file" in err and err.count("\n") == 1


def test_through_the_dispatcher_as_a_process():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "kv", "--config", str(CONFIGS / "jamba-v0.1.json"),
                           "--context", "4096"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    # 4 attention layers × 4,096 tokens × 4,096 B + 28 Mamba layers × 311,296 B of state
    assert result["total_bytes"] == 4 * 4096 * 4096 + 28 * 311_296
    bad = subprocess.run([sys.executable, "-m", "app.cli", "kv", "--config", "missing.json", "--context", "1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1


def test_tensor_parallel_per_gpu(capsys):
    path = str(CONFIGS / "llama-3.1-8b.json")
    # 8 K/V heads: 4 GPUs hold 2 each; 16 GPUs hold 1 each (copied twice). 32 layers × 2 × 128 × 2 B a head-token
    for tp, heads in ((1, 8), (4, 2), (8, 1), (16, 1)):
        code, out, _ = run(capsys, "--config", path, "--context", "1000", "--batch", "2", "--tp", str(tp))
        r = last_json(out)
        assert code == 0 and r["kv_heads_per_gpu"] == heads and r["tp"] == tp
        assert r["per_gpu_bytes"] == 2 * 1000 * 32 * 2 * 128 * 2 * heads
    # MLA: the latent is whole on every GPU
    code, out, _ = run(capsys, "--config", str(CONFIGS / "deepseek-v3.json"), "--context", "1000", "--tp", "8")
    r = last_json(out)
    assert code == 0 and r["per_gpu_bytes"] == r["total_bytes"] == 61 * 576 * 2 * 1000 and r["kv_heads_per_gpu"] == 1
    for bad, message in (("3", "divide the 8 K/V heads"), ("0", "tp=0 is outside 1..64")):
        code, out, err = run(capsys, "--config", path, "--context", "10", "--tp", bad)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err
