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
from sim.words import say, text
from sim.words.catalog import PSEUDO


def test_byte_tokens():
    assert bt.to_bytes("aé") == [97, 195, 169] and bt.from_bytes([97, 195, 169]) == "aé"
    assert bt.from_bytes([97, 195]) == "a\ufffd"  # a cut character
    assert [bt.show_byte(b) for b in (10, 32, 65, 0x7F, 0xC3)] == ["⏎", "␣", "A", "\\x7f", "\\xc3"]
    assert bt.printable(b"ab\ncd") == "ab⏎cd"


def test_two_prompts_metrics_title_and_table():
    a = list(b"abcdefghij")  # blocks of 4: [abcd][efgh][ij]
    demo = ps.change_one_byte(a, 5, 4)  # f -> F, block 1
    assert demo.ids_b == tuple(b"abcdeFghij") and demo.ids_a == tuple(a)
    assert ro.demo_metrics(demo, PSEUDO) == [Metric("prefix.m.demo_reused", "prefix.m.demo_of(n=1, total=3)"),
                                             Metric("prefix.m.demo_read", "4"), Metric("prefix.m.demo_computed", "6")]
    assert ro.demo_chart_title(demo, lang=PSEUDO) == (
        "prefix.s.change.some.one(head=prefix.s.change.head(pos=5, before=f, after=F, block=1), hit=prefix.s.block(b=0), "
        "tokens=4, rest=prefix.s.blocks(lo=1, hi=2))")
    table = ro.demo_block_table(demo)
    assert table.columns.tolist() == ["request", "block", "tokens", "text", "hash", "parent hash", "fate"]
    assert table["text"].tolist() == ["abcd", "efgh", "ij", "abcd", "eFgh", "ij"]
    assert table["tokens"].tolist()[:3] == ["0..3", "4..7", "8..9"]
    assert ro.demo_chart_title(ps.change_one_byte(list(b"ab\ncd"), 2, 4), lang=PSEUDO) == (
        "prefix.s.change.none(head=prefix.s.change.head(pos=2, before=⏎, after=X, block=0), n=2)")
    with pytest.raises(ValueError, match="the changed byte must be 0..9, got 10"):
        ps.change_one_byte(a, 10, 4)


def test_demo_prompt_problem():
    assert ps.demo_prompt_problem([1, 2], 400) is None and ps.demo_prompt_problem([1] * 400, 400) is None
    assert say(PSEUDO, ps.demo_prompt_problem([1], 400)) == "prefix.s.demo.problem(n=1, max=400)"
    assert say(PSEUDO, ps.demo_prompt_problem([1] * 401, 400)) == "prefix.s.demo.problem(n=401, max=400)"
    assert say("ko", ps.demo_prompt_problem([1] * 401, 400)) == text("ko", "prefix.s.demo.problem", n=401, max=400)


def _hand_run():
    # request 0 stores [0..7] in two blocks of 4; request 1 = [0..9] hits both (8 of its 10 tokens)
    return simulate_prefix_cache(trace_from_lists([list(range(8)), list(range(10))], [[50, 51, 52], [60]]),
                                 CacheConfig(4, 64, 2))


def test_hit_metrics_by_hand():
    got = {m.label: (m.value, m.help) for m in ro.hit_metrics(_hand_run(), PSEUDO)}
    assert got["prefix.m.hit_rate"] == ("44.4%", "prefix.m.hit_rate_help(hit=8, total=18)")
    assert got["prefix.m.computed"] == ("10", None) and got["prefix.m.saved"] == ("8", None)
    assert got["prefix.m.speedup"] == ("1.80×", "prefix.m.speedup_help")
    assert got["prefix.m.reused"] == ("2", "prefix.m.reused_help(distinct=2, ref=2)")
    assert got["prefix.m.evictions"][0] == "0"


def test_throughput_metrics_by_hand():
    agent = HitTotals(num_prompt_tokens=1000, num_hit_tokens=800, num_decode_steps=50, num_evictions=0,
                      num_requests_with_hit=9)
    got = ro.throughput_metrics(_hand_run(), agent, 4.0, PSEUDO)  # (18 + 4·2) / (10 + 4·2) = 26 / 18
    assert got[0] == Metric("prefix.m.gain", "1.44×", help="prefix.m.gain_help(p=18, d=2, w=4)")
    assert [(m.label, m.value) for m in got[1:]] == [("prefix.m.agent_hit", "80.0%"),
                                                     ("prefix.m.agent_speedup", "5.00×"),
                                                     ("prefix.m.agent_gain", "3.00×")]


def _both(fixed: float, variable: float) -> dict:
    return {"fixed_first": ps.LayoutRun(SimpleNamespace(hit_rate=fixed), ""),
            "variable_first": ps.LayoutRun(SimpleNamespace(hit_rate=variable), "")}


