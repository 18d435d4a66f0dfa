"""Prefill/decode disaggregation (sim/serving/disagg.py): hand-computed timings with one GPU each way, with and without
a transfer cost; conservation (prefilled once, decoded once, bytes = the formula); the verdict both ways."""

import math

import numpy as np
import pytest

from sim.alloc.workload import workload_from_lengths
from sim.cost.memory import MemoryConfig, request_bytes
from sim.cost.presets import load_presets
from sim.msg import Msg
from sim.serving.disagg import (
    DisaggConfig,
    DisaggSetup,
    prompt_kv_bytes,
    run_disagg,
    simulate_colocated,
    simulate_disagg,
)
from sim.serving.engine import EngineConfig, simulate_engine
from sim.serving.step_cost import LinearCost
from sim.words import engine_readouts as er
from sim.words import text
from sim.words.catalog import PSEUDO
from sim.words.serving import cell, event_line

UNIT = LinearCost(1.0)  # every pass takes 1 s
CFG = EngineConfig(max_num_seqs=4, capacity_tokens=64, block_size=4, watermark=0.0, max_num_batched_tokens=32, enable_chunked_prefill=True)


def three():
    # prompts of 4 tokens; outputs 3, 2, 3; r0 and r1 arrive at 0, r2 at 1
    return workload_from_lengths([4, 4, 4], [3, 2, 3], arrival=[0, 0, 1], max_model_len=8)


def test_free_transfer_one_gpu_each_way_by_hand():
    run = simulate_disagg(three(), CFG, UNIT, DisaggConfig(1, 1), lambda p: 1000 * p, math.inf)
    # prefill GPU: pass 0→1 prefills r0 and r1 (first tokens at 1); r2 arrived at 1: pass 1→2, first token at 2
    np.testing.assert_array_equal(run.first_token_s, [1, 1, 2])
    np.testing.assert_array_equal(run.transfer_end_s, [1, 1, 2])  # no cost: the KV lands as the token comes out
    # decode GPU: pass 1→2 gives r0 and r1 their 2nd token (r1 done at 2); r2 lands at 2: pass 2→3 gives r0 its 3rd
    # (done at 3) and r2 its 2nd; pass 3→4 r2's 3rd
    np.testing.assert_array_equal(run.finish_s, [3, 2, 4])
    np.testing.assert_array_equal(np.sort(run.token_gaps_s), [1, 1, 1, 1, 1])  # 2 + 1 + 2 gaps, one pass each
    np.testing.assert_array_equal(run.ttft_s, [1, 1, 1])
    # colocated on two GPUs (r0, r2 on GPU 0; r1 on GPU 1) happens to time the same: GPU 0 prefills r0 (0→1), then
    # decodes r0 while prefilling r2 (1→2), then decodes both (2→3, r0 done), r2 alone (3→4)
    co = simulate_colocated(three(), CFG, UNIT, 2)
    np.testing.assert_array_equal(co.first_token_s, [1, 1, 2])
    np.testing.assert_array_equal(co.finish_s, [3, 2, 4])


def test_transfers_queue_on_the_prefill_gpus_link_by_hand():
    # 4 tokens × 1000 B = 4000 B at 4000 B/s: 1 s each, one at a time: r0 1→2, r1 2→3, r2 (first token at 2) 3→4
    run = simulate_disagg(three(), CFG, UNIT, DisaggConfig(1, 1), lambda p: 1000 * p, 4000.0)
    np.testing.assert_array_equal(run.transfer_start_s, [1, 2, 3])
    np.testing.assert_array_equal(run.transfer_end_s, [2, 3, 4])
    # decode GPU: r0 lands at 2, pass 2→3 (2nd token, a gap of 3 − 1 = 2 s); r1 lands at 3: pass 3→4 gives r0 its 3rd
    # (done at 4) and r1 its 2nd (gap 4 − 1 = 3 s, done); r2 lands at 4: passes 4→5 (gap 5 − 2 = 3 s) and 5→6
    np.testing.assert_array_equal(run.finish_s, [4, 4, 6])
    np.testing.assert_array_equal(np.sort(run.token_gaps_s), [1, 1, 2, 3, 3])
    assert run.makespan_s == 6.0 and run.tokens_per_s == 8 / 6


