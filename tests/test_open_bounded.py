"""A link cannot make a page's opening run long work. With every declared control at its max, and again at its min,
each page (and each view of tests/test_controls.py's VIEWS) opens under the app's own on-open limit without an
exception; every job whose estimate is over that limit is not handed to the shared queue (a button is drawn
instead); every job that is handed to it unasked was estimated within the limit; and the models' forward passes
during the opening stay under a fixed amount of work. What ran is counted (the queue's submissions, the estimates
asked for, the tokens through the model), never timed.

The page tests raise the limit (conftest.py) so that every section draws: under that setting a link such as
`/kv_quantization?win=16&len=1024&all=1` runs for minutes by design. These tests put the real limit back."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
from streamlit.testing.v1 import AppTest

from app.controls.declared import Among, Choice, Number, Slider, Stops, Text, Toggle
from app.urlstate import CONTROLS_KEY
from app.work import AUTO_ENV, AUTO_RUN_S, SHOWN_KEY
from sim.model.transformer import PRESETS
from tests.conftest import PAGES_DIR
from tests.test_controls import VIEWS

TINY_CONTEXT = PRESETS["mha"].max_seq_len
# Model work an opening may do, in tokens of the bundled tiny model (a larger model's tokens count by its parameters
# over the tiny model's, counted by their MLPs' parameters): 16 full contexts. At the max links, with the reference
# rates, the most any view's opening does within its limit is under a third of that (the lesson's step 4: 35 tokens
# of the real SmolLM2, 4,725); KV quantization's headline alone at win=16, len=1024 is 16 windows × 1,024 tokens ×
# 9 passes (8 schemes and the reference) = 147,456.
OPEN_WORK_TOKENS = 16 * TINY_CONTEXT
MAX_LINK = {"win": "16", "len": "1024", "all": "1", "lang": "ko"}  # the link the defect report opened


@dataclass
class Spy:
    """What one page run started: job kind -> its estimate (as asked of the server's rate book), the keys' kinds handed to
    the shared queue (run_job's jobs and once()'s measurements), the models' work in tokens of the bundled tiny model
    (each MLP call's tokens × its parameters: every path through a model's layers, the teacher-forced quantized one
    included, calls them), and the KV quantization page's teacher-forced evaluations."""

    estimates: dict[str, float] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    work_tokens: float = 0.0
    evaluations: int = 0
    sizes: dict[int, int] = field(default_factory=dict)

    def clear(self) -> None:
        self.estimates.clear()
        self.submitted.clear()
        self.work_tokens, self.evaluations = 0.0, 0

    def size(self, module) -> int:
        if id(module) not in self.sizes:
            self.sizes[id(module)] = sum(p.numel() for p in module.parameters())
        return self.sizes[id(module)]


@pytest.fixture
def spy(monkeypatch, shipped_models):
    from torch.nn.modules.module import register_module_forward_hook

    from app import resources
    from sim.model import quant_errors
    from sim.model.transformer import MLP
    from sim.work.queue import RateBook, SharedRuns
    from sim.work.run_cost import DEFAULT_RATES

    monkeypatch.setenv(AUTO_ENV, str(AUTO_RUN_S))
    s, lock = Spy(), threading.Lock()
    tiny = shipped_models["mha"]
    tiny_token = sum(s.size(layer.mlp) for layer in tiny.model.layers)  # one token through the tiny model's MLPs
    run, evaluate = SharedRuns.run, quant_errors.evaluate_scheme

    def spied_estimate(self, kind, prior_s):
        s.estimates[kind] = prior_s  # the cost model's, uncorrected by this machine's runs (test_work tests those)
        return prior_s

    def spied_run(self, key, compute, **kw):
        s.submitted.append(key[0])
        return run(self, key, compute, **kw)

    def counted(module, args, output):
        if isinstance(module, MLP):
            with lock:
                s.work_tokens += args[0].shape[:-1].numel() * s.size(module) / tiny_token

    def spied_evaluate(*args, **kw):
        s.evaluations += 1
        return evaluate(*args, **kw)

    # Every estimate from the rates fitted on the project's reference CPU, not this machine's: what a link may start
    # then does not depend on how fast the machine running the tests is.
    monkeypatch.setattr(resources, "model_rates", lambda name, attn_impl: DEFAULT_RATES[attn_impl])
    monkeypatch.setattr(RateBook, "estimate", spied_estimate)
    monkeypatch.setattr(SharedRuns, "run", spied_run)
    monkeypatch.setattr(quant_errors, "evaluate_scheme", spied_evaluate)
    handle = register_module_forward_hook(counted)
    yield s
    handle.remove()


def at_end(control, high: bool) -> str | None:
    """The control's largest (`high`) or smallest value as a link carries it: the last or first option, a toggle on
    or off, text at its longest or empty."""
    if isinstance(control, Slider | Number | Among):
        return f"{control.hi if high else control.lo}"
    if isinstance(control, Stops | Choice):
        options = control.stops if isinstance(control, Stops) else control.choices()
        return f"{options[-1] if high else options[0]}"
    if isinstance(control, Toggle):
        return "1" if high else "0"
    if isinstance(control, Text):
        return "x" * min(control.max_len, control.max_chars or control.max_len) if high else ""
    return None


def open_page(slug: str, params: dict) -> AppTest:
    at = AppTest.from_file(str(PAGES_DIR / f"{slug}.py"), default_timeout=300)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def declared_controls(slug: str, view: dict, monkeypatch) -> dict:
    """The view's declared controls, read from an opening that starts no job at all (a limit of 0 s)."""
    monkeypatch.setenv(AUTO_ENV, "0")
    at = open_page(slug, view)
    monkeypatch.setenv(AUTO_ENV, str(AUTO_RUN_S))
    return at.session_state[CONTROLS_KEY]


def check_bounded(at: AppTest, spy: Spy, *, work: bool = True) -> None:
    assert not at.exception, [e.value for e in at.exception]
    over = {kind for kind, s in spy.estimates.items() if s > AUTO_RUN_S}
    assert not over & set(spy.submitted), (over, spy.submitted)  # over the limit: not started
    if over:
        assert at.button, over  # ... and a button to start it
    started = {kind: spy.estimates[kind] for kind in spy.submitted if kind in spy.estimates}
    assert all(s <= AUTO_RUN_S for s in started.values()), started
    if work:
        assert spy.work_tokens <= OPEN_WORK_TOKENS, spy.work_tokens


def shown(at: AppTest) -> dict:
    """Job kind -> the result the page drew (app/work.py keeps it)."""
    return at.session_state[SHOWN_KEY] if SHOWN_KEY in at.session_state else {}


@pytest.mark.parametrize("high", [True, False], ids=["max", "min"])
@pytest.mark.parametrize(("slug", "view"), VIEWS)
def test_a_link_at_every_end_starts_no_long_work(slug, view, high, spy, monkeypatch):
    declared = declared_controls(slug, view, monkeypatch)
    params = {k: v for k, c in declared.items() if (v := at_end(c, high)) is not None} | view
    spy.clear()
    check_bounded(open_page(slug, params), spy)


def test_kv_quantization_measures_a_long_link_only_when_asked(spy):
    """The defect's link: its estimate is over the limit, no teacher-forced run starts, the Run button waits; the
    default link is within it and opens on its measured chart."""
    at = open_page("kv_quantization", MAX_LINK)
    check_bounded(at, spy)
    assert spy.estimates["kv_quantization.chosen"] > AUTO_RUN_S
    assert spy.evaluations == 0
    assert "kv_quantization.chosen" not in shown(at)
    assert [b for b in at.button if b.key == "_work.button.kv_quantization.chosen"]

    spy.clear()
    at = open_page("kv_quantization", {})
    check_bounded(at, spy, work=False)  # its measurements run unasked: within the limit, not within OPEN_WORK_TOKENS
    assert "kv_quantization.chosen" in shown(at)  # measured now, or earlier on this server
    assert not [b for b in at.button if b.key == "_work.button.kv_quantization.chosen"]
