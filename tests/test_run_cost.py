"""The cost model counts a job's calls, tokens and attention pairs exactly."""

import torch

from sim.model.generate import generate_steps
from sim.model.measure import measure_rates
from sim.work.run_cost import ModelRates, Work, cached_work, fit_rates, naive_work, prefill_work, triangle
from tests.conftest import random_model


def test_counts_by_hand():
    assert triangle(4, 7) == 4 + 5 + 6
    assert prefill_work(3) == Work(1, 3, 6)  # pairs 1 + 2 + 3
    assert prefill_work(3, batch=2) == Work(1, 6, 12)
    # prefill 3, then 3 one-token steps attending to 4, 5, 6 keys
    assert cached_work(3, 4) == Work(4, 6, 6 + 4 + 5 + 6)
    # forward over 3 then over 4 positions
    assert naive_work(3, 2) == Work(2, 7, 6 + 10)


def test_counts_match_what_generation_executes():
    model = random_model()
    for mode, work in (("cached", cached_work(5, 9)), ("naive", naive_work(5, 9))):
        steps = list(generate_steps(model, [1, 2, 3, 4, 5], 9, mode, count=False))
        assert len(steps) == work.calls
        assert sum(s.num_new for s in steps) == work.tokens
        # each fed position t (0-based, absolute) scores t + 1 keys
        pairs = sum(sum(range(s.kv_len - s.num_new + 1, s.kv_len + 1)) for s in steps)
        assert pairs == work.pairs


def test_fit_recovers_exact_rates():
    true = ModelRates(1e-3, 2e-5, 5e-8)
    samples = [(w, true.seconds(w)) for w in (prefill_work(1), prefill_work(64), prefill_work(512), naive_work(3, 7))]
    got = fit_rates(samples)
    for a, b in ((got.per_call_s, true.per_call_s), (got.per_token_s, true.per_token_s),
                 (got.per_pair_s, true.per_pair_s)):
        assert abs(a - b) <= 1e-9 + 1e-6 * b


def test_measured_rates_are_non_negative_and_predict_positive_time():
    torch.manual_seed(0)
    rates = measure_rates(random_model(), "sdpa", repeats=1)
    assert min(rates.per_call_s, rates.per_token_s, rates.per_pair_s) >= 0
    assert rates.seconds(cached_work(10, 10)) > 0