def test_every_request_prefilled_once_decoded_once_and_bytes_are_the_formula():
    arch = load_presets()["llama-3.1-8b"]
    rng = np.random.default_rng(2)
    n = 60
    wl = workload_from_lengths(rng.integers(50, 900, n), rng.integers(2, 80, n),
                               arrival=np.sort(rng.integers(0, 40, n)), max_model_len=1024)
    cfg = EngineConfig(max_num_seqs=16, capacity_tokens=8192, block_size=16, watermark=0.0, max_num_batched_tokens=512, enable_chunked_prefill=True)
    cost = LinearCost(0.01, per_token_s=1e-5)
    run = simulate_disagg(wl, cfg, cost, DisaggConfig(2, 3), lambda p: prompt_kv_bytes(arch, "fp16", p), 50e9)
    prefill, decode = run.engines[:2], run.engines[2:]
    assert len(decode) == 3
    # each prompt token computed exactly once, on a prefill GPU; no decode GPU computes a prompt token
    assert sum(int(e.result.it_prefill_tokens.sum()) for e in prefill) == int(wl.prompt_len.sum())
    assert all(int(e.result.it_prefill_tokens.sum()) == 0 for e in decode)
    assert all(e.result.num_preemptions == 0 for e in run.engines)
    # each request reaches exactly one decode GPU, which produces every token after the first
    assert sorted(int(x) for e in decode for x in e.result.output_len) == sorted(wl.output_len.tolist())
    assert sum(int(e.result.it_tokens.sum()) for e in decode) == int((wl.output_len - 1).sum())
    assert len(run.token_gaps_s) == int((wl.output_len - 1).sum())
    # Llama 3.1 8B, fp16: 2 × 32 layers × 8 KV heads × 128 × 2 bytes = 131,072 bytes per prompt token
    assert request_bytes(MemoryConfig(arch, 1, 100, "fp16")) == 100 * 131_072
    assert run.transfer_bytes.tolist() == [131_072 * p for p in wl.prompt_len.tolist()]
    assert np.all(run.transfer_start_s >= run.first_token_s) and np.all(run.finish_s > run.transfer_end_s)


def test_a_prefilled_request_decodes_from_its_second_token():
    wl = workload_from_lengths([6], [3], arrival=[5], max_model_len=9)
    run = simulate_engine(wl, CFG, UNIT, prefilled_first_s=np.array([4.0]), record=True, check=True)
    assert run.result.first_token_s.tolist() == [4.0] and run.result.finish_s.tolist() == [7.0]
    assert event_line(PSEUDO, run.steps[0].events[0]) == 'serving.ev.arrived(r=0, blocks=[0, 1])'  # 6 + 1 tokens, blocks of 4
    assert run.result.itl_s.tolist() == [2.0, 1.0]  # 6 − 4, then one pass
    with pytest.raises(ValueError, match="at least 2 output tokens"):
        simulate_engine(workload_from_lengths([6], [1], max_model_len=9), CFG, UNIT, prefilled_first_s=np.zeros(1))


def test_the_study_measures_what_its_verdict_says():
    st = run_disagg(DisaggSetup())
    c, d = st.to_frame().to_dict("records")
    text = er.disagg_study_verdict(st)
    assert ("within 2% of colocated's" in text) == (abs(d["throughput_tok_s"] / c["throughput_tok_s"] - 1) < 0.02)
    assert (d["itl_p99_ms"] < c["itl_p99_ms"]) == ("did not even shorten" not in text)
    assert f"{d['slo_met_pct']:.0f}% of requests met both vs {c['slo_met_pct']:.0f}% colocated" in text
    assert st.transfer_gb == pytest.approx(st.disagg.transfer_bytes.sum() / 1e9)
    # the pool cells come with their messages, row for row, so Korean never parses the English (issue 35)
    pools = DisaggSetup().pools
    assert st.cell_msgs["pool"] == [Msg("serving.cell.pool_colocated", n=pools.num_gpus),
                                    Msg("serving.cell.pool_disaggregated", p=pools.num_prefill, d=pools.num_decode)]
    assert [c["pool"], d["pool"]] == [cell("en", m) for m in st.cell_msgs["pool"]]


