"""A user's JSONL trace (sim/alloc/trace.py) and the two command-line subcommands that replay it (app/cli_trace.py).

Every refusal must name the line and the field; the prefix replay's hit counts are worked out by hand; the serve
command's numbers are the simulators' for the same trace."""

import json
import subprocess
import sys

import numpy as np
import pytest

from app import cli_trace
from sim.alloc import trace as tr
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.serving import engine as en
from sim.serving import schedulers as sch
from sim.serving.comparison import DeploymentConfig
from tests.conftest import ROOT

IDS20 = list(range(1, 21))


def write(tmp_path, lines, name="t.jsonl") -> str:
    p = tmp_path / name
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(p)


def run_cli(name, argv, capsys):
    rc = cli_trace.main(name, argv)
    out, err = capsys.readouterr()
    return rc, out, err


# --- the format -----------------------------------------------------------------------------------


def test_lines_parse_into_requests_in_file_order():
    text = tr.write_trace([{"prompt": [5, 6, 7], "output_len": 2},
                           {"arrival": 0.5, "prompt_len": 10, "prefix_group": "sys", "prefix_len": 8, "output_len": 3,
                            "id": "q"},
                           {"arrival": 0.5, "prompt_len": 12, "prefix_group": "sys", "prefix_len": 6, "output_len": 1}])
    tf = tr.parse_trace("\n" + text)  # a blank first line is skipped but still counted
    assert [r.line for r in tf.requests] == [2, 3, 4]
    assert tf.prompt_len.tolist() == [3, 10, 12] and tf.output_len.tolist() == [2, 3, 1]
    assert tf.arrival_s.tolist() == [0.0, 0.5, 0.5]
    assert [r.label for r in tf.requests] == ["line 2", "q", "line 4"]
    a, b = tf.requests[1].prompt, tf.requests[2].prompt
    assert tf.requests[0].prompt.tolist() == [5, 6, 7]
    assert np.array_equal(a[:6], b[:6])  # the group's shared tokens: the shorter prefix_len, 6
    assert a[6:8].tolist() == tr.parse_trace(text).requests[1].prompt[6:8].tolist()  # same file, same ids
    assert not np.array_equal(a[8:], b[8:10])  # private tokens differ
    wl = tf.to_workload()
    assert wl.max_model_len == 13 and wl.max_tokens.tolist() == [2, 3, 1]
    ptrace = tf.to_prefix_trace()
    assert ptrace.requests[0].num_stored == 4 and ptrace.requests[0].stored().tolist() == [5, 6, 7, -1]


@pytest.mark.parametrize(("text", "line", "field", "words"), [
    ('{"prompt": [1], "output_len": "x"}', 1, "output_len", "whole number"),
    ('{"prompt": [1], "output_len": 0}', 1, "output_len", "1..32,767, got 0"),
    ('{"prompt": [1], "output_len": 2.5}', 1, "output_len", "whole number"),
    ('{"prompt": [1], "output_len": true}', 1, "output_len", "whole number"),
    ('{"prompt": [1]}', 1, "output_len", "missing"),
    ('{"prompt": [], "output_len": 1}', 1, "prompt", "0 ids"),
    ('{"prompt": [1, -2], "output_len": 1}', 1, "prompt", "token 1"),
    ('{"prompt": [1, 2147483648], "output_len": 1}', 1, "prompt", "token 1"),
    ('{"prompt": "abc", "output_len": 1}', 1, "prompt", "list"),
    ('{"output_len": 1}', 1, "prompt", "missing"),
    ('{"prompt": [1], "prompt_len": 1, "output_len": 1}', 1, "prompt_len", "not both"),
    ('{"prompt_len": 9, "prefix_group": "a", "output_len": 1}', 1, "prefix_len", "missing"),
    ('{"prompt_len": 9, "prefix_len": 3, "output_len": 1}', 1, "prefix_len", "prefix_group"),
    ('{"prompt_len": 9, "prefix_group": "a", "prefix_len": 10, "output_len": 1}', 1, "prefix_len", "0..9"),
    ('{"prompt_len": 9, "prefix_group": [1], "prefix_len": 1, "output_len": 1}', 1, "prefix_group", "text"),
    ('{"prompt": [1], "output_len": 1, "arrival": -1}', 1, "arrival", "seconds"),
    ('{"prompt": [1], "output_len": 1, "output_length": 4}', 1, "'output_length'", "unknown field"),
    ('{"prompt_len": 30000, "output_len": 3000}', 1, "output_len", "32,768"),
])
def test_each_bad_field_is_named_with_its_line(text, line, field, words):
    with pytest.raises(tr.TraceError) as info:
        tr.parse_trace('{"prompt": [1, 2], "output_len": 1}\n' * (line - 1) + text)
    err = info.value
    assert err.line == line and err.field == field
    assert str(err).startswith(f"line {line}: {field}: ") and words in str(err)


