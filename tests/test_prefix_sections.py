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


def test_two_prompts_by_hand():
    a = list(b"abcdefghij")  # 10 tokens in blocks of 4: [abcd][efgh][ij]
    b = list(a)
    b[5] = ord("F")  # block 1 changes
    demo = ps.compare_two_prompts(a, b, 4, 5)
    assert (demo.num_hit_blocks_b, demo.num_blocks_b, demo.num_hit_tokens_b, demo.num_computed_b) == (1, 3, 4, 6)
    assert demo.frame["fate"].tolist()[3:] == [ps.BlockFate.HIT, ps.BlockFate.CACHED, ps.BlockFate.PARTIAL]
    assert demo.frame["fate"].iloc[3] == "hit"  # str-valued: the table and the figure show the same words
    assert ro.demo_summary(demo).startswith("B reuses **1** blocks (**4** tokens) and computes **6** tokens, although it "
                                     "differs from A in one byte of 10.")
    assert "Here the change" not in ro.demo_summary(demo)
    assert ro.demo_finding(demo) == "changing byte 5 of 10 leaves 1 of 3 blocks reusable (section 1)"
    late = ps.compare_two_prompts(a, a[:9] + [ord("J")], 4, 9)  # the change sits in the partial block
    assert "B could reuse up to 2 full blocks" in ro.demo_summary(late)


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
    assert ro.tree_agreement(view, 16_384, 123) == (
        f"Over all 20 requests the tree (which never evicts) finds {view.radix_total:,} hit tokens, and the hashed "
        f"block pool with room for everything finds {view.hashed_total:,}: equal. With the 16,384-slot cache above "
        "it finds 123.")
    assert ro.tree_agreement(replace(view, hashed_total=None), 16_384, 123) is None


def test_agent_sentences_state_the_totals():
    agent = HitTotals(num_prompt_tokens=1000, num_hit_tokens=800, num_decode_steps=50, num_evictions=0,
                      num_requests_with_hit=9)
    assert agent.prefill_speedup == 5.0 and agent.throughput_gain(0) == 5.0
    assert agent.throughput_gain(4) == pytest.approx(1200 / 400)
    assert claims.agent_finding(agent, 4) == ("simulated agent loop: 80.0% hit, prefill 5.00× less, throughput ≈ "
                                              "3.00× (decode step = 4 prefill tokens)")
    assert "hits **80.0%** of its prompt tokens, so its prefill work drops **5.00×**" in claims.agent_paragraph(agent, 4)
    assert "gets **3.00×** faster" in claims.agent_paragraph(agent, 4)


def test_kv_change_text():
    text, finding = prw.kv_change_text([1, 30, 30, 30], 10, 40)
    assert "In layer 0 only **1** position changed" in text and "layer 3: **30** of the 30 positions from 10 on" in text
    assert finding == "changing byte 10: layer 0 changes 1 position, layers 1–3 change all 30 of the 30 positions " \
                      "from 10 on (section 5)"
    _, finding = prw.kv_change_text([1, 20, 30], 10, 40)
    assert "layers 1–2 change 20–30 of the 30" in finding


def test_claims_quote_the_runs_they_come_from():
    cfg, cache = PrefixWorkloadConfig(num_requests=40), CacheConfig()
    view = ps.compare_workloads(cfg, cache)
    demo = ps.compare_two_prompts(list(b"abcdefghij"), list(b"abcdeFghij"), 4, 5)
    run = SimpleNamespace(num_branches=2, prefix_ids=[0] * 50, prefill_saved_share=0.4, token_saved_share=0.45,
                          tokens_identical=True)
    got = claims.prefix_claims(demo, view, 10.0, claims.branch_finding(run), "KV")
    assert [c.seed for c in got] == ["000", "000", "002", "002", "002"]
    assert [c.verdict for c in got] == [Verdict.RIGHT, Verdict.RIGHT, Verdict.RIGHT, Verdict.NEEDS_CONTEXT,
                                        Verdict.RIGHT]
    assert got[0].computed == f"{ro.demo_finding(demo)}; on the real model KV."
    rag = view.get("rag", "fixed_first").hit_rate
    assert f"documents before the question: {100 * rag:.1f}% hit" in got[1].computed
    agent = view.get("agent", "fixed_first")
    assert got[3].computed == claims.agent_finding(agent, 10.0) and got[3].value == agent.throughput_gain(10.0)
    assert got[4].computed == "2 branches on a prefix of 50 bytes: prefill time −40% (tokens −45%), tokens identical"
    # sections that did not run are named instead
    empty = claims.prefix_claims(None, None, 10.0)
    assert empty[0].computed == f"section 1; on the real model {claims.NOT_RUN}."
    assert "before the question: ? hit" in empty[1].computed and empty[3].computed == "section 2"
    assert empty[4].computed == claims.NOT_RUN
