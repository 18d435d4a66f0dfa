"""The cost model counts a job's calls, tokens and attention pairs exactly."""

import torch

from sim.model.generate import generate_steps
from sim.model.measure import measure_rates
from sim.work.run_cost import (
    SMOLLM2_DECODE_RATES,
    SMOLLM2_PREFILL_RATES,
    ModelRates,
    SplitRates,
    Work,
    cached_work,
    decode_work,
    fit_rates,
    naive_work,
    prefill_work,
    smollm2_rates,
    smollm2_tokens,
    triangle,
)
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
        steps = list(generate_steps(model, [1, 2, 3, 4, 5], 9, mode=mode, count=False))
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
    rates = measure_rates(random_model(), attn_impl="sdpa", repeats=1)
    assert min(rates.per_call_s, rates.per_token_s, rates.per_pair_s) >= 0
    assert rates.seconds(cached_work(10, 10)) > 0


def test_split_rates_charge_the_prefill_and_the_steps_at_their_own_rates():
    pre, dec = ModelRates(1.0, 10.0, 100.0), ModelRates(1000.0, 1e4, 1e5)
    r = SplitRates(pre, dec)
    assert cached_work(3, 4) == prefill_work(3) + decode_work(3, 4)
    assert decode_work(3, 4) == Work(3, 3, 4 + 5 + 6) and decode_work(3, 1) == Work()
    assert r.prefill_s(3) == 1 + 3 * 10 + 6 * 100
    assert r.cached_s(3, 4) == 1 + 3 * 10 + 6 * 100 + 3 * 1000 + 3 * 1e4 + 15 * 1e5
    assert r.naive_s(3, 2) == pre.seconds(naive_work(3, 2))  # every naive step is a forward from position 0
    # a one-rate model gives the same answers through the same interface
    assert pre.cached_s(3, 4) == pre.seconds(cached_work(3, 4)) and pre.naive_s(3, 2) == pre.seconds(naive_work(3, 2))


def test_smollm2_prefills_a_token_for_less_than_it_decodes_one():
    for attn in ("sdpa", "eager"):
        r = smollm2_rates(attn)
        assert r.prefill is SMOLLM2_PREFILL_RATES[attn] and r.decode is SMOLLM2_DECODE_RATES[attn]
        # 150 tokens in one prefill against 150 one-token steps: the fit's ~8× per token
        assert r.prefill_s(150) * 4 < r.decode.seconds(Work(150, 150, 0))


def test_smollm2_tokens_estimate_counts_digits_and_non_ascii_bytes_one_each():
    assert smollm2_tokens("") == 0
    assert smollm2_tokens("a") == 1  # ceil(0.4)
    assert smollm2_tokens("hello") == 2  # ceil(5 × 0.4)
    assert smollm2_tokens("4172") == 4  # SmolLM2 splits digits
    assert smollm2_tokens("가") == 3  # three UTF-8 bytes, each at most a token
    assert smollm2_tokens("ab 12 가") == 2 + 3 + -(-4 * 2 // 5)  # 2 digits, 3 bytes of 가, 4 other ASCII bytes
