"""Whose mistake each allocator check is (issue 35): the ones a user can reach are Refusals, message values worded
from alloc_refusals.json in the page language with their numbers; the rest are Misuse, because every control,
flag and file that feeds them is bounded first, which the last tests prove by building the configs at the ends
of those controls."""

from __future__ import annotations

import pytest

from sim.alloc import prefix_sweeps as ps
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS, BlockPool, simulate_parallel_sampling
from sim.alloc.policies import block_size_tradeoff
from sim.alloc.prefix_cache import CacheConfig, simulate_prefix_cache
from sim.alloc.schedule import PoolConfig, check_fits
from sim.alloc.workload import (
    MAX_TRACE_TOKENS,
    LengthWorkloadConfig,
    PrefixWorkloadConfig,
    Trace,
    make_trace,
    trace_from_lists,
    workload_from_lengths,
)
from sim.msg import Msg
from sim.refusal import Misuse, Refusal
from sim.words import say, why
from sim.words.catalog import PSEUDO
from tests.conftest import run_page, unescaped


def refused(fn, *args, **kwargs) -> Refusal:
    with pytest.raises(Refusal) as got:
        fn(*args, **kwargs)
    return got.value


# --- the refusals: key, fields (numbers stay numbers), the English they always had, and Korean ------------------


def test_workload_settings_a_user_can_combine_are_refused_with_their_numbers():
    e = refused(LengthWorkloadConfig, max_model_len=2048, max_tokens=2048)
    assert e.msg == Msg("alloc.err.max_tokens", hi=2047, max_len=2048, got=2048)
    assert why(e, PSEUDO) == 'alloc.err.max_tokens(hi=2,047, max_len=2,048, got=2,048)'
    e = refused(LengthWorkloadConfig, max_model_len=64, max_tokens=32, prompt_mean=64)
    assert e.msg == Msg("alloc.err.prompt_mean", hi=63, got=64)
    assert why(e, PSEUDO) == 'alloc.err.prompt_mean(hi=63, got=64)'
    e = refused(LengthWorkloadConfig, max_tokens=1024, output_mean=2000)
    assert e.msg == Msg("alloc.err.output_mean", max_tokens=1024, got=2000)
    assert why(e, PSEUDO) == 'alloc.err.output_mean(max_tokens=1,024, got=2,000)'


def test_a_prefix_workload_past_the_token_limit_names_where_it_stopped():
    cfg = PrefixWorkloadConfig(workload="random", num_requests=2000, shared_len=4096, variable_len=1024,
                               output_len=1024)
    e = refused(make_trace, cfg)
    n, tokens = e.fields["n"], e.fields["tokens"]
    assert e.key == "alloc.err.trace_tokens" and e.fields["max"] == MAX_TRACE_TOKENS
    assert tokens > MAX_TRACE_TOKENS and n < 2000  # stopped at the first request past the limit
    # random prompts are ±50% of shared + variable, outputs ±50% of output_len: each stores at most this many
    most = (5120 + 2560) + (1024 + 512) - 1
    assert tokens - most <= MAX_TRACE_TOKENS and tokens <= n * most
    assert why(e, PSEUDO) == f"alloc.err.trace_tokens(n={n:,}, tokens={tokens:,}, max=4,000,000)"
    assert why(e, "ko") == (f"요청 {n:,}개째에 이 작업 부하가 저장하는 토큰이 이미 {tokens:,}개로 시뮬레이터 한도 "
                            "4,000,000개를 넘는다: 요청 수를 줄이거나 프롬프트와 출력을 짧게 한다")


