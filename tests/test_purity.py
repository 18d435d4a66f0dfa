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
