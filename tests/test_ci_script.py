"""`.ci/run` runs the README's second command as written and fails when it fails. Under `set -e`, bash does not stop
at a failing command inside an `&&` list: at 3112366 a lint error skipped the whole suite and the script went on to
the numerics rerun, so only the last step's exit code decided CI's."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    lines = (ROOT / "README.md").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("# 2. install the test tools"))
    return lines[at + 1]


def test_ci_runs_the_readme_test_command_as_written():
    command = _readme_test_command()
    assert command.startswith("python3 -m venv .venv && ") and command.endswith("pytest -n auto")
    assert [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith(command)]


def test_ci_stops_when_the_readme_test_command_fails(tmp_path):
    """The script's own lines from the README command to the end, run with the command's first step failing (a
    stand-in for ruff's or pytest's exit 1): the script must exit non-zero and run nothing after it."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(_readme_test_command()))
    rest = "\n".join(lines[at:]).replace(_readme_test_command(), "false && true", 1)
    script = tmp_path / "rest.sh"
    script.write_text("set -euo pipefail\nstart=0\necho() { builtin echo \"$@\" >> ran.txt; }\n"
                      "python3() { builtin echo after >> ran.txt; }\n" + rest.replace(".venv/bin/python", "python3"))
    got = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    ran = (tmp_path / "ran.txt").read_text().splitlines() if (tmp_path / "ran.txt").exists() else []
    assert got.returncode != 0, (got, ran)
    assert "after" not in ran and not any("numerics" in line for line in ran), ran