def test_layout_metric_caption_and_sentence():
    run = ps.LayoutRun(_hand_run(), "group 0, question 1", (("system prompt", 64), ("question", 8)))
    assert ro.layout_metric("variable_first", run, PSEUDO) == Metric(
        "prefix.m.layout(layout=prefix.layout.variable_first)", "44.4%", help="prefix.m.layout_help(hit=8, total=18)")
    assert ro.last_request_caption(run, PSEUDO) == (
        "prefix.s.last_request(label=group 0, question 1, layout=[prefix.seg.system_prompt 64] [prefix.seg.question 8])")
    assert ro.layout_sentence("rag", _both(0.861, 0.0), PSEUDO) == (
        "prefix.s.layout.sentence(name=prefix.workload.rag, fixed=86.1, change=prefix.s.layout.drops(var=0.0))")
    assert "prefix.s.layout.leaves(var=0.0)" in ro.layout_sentence("random", _both(0.0, 0.0), PSEUDO)
    assert "prefix.s.layout.raises(var=20.0)" in ro.layout_sentence("random", _both(0.1, 0.2), PSEUDO)


def test_workloads_caption_says_what_rags_header_gives():
    cfg = PrefixWorkloadConfig()
    assert ro.workloads_caption(cfg, CacheConfig(), PSEUDO) == (
        "prefix.s.workloads_caption(n=200, shared=500, new=64, out=64, groups=4, header=prefix.s.rag.short(h=12, bs=16))")
    assert ro.workloads_caption(cfg, CacheConfig(block_size=4), PSEUDO).endswith(
        "header=prefix.s.rag.fills.other(h=12, n=3, bs=4, tokens=12))")
    assert ro.workloads_caption(cfg, CacheConfig(block_size=8), PSEUDO).endswith(
        "header=prefix.s.rag.fills.one(h=12, n=1, bs=8, tokens=8))")
    assert "prefix.s.rag.short(h=12, bs=13)" in ro.workloads_caption(cfg, CacheConfig(block_size=13, capacity_tokens=13_000),
                                                                     PSEUDO)


def test_rags_header_is_what_the_question_first_layout_hits():
    # the caption's claim, simulated: with the question first only the header's full blocks hit
    cfg = PrefixWorkloadConfig("rag", "variable_first", num_requests=20, num_groups=1)
    for bs, per_request in ((4, 12), (8, 8), (16, 0)):
        res = simulate_prefix_cache(make_trace(cfg), CacheConfig(bs, 65_536))
        assert res.hit_tokens.tolist() == [0] + [per_request] * 19


def test_sweep_caption_and_tree_titles():
    assert ro.sweep_caption(CacheConfig(8, 4096, 3), PSEUDO).startswith("prefix.s.sweep_caption(bs=8, running=3,")
    assert "cap=4,096)" in ro.sweep_caption(CacheConfig(8, 4096, 3), PSEUDO)
    cfg = PrefixWorkloadConfig("chat", "variable_first", num_requests=3)
    assert ro.num_tree_requests(cfg, 8) == 3 and ro.num_tree_requests(cfg, 2) == 2
    assert ro.sweep_caption(CacheConfig(8, 4096, 3), PSEUDO) == "prefix.s.sweep_caption(bs=8, running=3, cap=4,096)"


def test_job_plans():
    cfg, cache = PrefixWorkloadConfig(), CacheConfig()
    assert ro.workloads_job(cfg, 1000, PSEUDO) == ro.JobPlan(pytest.approx(1e-6 * 1000 * 2 * 8),
                                                             "prefix.job.workloads(n=200)")
    job = ro.sweeps_job(cache, 1000, PSEUDO)  # 15 simulations per layout
    assert job.estimate_s == pytest.approx(2000 * (1e-6 + 15 * 1.5e-7))
    assert job.what == "prefix.job.sweeps(n=30)"
    assert ro.tree_job(1000, PSEUDO) == ro.JobPlan(pytest.approx(3e-3), "prefix.job.tree")


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
    assert say(PSEUDO, pr.branch_inputs("a", "x", num_new=4, repeats=1).kv_problem) == "prefix.run.kv_problem"
    assert len(pr.branch_inputs("x" * 500, "x", num_new=4, repeats=1).kv_ids) == pr.KV_DEMO_BYTES == 120

    def problem(prefix="abc", suffixes="x"):
        got = pr.branch_inputs(prefix, suffixes, num_new=4, repeats=1).problem
        return None if got is None else say(PSEUDO, got)

    assert problem("") == "prefix.run.empty"
    assert problem("é" * 700) == "prefix.run.too_long(n=1,400, max=700)"
    assert problem("x" * 700) is None
    assert pr.branch_inputs("é" * 700, "x", num_new=4, repeats=1).problem == Msg("prefix.run.too_long", n=1400, max=700)
    assert problem(suffixes=" \n") == "prefix.run.branches(max=8, n=0)"
    assert problem(suffixes="\n".join("abcdefghi")) == "prefix.run.branches(max=8, n=9)"
    assert problem(suffixes="x" * 80) == "prefix.run.suffix_long(n=81, max=80)"
    assert problem(suffixes="x" * 79) is None


