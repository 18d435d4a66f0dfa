import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Page tests assert on every section, so every job a page opens runs without its button (the
# gating itself is tested with the real limit, in test_work.py).
os.environ.setdefault("KVLAB_AUTO_RUN_S", "600")
# Under `pytest -n auto` every core already runs a test process: one torch thread each (and in the app servers
# they start), so no worker's OpenMP threads wait spinning for a core another worker holds.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("KVLAB_THREADS", "1")

from sim.model.device import configure_threads  # noqa: E402
from sim.model.transformer import PRESETS, Llama, ModelConfig, load_model  # noqa: E402

# The torch threads the app itself runs with (app/resources.py), from the first test on: a page test would
# set them anyway, so without this the tests before it ran with torch's default, whose OpenMP threads spin
# on a shared 2-core machine (single tests took minutes instead of seconds).
configure_threads()


def _scan_components_once() -> None:
    """Every new AppTest scans each installed distribution's metadata for Streamlit components (0.1-0.2 s
    quiet, 0.6 s under the suite's load: about what a warm page run takes; the suite makes about 480). The
    installed packages do not change during a test session, so the scan runs once per process; `streamlit run`
    too scans once, at start-up."""
    import functools

    from streamlit.components.v2 import manifest_scanner

    if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):
        manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


_scan_components_once()


def random_model(n_kv_heads: int = 4, seed: int = 0, **overrides) -> Llama:
    """A model with seeded random weights: parity tests need no trained checkpoint."""
    torch.manual_seed(seed)
    cfg = ModelConfig(name=f"random-kv{n_kv_heads}", n_kv_heads=n_kv_heads, **overrides)
    model = Llama(cfg)
    for p in model.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.08)
    return model.eval().requires_grad_(False)


@pytest.fixture(scope="session")
def shipped_models() -> dict[str, Llama]:
    return {name: load_model(name) for name in PRESETS}


PAGES_DIR = ROOT / "pages"


def run_page(slug: str, params: dict[str, str] | None = None, timeout: float = 300):
    """One page of the lab run by AppTest, with `params` in its URL."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(PAGES_DIR / f"{slug}.py"), default_timeout=timeout)
    for k, v in (params or {}).items():
        at.query_params[k] = str(v)
    return at.run()


def run_in_app(slug: str, params: dict[str, str] | None = None, timeout: float = 120):
    """One page reached as a user reaches it: app/main.py (navigation, sidebar) with `params` in the URL,
    then a switch to the page (Home is main's default)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=timeout)
    for k, v in (params or {}).items():
        at.query_params[k] = str(v)
    at.run()
    if slug != "home":
        at.switch_page(str(PAGES_DIR / f"{slug}.py")).run()
    return at


def metric_value(at, label: str) -> str:
    """The value text of the metric with this label (StopIteration names a missing one)."""
    return next(m.value for m in at.metric if m.label == label)


def unescaped(markdown: str) -> str:
    """A message as the reader sees it: app.text.plain backslash-escapes every Markdown character."""
    import re

    return re.sub(r"\\(.)", r"\1", markdown)


def _need_browser():
    import shutil

    from benchmarks.browser import CHROMIUM

    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but no Chromium at {CHROMIUM}: .ci/run must install Debian's chromium")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI=true but playwright is not installed")
        pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)")


# One server and one Chromium for every browser test module (test_browser*.py): the server's caches stay warm
# from one module to the next. Fixtures here, not in a test module, so that each is made once.
@pytest.fixture(scope="session")
def app_url():
    _need_browser()
    from benchmarks.browser import AppServer

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # one server per xdist worker, each its own log
    server = AppServer(ROOT / "test-output" / f"streamlit{'_' + worker if worker else ''}.log")
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def browser():
    _need_browser()
    from playwright.sync_api import sync_playwright

    from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


# The files whose expected values meet floating-point rounding most directly: the model, its caches and kernels,
# quantization, the online softmax and the sentences that report their errors. Their expectations come from the
# computation itself or a proven bound, never a rounding error written down; `.ci/run` runs them a second time
# under the other OpenBLAS kernel choice (OPENBLAS_CORETYPE set or not) and two torch threads to hold them to it.
NUMERICS_FILES = frozenset({
    "test_model.py", "test_oracle.py", "test_kernels.py", "test_masks.py", "test_quant.py", "test_quant_results.py",
    "test_quant_setup.py", "test_takeaways_quant_kernels.py", "test_attention_readouts.py", "test_evict_cache.py",
    "test_graph_step.py", "test_flop_oracle.py", "test_shrink_checks.py", "test_takeaways_generation.py",
    "test_chart_takeaways.py", "test_probe.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in NUMERICS_FILES:
            item.add_marker(pytest.mark.numerics)
