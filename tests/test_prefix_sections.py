"""What the Prefix caching page draws per section, as pure functions: two prompts block by block, the
workload overview, the tree next to the hashed pool, and the seeds' claims built from those results."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from sim.alloc import prefix_sweeps as ps
from sim.alloc.prefix_cache import CacheConfig, HitTotals, simulate_prefix_cache
from sim.alloc.workload import LAYOUTS, PrefixWorkloadConfig, make_trace
from sim.claims import Verdict
from sim.words import prefix as ro
from sim.words import prefix_claims as claims
from sim.words import prefix_run as prw
from sim.words.catalog import PSEUDO


def test_two_prompts_by_hand():
    a = list(b"abcdefghij")  # 10 tokens in blocks of 4: [abcd][efgh][ij]
    b = list(a)
    b[5] = ord("F")  # block 1 changes
    demo = ps.compare_two_prompts(a, b, 4, 5)
    assert (demo.num_hit_blocks_b, demo.num_blocks_b, demo.num_hit_tokens_b, demo.num_computed_b) == (1, 3, 4, 6)
    assert demo.frame["fate"].tolist()[3:] == [ps.BlockFate.HIT, ps.BlockFate.CACHED, ps.BlockFate.PARTIAL]
    assert demo.frame["fate"].iloc[3] == "hit"  # str-valued: the table and the figure show the same words
    assert ro.demo_summary(demo, PSEUDO).startswith("prefix.s.demo.summary(blocks=1, hit=4, computed=6, len=10, bs=4,")
    assert "prefix.s.demo.note" not in ro.demo_summary(demo, PSEUDO)
    assert ro.demo_finding(demo, PSEUDO) == "prefix.s.demo.finding(pos=5, len=10, hit=1, total=3)"
    late = ps.compare_two_prompts(a, a[:9] + [ord("J")], 4, 9)  # the change sits in the partial block
    assert "note=prefix.s.demo.note(n=2))" in ro.demo_summary(late, PSEUDO)


def test_overview_keeps_each_runs_totals():
    cfg, cache = PrefixWorkloadConfig(num_requests=40, shared_len=100), CacheConfig()
    view = ps.compare_workloads(cfg, cache, workloads=("agent", "rag"))
    assert list(view.totals) == [("agent", "fixed_first"), ("agent", "variable_first"), ("rag", "fixed_first"),
                                 ("rag", "variable_first")]
    for (wl, layout), t in view.totals.items():
        full = simulate_prefix_cache(make_trace(replace(cfg, workload=wl, layout=layout)), cache)
        assert t == full.totals()
        assert t.throughput_gain(10.0) == full.throughput_gain(10.0) and t.hit_rate == full.hit_rate
    frame = view.to_frame()
    assert frame.columns.tolist() == ["workload", "layout", "prompt_tokens", "hit_tokens", "computed_tokens",
                                      "hit_rate", "prefill_speedup", "evictions", "requests_with_hit", "decode_steps"]
    assert frame["hit_rate"].tolist() == [t.hit_rate for t in view.totals.values()]


def test_both_layouts_and_sweeps_cover_both_layouts():
    cfg, cache = PrefixWorkloadConfig(num_requests=30, shared_len=64), CacheConfig()
    both = ps.run_both_layouts(cfg, cache)
    assert list(both) == list(LAYOUTS)
    last = both["fixed_first"]
    layout = " ".join(f"[{name} {n:,}]" for name, n in last.last_segments)  # the trace's own part names
    assert layout.startswith("[system prompt 64]") and ro.last_request_caption(last).endswith(layout)
    assert both["variable_first"].result.num_hit_tokens == 0
    cap, bsz = ps.sweep_both_layouts(cfg, cache)
    assert list(cap) == list(bsz) == list(LAYOUTS)
    assert ps.num_sweep_runs(cache) == 9 + 6  # 16,384 and 16 are already in the defaults
    assert ps.num_sweep_runs(replace(cache, capacity_tokens=5000, block_size=4)) == 10 + 7


def test_tree_view_agrees_with_the_hashed_pool():
    cfg = PrefixWorkloadConfig(num_requests=20, shared_len=64)
    view = ps.tree_view(cfg, 16, 5)
    assert len(view.labels) == 5 and len(view.hit_tokens) == 5 and view.num_requests == 20
    assert view.radix_total == view.hashed_total
    assert ro.tree_agreement(view, 16_384, 123, PSEUDO) == (
        f"prefix.s.agree(n=20, radix={view.radix_total:,}, hashed={view.hashed_total:,}, same=prefix.s.agree.equal, "
        "cap=16,384, hits=123)")
    assert ro.tree_agreement(replace(view, hashed_total=None), 16_384, 123) is None


def test_agent_sentences_state_the_totals():
    agent = HitTotals(num_prompt_tokens=1000, num_hit_tokens=800, num_decode_steps=50, num_evictions=0,
                      num_requests_with_hit=9)
    assert agent.prefill_speedup == 5.0 and agent.throughput_gain(0) == 5.0
    assert agent.throughput_gain(4) == pytest.approx(1200 / 400)
    assert claims.agent_finding(agent, 4, PSEUDO) == "prefix.claim.agent_finding(hit=80.0, speedup=5.00, gain=3.00, w=4)"
    assert "(hit=80.0, speedup=5.00, w=4," in claims.agent_paragraph(agent, 4, PSEUDO)
    assert "gain=3.00," in claims.agent_paragraph(agent, 4, PSEUDO)


def test_kv_change_text():
    text, finding = prw.kv_change_text([1, 30, 30, 30], 10, 40, lang=PSEUDO)
    assert "prefix.kv.p.zero_one" in text and "prefix.kv.p.layer_n(i=3, n=30), after=30, pos=10)" in text
    assert finding == ("prefix.kv.finding(pos=10, zero=1, deep=prefix.kv.finding_deep(deep=prefix.kv.deep.all.other("
                       "layers=prefix.kv.layers(last=3), n=30)), after=30)")
    _, finding = prw.kv_change_text([1, 20, 30], 10, 40, lang=PSEUDO)
    assert "prefix.kv.deep.range.other(layers=prefix.kv.layers(last=2), lo=20, hi=30)), after=30)" in finding


def test_claims_quote_the_runs_they_come_from():
    cfg, cache = PrefixWorkloadConfig(num_requests=40), CacheConfig()
    view = ps.compare_workloads(cfg, cache)
    demo = ps.compare_two_prompts(list(b"abcdefghij"), list(b"abcdeFghij"), 4, 5)
    run = SimpleNamespace(num_branches=2, prefix_ids=[0] * 50, prefill_saved_share=0.4, token_saved_share=0.45,
                          tokens_identical=True)
    got = claims.prefix_claims(demo, view, 10.0, claims.branch_finding(run, PSEUDO), "KV", PSEUDO)
    assert [c.seed for c in got] == ["000", "000", "002", "002", "002"]
    assert [c.verdict for c in got] == [Verdict.RIGHT, Verdict.RIGHT, Verdict.RIGHT, Verdict.NEEDS_CONTEXT,
                                        Verdict.RIGHT]
    assert got[0].computed == f"prefix.claim.one_byte.computed(demo={ro.demo_finding(demo, PSEUDO)}, kv=KV)"
    rag = view.get("rag", "fixed_first").hit_rate
    assert f"prefix.claim.layout.computed(rag_fixed={100 * rag:.1f}%," in got[1].computed
    agent = view.get("agent", "fixed_first")
    assert got[3].computed == claims.agent_finding(agent, 10.0, PSEUDO) and got[3].value == agent.throughput_gain(10.0)
    assert got[4].computed == "prefix.claim.branch_finding(n=2, bytes=50, time=40, tokens=45, same=prefix.claim.identical)"
    # sections that did not run are named instead
    empty = claims.prefix_claims(None, None, 10.0)
    assert empty[0].computed == f"section 1; on the real model {claims.NOT_RUN}."
    assert "before the question: ? hit" in empty[1].computed and empty[3].computed == "section 2"
    assert empty[4].computed == claims.NOT_RUN
