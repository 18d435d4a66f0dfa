"""sim/ never imports streamlit or plotly: checked in the source and in a fresh interpreter."""

import ast
import subprocess
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "sim"
FORBIDDEN = ("streamlit", "plotly")


def test_no_forbidden_import_in_source():
    offenders = []
    for path in sorted(SIM.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_all_of_sim_loads_neither():
    modules = [".".join(p.relative_to(SIM.parent).with_suffix("").parts) for p in SIM.rglob("*.py")]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(sorted(n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=SIM.parent, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_user_facing_error_type():
    """Every refusal a user can cause is a sim.refusal.Refusal: the allocators' name for it, a trace's and the
    serving simulators' are that class, not look-alikes."""
    from sim.alloc.errors import WordedError
    from sim.alloc.trace import TraceError
    from sim.refusal import Refusal
    from sim.serving.errors import Refusal as ServingRefusal

    assert WordedError is Refusal and ServingRefusal is Refusal and issubclass(TraceError, Refusal)
    bad = TraceError(3, "output_len", "not_regular", path="'x'")
    assert isinstance(bad, Refusal) and bad.key == "not_regular" and str(bad).startswith("line 3: output_len: ")
    defined = []
    for path in SIM.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "ValueError" for b in node.bases)
                    and any(isinstance(f, ast.FunctionDef) and f.name in ("words", "in_lang") for f in node.body)
                    and path.name != "refusal.py"):
                defined.append(f"{path.relative_to(SIM)}:{node.name}")  # a ValueError that words itself
    assert defined == []  # no second worded ValueError class
