"""Cache-aware routing across replicas (sim/serving/routing.py): one replica is the single-pool engine exactly;
hand-worked hit counts for round-robin against prefix-aware routing; the load guard."""

import numpy as np
import pytest

from sim.alloc.trace import parse_trace, write_trace
from sim.serving import routing as rt
from sim.serving import step_cost as sc
from sim.serving.comparison import DeploymentConfig
from sim.serving.engine import EngineConfig, simulate_engine

UNIT = sc.LinearCost(base_s=1.0)


def grouped(groups: list[str], gap_s: float, prompt: int = 80, shared: int = 64, output: int = 4):
    lines = [{"arrival": gap_s * i, "prompt_len": prompt, "prefix_group": g, "prefix_len": shared,
              "output_len": output} for i, g in enumerate(groups)]
    tf = parse_trace(write_trace(lines))
    return tf.to_workload(), tf.prompt_hashes(16)


@pytest.mark.parametrize("router", rt.ROUTERS)
def test_one_replica_is_the_single_pool_engine(router):
    rng = np.random.default_rng(0)
    wl, hashes = grouped([f"g{int(g)}" for g in rng.integers(0, 5, size=120)], 0.004, prompt=900, shared=600,
                         output=60)
    cost = DeploymentConfig().cost()
    cfg = EngineConfig(max_num_seqs=32, capacity_tokens=6_000, block_size=16, watermark=0.01, max_num_batched_tokens=2048, enable_prefix_caching=True)
    got = rt.simulate_routing(wl, hashes, cfg, cost, rt.RouterConfig(1, router))
    ref = simulate_engine(wl, cfg, cost, prompt_hashes=hashes)
    assert ref.result.num_preemptions > 0 and ref.prefix_hit_tokens > 0  # a busy pool that shares prefixes
    np.testing.assert_array_equal(got.first_token_s, ref.result.first_token_s)
    np.testing.assert_array_equal(got.finish_s, ref.result.finish_s)
    assert got.hit_tokens == ref.prefix_hit_tokens and got.tokens_per_s == ref.result.tokens_per_s


def test_prefix_aware_routing_keeps_each_group_on_one_replica():
    # A A B B A A B B, 10 s apart (each done before the next): 80-token prompts sharing 64 tokens = 4 full blocks of
    # 16 per group; at most (80 - 1) // 16 = 4 blocks can hit, so a hit is 64 tokens.
    wl, hashes = grouped(list("AABBAABB"), 10.0)
    cfg = EngineConfig(max_num_seqs=4, capacity_tokens=4096, block_size=16, watermark=0.0, max_num_batched_tokens=256)
    aware = rt.simulate_routing(wl, hashes, cfg, UNIT, rt.RouterConfig(2, "prefix_aware"))
    # A -> replica 0 (a tie, both empty); A matches 0; B matches nothing: a tie goes to the replica sent fewer (1)
    assert aware.replica.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]
    assert aware.hit_tokens == 6 * 64  # each group computed once
    rr = rt.simulate_routing(wl, hashes, cfg, UNIT, rt.RouterConfig(2, "round_robin"))
    # replica 0 gets A B A B (requests 0 2 4 6), replica 1 the same: each computes A and B once
    assert rr.replica.tolist() == [0, 1] * 4 and rr.hit_tokens == 4 * 64
    assert aware.hit_rate == pytest.approx(384 / 640) and rr.hit_rate == pytest.approx(256 / 640)


def test_load_beats_affinity_past_the_slack():
    # one group, two replicas, slack 2: affinity keeps replica 0 until it was sent 3 more than replica 1
    wl, hashes = grouped(["A"] * 8, 10.0)
    res = rt.simulate_routing(wl, hashes, EngineConfig(max_num_seqs=4, capacity_tokens=4096, block_size=16, watermark=0.0, max_num_batched_tokens=256), UNIT,
                              rt.RouterConfig(2, "prefix_aware", window=64, balance_slack=2))
    assert res.replica.tolist()[:4] == [0, 0, 0, 1]
    # from then on both replicas hold A's blocks: ties go to the one sent fewer
    assert res.replica.tolist()[4:] == [1, 1, 0, 1]
    assert res.requests_per_replica() == [4, 4]


def test_router_refusals():
    with pytest.raises(ValueError, match="router must be one of"):
        rt.RouterConfig(2, "random")
    with pytest.raises(ValueError, match="num_replicas must be 1..16"):
        rt.RouterConfig(0)