@pytest.mark.parametrize(("text", "line", "words"), [
    ('{"prompt": [1], "output_len": 1}\n{"prompt": [1], "output_len": 1, "arrival": NaN}', 2, "not valid JSON"),
    ('{"prompt": [1], "output_len": 1, "arrival": Infinity}', 1, "not valid JSON"),
    ("[1, 2]", 1, "JSON object"),
    ("{'prompt': [1]}", 1, "not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, 1, ""),
    ('{"prompt": [1], "output_len": 1, "arrival": 2}\n{"prompt": [1], "output_len": 1, "arrival": 1}', 2,
     "before the line above's 2 s"),
])
def test_lines_that_are_not_requests(text, line, words):
    with pytest.raises(tr.TraceError) as info:
        tr.parse_trace(text)
    assert info.value.line == line and words in str(info.value)


def test_sizes_are_bounded_before_parsing(tmp_path):
    with pytest.raises(tr.TraceError, match="over the limit of 100"):
        tr.parse_trace(b"x" * 101, max_bytes=100)
    with pytest.raises(tr.TraceError, match=r"^the trace: no requests"):
        tr.parse_trace("\n \n")
    with pytest.raises(tr.TraceError, match="line 2: not UTF-8"):
        tr.parse_trace(b'{"prompt": [1], "output_len": 1}\n\xff\xfe')
    many = '{"prompt": [1], "output_len": 1}\n' * (tr.MAX_TRACE_REQUESTS + 1)
    with pytest.raises(tr.TraceError, match=f"line {tr.MAX_TRACE_REQUESTS + 1}: more than 2,000 requests"):
        tr.parse_trace(many)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * 101)
    with pytest.raises(tr.TraceError, match="101 bytes, over the limit of 100"):
        tr.read_trace(big, max_bytes=100)
    with pytest.raises(tr.TraceError, match="cannot read"):
        tr.read_trace(tmp_path / "missing.jsonl")


# --- python -m app.cli prefix ---------------------------------------------------------------------


def test_prefix_replays_the_trace_one_request_at_a_time(tmp_path, capsys):
    path = write(tmp_path, [{"prompt": IDS20, "output_len": 4}, {"prompt": IDS20 + [21], "output_len": 4},
                            {"prompt": IDS20[:16], "output_len": 2}, {"prompt": [99] + IDS20, "output_len": 1}])
    rc, out, err = run_cli("prefix", ["--trace", path, "--block-size", "4"], capsys)
    assert rc == 0 and err == ""
    last = json.loads(out.strip().splitlines()[-1])
    # r0: nothing cached. r1: its 21 tokens are 5 full blocks behind r0's, (21 - 1) // 4 = 5 may hit -> 20.
    # r2: all 16 tokens cached, but the last one is recomputed: (16 - 1) // 4 = 3 blocks -> 12.
    # r3: token 99 first: its first block's hash differs, so the chain never matches -> 0.
    assert last["hit_tokens"] == [0, 20, 12, 0]
    assert last["hit_rate"] == pytest.approx(32 / (20 + 21 + 16 + 21))
    # at block size 16: r1 hits 16 ((21-1)//16 = 1 block), r2 hits 0 ((16-1)//16 = 0)
    rc, out, _ = run_cli("prefix", ["--trace", path], capsys)
    assert json.loads(out.strip().splitlines()[-1])["hit_tokens"] == [0, 16, 0, 0]


