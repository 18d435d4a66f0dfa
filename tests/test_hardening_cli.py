"""Issue 39 on the command line and in the trace reader: untrusted text never reaches the terminal raw, error
lines are one short line, a FIFO or a device is refused instead of read, and JSON Lines split at "\\n" only."""

import json
import os
import subprocess
import sys

from app import cli_trace
from app.cli import MAX_ERROR
from sim.alloc import trace as tr
from tests.conftest import ROOT

ESC_ID = "\x1b[2J\x1b]0;owned\x07red\x1b[31m"


def _cli(argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "app.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_a_line_separator_inside_a_string_is_part_of_the_line():
    # valid JSON holds U+2028, U+2029 and U+0085 raw inside a string (str.splitlines() splits at each)
    raw = ('{"id": "a\u2028b\u2029c\x85d", "prompt_len": 4, "output_len": 2}\r\n'
           '{"prompt_len": 3, "output_len": 1}\n')
    tf = tr.parse_trace(raw.encode())
    assert [r.line for r in tf.requests] == [1, 2]
    assert tf.requests[0].label == "a\u2028b\u2029c\x85d"


def test_prefix_writes_control_characters_in_an_id_out(tmp_path, capsys):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"id": ESC_ID, "prompt_len": 20, "output_len": 2}) + "\n")
    rc = cli_trace.main("prefix", ["--trace", str(p)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out.splitlines()[0]  # shown, written out
    assert json.loads(out.splitlines()[-1])["hit_tokens"] == [0]


def test_a_fifo_as_the_trace_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for sub in ("prefix", "serve"):
        got = _cli([sub, "--trace", str(fifo)])  # before the fix: blocked in open() until killed
        assert got.returncode == 2 and got.stdout == ""
        assert len(got.stderr.splitlines()) == 1
        assert "is not a regular file" in got.stderr


def test_a_folder_or_a_device_is_refused(tmp_path):
    for path in (str(tmp_path), "/dev/zero"):
        try:
            tr.read_trace(path)
        except tr.TraceError as exc:
            assert exc.key == "not_regular", exc
        else:
            raise AssertionError(f"{path} was read as a trace")


def test_error_lines_are_one_short_line_with_control_characters_written_out(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"prompt_len": 20, "output_len": 2}) + "\n")
    hostile = ESC_ID + "x" * 10_000
    for argv in (["serve", "--trace", str(p), "--policy", hostile], ["serve", "--trace", str(p), "--model", hostile],
                 ["prefix", "--trace", str(p), "--block-size", hostile], ["prefix", "--trace", str(tmp_path / hostile[:200])],
                 [hostile]):
        got = _cli(argv)
        assert got.returncode == 2, argv[:2]
        lines = got.stderr.splitlines()
        assert len(lines) == 1 and len(lines[0]) <= MAX_ERROR, (argv[:2], len(got.stderr))
        assert "\x1b" not in got.stderr and "\x07" not in got.stderr, argv[:2]
