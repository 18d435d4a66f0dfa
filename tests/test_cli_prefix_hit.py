"""`python -m app.cli prefix-hit`: the hybrid prefix-hit staircase's contract (issue 38). Block sizes and hits
worked out by hand from vLLM's rules (sim/cost/vllm_rules.py): hits are whole blocks and the last prompt token
is always computed, so a prompt of N tokens sent twice hits ⌊(N − 1) / B⌋ · B."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app import cli_prefix_hit
from sim.cost.kv_engine import KVEngineConfig
from sim.cost.memory import MAX_CONTEXT, MemoryConfig
from sim.cost.prefix_hit import MAX_STAIRCASE_POINTS, PrefixHit, hit_tokens, prefix_hit
from sim.cost.presets import MODELS_JSON, load_presets

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = MODELS_JSON.parent / "configs"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_prefix_hit.main("prefix-hit", list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


# (config, prompt, extra options, block size, hits): the block holds one recurrent state (bytes in the comments)
CASES = [
    # Qwen3-Next: state 8,192 × 3 × 2 + 32 × 128 × 128 × 2 = 1,097,728 B; attention 2 × 2 × 256 × 2 = 2,048 B a
    # token: 16 × ⌈1,097,728 / (16 × 2,048)⌉ = 16 × 34 = 544
    ("qwen3-next-80b-a3b", 544, (), 544, 0),
    ("qwen3-next-80b-a3b", 545, (), 544, 544),
    ("qwen3-next-80b-a3b", 2000, (), 544, 1632),
    # Nemotron-H 8B in vLLM v0.24.0: recurrent state fp32 by default: 61,440 + 4,194,304 = 4,255,744 B over
    # 4,096 B a token: 16 × ⌈64.94⌉ = 1,040; with --state-dtype bf16: 61,440 + 2,097,152 B -> 16 × 33 = 528
    ("nemotron-h-8b", 1040, (), 1040, 0),
    ("nemotron-h-8b", 2100, (), 1040, 2080),
    ("nemotron-h-8b", 1000, ("--state-dtype", "bf16"), 528, 528),
    # Jamba: 8,192 × 3 × 2 + 8,192 × 16 × 2 = 311,296 B over 4,096 B: 16 × ⌈4.75⌉ = 80
    ("jamba-v0.1", 80, (), 80, 0),
    ("jamba-v0.1", 100, (), 80, 80),
    # full attention: the block asked for
    ("llama-3.1-8b", 48, (), 16, 32),
    ("llama-3.1-8b", 48, ("--block-size", "32"), 32, 32),
    ("llama-3.1-8b", 16, (), 16, 0),
]


@pytest.mark.parametrize("key, n, extra, bs, hits", CASES)
def test_block_size_and_hits_by_hand(capsys, key, n, extra, bs, hits):
    code, out, err = run(capsys, "--config", str(CONFIGS / f"{key}.json"), "--prompt-len", str(n), *extra)
    assert code == 0 and err == ""
    r = last_json(out)
    assert (r["block_size"], r["min_cacheable_prompt"], r["hit_tokens"]) == (bs, bs + 1, hits)
    assert r["hit_rate"] == hits / n and r["recomputed_tokens"] == n - hits
    assert r["state_aligned"] == (bs != r["requested_block_size"])


def test_staircase_steps_at_every_block_and_marks_the_prompt():
    h = prefix_hit(MemoryConfig(load_presets()["qwen3-next-80b-a3b"]), KVEngineConfig(), 1200)
    xs, ys = h.staircase()
    assert xs[0] == 1 and 1200 in xs and xs[-1] >= 1200 + 544
    for k in range(1, xs[-1] // 544 + 1):  # each step's corners are drawn: 0 → k blocks at k·544 + 1
        i = xs.index(k * 544)
        assert xs[i + 1] == k * 544 + 1
        assert ys[i] == hit_tokens(k * 544, 544) / (k * 544) and ys[i + 1] == k * 544 / (k * 544 + 1)
    assert all(y < 1 for y in ys)  # the last token is always computed
    assert h.next_step == 1633 and h.hit_tokens == 1088


@pytest.mark.parametrize("argv, message", [
    (["--prompt-len", "0"], "from 1 to"),
    (["--prompt-len", "-5"], "from 1 to"),
    (["--prompt-len", "ten"], "invalid int value"),
])
def test_bad_prompt_length_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, "--config", str(CONFIGS / "llama-3.1-8b.json"), *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err


def test_rejected_config_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama"}')
    code, out, err = run(capsys, "--config", str(bad), "--prompt-len", "100")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "missing field" in err


def test_through_the_cli_entry_point():
    proc = subprocess.run([sys.executable, "-m", "app.cli", "prefix-hit", "--config",
                           str(CONFIGS / "jamba-v0.1.json"), "--prompt-len", "161"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = last_json(proc.stdout)
    assert (r["block_size"], r["hit_tokens"]) == (80, 160)


def _staircase_lengths_built_whole(prompt_len: int, bs: int) -> tuple[int, ...]:
    """The staircase's lengths as first written: every corner built, then dropped when too many."""
    top = max(prompt_len + bs, 4 * bs + 1)
    step = max(1, top // MAX_STAIRCASE_POINTS)
    lengths = set(range(1, top + 1, step))
    lengths.update(n for k in range(1, top // bs + 1) for n in (k * bs, k * bs + 1) if n <= top)
    lengths.add(prompt_len)
    if len(lengths) > 3 * MAX_STAIRCASE_POINTS:
        lengths = set(range(1, top + 1, step)) | {prompt_len}
    return tuple(sorted(lengths))


@pytest.mark.parametrize("bs", [1, 2, 16, 544])
@pytest.mark.parametrize("prompt_len", [1, 100, 6_000, 24_000, 200_000])
def test_staircase_draws_the_same_lengths_without_building_every_corner(prompt_len, bs):
    h = PrefixHit(prompt_len, bs, bs, hit_tokens(prompt_len, bs), False)
    assert h.staircase()[0] == _staircase_lengths_built_whole(prompt_len, bs)


def test_the_longest_prompt_in_tiny_blocks_builds_only_the_points_it_draws():
    """A link at --prompt-len 134,217,728 with blocks of 16 built 16.8 million lengths (over a GiB) before keeping
    4,000: the page took seconds on open. Counted by the memory it allocates, not timed."""
    import tracemalloc

    h = PrefixHit(MAX_CONTEXT, 16, 16, hit_tokens(MAX_CONTEXT, 16), False)
    tracemalloc.start()
    try:
        xs, _ = h.staircase()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(xs) <= MAX_STAIRCASE_POINTS + 2 and MAX_CONTEXT in xs
    assert peak < 8 * 2**20, peak  # sets and tuples of the ~4,000 points drawn; 16.8 million ints alone are ~470 MiB
