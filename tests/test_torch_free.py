"""The numpy-only packages and the pages whose default view needs no model never import torch (~1.5 s of
cold start): each module, and each page run by AppTest, in a fresh interpreter."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NUMPY_ONLY = [*(ROOT / "sim" / pkg for pkg in ("cost", "alloc", "serving", "work", "lesson")), ROOT / "sim" / "claims.py", ROOT / "sim" / "readout.py"]
MODULES = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for d in NUMPY_ONLY for p in ([d] if d.is_file() else sorted(d.rglob("*.py"))))
# Default views that need no model; run directly (app/main.py opens Home, which shows torch's version).
# The simulator pages run the real model by default (a live section, a few seconds): with it switched off
# in the link their simulators alone must not import torch.
TORCH_FREE_PAGES = {"kv_memory": {}, "roofline": {}, "paged_blocks": {"live": "0"}, "prefix_caching": {"live": "0"},
                    "serving": {"live": "0"}, "shrink_cache": {}, "lesson": {}}


def fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("module", MODULES)
def test_numpy_only_module_imports_without_torch(module):
    out = fresh(f"import importlib, sys\nimportlib.import_module({module!r})\nprint('torch' in sys.modules)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False", f"{module} imports torch"


@pytest.mark.parametrize("slug", TORCH_FREE_PAGES)
def test_page_default_view_runs_without_torch(slug):
    params = TORCH_FREE_PAGES[slug]
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(ROOT / 'pages' / f'{slug}.py')!r}, default_timeout=300)\n"
        f"for k, v in {params!r}.items(): at.query_params[k] = v\n"
        "at.run()\n"
        "assert not at.exception, [e.value for e in at.exception]\n"
        "print('torch' in sys.modules)\n"
    )
    out = fresh(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", f"{slug} imports torch on open"
