"""Paged KV blocks and Prefix caching: each chart title states its takeaway, worded from the numbers it draws,
and its wording flips when the comparison flips."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd

from sim.alloc.policies import BlockSizeTradeoff
from sim.alloc.workload import PrefixWorkloadConfig
from sim.msg import Msg
from sim.words import paging as pg
from sim.words import prefix as ro
from sim.words import say, text
from sim.words.catalog import PSEUDO
from sim.words.prefix_run import kv_takeaway
from tests.conftest import run_page


def _policy(share: float):
    return SimpleNamespace(capacity_share_tokens=share, capacity_tokens=16_384)


def test_capacity_takeaway_flips_with_paged_against_contiguous():
    above = {"paged": _policy(0.924), "reserve_max_len": _policy(0.209), "first_fit": _policy(0.347)}
    assert pg.capacity_takeaway(above, lang=PSEUDO) == (
        "paged.s.cap.more(p=92.4%, cap=paged.s.cap.capacity(n=16,384), span=20.9–34.7%, "
        "policies=paged.s.cap.policies)")
    below = {"paged": _policy(0.1), "reserve_max_len": _policy(0.209), "first_fit": _policy(0.347)}
    assert pg.capacity_takeaway(below, lang=PSEUDO) == (
        "paged.s.cap.less(p=10.0%, cap=paged.s.cap.capacity(n=16,384), span=20.9–34.7%, "
        "policies=paged.s.cap.policies)")
    within = {"paged": _policy(0.3), "reserve_max_len": _policy(0.209), "first_fit": _policy(0.347)}
    assert pg.capacity_takeaway(within, lang=PSEUDO) == (
        "paged.s.cap.within(p=30.0%, cap=paged.s.cap.capacity(n=16,384), span=20.9–34.7%, "
        "policies=paged.s.cap.policies)")


def _trade(waste, table):
    return BlockSizeTradeoff(np.array([1, 16, 256]), np.array(waste), np.array(table), np.array(table, dtype=int))


def test_block_size_takeaway_follows_the_sweep():
    usual = _trade([0.0, 0.0171, 0.228], [453.1, 28.8, 2.3])
    assert pg.block_size_takeaway(usual, 16, lang=PSEUDO) == (
        "paged.s.bs.full(head=paged.s.bs.head(bs=16, waste=1.71%, table=28.8), lo=1, hi=256, w=paged.s.bs.waste_up, "
        "w0=0.00%, w1=22.80%, t=paged.s.bs.tables_down, t0=453.1, t1=2.3)")
    flipped = _trade([0.3, 0.1, 0.05], [1.0, 1.0, 1.0])
    assert pg.block_size_takeaway(flipped, 256, lang=PSEUDO) == (
        "paged.s.bs.full(head=paged.s.bs.head(bs=256, waste=5.00%, table=1.0), lo=1, hi=256, "
        "w=paged.s.bs.waste_down, w0=30.00%, w1=5.00%, t=paged.s.bs.tables_flat, t0=1.0, t1=1.0)")


def test_sharing_takeaway_says_what_sharing_saved():
    assert pg.sharing_takeaway(4, 10, 16, 2, 16, lead=text(PSEUDO, "paged.s.fork.lead", n="24"), lang=PSEUDO) == (
        "paged.s.share.saves(sharing=paged.s.share.lead(lead=paged.s.fork.lead(n=24)), saved=38%, "
        "who=paged.s.share.who(n=4), held=paged.s.share.held(n=10, bs=16, bytes=), copies=paged.s.share.copies(n=16, "
        "bytes=), shared=paged.s.share.still.other(n=2))")
    assert pg.sharing_takeaway(1, 3, 3, 0, 8, bytes_per_block=100, lang=PSEUDO) == (
        "paged.s.share.nothing(sharing=paged.s.share.bare, who=paged.s.share.who_one, held=paged.s.share.held(n=3, "
        "bs=8, bytes=paged.s.share.bytes(n=300)), shared=paged.s.share.none)")
    assert pg.sharing_takeaway(2, 5, 4, 1, 8, lang=PSEUDO) == (
        "paged.s.share.costs(sharing=paged.s.share.bare, who=paged.s.share.who(n=2), held=paged.s.share.held(n=5, "
        "bs=8, bytes=), copies=paged.s.share.copies(n=4, bytes=), shared=paged.s.share.still.one(n=1))")


def test_change_takeaway_names_the_hits_and_the_recomputed_blocks():
    assert ro.change_takeaway(72, "7", "8", 16, 4, 9, lang=PSEUDO) == (
        "prefix.s.change.some.other(head=prefix.s.change.head(pos=72, before=7, after=8, block=4), "
        "hit=prefix.s.blocks(lo=0, hi=3), tokens=64, rest=prefix.s.blocks(lo=4, hi=8))")
    assert ro.change_takeaway(3, "&lt;", "X", 16, 0, 9, lang=PSEUDO) == (
        "prefix.s.change.none(head=prefix.s.change.head(pos=3, before=&lt;, after=X, block=0), n=9)")


def _result(hits: list[int], prompt: int = 100):
    hit = np.array(hits)
    return SimpleNamespace(num_requests=len(hits), num_requests_with_hit=int((hit > 0).sum()),
                           num_prompt_tokens=prompt * len(hits), num_hit_tokens=int(hit.sum()),
                           hit_rate=hit.sum() / (prompt * len(hits)))


def test_per_request_takeaway_counts_the_requests_that_hit():
    assert ro.per_request_takeaway("system_prompt", "fixed_first", _result([0, 80, 80, 80]), lang=PSEUDO) == (
        "prefix.s.per_request.hit(head=prefix.s.per_request.head(name=prefix.workload.system_prompt, "
        "layout=prefix.layout.fixed_first), who=prefix.s.per_request.some(hit=3, n=4), rate=60.0, hits=240, "
        "total=400)")
    assert ro.per_request_takeaway("rag", "variable_first", _result([0, 0]), lang=PSEUDO) == (
        "prefix.s.per_request.none(head=prefix.s.per_request.head(name=prefix.workload.rag, "
        "layout=prefix.layout.variable_first), total=200)")


def _sweep(x: str, xs, fixed, variable):
    return {"fixed_first": pd.DataFrame({x: xs, "hit_rate": fixed}),
            "variable_first": pd.DataFrame({x: xs, "hit_rate": variable})}


def test_capacity_takeaway_says_which_layout_leads_and_what_more_slots_give():
    flat = _sweep("capacity_tokens", [8192, 16384, 32768], [0.865, 0.865, 0.865], [0.0, 0.0, 0.0])
    assert ro.capacity_takeaway(flat, 16384, lang=PSEUDO) == (
        "prefix.s.cap.nothing_from(head=prefix.s.vs.two(at=prefix.s.cap.at(cap=16,384), "
        "first=prefix.layout_short.fixed_first, a=86.5, second=prefix.layout_short.variable_first, b=0.0), "
        "rate=86.5%, least=8,192)")
    rising = _sweep("capacity_tokens", [8192, 16384, 32768], [0.1, 0.2, 0.3], [0.2, 0.4, 0.6])
    assert ro.capacity_takeaway(rising, 16384, lang=PSEUDO) == (
        "prefix.s.cap.raise(head=prefix.s.vs.two(at=prefix.s.cap.at(cap=16,384), "
        "first=prefix.layout_short.variable_first, a=40.0, second=prefix.layout_short.fixed_first, b=20.0), "
        "layout=prefix.layout_short.variable_first, rate=60.0, cap=32,768)")


def test_block_size_takeaway_gives_the_leading_layouts_range():
    falls = _sweep("block_size", [8, 16, 256], [0.87, 0.865, 0.446], [0.0, 0.0, 0.0])
    assert ro.block_size_takeaway(falls, 16, lang=PSEUDO) == (
        "prefix.s.bs.range(head=prefix.s.vs.two(at=prefix.s.bs.at(bs=16), first=prefix.layout_short.fixed_first, "
        "a=86.5, second=prefix.layout_short.variable_first, b=0.0), layout=prefix.layout_short.fixed_first, hi=87.0, "
        "hi_bs=8, lo=44.6, lo_bs=256)")
    same = _sweep("block_size", [8, 16], [0.5, 0.5], [0.5, 0.5])
    assert ro.block_size_takeaway(same, 8, lang=PSEUDO) == (
        "prefix.s.bs.same(head=prefix.s.vs.both(at=prefix.s.bs.at(bs=8), a=50.0), "
        "layout=prefix.layout_short.fixed_first)")


def _segments(rows):
    return pd.DataFrame(rows, columns=["segment", "parent", "start_block", "end_block", "requests", "created_by",
                                       "lane"])


def test_tree_takeaway_and_branching_sentence_follow_the_segments():
    cfg = PrefixWorkloadConfig("chat", "fixed_first")
    shared = _segments([(0, np.nan, 0, 4, [0, 1, 2], 0, 0), (1, 0, 4, 6, [0], 0, 0), (2, 0, 4, 5, [1], 1, 1),
                        (3, 0, 4, 7, [2], 2, 2)])
    assert ro.tree_takeaway(cfg, 3, shared, lang=PSEUDO) == (
        "prefix.s.tree.shared.other(head=prefix.s.tree.head(n=3, name=prefix.workload.chat, "
        "layout=prefix.layout.fixed_first), paths=18, stored=10, shared=4)")
    assert ro.tree_branching_sentence(shared, 3, lang=PSEUDO) == "prefix.s.roots.one(who=prefix.s.roots.all(n=3))"
    apart = _segments([(0, np.nan, 0, 2, [0], 0, 0), (1, np.nan, 0, 3, [1], 1, 1)])
    assert ro.tree_takeaway(cfg, 2, apart, lang=PSEUDO) == (
        "prefix.s.tree.none(head=prefix.s.tree.head(n=2, name=prefix.workload.chat, "
        "layout=prefix.layout.fixed_first), n=2, stored=5)")
    assert ro.tree_branching_sentence(apart, 2, lang=PSEUDO) == "prefix.s.roots.every(n=2)"


def test_kv_takeaway_says_what_stays_and_what_changes():
    assert kv_takeaway([1, 80, 80, 80], 40, 120, 0, "p", "P", lang=PSEUDO) == (
        "prefix.kv.title(pos=40, before=p, after_label=P, "
        "before_text=prefix.kv.before.same(who=prefix.kv.before.positions(last=39), layers=4), after=80, zero=1, "
        "deep=prefix.kv.title_deep(deep=prefix.kv.deep.all.other(layers=prefix.kv.layers(last=3), n=80)))")
    assert kv_takeaway([3, 5], 0, 10, 0, "a", "A", lang=PSEUDO) == (
        "prefix.kv.title(pos=0, before=a, after_label=A, before_text=prefix.kv.before.none, after=10, zero=3, "
        "deep=prefix.kv.title_deep(deep=prefix.kv.deep.n.one(layers=prefix.kv.layer1, n=5)))")
    assert kv_takeaway([1, 2], 4, 6, 2, "a", "A", lang=PSEUDO) == (
        "prefix.kv.title(pos=4, before=a, after_label=A, before_text=prefix.kv.before.changed(n=2, pos=4), after=2, "
        "zero=1, deep=prefix.kv.title_deep(deep=prefix.kv.deep.all.one(layers=prefix.kv.layer1, n=2)))")


def _titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_prefix_page_titles_follow_the_url():
    at = run_page("prefix_caching", {"live": "0"})
    assert not at.exception
    assert say("en", Msg("prefix.s.change.some.other",
                         head=Msg("prefix.s.change.head", pos="72", before="7", after="8", block="4"),
                         hit=Msg("prefix.s.blocks", lo="0", hi="3"), tokens="64",
                         rest=Msg("prefix.s.blocks", lo="4", hi="8"))) in _titles(at)
    at = run_page("prefix_caching", {"live": "0", "demo_pos": "3", "demo_text": "a<b>cdefghijklmnopqrstuvwxyz"})
    assert not at.exception
    titles = _titles(at)
    assert say("en", Msg("prefix.s.change.none", n="2",
                         head=Msg("prefix.s.change.head", pos="3", before="&gt;", after="X", block="0"))) in titles


def test_paged_page_title_follows_the_url():
    titles = _titles(run_page("paged_blocks", {"live": "0", "tab": "fork"}))  # parallel sampling's own tab
    lead = Msg("paged.s.share.lead", lead=Msg("paged.s.fork.lead", n="24"))  # 40-token prompt + 24: 4 blocks of 16
    assert say("en", Msg("paged.s.share.saves", sharing=lead, saved="38%", who=Msg("paged.s.share.who", n="4"),
                         held=Msg("paged.s.share.held", n="10", bs="16", bytes=""),
                         copies=Msg("paged.s.share.copies", n="16", bytes=""),
                         shared=Msg("paged.s.share.still.other", n="2"))) in titles
    at = run_page("paged_blocks", {"live": "0", "fork_n": "1", "tab": "fork"})
    assert not at.exception
    assert say("en", Msg("paged.s.share.nothing", sharing=lead, who=Msg("paged.s.share.who_one"),
                         held=Msg("paged.s.share.held", n="4", bs="16", bytes=""),
                         shared=Msg("paged.s.share.none"))) in _titles(at)