def test_prefix_with_a_small_pool_evicts(tmp_path, capsys):
    # blocks of 4, 6 blocks: r0 stores 20 + 3 = 23 tokens in all 6 blocks and caches its 5 full ones. r1 (20 other
    # tokens + 1 output stored = 6 blocks) takes every block: r0's 5 cached ones are evicted, so r2 (r0's prompt)
    # hits 0. r1 freed its blocks last one first, so r2's 5 blocks are r1's partial last block (never cached) and 4
    # cached ones: 5 + 4 = 9 evictions. With 12 blocks nothing is evicted and r2 hits r0's blocks.
    path = write(tmp_path, [{"prompt": IDS20, "output_len": 4}, {"prompt": list(range(100, 120)), "output_len": 2},
                            {"prompt": IDS20, "output_len": 1}])
    rc, out, _ = run_cli("prefix", ["--trace", path, "--block-size", "4", "--num-blocks", "6"], capsys)
    last = json.loads(out.strip().splitlines()[-1])
    assert rc == 0 and last["hit_tokens"] == [0, 0, 0] and last["evictions"] == 9
    rc, out, _ = run_cli("prefix", ["--trace", path, "--block-size", "4", "--num-blocks", "12"], capsys)
    assert json.loads(out.strip().splitlines()[-1])["hit_tokens"] == [0, 0, 16]  # (20 - 1) // 4 = 4 blocks


def test_prefix_groups_hit_their_shared_blocks(tmp_path, capsys):
    path = write(tmp_path, [{"prompt_len": 300, "prefix_group": "a", "prefix_len": 256, "output_len": 5},
                            {"prompt_len": 280, "prefix_group": "a", "prefix_len": 256, "output_len": 5},
                            {"prompt_len": 280, "prefix_group": "b", "prefix_len": 256, "output_len": 5},
                            {"prompt_len": 260, "prefix_group": "a", "prefix_len": 100, "output_len": 5}])
    rc, out, _ = run_cli("prefix", ["--trace", path], capsys)
    # 256 shared tokens = 16 full blocks; group b shares nothing with a; the last shares a's first 100 = 6 blocks
    assert json.loads(out.strip().splitlines()[-1])["hit_tokens"] == [0, 256, 0, 96]


