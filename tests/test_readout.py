"""The one Metric type (torch-free) and the Attention kernels page's sentences built from its shapes,
timings and sweeps (hand-made results, nothing timed)."""

import subprocess
import sys
from pathlib import Path

import pytest

from sim.attention.shapes import AttentionShape
from sim.attention.timing import SweepResult
from sim.readout import Metric
from sim.words.attention import (
    backends_caption,
    lengths_up_to,
    no_sweep_warning,
    one_length_caption,
    shape_metrics,
    stale_timing_note,
    sweep_heading,
    sweep_progress,
    timing_heading,
)
from sim.words.catalog import PSEUDO
from tests.test_attention_readouts import fake_result

ROOT = Path(__file__).resolve().parent.parent


def test_metric_defaults_and_is_frozen():
    m = Metric("FLOPs per call", "1 GFLOP")
    assert (m.delta, m.help) == (None, None)
    with pytest.raises(AttributeError):
        m.value = "2 GFLOP"
    assert all(isinstance(x, Metric) for x in shape_metrics(AttentionShape(), 1))


def test_readout_module_imports_without_torch():
    code = "import sys\nimport sim.readout\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_timing_sentences():
    r = fake_result(128)  # B=1, H=1, N=128, d=16, measured on "cpu" with 2 threads
    assert timing_heading(r, "12:34:56", lang=PSEUDO) == (
        'kernels.s.timing_heading(shape=kernels.shape.label(b=1, h=1, q=128, k=128, d=16, '
        'mask=kernels.shape.causal, dtype=float32), at=12:34:56, device=cpu, threads=2)')
    assert stale_timing_note(r, r.shape) is None and stale_timing_note(r, None) is None
    other = AttentionShape(batch=1, heads=1, seq_len=256, head_dim=16)
    assert stale_timing_note(r, other, lang=PSEUDO) == (
        'kernels.s.stale(shape=kernels.shape.label(b=1, h=1, q=128, k=128, d=16, '
        'mask=kernels.shape.causal, dtype=float32))')
    assert backends_caption("cuda:0", 120, lang=PSEUDO) == 'kernels.s.backends(device=cuda:0, timeout=120)'
    assert backends_caption("cpu", 90, lang=PSEUDO) == 'kernels.s.backends(device=cpu, timeout=90)'


def test_sweep_sentences():
    assert no_sweep_warning(AttentionShape(batch=4, heads=32), lang=PSEUDO) == 'kernels.s.no_sweep(bh=128)'
    assert one_length_caption([128], lang=PSEUDO) == 'kernels.s.one_length(n=128)'
    assert lengths_up_to([128, 256, 512, 1024], 512) == [128, 256, 512]
    assert lengths_up_to([128, 256], 100) == []
    assert sweep_progress(1, 4096, 6) == "N = 4,096 (2 of 6)"
    sweep = SweepResult((fake_result(128), fake_result(4096)), 1.5e12)
    assert sweep_heading(sweep) == f"**{sweep.label}** — N = 128 … 4,096"


def test_show_metrics_draws_every_metric_in_rows():
    from streamlit.testing.v1 import AppTest

    def page():
        from app.metrics import show_metrics
        from sim.readout import Metric

        show_metrics([Metric(f"m{i}", str(i), "a delta" if i == 0 else None, "a help" if i == 1 else None)
                      for i in range(5)], 2)
        show_metrics([Metric("alone", "7")])

    at = AppTest.from_function(page).run()
    assert not at.exception
    assert [(m.label, m.value) for m in at.metric] == [(f"m{i}", str(i)) for i in range(5)] + [("alone", "7")]
    assert at.metric[0].proto.delta == "a delta" and at.metric[1].proto.help == "a help"
    assert len(at.columns) == 3 * 2 + 1  # three rows of two, then one row of one
