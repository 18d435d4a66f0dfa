"""A measured time is a fact about this machine at that moment: the naive and cached steps are timed in turns
under the same load, and the page says when and under what load they were taken, and when the machine was too
busy for them to describe the model."""

import math

from app.work import SHOWN_KEY
from sim.model.generate import SamplingConfig, encode, run_comparison
from sim.words.catalog import PSEUDO
from sim.words.decode import measured_caption
from sim.work.conditions import Conditions, Measuring
from tests.conftest import run_page

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def test_naive_and_cached_steps_take_turns_until_naive_runs_out_of_budget(shipped_models):
    model, order = shipped_models["mha"], []
    ids = encode("ROMEO.\n")
    res = run_comparison(model, ids, 6, sampling=SamplingConfig(), attn_impl="sdpa", naive_budget_s=None, on_step=lambda mode, i: order.append((mode, i)))
    assert order == [(mode, i) for i in range(1, 7) for mode in ("cached", "naive")]
    assert [r.token for r in res.naive] == [r.token for r in res.cached] and res.naive_complete
    order.clear()
    res = run_comparison(model, ids, 6, sampling=SamplingConfig(), attn_impl="sdpa", naive_budget_s=0.0, on_step=lambda mode, i: order.append((mode, i)))
    # a budget of 0 s is spent by naive's first step: from there on the cached steps run alone
    assert order == [("cached", 1), ("naive", 1), *[("cached", i) for i in range(2, 7)]]
    assert len(res.naive) == 1 and len(res.cached) == 6
    c = res.conditions
    assert c is not None and c.num_cpus >= 1 and c.started_at > T0


def test_the_load_decides_whether_the_machine_was_too_busy():
    assert not Conditions(T0, 0.4, 1.9, 2).busy and Conditions(T0, 0.4, 2.1, 2).busy
    assert Conditions(T0, 11.0, 1.0, 2).busy  # busy at either end
    assert not Conditions(T0, math.nan, math.nan, 2).busy  # no load average on this system: no claim
    import os
    import time

    before = time.time()
    with Measuring() as m:
        pass
    assert before <= m.conditions.started_at <= time.time() and m.conditions.num_cpus == (os.cpu_count() or 1)


def test_the_caption_says_when_and_under_what_load():
    quiet = Conditions(T0, 0.4, 0.6, 2)
    assert measured_caption(quiet, T0 + 30, lang=PSEUDO) == 'decode.s.measured.quiet(at=22:13:20, ago=, before=0.4, after=0.6, cpus=2)'
    busy = measured_caption(Conditions(T0, 11.0, 9.5, 2), T0 + 35 * 60, lang=PSEUDO)
    assert busy == (
        'decode.s.measured.busy(at=22:13:20, ago=decode.s.measured.ago(m=35), before=11.0, '
        'after=9.5, cpus=2)')
    assert measured_caption(quiet, T0, "ko").startswith("측정 시각 22:13:20 UTC. 순진한 스텝과 캐시 스텝을")


def test_the_page_shows_the_conditions_of_its_times():
    at = run_page("decode_cost", {"n": "8"})
    assert not at.exception
    res = at.session_state[SHOWN_KEY]["decode_cost.compare"]
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Measured at ") and f"on {res.conditions.num_cpus} cores" in c for c in captions)