@pytest.mark.parametrize(("argv", "words"), [
    (["--block-size", "0"], "prefix: argument --block-size: must be 1..256, got 0"),
    (["--num-blocks", "x"], "prefix: argument --num-blocks: must be a whole number, got 'x'"),
    (["--num-blocks", "1"], "prefix: line 1: the request stores 23 tokens"),
    (["--frobnicate"], "prefix: unrecognized arguments: --frobnicate"),
])
def test_prefix_refusals_are_one_line_and_exit_2(tmp_path, capsys, argv, words):
    path = write(tmp_path, [{"prompt": IDS20, "output_len": 4}])
    rc, out, err = run_cli("prefix", ["--trace", path] + argv, capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(words), err


def test_a_bad_trace_through_the_real_command_line(tmp_path):
    path = write(tmp_path, [{"prompt": [1, 2], "output_len": 1}, {"prompt": [1, 2], "output_len": 1},
                            {"prompt": [1, "two"], "output_len": 1}])
    for name in ("prefix", "serve"):
        p = subprocess.run([sys.executable, "-m", "app.cli", name, "--trace", path], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.strip() == f"{name}: line 3: prompt: token 1 must be a whole number 0..2,147,483,647, " \
                                   "got 'two'"
    path = write(tmp_path, [{"prompt": [1, 2], "output_len": 1}, {"prompt": [1, 2], "output_len": 1},
                            {"prompt": [1, 3], "output_len": 1}])
    p = subprocess.run([sys.executable, "-m", "app.cli", "prefix", "--trace", path, "--block-size", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    assert json.loads(p.stdout.strip().splitlines()[-1])["hit_tokens"] == [0, 1, 1]


# --- python -m app.cli serve ----------------------------------------------------------------------

SERVE_TRACE = [{"arrival": 0.01 * i, "prompt_len": 200 + 37 * i, "prefix_group": "sys", "prefix_len": 128,
                "output_len": 20 + 11 * i} for i in range(12)]


@pytest.mark.parametrize("policy", ["static", "continuous", "chunked"])
def test_serve_prints_the_simulators_metrics(tmp_path, capsys, policy):
    path = write(tmp_path, SERVE_TRACE)
    rc, out, err = run_cli("serve", ["--trace", path, "--policy", policy, "--kv-tokens", "4096", "--max-batch", "8",
                                     "--token-budget", "1024"], capsys)
    assert rc == 0 and err == ""
    got = json.loads(out.strip().splitlines()[-1])
    wl = tr.parse_trace(tr.write_trace(SERVE_TRACE)).to_workload()
    cost = DeploymentConfig(kv_limit_tokens=4096).cost()
    if policy == "static":
        r = sch.simulate_static(wl, en.EngineConfig(max_num_seqs=8, capacity_tokens=4096, block_size=16, watermark=0.01, max_num_batched_tokens=1 << 20, enable_chunked_prefill=False), cost)
    else:
        cfg = en.EngineConfig(max_num_seqs=8, capacity_tokens=4096, block_size=16, watermark=0.01, max_num_batched_tokens=1024, enable_chunked_prefill=policy == "chunked", cpu_capacity_tokens=4096)
        r = en.simulate_engine(wl, cfg, cost).result
    ttft, itl = r.percentiles(r.ttft_s), r.percentiles(r.itl_s)
    assert got["throughput_tok_s"] == r.tokens_per_s
    assert (got["ttft_p50_s"], got["ttft_p95_s"], got["itl_p50_s"]) == (ttft[0], ttft[1], itl[0])
    assert got["requests"] == 12 and got["policy"] == policy and got["output_tokens"] == int(wl.output_len.sum())


def test_serve_chunked_prefill_lowers_the_tail_of_inter_token_latency(tmp_path, capsys):
    # long prompts arriving while others decode: unchunked, each prompt stalls every decode for a whole prefill
    lines = [{"arrival": 0.02 * i, "prompt_len": 6000, "output_len": 200} for i in range(16)]
    path = write(tmp_path, lines)
    got = {}
    for policy in ("continuous", "chunked"):
        rc, out, _ = run_cli("serve", ["--trace", path, "--policy", policy, "--max-batch", "16", "--token-budget",
                                       "8192" if policy == "continuous" else "512"], capsys)
        assert rc == 0
        got[policy] = json.loads(out.strip().splitlines()[-1])
    # Llama 3.1 8B on an H100: a 6,000-token prefill takes ~0.09 s, so unchunked the p99 gap is ~94 ms against ~9 ms
    # with 512-token chunks; the p95 is a plain decode step either way (16 stalls among 3,184 gaps)
    assert got["chunked"]["itl_p99_s"] < got["continuous"]["itl_p99_s"] / 5


@pytest.mark.parametrize(("argv", "words"), [
    (["--policy", "fast"], "serve: argument --policy: invalid choice: 'fast'"),
    (["--policy", "static", "--preemption", "swap"], "serve: static batching reserves"),
    (["--policy", "continuous", "--token-budget", "64"], "serve: without chunking, a token budget of 64"),
    (["--policy", "chunked", "--token-budget", "64"], "serve: a token budget of 64 cannot give each of 256"),
    (["--kv-tokens", "100"], "serve: a KV capacity of 100 token slots cannot hold one request of the maximum length 748"),
    # host slots past any pool's bound: the flag named, with the bound, before a pool is made
    (["--cpu-tokens", str(1 << 26), "--block-size", "1", "--preemption", "swap"],
     "serve: argument --cpu-tokens: must be 0..4,194,304, got 67,108,864"),
])
def test_serve_refusals_are_one_line_and_exit_2(tmp_path, capsys, argv, words):
    path = write(tmp_path, SERVE_TRACE)
    rc, out, err = run_cli("serve", ["--trace", path] + argv, capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(words), err


@pytest.mark.parametrize(("argv", "key", "fields"), [
    (["--kv-tokens", "8"], "alloc.err.capacity_block", {"cap": 8, "bs": 16}),
    (["--policy", "static", "--kv-tokens", "8"], "alloc.err.capacity_block", {"cap": 8, "bs": 16}),
    (["--cpu-tokens", "5", "--preemption", "swap"], "serving.err.cpu_capacity",
     {"bs": 16, "max": MAX_CAPACITY_TOKENS, "got": 5}),
])
def test_serve_refuses_settings_against_the_block_size(tmp_path, capsys, argv, key, fields):
    """A KV limit or host slots below one block: one line, exit 2, the refusal's English with its numbers."""
    from sim.msg import Msg
    from sim.words import say

    rc, out, err = run_cli("serve", ["--trace", write(tmp_path, SERVE_TRACE)] + argv, capsys)
    assert rc == 2 and out == "" and err == f"serve: {say('en', Msg(key, **fields))}\n"


def test_serve_refuses_a_trace_that_needs_too_many_passes(tmp_path, capsys):
    """The engine's refusal of a user's trace: the command line's one line is the refusal's English, every number
    in it (and the same refusal worded in Korean carries them too)."""
    from sim.refusal import Refusal
    from sim.words import say

    lines = [{"prompt_len": 1, "output_len": 32_767}] * 10  # 327,670 tokens one at a time: past 300,000 passes
    path = write(tmp_path, lines)
    rc, out, err = run_cli("serve", ["--trace", path, "--policy", "continuous", "--max-batch", "1", "--token-budget",
                                     "1048576"], capsys)
    wl = tr.parse_trace(tr.write_trace(lines)).to_workload()
    cfg = en.EngineConfig(max_num_seqs=1, capacity_tokens=DeploymentConfig().kv_budget()[2],
                          max_num_batched_tokens=1 << 20, enable_chunked_prefill=False)
    with pytest.raises(Refusal) as e:
        en.check_engine(wl, cfg)
    fields = {"tokens": 327_670, "seqs": 1, "least": 327_670, "max": sch.MAX_ITERATIONS}
    assert (e.value.key, dict(e.value.fields)) == ("serving.err.passes", fields)
    assert rc == 2 and out == "" and err == f"serve: {e.value}\n"
    ko = say("ko", e.value.msg)
    assert all(f"{v:,}" in ko for v in fields.values())


def test_the_page_keys_a_trace_run_by_its_digest_not_its_bytes():
    """Issue 39: the shared result cache kept whole traces (up to 2 MiB each) in its keys; a key is now the trace's
    SHA-256, so what the cache holds is bounded by its byte limit and the results themselves."""
    import hashlib

    from app.work import server
    from sim.work.queue import approx_bytes
    from tests.conftest import run_page

    text = tr.write_trace([{"prompt": list(range(1000, 1500 + i)), "output_len": 5} for i in range(40)])
    assert len(text) > 100_000
    at = run_page("serving", {"tab": "trace", "live": "0"})
    at.text_area(key="tr_text").set_value(text).run()
    assert not at.exception
    keys = [k for k in list(server().results._data) if k[0] == "serving.trace"]
    assert keys and all(approx_bytes(k) < 4096 for k in keys), [approx_bytes(k) for k in keys]
    assert any(hashlib.sha256(text.encode()).hexdigest() in k[1] for k in keys)
