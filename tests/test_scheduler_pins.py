"""Exact pins of every scheduling loop on representative configs, taken from the loops before they became one
`sim.serving.scheduler.Scheduler` (issue 35): whatever runs them now must give the same integers.

Every pinned value is an integer by construction: counts, block ids, steps, and times under step costs whose
seconds are whole numbers (1 + tokens fed), so their sums are exact in floating point. Each digest is the
SHA-256 of the int64 bytes of the arrays listed in `_fingerprint*`; `python tests/test_scheduler_pins.py`
prints them again (only ever to re-pin after a deliberate change of behaviour, said in the commit).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sim.alloc.paged_schedule import simulate_paged_fast, simulate_paged_stepwise
from sim.alloc.prefix_cache import block_hashes
from sim.alloc.schedule import PoolConfig
from sim.alloc.workload import LengthWorkloadConfig, make_workload
from sim.serving import engine as en
from sim.serving import schedulers as sch
from sim.serving import step_cost as sc
from sim.serving.studies import STEP_SCENARIOS, run_scenario

PER_TOKEN = sc.LinearCost(base_s=1.0, per_token_s=1.0)  # 1 + tokens fed: whole seconds, exact sums


def _ints(a) -> np.ndarray:
    x = np.asarray(a)
    if x.dtype.kind == "f":
        assert np.all(np.isfinite(x)) and np.all(x == np.round(x)), "a pinned value is not a whole number"
    return x.astype(np.int64)


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        x = _ints(a)
        h.update(len(x).to_bytes(8, "little"))
        h.update(x.tobytes())
    return h.hexdigest()[:16]


# --- the paging page's schedule (continuous batching in decode steps, no token budget) ----------------------

PAGED_CASES = {
    "chat_burst": (LengthWorkloadConfig(num_requests=300, seed=1), PoolConfig(16_384, 16, 256)),
    "poisson_small_pool": (LengthWorkloadConfig(num_requests=200, arrival="poisson", arrival_rate=0.5, seed=2),
                           PoolConfig(8192, 32, 256)),
    "uniform_few_seqs": (LengthWorkloadConfig(num_requests=120, length_dist="uniform", prompt_mean=60,
                                              output_mean=90, max_model_len=512, max_tokens=400, seed=3),
                         PoolConfig(2048, 8, 16)),
    "fixed_tight": (LengthWorkloadConfig(num_requests=40, length_dist="fixed", prompt_mean=30, output_mean=50,
                                         max_model_len=128, max_tokens=100, seed=4), PoolConfig(256, 4, 64)),
}


def _fingerprint_paged(r) -> tuple:
    s = r.segments
    return (r.makespan, r.num_preemptions, int(r.used_blocks.sum()), r.peak_running,
            _digest(r.used_blocks, s.req, s.start, s.end, s.prompt, r.first_start))


PAGED_PINS = {
    "chat_burst": (2769, 392, 2341919, 120, 'b71878fb7b4a4d4e'),
    "poisson_small_pool": (3904, 229, 855847, 40, 'ca3c9bb53849930d'),
    "uniform_few_seqs": (784, 51, 169188, 16, '76b950b72e2bb6d5'),
    "fixed_tight": (489, 42, 28000, 8, 'e774900a676f4871'),
}

SNAPSHOT_STEPS = (0, 1, 7, 40, 333)


def _fingerprint_snapshots(snaps: dict) -> str:
    arrays = []
    for step in sorted(snaps):
        sn = snaps[step]
        arrays += [sn.owner, sn.logical_index, sn.ref_cnt, sn.fill, list(sn.free_block_queue)]
        for req in sorted(sn.req_to_block_table):
            arrays += [[req, sn.req_to_num_tokens[req]], list(sn.req_to_block_table[req])]
    return _digest(*arrays)


SNAPSHOT_PINS = {
    "chat_burst": '861a450b277edee5',
    "poisson_small_pool": 'd01d11e8c6a6a002',
    "uniform_few_seqs": 'fd1604a438c6dcde',
    "fixed_tight": '8c8e9860bae47d30',
}


# --- the Serving page's schedulers (static, continuous) and the Serving engine -------------------------------

def _serving_workload(seed: int, n: int = 60, rate: float = 0.3):
    return make_workload(LengthWorkloadConfig(num_requests=n, prompt_mean=40, output_mean=30, max_model_len=256,
                                              max_tokens=120, arrival="poisson", arrival_rate=rate, seed=seed))


def _fingerprint_result(r) -> str:
    return _digest(r.first_token_s, r.finish_s, r.num_preempted, r.seg_req, r.seg_start_s, r.seg_end_s,
                   r.seg_row_end_s, r.it_start_s, r.it_seconds, r.it_rows, r.it_tokens, r.it_prefills,
                   r.it_prefill_tokens, r.it_kv_claimed, r.it_kv_tokens, r.it_finished, np.sort(r.itl_s))


SCHED_CASES = {
    "continuous_roomy": ("continuous", 1, dict(max_num_seqs=32, capacity_tokens=4096, block_size=16, watermark=0.01,
                                               max_num_batched_tokens=8192)),
    "continuous_preempting": ("continuous", 2, dict(max_num_seqs=64, capacity_tokens=1024, block_size=8,
                                                    watermark=0.01, max_num_batched_tokens=512)),
    "continuous_no_watermark": ("continuous", 3, dict(max_num_seqs=8, capacity_tokens=512, block_size=4,
                                                      watermark=0.0, max_num_batched_tokens=300)),
    "static": ("static", 4, dict(max_num_seqs=16, capacity_tokens=4096, block_size=16, watermark=0.01,
                                 max_num_batched_tokens=8192)),
    "static_cut": ("static", 5, dict(max_num_seqs=64, capacity_tokens=1024, block_size=16, watermark=0.01,
                                     max_num_batched_tokens=8192)),
}

SCHED_PINS = {
    "continuous_roomy": (125, 0, '57674f157ecb43af'),
    "continuous_preempting": (169, 3, 'f4d256123c4b2a59'),
    "continuous_no_watermark": (280, 6, 'c1239de363346ea8'),
    "static": (476, 0, '43954efddc321872'),
    "static_cut": (694, 0, '49ef902b8b2ab363'),
}

ENGINE_CASES = {
    "chunked": (6, dict(max_num_seqs=16, capacity_tokens=1024, block_size=8, watermark=0.0, max_num_batched_tokens=64,
                        enable_chunked_prefill=True), {}),
    "unchunked_v0_watermark": (7, dict(max_num_seqs=16, capacity_tokens=768, block_size=8, watermark=0.01,
                                       max_num_batched_tokens=300, enable_chunked_prefill=False), {}),
    "swap": (8, dict(max_num_seqs=32, capacity_tokens=512, block_size=4, watermark=0.0, max_num_batched_tokens=300,
                     enable_chunked_prefill=False, preemption_mode="swap", cpu_capacity_tokens=256), {}),
    "swap_chunked_tight_host": (9, dict(max_num_seqs=32, capacity_tokens=512, block_size=4, watermark=0.0,
                                        max_num_batched_tokens=96, enable_chunked_prefill=True, preemption_mode="swap", cpu_capacity_tokens=64), {}),
    "prefix": (10, dict(max_num_seqs=16, capacity_tokens=1024, block_size=4, watermark=0.0, max_num_batched_tokens=128,
                        enable_chunked_prefill=True, enable_prefix_caching=True), {"prefix": True}),
    "prefix_tight": (11, dict(max_num_seqs=16, capacity_tokens=384, block_size=4, watermark=0.0, max_num_batched_tokens=256,
                              enable_chunked_prefill=False, enable_prefix_caching=True), {"prefix": True}),
    "speculative": (12, dict(max_num_seqs=8, capacity_tokens=512, block_size=4, watermark=0.0, max_num_batched_tokens=64,
                             enable_chunked_prefill=True, num_speculative_tokens=3, draft_acceptance_rate=0.6, seed=5), {}),
    "prefilled_decode": (13, dict(max_num_seqs=16, capacity_tokens=1024, block_size=8, watermark=0.0, max_num_batched_tokens=64,
                                  enable_chunked_prefill=True), {"prefilled": True}),
}

ENGINE_PINS = {
    "chunked": (165, (9, 0, 371, 0, 0, 0, 0, 0), 'cd42b563d4493e80'),
    "unchunked_v0_watermark": (165, (10, 0, 319, 0, 0, 0, 0, 0), 'a215ea32e4270cc1'),
    "swap": (362, (0, 27, 0, 0, 0, 0, 0, 43), '1d9541a22aafc679'),
    "swap_chunked_tight_host": (336, (41, 20, 4005, 0, 0, 0, 0, 14), '497fafa1c85c1b3f'),
    "prefix": (171, (0, 0, 0, 168, 0, 0, 0, 0), '574929a41b8ca13d'),
    "prefix_tight": (425, (33, 0, 1244, 504, 0, 0, 0, 0), '1e8b9230fdf6aa7b'),
    "speculative": (133, (9, 0, 432, 0, 1762, 1005, 260, 0), 'aa5a7ae36b71ec19'),
    "prefilled_decode": (171, (8, 0, 542, 0, 0, 0, 0, 0), 'cbbd6433f24cf0bf'),
}


def _engine_run(name: str):
    seed, kw, extra = ENGINE_CASES[name]
    wl = _serving_workload(seed)
    hashes = None
    if extra.get("prefix"):
        rng = np.random.default_rng(seed)
        hashes = [block_hashes(rng.integers(0, 2, size=int(p)), kw["block_size"]) for p in wl.prompt_len]
    prefilled = None
    if extra.get("prefilled"):
        keep = wl.output_len >= 2
        wl = type(wl)(**{f: (getattr(wl, f)[keep] if isinstance(getattr(wl, f), np.ndarray) else getattr(wl, f))
                         for f in wl.__dataclass_fields__})
        prefilled = wl.arrival.astype(np.float64) + 3
    return en.simulate_engine(wl, en.EngineConfig(**kw), PER_TOKEN, prompt_hashes=hashes, kv_bytes_per_token=0,
                              prefilled_first_s=prefilled, check=True)


def _fingerprint_engine(run) -> tuple:
    stats = (run.num_recomputes, run.num_swaps, run.recomputed_tokens, run.prefix_hit_tokens,
             run.spec_reserved_slots, run.spec_rolled_back_slots, run.spec_blocks_freed, run.peak_cpu_blocks)
    return stats, _fingerprint_result(run.result)


SCENARIO_PINS = {
    "chunked": (5, '1568387cd2d94def'),
    "recompute": (9, '04f9ee515fa267de'),
    "swap": (9, '9d95f220ca1ff9cc'),
    "prefix": (4, '069fa29d4d3ffa7b'),
    "speculative": (4, '24a2c8dc072e5131'),
}


def _fingerprint_steps(run) -> str:
    arrays = []
    for v in run.steps:
        arrays += [[v.step], list(v.waiting), list(v.running), list(v.swapped), list(v.finished),
                   [x for r, _kind, n in v.rows for x in (r, n)], list(v.free_queue), list(v.ref_cnt),
                   [v.num_cpu_free], list(v.cached_blocks)]
        for req in sorted(v.block_tables):
            arrays += [[req, v.num_tokens[req]], list(v.block_tables[req])]
        for req in sorted(v.cpu_block_tables):
            arrays += [[req], list(v.cpu_block_tables[req])]
    return _digest(*arrays)


# --- the tests -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAGED_CASES)
def test_paged_schedule_is_pinned(name):
    wcfg, scfg = PAGED_CASES[name]
    wl = make_workload(wcfg)
    fast = simulate_paged_fast(wl, scfg)
    assert _fingerprint_paged(fast) == PAGED_PINS[name]
    for lazy in (False, True):  # the Scheduler step by step, and the replay that skips steps inside a block
        steps = simulate_paged_stepwise(wl, scfg, SNAPSHOT_STEPS, lazy=lazy)
        assert _fingerprint_paged(steps.result) == PAGED_PINS[name]
        assert _fingerprint_snapshots(steps.snapshots) == SNAPSHOT_PINS[name]


@pytest.mark.parametrize("name", SCHED_CASES)
def test_serving_schedulers_are_pinned(name):
    policy, seed, kw = SCHED_CASES[name]
    r = sch.simulate(_serving_workload(seed), en.EngineConfig(**kw, enable_chunked_prefill=False), PER_TOKEN, policy)
    assert (r.num_iterations, r.num_preemptions, _fingerprint_result(r)) == SCHED_PINS[name]


@pytest.mark.parametrize("name", ENGINE_CASES)
def test_engine_is_pinned(name):
    run = _engine_run(name)
    assert (run.result.num_iterations, *_fingerprint_engine(run)) == ENGINE_PINS[name]


@pytest.mark.parametrize("name", STEP_SCENARIOS)
def test_step_scenarios_are_pinned(name):
    run = run_scenario(name)
    assert (len(run.steps), _fingerprint_steps(run)) == SCENARIO_PINS[name]


def test_chunked_scenario_rows_by_hand():
    """The step-through view's first steps of the "chunked" scenario, every row's request, kind and tokens."""
    run = run_scenario("chunked")
    assert [[(r, n) for r, _k, n in v.rows] for v in run.steps[:3]] == CHUNKED_ROWS


CHUNKED_ROWS = [[(0, 10)], [(0, 4), (1, 5), (2, 1)], [(0, 1), (1, 1), (2, 2)]]


if __name__ == "__main__":  # print the pins (only to re-pin after a deliberate change of behaviour)
    for name, (wcfg, scfg) in PAGED_CASES.items():
        wl = make_workload(wcfg)
        print("paged", repr(name), _fingerprint_paged(simulate_paged_fast(wl, scfg)),
              repr(_fingerprint_snapshots(simulate_paged_stepwise(wl, scfg, SNAPSHOT_STEPS).snapshots)))
    for name, (policy, seed, kw) in SCHED_CASES.items():
        r = sch.simulate(_serving_workload(seed), en.EngineConfig(**kw, enable_chunked_prefill=False), PER_TOKEN, policy)
        print("sched", repr(name), (r.num_iterations, r.num_preemptions, _fingerprint_result(r)))
    for name in ENGINE_CASES:
        run = _engine_run(name)
        print("engine", repr(name), (run.result.num_iterations, *_fingerprint_engine(run)))
    for name in STEP_SCENARIOS:
        run = run_scenario(name)
        print("scenario", repr(name), (len(run.steps), _fingerprint_steps(run)))
    print("chunked rows", [[(r, n) for r, _k, n in v.rows] for v in run_scenario("chunked").steps[:3]])
