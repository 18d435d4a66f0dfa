"""The allocators' refusals a command-line user can cause (sim/alloc: a pool too big, a KV capacity below one block
or below the longest request): exit code 2 and one line on stderr that names the numbers, the same line as before
they became Refusals (the English of their catalog entry, alloc_refusals.json)."""

import pytest

import app.cli_trace
from app.cli import fail, main
from sim.msg import Msg
from sim.refusal import Refusal
from sim.words import say

TRACE = '{"prompt_len": 100, "output_len": 20}\n{"prompt_len": 300, "output_len": 50, "arrival": 0.5}\n'
MAX_LEN = 350  # the longest request: prompt + output


@pytest.mark.parametrize(("argv", "msg", "line"), [
    (["--kv-tokens", "5"], Msg("alloc.err.capacity_block", cap=5, bs=16), "capacity 5 is smaller than one block of 16"),
    (["--kv-tokens", "5", "--policy", "static"], Msg("alloc.err.capacity_block", cap=5, bs=16),
     "capacity 5 is smaller than one block of 16"),
    (["--kv-tokens", "100"], Msg("alloc.err.capacity", cap=100, max_len=MAX_LEN),
     "a KV capacity of 100 token slots cannot hold one request of the maximum length 350: raise the capacity or "
     "lower the maximum length"),
    # 351 slots hold 350 tokens, but in blocks of 256 only one block (256 slots) fits
    (["--kv-tokens", "351", "--block-size", "256"], Msg("alloc.err.blocks", n=1, bs=256, slots=256, max_len=MAX_LEN),
     "1 blocks of 256 slots (256) cannot hold one request of the maximum length 350: raise the capacity or use "
     "smaller blocks"),
])
def test_serve_prints_an_allocator_refusal_on_one_line_and_exits_2(tmp_path, capsys, monkeypatch, argv, msg, line):
    trace = tmp_path / "t.jsonl"
    trace.write_text(TRACE)
    failed = []
    monkeypatch.setattr(app.cli_trace, "fail", lambda exc, prog="": failed.append(exc) or fail(exc, prog))
    code = main(["serve", "--trace", str(trace), *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(failed) == 1 and isinstance(failed[0], Refusal) and failed[0].msg == msg  # a message value, not English
    assert err == f"serve: {say('en', msg)}\n"  # the catalog's English with these numbers, on one line
    assert err == f"serve: {line}\n"  # the line the command printed before it was a Refusal
    assert say("ko", msg) != say("en", msg)  # and a page would word it in Korean
