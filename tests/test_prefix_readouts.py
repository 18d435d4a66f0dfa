"""What the Prefix caching page says, as pure functions with hand-worked values: byte tokens, the two-prompt
view's metrics, title and table, section 2-4 metrics, captions and job plans, and the real-model results'
own metrics and sentences (BranchInputs, BranchRun, KVChange built by hand: no model, no torch)."""

from types import SimpleNamespace

import numpy as np
import pytest

from sim.alloc import byte_tokens as bt
from sim.alloc import prefix_sweeps as ps
from sim.alloc.prefix_cache import CacheConfig, HitTotals, simulate_prefix_cache
from sim.alloc.workload import PrefixWorkloadConfig, make_trace, trace_from_lists
from sim.model import prefix_run as pr
from sim.msg import Msg
from sim.readout import Metric
from sim.words import prefix as ro
from sim.words import prefix_run as prw
from sim.words import say


def test_byte_tokens():
    assert bt.to_bytes("aé") == [97, 195, 169] and bt.from_bytes([97, 195, 169]) == "aé"
    assert bt.from_bytes([97, 195]) == "a\ufffd"  # a cut character
    assert [bt.show_byte(b) for b in (10, 32, 65, 0x7F, 0xC3)] == ["⏎", "␣", "A", "\\x7f", "\\xc3"]
    assert bt.printable(b"ab\ncd") == "ab⏎cd"


def test_two_prompts_metrics_title_and_table():
    a = list(b"abcdefghij")  # blocks of 4: [abcd][efgh][ij]
    demo = ps.change_one_byte(a, 5, 4)  # f -> F, block 1
    assert demo.ids_b == tuple(b"abcdeFghij") and demo.ids_a == tuple(a)
    assert ro.demo_metrics(demo) == [Metric("Blocks of B reused", "1 of 3"), Metric("Tokens of B read from the cache", "4"),
                              Metric("Tokens of B computed", "6")]
    assert ro.demo_chart_title(demo) == ("Byte 5 changed (f → F, block 1): block 0 of B stays a hit (4 tokens), blocks 1–2 "
                                  "must be recomputed")
    table = ro.demo_block_table(demo)
    assert table.columns.tolist() == ["request", "block", "tokens", "text", "hash", "parent hash", "fate"]
    assert table["text"].tolist() == ["abcd", "efgh", "ij", "abcd", "eFgh", "ij"]
    assert table["tokens"].tolist()[:3] == ["0..3", "4..7", "8..9"]
    assert ro.demo_chart_title(ps.change_one_byte(list(b"ab\ncd"), 2, 4)) == ("Byte 2 changed (⏎ → X, block 0): no block of "
                                                                      "B stays a hit, all 2 blocks must be recomputed")
    with pytest.raises(ValueError, match="the changed byte must be 0..9, got 10"):
        ps.change_one_byte(a, 10, 4)


def test_demo_prompt_problem():
    assert ps.demo_prompt_problem([1, 2], 400) is None and ps.demo_prompt_problem([1] * 400, 400) is None
    assert say("en", ps.demo_prompt_problem([1], 400)) == \
        "Prompt A is 1 bytes; it needs 2..400 bytes (one token per byte)."
    assert say("en", ps.demo_prompt_problem([1] * 401, 400)) == \
        "Prompt A is 401 bytes; it needs 2..400 bytes (one token per byte)."
    assert say("ko", ps.demo_prompt_problem([1] * 401, 400)) == \
        "프롬프트 A가 401바이트다. 2..400바이트여야 한다(바이트 하나가 토큰 하나)."


def _hand_run():
    # request 0 stores [0..7] in two blocks of 4; request 1 = [0..9] hits both (8 of its 10 tokens)
    return simulate_prefix_cache(trace_from_lists([list(range(8)), list(range(10))], [[50, 51, 52], [60]]),
                                 CacheConfig(4, 64, 2))


def test_hit_metrics_by_hand():
    got = {m.label: (m.value, m.help) for m in ro.hit_metrics(_hand_run())}
    assert got["Token hit rate"] == ("44.4%", "8 of 18 prompt tokens came from the cache.")
    assert got["Prefill tokens computed"] == ("10", None) and got["Prefill tokens saved"] == ("8", None)
    assert got["Prefill speed-up"] == ("1.80×", "Prompt tokens / prompt tokens computed.")
    assert got["Blocks reused"] == ("2", "Cache hits in blocks; 2 distinct blocks were hit, and up to 2 requests "
                                         "held one block at once.")
    assert got["Evictions"][0] == "0"