def test_a_cache_smaller_than_one_request_says_how_big_it_must_be():
    trace = trace_from_lists([[1] * 10, [2] * 300, [3] * 40])
    e = refused(simulate_prefix_cache, trace, CacheConfig(block_size=16, capacity_tokens=256))
    assert e.msg == Msg("alloc.err.cache_too_small", req=1, n=300, blocks=19, bs=16, num_blocks=16, slots=256,
                        need=304)
    assert why(e, PSEUDO) == (
        'alloc.err.cache_too_small(req=1, n=300, blocks=19, bs=16, num_blocks=16, slots=256, '
        'need=304)')
    assert why(e, "ko") == ("요청 1: 토큰 300개(크기 16인 블록 19개)를 저장해야 하는데 캐시에는 블록 16개(토큰 256개)뿐이다: "
                            "용량을 토큰 304개 이상으로 늘린다")


def test_kv_capacity_refusals_keep_their_english_and_speak_korean():
    e = refused(PoolConfig, capacity_tokens=0)
    assert e.msg == Msg("alloc.err.capacity_range", max=MAX_CAPACITY_TOKENS, n=0)
    assert why(e, PSEUDO) == 'alloc.err.capacity_range(max=4,194,304, n=0)'
    e = refused(PoolConfig, capacity_tokens=5, block_size=16)
    assert e.msg == Msg("alloc.err.capacity_block", cap=5, bs=16)
    assert why(e, "ko") == "KV 용량 5슬롯은 블록 하나(16슬롯)보다 작다"
    wl = workload_from_lengths([300], [50], max_model_len=4000)  # 4,000 slots hold it; 15 blocks of 256 do not
    e = refused(check_fits, wl, PoolConfig(capacity_tokens=4000, block_size=256))
    assert e.msg == Msg("alloc.err.blocks", n=15, bs=256, slots=3840, max_len=4000)
    assert why(e, "ko") == ("슬롯 256개짜리 블록 15개(3,840)로는 최대 길이 4,000인 요청 하나도 담을 수 없다: "
                            "용량을 늘리거나 블록을 작게 한다")
    with pytest.raises(Misuse):  # no user can ask for it: every pool's size is bounded at MAX_CAPACITY_TOKENS first
        BlockPool(MAX_CAPACITY_TOKENS + 1, 1)


# --- the pages show them in the page language ---------------------------------------------------------------------


def _errors(at) -> list[str]:
    assert not at.exception, at.exception
    return [unescaped(e.value) for e in at.error]


@pytest.mark.parametrize(("params", "msg"), [
    (dict(max_len=4096, capacity=2048), Msg("alloc.err.capacity", cap=2048, max_len=4096)),
    (dict(output_mean=2000), Msg("alloc.err.output_mean", max_tokens=1024, got=2000)),
])
def test_the_paging_page_words_its_refusal_in_korean(params, msg):
    errors = _errors(run_page("paged_blocks", {"live": "0", "lang": "ko", **params}))
    assert len(errors) == 1 and say("ko", msg) in errors[0], errors


def test_the_prefix_page_words_its_refusals_in_korean():
    """Before, the page showed str(exc): the English, whatever the page language."""
    cfg, cache = PrefixWorkloadConfig(shared_len=4096), CacheConfig(capacity_tokens=2048)
    expected = refused(ps.run_both_layouts, cfg, cache)
    assert expected.key == "alloc.err.cache_too_small"
    errors = _errors(run_page("prefix_caching", {"live": "0", "lang": "ko", "shared": "4096", "capacity": "2048"}))
    assert any(why(expected, "ko") in e for e in errors), errors
    expected = refused(make_trace, PrefixWorkloadConfig(num_requests=2000, shared_len=4096))
    errors = _errors(run_page("prefix_caching", {"live": "0", "lang": "ko", "requests": "2000", "shared": "4096"}))
    assert any(why(expected, "ko") in e for e in errors), errors


# --- the rest are Misuse: the lab's own callers bound every value first ------------------------------------------


