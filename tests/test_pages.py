"""Every page in the navigation renders with no exception, at defaults and with bad URL values."""

from pathlib import Path

import pytest

from app.registry import PAGES
from sim.model.device import pick_device
from sim.msg import Msg
from sim.words import say
from sim.work.threads import threads_message
from tests.conftest import run_in_app

ROOT = Path(__file__).resolve().parent.parent


run_page = run_in_app


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_page_renders(slug):
    at = run_page(slug)
    assert not at.exception, at.exception
    expected = "KV Cache Lab" if slug == "home" else next(p.title for p in PAGES if p.slug == slug)
    assert at.title[0].value == expected


@pytest.mark.parametrize("slug", [p.slug for p in PAGES])
def test_page_survives_garbage_url(slug):
    at = run_page(slug, {"n": "-1e999", "variant": "../../etc/passwd", "prompt": "x" * 5000, "mode": "%00"})
    assert not at.exception, at.exception


def test_every_page_is_built():
    """Every page in the registry has its file in pages/, and every file there its entry."""
    assert sorted(p.path.name for p in PAGES) == sorted(f.name for f in PAGES[0].path.parent.glob("*.py"))


def test_home_device_panel_shows_the_device_in_use():
    at = run_page("home")
    lab_map = at.table[0].value  # a static table: every page's row, its summary wrapped, nothing cut off
    assert list(lab_map["Page"]) == [p.title for p in PAGES if p.slug != "home"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Device in use"] == str(pick_device())
    import torch

    assert metrics["torch"] == torch.__version__
    threads = next(m for m in at.metric if m.label in ("CPU threads", "GPU memory"))
    if threads.label == "CPU threads":  # the number is explained where it is shown
        key, fields = threads_message()
        assert threads.help == say("en", Msg("home.threads_help", why=Msg(key, **fields))) and "KVLAB_THREADS" in threads.help
    # the pages are listed once (the sidebar links them, the table says what each shows): one link, the Lesson's
    links = at.get("page_link")
    assert [link.proto.page for link in links] == ["lesson"]
    assert "there is no 003" in at.markdown[1].value  # a seed is explained where the word first appears
    backends = at.dataframe[0].value
    assert list(backends["Backend"]) == ["math", "flash", "efficient", "cudnn"]
    assert backends.set_index("Backend").loc["math", "Runs here"] == "yes"  # math runs everywhere


def test_no_tracker_words_reach_users():
    """Issue numbers mean nothing to a class: none in any page, figure builder or benchmark output."""
    import re

    sources = [*ROOT.joinpath("pages").glob("*.py"), *ROOT.joinpath("app").rglob("*.py"),
               *ROOT.joinpath("benchmarks").glob("*.py")]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in sources for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\b[Ii]ssue\s*#?\d", line)]
    assert hits == []


@pytest.mark.parametrize("slug", [p.slug for p in PAGES if p.slug != "home"])
def test_descriptive_deltas_carry_no_arrow(slug):
    """A delta like '31.2% of FP16' or 'at S = 32,768' is a note, not a change: an up arrow on it reads
    as growth (on a reduction, the opposite of the truth)."""
    from streamlit.proto.Metric_pb2 import Metric

    from tests.conftest import run_page as run_alone

    at = run_alone(slug)
    arrows = [(m.label, m.proto.delta) for m in at.metric
              if m.proto.delta and not m.proto.delta.startswith(("+", "−", "-")) and m.proto.direction != Metric.NONE]
    assert arrows == []