def test_throughput_metrics_by_hand():
    agent = HitTotals(num_prompt_tokens=1000, num_hit_tokens=800, num_decode_steps=50, num_evictions=0,
                      num_requests_with_hit=9)
    got = ro.throughput_metrics(_hand_run(), agent, 4.0)  # (18 + 4·2) / (10 + 4·2) = 26 / 18
    assert got[0] == Metric("Throughput gain, this workload", "1.44×",
                            help="(P + w·D) / (P − hits + w·D) with P = 18 prompt tokens, D = 2 decode steps, w = 4.")
    assert [(m.label, m.value) for m in got[1:]] == [("Agent loop: hit rate", "80.0%"),
                                                     ("Agent loop: prefill speed-up", "5.00×"),
                                                     ("Agent loop: throughput gain", "3.00×")]


def _both(fixed: float, variable: float) -> dict:
    return {"fixed_first": ps.LayoutRun(SimpleNamespace(hit_rate=fixed), ""),
            "variable_first": ps.LayoutRun(SimpleNamespace(hit_rate=variable), "")}


def test_layout_metric_caption_and_sentence():
    run = ps.LayoutRun(_hand_run(), "group 0, question 1", (("system prompt", 64), ("question", 8)))
    assert ro.layout_metric("variable_first", run) == Metric("Hit rate · variable content first", "44.4%",
                                                              help="8 of 18 prompt tokens.")
    assert ro.last_request_caption(run) == "Last request (group 0, question 1): [system prompt 64] [question 8]"
    assert ro.layout_sentence("rag", _both(0.861, 0.0)) == (
        "**RAG: documents + question**: with the repeated content first, **86.1%** of prompt tokens are served from "
        "the cache; moving what changes to the top drops it to **0.0%** — every block after the first difference "
        "has a new hash.")
    assert "leaves it at **0.0%**" in ro.layout_sentence("random", _both(0.0, 0.0))
    assert "raises it to **20.0%**" in ro.layout_sentence("random", _both(0.1, 0.2))


def test_workloads_caption_says_what_rags_header_gives():
    cfg = PrefixWorkloadConfig()
    assert ro.workloads_caption(cfg, CacheConfig()) == (
        "Every workload with the sizes above (200 requests, 500 shared tokens, ~64 new and ~64 output tokens, "
        "4 groups) and the same cache. RAG's 12-token instruction header is shared in both layouts but shorter than "
        "a block of 16, so the question-first layout gets nothing from it.")
    assert ro.workloads_caption(cfg, CacheConfig(block_size=4)).endswith(
        "fills 3 full blocks of 4, so even the question-first layout can reuse 12 tokens of it.")
    assert ro.workloads_caption(cfg, CacheConfig(block_size=8)).endswith(
        "fills 1 full block of 8, so even the question-first layout can reuse 8 tokens of it.")
    assert "shorter than a block of 13" in ro.workloads_caption(cfg, CacheConfig(block_size=13, capacity_tokens=13_000))


def test_rags_header_is_what_the_question_first_layout_hits():
    # the caption's claim, simulated: with the question first only the header's full blocks hit
    cfg = PrefixWorkloadConfig("rag", "variable_first", num_requests=20, num_groups=1)
    for bs, per_request in ((4, 12), (8, 8), (16, 0)):
        res = simulate_prefix_cache(make_trace(cfg), CacheConfig(bs, 65_536))
        assert res.hit_tokens.tolist() == [0] + [per_request] * 19


def test_sweep_caption_and_tree_titles():
    assert ro.sweep_caption(CacheConfig(8, 4096, 3)).startswith("Left: block size 8, 3 running.")
    assert "the same 4,096 slots in blocks of each size" in ro.sweep_caption(CacheConfig(8, 4096, 3))
    cfg = PrefixWorkloadConfig("chat", "variable_first", num_requests=3)
    assert ro.num_tree_requests(cfg, 8) == 3 and ro.num_tree_requests(cfg, 2) == 2
    assert ro.sweep_caption(CacheConfig(8, 4096, 3)).endswith("a prefix shorter than one block never hits (vLLM "
                                                              "uses 16).")