def test_checks_only_a_bug_can_fail_are_misuse_not_refusals():
    for call in (lambda: BlockPool(4, 0), lambda: BlockPool(4).append(7), lambda: BlockPool(4).add_request(0, 99),
                 lambda: LengthWorkloadConfig(spread=9.0), lambda: Trace(()), lambda: trace_from_lists([[]]),
                 lambda: PrefixWorkloadConfig(layout="middle"), lambda: CacheConfig(max_running=0),
                 lambda: ps.change_one_byte([1, 2], 2, 16), lambda: simulate_parallel_sampling(0, 1, 1),
                 lambda: block_size_tradeoff(workload_from_lengths([5], [5])).at(3)):
        with pytest.raises(Misuse) as got:
            call()
        assert isinstance(got.value, ValueError) and not isinstance(got.value, Refusal)


def test_the_length_workload_controls_stay_inside_what_the_config_accepts():
    """Paging and Serving's workload boxes and the Serving tabs' studies: each value at either end of its control
    (with the page's rate unit) builds a config, so the config's own range checks can only catch a bug."""
    from app import workload as w
    from app.controls import paged_blocks as pb
    from app.controls import serving as sv
    from app.controls import serving_engine as se
    from sim.serving.comparison import ARRIVAL_TICK_S
    from sim.serving.schedulers import MAX_REQUESTS

    tiny = dict(prompt_mean=1, output_mean=1, max_tokens=1)
    for max_requests in (pb.MAX_LENGTH_WORKLOAD_REQUESTS, MAX_REQUESTS):
        requests = w.workload_controls(max_requests)[0]
        for n in (requests.lo, requests.hi):
            for dist in w.LENGTHS.choices():
                for max_len in (w.MAX_LEN.lo, w.MAX_LEN.hi):
                    for spread in (w.SPREAD.lo, w.SPREAD.hi):
                        LengthWorkloadConfig(num_requests=n, length_dist=dist, max_model_len=max_len, spread=spread,
                                             **tiny)
    for rate, scale in ((pb.RATE, 1.0), (sv.RATE, ARRIVAL_TICK_S), (se.CK_RATE, ARRIVAL_TICK_S),
                        (se.DG_RATE, ARRIVAL_TICK_S)):
        for arrival in pb.ARRIVAL.choices():
            for r in (rate.lo, rate.hi):
                LengthWorkloadConfig(arrival=arrival, arrival_rate=r * scale, **tiny)
    for requests in (se.CK_REQUESTS, se.PE_REQUESTS, se.DG_REQUESTS):
        LengthWorkloadConfig(num_requests=requests.hi, max_model_len=se.STUDY_MAX_LEN, **tiny)


def test_the_prefix_and_pool_controls_stay_inside_what_the_configs_accept():
    from app.controls import paged_blocks as pb
    from app.controls import prefix_caching as pc
    from app.controls import serving as sv
    from sim.serving.schedulers import MAX_BATCH

    for workload in pc.WORKLOAD.choices():
        for layout in pc.LAYOUT.choices():
            for end in ("lo", "hi"):
                PrefixWorkloadConfig(workload, layout, *(getattr(c, end) for c in
                                                         (pc.REQUESTS, pc.SHARED, pc.VARIABLE, pc.OUTPUT, pc.GROUPS,
                                                          pc.SEED)))
    for bs in pc.BLOCK_SIZES:
        for cap in (pc.CAPACITY.lo, pc.CAPACITY.hi):
            for running in (pc.RUNNING.lo, pc.RUNNING.hi):
                CacheConfig(int(bs), cap, running)
    for bs in (pb.BLOCK_SIZE.lo, pb.BLOCK_SIZE.hi, *sv.BLOCK_SIZES):
        PoolConfig(capacity_tokens=MAX_CAPACITY_TOKENS, block_size=int(bs), max_num_seqs=sv.BATCH.hi)
    assert sv.BATCH.hi == MAX_BATCH
    fork = simulate_parallel_sampling(pb.FORK_PROMPT.hi, pb.FORK_N.hi, pb.FORK_GEN.hi, pb.BLOCK_SIZE.lo)
    assert fork.num_branches == pb.FORK_N.hi