def test_branch_job_costs_the_longest_branch_both_ways():
    rates = SimpleNamespace(seconds=lambda work: 1e-3 * work.tokens)
    job = pr.branch_inputs("abc", "King.\nHam.", num_new=4, repeats=1).job(rates)
    # the longest branch: 3 + 6 prompt tokens, then 3 one-token steps = 12 tokens; 2 ways × 2 branches × 2 runs
    assert job.estimate_s == pytest.approx(2 * 2 * 2 * 12e-3)
    assert job.what == Msg("prefix.run.job", n=2, repeats=1)
    assert say(PSEUDO, job.what) == "prefix.run.job(n=2, repeats=1)"


def _branch_run(**kw):
    # 2 branches of 10 tokens on a 100-token prefix: 220 prefill tokens from scratch, 120 branched
    args = dict(prefix_ids=[0] * 100, suffix_ids=[[1] * 10, [2] * 10], num_new=5, branch_tokens=[[72, 105], [10]],
                scratch_tokens=[[72, 105], [10]], max_abs_logit_diff=0.0, shared_prefill_s=1.0,
                suffix_prefill_s=[0.1, 0.1], scratch_prefill_s=[1.0, 1.0], branch_decode_s=0.10,
                scratch_decode_s=0.10, repeats=1, device="cpu", dtype="float32")
    return pr.BranchRun(**(args | kw))


def test_branch_run_metrics_and_sentences():
    run = _branch_run()
    got = {m.label: (m.value, m.help) for m in prw.branch_metrics(run, lang=PSEUDO)}
    assert got["prefix.run.m.scratch"] == ("2000.0 ms", "prefix.run.m.passes(tokens=220, n=2)")
    assert got["prefix.run.m.cached"] == ("1200.0 ms", "prefix.run.m.passes(tokens=120, n=3)")
    assert got["prefix.run.m.saved"] == ("40%", "prefix.run.m.saved_help(share=45)")
    assert got["prefix.run.m.identical"][0] == "prefix.run.m.yes" and got["prefix.run.m.logit"][0] == "0.0e+00"
    assert prw.mismatch_warning(run) is None
    assert prw.branch_chart_title(run, lang=PSEUDO) == (
        "prefix.run.title.less(b=2000.0, a=1200.0, share=40%, where=prefix.run.where.other(n=2, prefix=100, device=cpu, "
        "dtype=float32))")
    # one decode step: 0.10 s / (2 × 4) = 12.5 ms; one prefill token: 2.0 s / 220 = 9.09 ms
    assert run.decode_step_in_prefill_tokens == pytest.approx(0.0125 / (2.0 / 220))
    assert prw.branch_report(run, lang=PSEUDO) == prw.branch_summary(run, lang=PSEUDO) + "prefix.run.decode_cost(ratio=1)"
    one = _branch_run(num_new=1)
    assert one.decode_step_in_prefill_tokens is None and prw.branch_report(one) == prw.branch_summary(one)
    frame = prw.branch_frame(run, ["King.", "Ham."])
    assert frame.to_dict("records") == [
        {"branch": 1, "continuation": "King.", "branched": "Hi", "from scratch": "Hi", "same": True},
        {"branch": 2, "continuation": "Ham.", "branched": "\n", "from scratch": "\n", "same": True}]


def test_branch_run_that_differs_says_why():
    run = _branch_run(scratch_tokens=[[72, 105], [11]], dtype="bfloat16", max_abs_logit_diff=0.03125)
    got = {m.label: m.value for m in prw.branch_metrics(run, lang=PSEUDO)}
    assert got["prefix.run.m.identical"] == "prefix.run.m.no" and got["prefix.run.m.logit"] == "3.1e-02"
    assert prw.mismatch_warning(run, lang=PSEUDO) == "prefix.run.mismatch(dtype=bfloat16)"
    assert prw.branch_frame(run, ["a", "b"])["same"].tolist() == [True, False]


def test_kv_change_words_its_own_counts():
    k = np.array([[0, 0, 0.5, 0], [0, 0, 1, 1], [0, 0, 1, 2]])  # (L, T): layer 0 changes only position 2
    v = np.array([[0, 0, 0.1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])  # layer 2: only K changed at 3
    kc = pr.KVChange(ids=[65, 66, 67, 68], changed_ids=[65, 66, 99, 68], position=2, k_diff=k, v_diff=v, k_scale=np.ones(3))
    assert kc.changed_counts() == [1, 2, 2]
    assert kc.position_labels() == ["A", "B", "C", "D"]
    assert prw.kv_chart_title(kc, lang=PSEUDO) == (
        "prefix.kv.title(pos=2, before=C, after_label=c, before_text=prefix.kv.before.same(who=prefix.kv.before.positions("
        "last=1), layers=3), after=2, zero=1, deep=prefix.kv.title_deep(deep=prefix.kv.deep.all.other(layers=prefix.kv."
        "layers(last=2), n=2)))")
    assert (prw.kv_summary(kc), prw.kv_finding(kc)) == prw.kv_change_text([1, 2, 2], 2, 4, 0)
    assert prw.kv_finding(kc, lang=PSEUDO) == (
        "prefix.kv.finding(pos=2, zero=1, deep=prefix.kv.finding_deep(deep=prefix.kv.deep.all.other(layers=prefix.kv."
        "layers(last=2), n=2)), after=2)")