def test_job_plans():
    cfg, cache = PrefixWorkloadConfig(), CacheConfig()
    assert ro.workloads_job(cfg, 1000) == ro.JobPlan(pytest.approx(1e-6 * 1000 * 2 * 8),
                                                     "Simulating 200 requests in both layouts, and every workload")
    job = ro.sweeps_job(cache, 1000)  # 15 simulations per layout
    assert job.estimate_s == pytest.approx(2000 * (1e-6 + 15 * 1.5e-7))
    assert job.what == "Sweeping capacity and block size: 30 simulations"
    assert ro.tree_job(1000) == ro.JobPlan(pytest.approx(3e-3), "Building the radix tree of every request")


def test_overview_download_and_sizes_only():
    cfg, cache = PrefixWorkloadConfig("chat", "variable_first", num_requests=30, shared_len=64), CacheConfig()
    assert ps.sizes_only(cfg) == PrefixWorkloadConfig(num_requests=30, shared_len=64)
    view = ps.compare_workloads(ps.sizes_only(cfg), cache, workloads=("agent",))
    shown, raw = view.to_csv_frame(), view.to_frame()
    assert shown["hit_rate"].tolist() == [round(100 * h, 2) for h in raw["hit_rate"]]
    assert shown["prefill_speedup"].tolist() == [round(s, 3) for s in raw["prefill_speedup"]]
    assert shown.drop(columns=["hit_rate", "prefill_speedup"]).equals(raw.drop(columns=["hit_rate", "prefill_speedup"]))


# --- the real-model section ----------------------------------------------------------------------

def test_branch_inputs_parse_and_name_the_numbers():
    got = pr.branch_inputs("abc", "King.\n\n  \nHam.", num_new=4, repeats=1)
    assert got.problem is None and got.continuations == ("King.", "Ham.")
    assert got.suffix_ids == (tuple(b"King.\n"), tuple(b"Ham.\n")) and got.prefix_ids == (97, 98, 99)
    assert got.kv_ids == (97, 98, 99) and got.kv_problem is None
    assert pr.branch_inputs("a", "x", num_new=4, repeats=1).kv_problem == Msg("prefix.run.kv_problem")
    assert say("en", pr.branch_inputs("a", "x", num_new=4, repeats=1).kv_problem) == "The prefix needs at least 2 bytes for this view."
    assert len(pr.branch_inputs("x" * 500, "x", num_new=4, repeats=1).kv_ids) == pr.KV_DEMO_BYTES == 120

    def problem(prefix="abc", suffixes="x"):
        got = pr.branch_inputs(prefix, suffixes, num_new=4, repeats=1).problem
        return None if got is None else say("en", got)

    assert problem("") == "The shared prefix is empty: type at least one character."
    assert problem("é" * 700) == "The shared prefix is 1,400 bytes; the limit is 700."
    assert problem("x" * 700) is None
    assert pr.branch_inputs("é" * 700, "x", num_new=4, repeats=1).problem == Msg("prefix.run.too_long", n=1400, max=700)
    assert problem(suffixes=" \n") == "Give 1..8 continuations (one per line); there are 0."
    assert problem(suffixes="\n".join("abcdefghi")) == "Give 1..8 continuations (one per line); there are 9."
    assert problem(suffixes="x" * 80) == "A continuation is 81 bytes; the limit is 80."
    assert problem(suffixes="x" * 79) is None


def test_branch_job_costs_the_longest_branch_both_ways():
    rates = SimpleNamespace(seconds=lambda work: 1e-3 * work.tokens)
    job = pr.branch_inputs("abc", "King.\nHam.", num_new=4, repeats=1).job(rates)
    # the longest branch: 3 + 6 prompt tokens, then 3 one-token steps = 12 tokens; 2 ways × 2 branches × 2 runs
    assert job.estimate_s == pytest.approx(2 * 2 * 2 * 12e-3)
    assert job.what == Msg("prefix.run.job", n=2, repeats=1)
    assert say("en", job.what) == "Prefilling once and branching 2 continuations, 1 timed repetitions"