def test_disagg_sentences_both_ways():
    slo = (1.0, 8.0)
    assert er.disagg_verdict(4996, 4917, 32.23, 8.46, 49.7, 94.7, 12.82, 24.05, *slo, lang=PSEUDO) == (
        'serving.s.e.dv_head(tput=serving.s.e.dv_tput_same(within=2%, dis=4,917, coloc=4,996), '
        'itl=serving.s.e.dv_itl(b=8.5 ms, a=32.2 ms), slo=serving.s.e.dv_slo(ttft=1, tpot=8, '
        'dis=95, coloc=50)) serving.s.e.dv_goodput(x=1.9×, dis=24.05, coloc=12.82)')
    assert er.disagg_verdict(1000, 1000, 30, 6, 100, 100, 5.0, 5.0, *slo, lang=PSEUDO) == (
        'serving.s.e.dv_head(tput=serving.s.e.dv_tput_same(within=2%, dis=1,000, coloc=1,000), '
        'itl=serving.s.e.dv_itl(b=6.0 ms, a=30.0 ms), slo=serving.s.e.dv_slo(ttft=1, tpot=8, '
        'dis=100, coloc=100)) serving.s.e.dv_steadier')
    assert er.disagg_verdict(1000, 800, 30, 40, 100, 60, 5.0, 3.0, *slo, lang=PSEUDO) == (
        'serving.s.e.dv_head(tput=serving.s.e.dv_tput(r=0.80, dis=800, coloc=1,000), '
        'itl=serving.s.e.dv_itl(b=40.0 ms, a=30.0 ms), slo=serving.s.e.dv_slo(ttft=1, tpot=8, '
        'dis=60, coloc=100)) serving.s.e.dv_lost')
    assert er.disagg_verdict(1000, 1100, 30, 6, 90, 99, 5.0, 6.0, *slo, lang=PSEUDO) == (
        'serving.s.e.dv_head(tput=serving.s.e.dv_tput(r=1.10, dis=1,100, coloc=1,000), '
        'itl=serving.s.e.dv_itl(b=6.0 ms, a=30.0 ms), slo=serving.s.e.dv_slo(ttft=1, tpot=8, '
        'dis=99, coloc=90)) serving.s.e.dv_more_tput')
    # colocated served nothing within the SLOs (a link at dg_rate=1000 raised ZeroDivisionError on the page)
    assert er.disagg_verdict(1000, 1000, 30, 6, 0, 40, 0.0, 2.5, *slo, lang=PSEUDO) == (
        'serving.s.e.dv_head(tput=serving.s.e.dv_tput_same(within=2%, dis=1,000, coloc=1,000), '
        'itl=serving.s.e.dv_itl(b=6.0 ms, a=30.0 ms), slo=serving.s.e.dv_slo(ttft=1, tpot=8, '
        'dis=40, coloc=0)) serving.s.e.dv_goodput_only(dis=2.50)')
    assert er.disagg_verdict(1000, 1000, 30, 6, 0, 40, 0.0, 2.5, *slo, lang="ko").endswith(
        text("ko", "serving.s.e.dv_goodput_only", dis="2.50"))
    assert er.disagg_takeaway(2, 2, 32.23, 8.46, 0.042, 0.059, lang=PSEUDO) == (
        'serving.s.e.disagg(p=2, d=2, n=4, itl=serving.s.e.cut(a=32.2 ms, b=8.5 ms), '
        'ttft=serving.s.e.raised(a=0.04 s, b=0.06 s))')


def test_disagg_refusals():
    with pytest.raises(ValueError, match="num_prefill must be 1..16 GPUs, got 0"):
        DisaggConfig(0, 2)
    with pytest.raises(ValueError, match="link must be one of nvlink4"):
        DisaggSetup(link="pcie9")
    with pytest.raises(ValueError, match="positive number of bytes"):
        simulate_disagg(three(), CFG, UNIT, DisaggConfig(1, 1), lambda p: p, 0.0)
