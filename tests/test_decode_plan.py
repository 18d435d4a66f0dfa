"""sim/work/decode_plan.py: the decode-cost comparison's cap and estimate, by hand."""

from sim.work.decode_plan import CompareEstimate, capped_new_tokens


def test_new_tokens_capped_to_the_context():
    assert capped_new_tokens(24, 1001, 1024) is None  # 24 + 1001 − 1 = 1024 positions fed: fits
    assert capped_new_tokens(24, 1002, 1024) == 1001
    assert capped_new_tokens(1024, 5, 1024) == 1  # a full prompt still yields its one next token


def test_estimate_stops_the_naive_run_at_its_budget():
    plan = CompareEstimate(cached_s=2.0, naive_s=50.0, budget_s=30.0)
    assert plan.seconds == 32.0
    assert plan.done(0, 0, 10) == 0.0
    assert plan.done(5, 5, 10) == (1.0 + 25.0) / 32.0  # half of each: 1 s cached, 25 s naive
    assert plan.done(10, 10, 10) == 1.0  # the naive run counted up to its budget only
    assert CompareEstimate(2.0, 6.0, 30.0).done(10, 10, 10) == 1.0
