"""The serving loops' refusals (issue 35): each is a Refusal with its numbers as fields, worded in the page's
language from assets/i18n/{en,ko}/loops_refusals.json, raised alike by the fast loop and the Scheduler's driver."""

import pytest

from sim.alloc.workload import workload_from_lengths
from sim.msg import Msg
from sim.refusal import Refusal
from sim.serving import schedulers as sch
from sim.serving import step_cost as sc
from sim.serving.config import EngineConfig
from sim.words import say
from tests.conftest import run_page

UNIT = sc.LinearCost(base_s=1.0)


def refusal(fn, *args, **kw) -> Refusal:
    with pytest.raises(Refusal) as got:
        fn(*args, **kw)
    return got.value


def test_a_budget_below_the_longest_request_is_refused_with_both_numbers():
    wl = workload_from_lengths([5], [5], max_model_len=64)
    cfg = EngineConfig(max_num_seqs=4, capacity_tokens=64, block_size=16, watermark=0.0, max_num_batched_tokens=32, enable_chunked_prefill=False)
    for fn in (sch.simulate_continuous, sch.simulate_static, sch.simulate_static_stepwise):
        e = refusal(fn, wl, cfg, UNIT)
        assert (e.key, e.fields) == ("loops.err.budget", {"budget": 32, "max_len": 64})


def test_too_few_rows_for_the_outputs_is_refused_before_running():
    wl = workload_from_lengths([1] * 400, [1000] * 400, max_model_len=1024)
    cfg = EngineConfig(max_num_seqs=1, capacity_tokens=1024, block_size=16, watermark=0.0, max_num_batched_tokens=1024,
                       enable_chunked_prefill=False)
    e = refusal(sch.simulate_continuous, wl, cfg, UNIT)
    assert (e.key, e.fields) == ("loops.err.least_passes",
                                 {"tokens": 400_000, "batch": 1, "least": 400_000, "max": sch.MAX_ITERATIONS})


def test_a_run_past_the_pass_limit_is_refused_by_the_loop_and_by_the_scheduler(monkeypatch):
    monkeypatch.setattr(sch, "MAX_ITERATIONS", 30)
    # 6 requests of 10 outputs, 2 rows at most: at least 30 passes; static batches of one row (the rectangle of 2
    # rows does not fit) take 60, continuous ones (its pool holds two requests) 30 plus the prefills' waits
    wl = workload_from_lengths([8] * 6, [10] * 6, max_model_len=32, max_tokens=[10] * 6)
    cfg = EngineConfig(max_num_seqs=2, capacity_tokens=32, block_size=4, watermark=0.0, max_num_batched_tokens=64, enable_chunked_prefill=False)
    fast, step = refusal(sch.simulate_static, wl, cfg, UNIT), refusal(sch.simulate_static_stepwise, wl, cfg, UNIT)
    assert (fast.key, fast.fields) == (step.key, step.fields) == ("loops.err.static_passes", {"max": 30})
    e = refusal(sch.simulate_continuous, wl, cfg, UNIT)
    assert e.key == "loops.err.continuous_passes" and e.fields["max"] == 30 and e.fields["waiting"] >= 1
    assert str(e) == f"continuous batching passed 30 forward passes with {e.fields['waiting']:,} requests waiting: " \
                     "raise the KV budget or the batch size"  # the English, one golden sentence


def test_the_policy_name_is_the_programs_own_mistake():
    with pytest.raises(ValueError, match="policy must be one of") as got:
        sch.simulate(workload_from_lengths([5], [5], max_model_len=64), EngineConfig(), UNIT, "orca")
    assert not isinstance(got.value, Refusal)


def test_the_serving_page_shows_the_budget_refusal_in_korean_with_its_numbers():
    at = run_page("serving", {"live": "0", "lang": "ko", "max_batched": "64", "max_len": "2048"})
    assert not at.exception, at.exception
    want = say("ko", Msg("loops.err.budget", budget=64, max_len=2048))
    assert "64" in want and "2,048" in want and want != say("en", Msg("loops.err.budget", budget=64, max_len=2048))
    assert at.error and want in at.error[0].value.replace("\\", "")  # shown escaped: user text is never Markdown


def test_the_serving_page_shows_the_pass_limit_refusal_in_korean():
    at = run_page("serving", {"live": "0", "lang": "ko", "batch": "1", "requests": "5000"})
    assert not at.exception, at.exception
    errors = " ".join(e.value.replace("\\", "") for e in at.error)
    assert "시뮬레이터 한도 300,000번을 넘는다" in errors and "전파마다 많아야 1개씩" in errors
