"""The golden examples: a few sentences per language pinned whole, as a reader sees them (issue 35).

The other tests pin which message a function chose and with which numbers (the "keys" pseudo-language,
sim.words.catalog.PSEUDO), so a copy edit in assets/i18n/ breaks none of them; it updates these, and only these.
Each test names the file whose asserts it was moved from."""

import pytest

from sim.alloc.block_pool import BlockPool, simulate_parallel_sampling
from sim.msg import Msg
from sim.refusal import Refusal
from sim.words import attention, decode, engine_readouts, lesson, paging, prefix_run, roofline, say
from sim.words.serving import event_line

# --- from tests/test_pool_views.py ---------------------------------------------------------------

def test_pool_views_golden():
    fork = simulate_parallel_sampling(33, 5, 40, 8)
    assert paging.fork_summary(fork) == (
        "The prompt is prefilled once into 5 blocks; forking gives every branch the same table and raises each "
        "block's **ref_cnt** to 5. The prompt's last block is only partly full, so the first write of each branch "
        "into it copies it (copy-on-write: 4→5, 4→6, 4→7, 4→8); the last branch finds ref_cnt 1 and writes in place. "
        "4 blocks stay shared (labelled ×n).")
    pool = BlockPool(6, 4)
    pool.add_request(0, 5)
    pool.add_request(1, 3)
    snap = pool.snapshot(7)
    assert paging.request_line(snap, 0) == "Request **0** holds **5** tokens in **2** blocks (62% of their 8 slots)."
    assert paging.request_line(snap, 0, lang="ko") == "요청 **0**: 토큰 **5**개를 블록 **2**개에 담고 있다(슬롯 8개 중 62%)."


# --- from tests/test_prefix_cache.py -------------------------------------------------------------

def test_prefix_cache_golden():
    from tests.test_prefix_cache import _branch_run

    one = prefix_run.branch_summary(_branch_run(1.0, branch_decode_s=0.147, scratch_decode_s=0.236))
    assert one == (
        "The cache removes **45%** of the prefill tokens and **40%** of the prefill time. Time saved (40%) trails "
        "tokens saved (45%) by 5 points: every forward pass carries a fixed cost (dozens of small kernels for a model "
        "this small), and branching makes 3 passes instead of 2. Decoding the same 2 × 4 steps took 147 ms branched "
        "vs 236 ms from scratch, 89 ms (61%) more from scratch; one timed repeat gives no spread to tell timing noise "
        "from a real gap.")


# --- from tests/test_serving_engine.py -----------------------------------------------------------

def test_serving_engine_golden():
    from tests.test_serving_engine import cfg

    with pytest.raises(Refusal) as e:
        cfg(max_num_batched_tokens=7, num_speculative_tokens=1)
    # every number, the setting and its bound, in both languages
    assert str(e.value) == ("a token budget of 7 cannot give each of 4 running requests its 2 decode token(s) per step: "
                            "raise it to at least 8 (vLLM asks max_num_batched_tokens >= max_num_seqs)")
    assert say("ko", e.value.msg) == ("토큰 예산 7개로는 돌고 있는 요청 4개에 스텝마다 디코드 토큰을 2개씩 줄 수 없다: "
                                      "적어도 8개로 올리라 (vLLM도 max_num_batched_tokens >= max_num_seqs를 요구한다)")
    # an event's line: a field that is a list of block ids reads as the list it is
    assert event_line("en", Msg("serving.ev.recompute", r=1, blocks=[2, 3])) == (
        "request 1 preempted (recompute): blocks [2, 3] freed")


# --- from tests/test_serving_offload.py ----------------------------------------------------------

def test_serving_offload_golden():
    assert engine_readouts.tier_verdict("disk", "NVMe", 16_384, 0.307, 0.240, 12_288, 299.6, 225.9, 16, "M") == (
        "The **disk** tier lost here: loading its 16,384 tokens over NVMe added 0.307 s to passes, more than the "
        "0.240 s prefilling them again would have cost. One block of 16 tokens loads in 299.6 µs over NVMe: slower "
        "than recomputing a block early in a prompt (225.9 µs for the first with M), faster from token 12,288 on, "
        "where attention over the earlier tokens makes recomputing dearer.")


# --- from tests/test_serving_disagg.py -----------------------------------------------------------

def test_serving_disagg_golden():
    assert engine_readouts.disagg_verdict(4996, 4917, 32.23, 8.46, 49.7, 94.7, 12.82, 24.05, 1.0, 8.0) == (
        "Disaggregated: throughput within 2% of colocated's (4,917 vs 4,996 tokens/s), the p99 gap between tokens "
        "8.5 ms vs 32.2 ms; with the SLOs (first token within 1 s, then at most 8 ms per token), 95% of requests met "
        "both vs 50% colocated. It bought steadier decoding, not throughput — and because the SLOs bind here, that "
        "is 1.9× the requests served within them (24.05 vs 12.82 per second).")
    assert engine_readouts.disagg_takeaway(2, 2, 32.23, 8.46, 0.042, 0.059) == (
        "2 prefill + 2 decode GPUs vs 4 colocated: p99 inter-token latency cut from 32.2 ms to 8.5 ms, median time "
        "to first token raised from 0.04 s to 0.06 s")