def _branch_run(**kw):
    # 2 branches of 10 tokens on a 100-token prefix: 220 prefill tokens from scratch, 120 branched
    args = dict(prefix_ids=[0] * 100, suffix_ids=[[1] * 10, [2] * 10], num_new=5, branch_tokens=[[72, 105], [10]],
                scratch_tokens=[[72, 105], [10]], max_abs_logit_diff=0.0, shared_prefill_s=1.0,
                suffix_prefill_s=[0.1, 0.1], scratch_prefill_s=[1.0, 1.0], branch_decode_s=0.10,
                scratch_decode_s=0.10, repeats=1, device="cpu", dtype="float32")
    return pr.BranchRun(**(args | kw))


def test_branch_run_metrics_and_sentences():
    run = _branch_run()
    got = {m.label: (m.value, m.help) for m in prw.branch_metrics(run)}
    assert got["Prefill from scratch"] == ("2000.0 ms", "220 tokens in 2 passes.")
    assert got["Prefill, prefix cached"] == ("1200.0 ms", "120 tokens in 3 passes.")
    assert got["Prefill time saved"] == ("40%", "Prefill tokens saved: 45%.")
    assert got["Tokens identical"][0] == "yes" and got["Largest logit diff"][0] == "0.0e+00"
    assert prw.mismatch_warning(run) is None
    assert prw.branch_chart_title(run) == ("Prefilling the prefix once cuts prefill from 2000.0 ms to 1200.0 ms (40% less) for 2 "
                                 "branches from a prefix of 100 tokens on cpu (float32)")
    # one decode step: 0.10 s / (2 × 4) = 12.5 ms; one prefill token: 2.0 s / 220 = 9.09 ms
    assert run.decode_step_in_prefill_tokens == pytest.approx(0.0125 / (2.0 / 220))
    assert prw.branch_report(run) == prw.branch_summary(run) + " One decode step here (batch 1) costs as much as **1** prefill tokens."
    one = _branch_run(num_new=1)
    assert one.decode_step_in_prefill_tokens is None and prw.branch_report(one) == prw.branch_summary(one)
    frame = prw.branch_frame(run, ["King.", "Ham."])
    assert frame.to_dict("records") == [
        {"branch": 1, "continuation": "King.", "branched": "Hi", "from scratch": "Hi", "same": True},
        {"branch": 2, "continuation": "Ham.", "branched": "\n", "from scratch": "\n", "same": True}]


def test_branch_run_that_differs_says_why():
    run = _branch_run(scratch_tokens=[[72, 105], [11]], dtype="bfloat16", max_abs_logit_diff=0.03125)
    got = {m.label: m.value for m in prw.branch_metrics(run)}
    assert got["Tokens identical"] == "NO" and got["Largest logit diff"] == "3.1e-02"
    assert prw.mismatch_warning(run).startswith("Some branch produced different tokens from its from-scratch run. In "
                                             "bfloat16 the two ways round differently")
    assert prw.branch_frame(run, ["a", "b"])["same"].tolist() == [True, False]


def test_kv_change_words_its_own_counts():
    k = np.array([[0, 0, 0.5, 0], [0, 0, 1, 1], [0, 0, 1, 2]])  # (L, T): layer 0 changes only position 2
    v = np.array([[0, 0, 0.1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])  # layer 2: only K changed at 3
    kc = pr.KVChange(ids=[65, 66, 67, 68], changed_ids=[65, 66, 99, 68], position=2, k_diff=k, v_diff=v, k_scale=np.ones(3))
    assert kc.changed_counts() == [1, 2, 2]
    assert kc.position_labels() == ["A", "B", "C", "D"]
    assert prw.kv_chart_title(kc) == ("Changing byte 2 (C → c): positions 0–1 stay exactly unchanged in all 3 layers; of the 2 "
                                "positions from 2 on, layer 0 changes 1 and layers 1–2 change all 2")
    assert (prw.kv_summary(kc), prw.kv_finding(kc)) == prw.kv_change_text([1, 2, 2], 2, 4, 0)
    assert prw.kv_finding(kc) == ("changing byte 2: layer 0 changes 1 position, layers 1–2 change all 2 of the 2 positions "
                            "from 2 on (section 5)")
