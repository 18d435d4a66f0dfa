"""The last arithmetic the pages held, now in sim/ where it can be tested: each by hand."""

import numpy as np
import pytest

from sim.cost.decode import ScalePoint
from sim.cost.shrink import ALL_METHODS, EVICT_METHODS, QUANT_METHODS, offload_cost, offloaded_bytes
from sim.lesson.steps import STEPS, step_at
from sim.serving.speculative import simulate_speculative
from sim.work.decode_plan import ShownRun, formula_per_step


def test_decode_views_by_hand():
    shown = ShownRun(num_prompt=5, num_new=30, grid_steps=24)
    assert shown.position(0) == 5 and shown.position(3) == 8
    assert shown.grid_rows == 24 and ShownRun(5, 7, 24).grid_rows == 7
    assert shown.grid_token_ids([1, 2, 3, 4, 5], list(range(100, 130))) == [1, 2, 3, 4, 5, *range(100, 123)]
    assert shown.profile_context(1000) == 34 and shown.profile_context(20) == 20
    assert formula_per_step([{"a": 1, "b": 2}, {"a": 10}]) == [3, 10]
    p = ScalePoint(length=8, naive_step=90, cached_step=10, naive_total=400, cached_total=50)
    assert p.step_ratio == 9.0 and p.total_ratio == 8.0


def test_offload_by_hand():
    assert offloaded_bytes(1000, 25) == 250 and offloaded_bytes(999, 50) == 499  # rounded down
    c = offload_cost(2_000_000, "pcie5", 4e9)
    assert c.hbm_ms == c.hbm_s * 1e3 and c.hbm_s == 2_000_000 / 4e9
    assert c.transfer_ms == c.transfer_s * 1e3
    assert ALL_METHODS == (*EVICT_METHODS, *QUANT_METHODS)


def test_lesson_step_counted_from_one():
    assert step_at(1) is STEPS[0] and step_at(len(STEPS)) is STEPS[-1]
    for bad in (0, len(STEPS) + 1):
        with pytest.raises(ValueError):
            step_at(bad)


def test_monte_carlo_half_width_is_two_standard_errors():
    mc = simulate_speculative(0.7, 4, num_passes=2_000, seed=3)
    assert mc.two_stderr == 2 * mc.stderr


def test_large_channels_counted_against_the_claims_threshold():
    from sim.model.real_probe import LARGE_CHANNEL, KVChannels

    k = np.array([[1.0, 1.0, 1.0, 9.0], [1.0, 1.0, 1.0, 2.0]])  # layer 0: max/median 9 > 4; layer 1: 2
    v = np.ones((2, 4))
    kv = KVChannels(num_tokens=3, k_mean=k, v_mean=v, bits_to_mse={})
    assert LARGE_CHANNEL == 4 and kv.num_large_layers("k") == 1 and kv.num_large_layers("v") == 0


def test_one_quote_verdict_rule_for_both_grids():
    from sim.cost.shrink import quote_verdict

    assert quote_verdict(3, 0, 0, 0.9) == "as_lecture" and quote_verdict(0, 3, 0, 0.9) == "against"
    assert quote_verdict(0, 0, 3, 0.9) == "neither" and quote_verdict(1, 2, 0, 0.9) == "mixed"
    assert quote_verdict(3, 0, 0, 0.4) == "cannot"  # the full cache cannot quote: the check tells nothing