# --- from tests/test_readout.py ------------------------------------------------------------------

def test_readout_golden():
    from tests.test_readout import fake_result

    r = fake_result(128)
    assert attention.timing_heading(r, "12:34:56") == (
        f"**{r.shape.label()}** — measured at 12:34:56 on `cpu` with 2 thread(s). Same shape again gives the cached "
        "numbers; **Measure again** takes fresh ones.")


# --- from tests/test_alloc_refusals.py -----------------------------------------------------------

def test_alloc_refusals_golden():
    from sim.alloc.prefix_cache import CacheConfig, simulate_prefix_cache
    from sim.alloc.workload import trace_from_lists

    trace = trace_from_lists([[1] * 10, [2] * 300, [3] * 40])
    with pytest.raises(Refusal) as e:
        simulate_prefix_cache(trace, CacheConfig(block_size=16, capacity_tokens=256))
    assert str(e.value) == ("request 1 stores 300 tokens = 19 blocks of 16, but the cache holds 16 blocks (256 tokens): "
                            "raise the capacity to at least 304 tokens")


# --- from tests/test_i18n_serving.py -------------------------------------------------------------

def test_i18n_serving_golden():
    assert engine_readouts.step_takeaway(2, 5, 6, 2, 1, 0, 1) == (
        "After step 2: 5 of 6 blocks held by 2 running requests; 1 waiting, 1 finished in this step")


# --- from tests/test_lesson_walk.py --------------------------------------------------------------

def test_lesson_walk_golden():
    from sim.lesson.blocks import block_story

    assert lesson.event_sentence(block_story()[4]) == (
        "Request A writes its next token into block #2, which request C shares and which is only partly filled: the "
        "pool first copies it to block #5 (copy-on-write), then writes the token there.")


# --- from tests/test_measured_times.py -----------------------------------------------------------

def test_measured_times_golden():
    from sim.work.conditions import Conditions

    t0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
    assert decode.measured_caption(Conditions(t0, 0.4, 0.6, 2), t0 + 30) == (
        "Measured at 22:13:20 UTC, one naive and one cached step in turn so both saw the same load; the load "
        "average went 0.4 → 0.6 on 2 cores, so the times describe this machine when it was not overloaded.")


# --- from tests/test_roofline.py -----------------------------------------------------------------

def test_roofline_golden():
    from sim.cost.roofline import TinyDecodePoint

    tp = TinyDecodePoint(2e6, 1e6, 500e-6, 50e-6, 120, 0.5, 2e9, 1e9)
    assert roofline.tiny_verdict(tp).startswith(
        "One cached decode step of the tiny model moves 2.00 MB and does 1.00 MFLOP. The roofline says it could take "
        "50 µs; it took **500 µs** — 10.0% of what the roof allows.")
    assert "each of its ~120 operations per token" in roofline.tiny_verdict(tp)


# --- from tests/test_lesson_fit.py ---------------------------------------------------------------

def test_lesson_fit_golden():
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.cost.roofline import RooflineConfig
    from sim.cost.roofline_fit import fit
    from sim.words.fit import fit_sentence

    f = fit(RooflineConfig(load_presets()["llama-3.1-70b"], 1, 4096), load_gpus()["h100-sxm"])
    assert fit_sentence(f, "Llama 3.1 70B") == (
        "Where it runs: Llama 3.1 70B does not fit one NVIDIA H100 SXM 80GB: weights 141.1 GB + cache 1.342 GB = "
        "142.4 GB, against the 77.31 GB a server may use on one (90% of its memory). It takes 2 of them, the weights "
        "split across them (tensor parallel); each GPU then does 1/2 of the FLOPs and reads 1/2 of the bytes, so the "
        "intensity, the ridge and the bound shown are the same on every one of them, and a step takes about 1/2 of "
        "the time shown (one GPU reading every byte), plus the time the GPUs spend exchanging partial results.")
    assert fit_sentence(f, "Llama 3.1 70B", "ko").startswith(
        "어디서 도는가: Llama 3.1 70B은(는) NVIDIA H100 SXM 80GB 한 장에 들어가지 않는다: 가중치 141.1 GB + 캐시 "
        "1.342 GB = 142.4 GB인데, 한 장에서 서버가 쓸 수 있는 것은 77.31 GB(메모리의 90%)다. 2장이 필요하고")
