"""Paged KV blocks and Prefix caching: each chart title states its takeaway, worded from the numbers it draws,
and its wording flips when the comparison flips."""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd

from sim.alloc.policies import BlockSizeTradeoff
from sim.alloc.workload import PrefixWorkloadConfig
from sim.words import paging as pg
from sim.words import prefix as ro
from sim.words.prefix_run import kv_takeaway
from tests.conftest import run_page


def _policy(share: float):
    return SimpleNamespace(capacity_share_tokens=share, capacity_tokens=16_384)


def test_capacity_takeaway_flips_with_paged_against_contiguous():
    above = {"paged": _policy(0.924), "reserve_max_len": _policy(0.209), "first_fit": _policy(0.347)}
    assert pg.capacity_takeaway(above) == ("Real tokens fill 92.4% of the 16,384-slot capacity over the run with "
                                           "paged blocks vs 20.9–34.7% with contiguous allocation")
    below = {"paged": _policy(0.1), "reserve_max_len": _policy(0.209), "first_fit": _policy(0.347)}
    assert pg.capacity_takeaway(below) == ("Real tokens fill only 10.0% of the 16,384-slot capacity over the run "
                                           "with paged blocks vs 20.9–34.7% with contiguous allocation")
    within = {"paged": _policy(0.3), "reserve_max_len": _policy(0.209), "first_fit": _policy(0.347)}
    assert pg.capacity_takeaway(within).endswith("with paged blocks, within 20.9–34.7% with contiguous allocation")


def _trade(waste, table):
    return BlockSizeTradeoff(np.array([1, 16, 256]), np.array(waste), np.array(table), np.array(table, dtype=int))


def test_block_size_takeaway_follows_the_sweep():
    usual = _trade([0.0, 0.0171, 0.228], [453.1, 28.8, 2.3])
    assert pg.block_size_takeaway(usual, 16) == (
        "Blocks of 16 leave 1.71% of slots empty and need 28.8 table entries per request; from 1 to 256 tokens a "
        "block, waste grows (0.00% → 22.80%) while tables shrink (453.1 → 2.3 entries)")
    flipped = _trade([0.3, 0.1, 0.05], [1.0, 1.0, 1.0])
    assert pg.block_size_takeaway(flipped, 256) == (
        "Blocks of 256 leave 5.00% of slots empty and need 1.0 table entries per request; from 1 to 256 tokens a "
        "block, waste shrinks (30.00% → 5.00%) while tables stay (1.0 → 1.0 entries)")


def test_sharing_takeaway_says_what_sharing_saved():
    assert pg.sharing_takeaway(4, 10, 16, 2, 16, lead="After 24 tokens per branch, ") == (
        "After 24 tokens per branch, sharing saves 38%: 4 branches hold 10 blocks of 16 tokens instead of 16 as "
        "unshared copies, 2 blocks still shared")
    assert pg.sharing_takeaway(1, 3, 3, 0, 8, bytes_per_block=100) == (
        "Sharing saves nothing: 1 branch holds 3 blocks of 8 tokens (300 bytes), as many as unshared copies, no "
        "block is shared")
    assert pg.sharing_takeaway(2, 5, 4, 1, 8) == (
        "Sharing costs blocks: 2 branches hold 5 blocks of 8 tokens, more than the 4 of unshared copies, 1 block "
        "still shared")


def test_change_takeaway_names_the_hits_and_the_recomputed_blocks():
    assert ro.change_takeaway(72, "7", "8", 16, 4, 9) == (
        "Byte 72 changed (7 → 8, block 4): blocks 0–3 of B stay hits (64 tokens), blocks 4–8 must be recomputed")
    assert ro.change_takeaway(3, "&lt;", "X", 16, 0, 9) == (
        "Byte 3 changed (&lt; → X, block 0): no block of B stays a hit, all 9 blocks must be recomputed")


def _result(hits: list[int], prompt: int = 100):
    hit = np.array(hits)
    return SimpleNamespace(num_requests=len(hits), num_requests_with_hit=int((hit > 0).sum()),
                           num_prompt_tokens=prompt * len(hits), num_hit_tokens=int(hit.sum()),
                           hit_rate=hit.sum() / (prompt * len(hits)))


def test_per_request_takeaway_counts_the_requests_that_hit():
    assert ro.per_request_takeaway("system_prompt", "fixed_first", _result([0, 80, 80, 80])) == (
        "Shared system prompt + questions, fixed content first: 3 of 4 requests hit the cache, which serves 60.0% of "
        "prompt tokens (240 of 400)")
    assert ro.per_request_takeaway("rag", "variable_first", _result([0, 0])) == (
        "RAG: documents + question, variable content first: no request hits the cache, all 200 prompt tokens are "
        "computed")


def _sweep(x: str, xs, fixed, variable):
    return {"fixed_first": pd.DataFrame({x: xs, "hit_rate": fixed}),
            "variable_first": pd.DataFrame({x: xs, "hit_rate": variable})}


def test_capacity_takeaway_says_which_layout_leads_and_what_more_slots_give():
    flat = _sweep("capacity_tokens", [8192, 16384, 32768], [0.865, 0.865, 0.865], [0.0, 0.0, 0.0])
    assert ro.capacity_takeaway(flat, 16384) == ("At 16,384 slots fixed first hits 86.5%, variable first 0.0%; more "
                                                 "slots add nothing (86.5% from 8,192 slots on)")
    rising = _sweep("capacity_tokens", [8192, 16384, 32768], [0.1, 0.2, 0.3], [0.2, 0.4, 0.6])
    assert ro.capacity_takeaway(rising, 16384) == ("At 16,384 slots variable first hits 40.0%, fixed first 20.0%; "
                                                   "more slots raise variable first to 60.0% (32,768 slots)")


def test_block_size_takeaway_gives_the_leading_layouts_range():
    falls = _sweep("block_size", [8, 16, 256], [0.87, 0.865, 0.446], [0.0, 0.0, 0.0])
    assert ro.block_size_takeaway(falls, 16) == ("In blocks of 16 fixed first hits 86.5%, variable first 0.0%; fixed "
                                                 "first ranges from 87.0% (8-token blocks) to 44.6% (256-token)")
    same = _sweep("block_size", [8, 16], [0.5, 0.5], [0.5, 0.5])
    assert ro.block_size_takeaway(same, 8) == ("In blocks of 8 both layouts hit 50.0%; block size makes no "
                                               "difference to fixed first")


def _segments(rows):
    return pd.DataFrame(rows, columns=["segment", "parent", "start_block", "end_block", "requests", "created_by",
                                       "lane"])


def test_tree_takeaway_and_branching_sentence_follow_the_segments():
    cfg = PrefixWorkloadConfig("chat", "fixed_first")
    shared = _segments([(0, np.nan, 0, 4, [0, 1, 2], 0, 0), (1, 0, 4, 6, [0], 0, 0), (2, 0, 4, 5, [1], 1, 1),
                        (3, 0, 4, 7, [2], 2, 2)])
    assert ro.tree_takeaway(cfg, 3, shared) == (
        "The first 3 requests of 'Multi-turn chat' (fixed content first): their paths cover 18 blocks but the tree "
        "stores 10, because 4 blocks are shared by 2 or more requests")
    assert ro.tree_branching_sentence(shared, 3) == ("Here all 3 requests drawn share their first block: they part "
                                                     "further down, or not at all.")
    apart = _segments([(0, np.nan, 0, 2, [0], 0, 0), (1, np.nan, 0, 3, [1], 1, 1)])
    assert ro.tree_takeaway(cfg, 2, apart) == (
        "The first 2 requests of 'Multi-turn chat' (fixed content first): no block is shared, so 2 separate paths "
        "store all 5 blocks")
    assert ro.tree_branching_sentence(apart, 2) == ("Here every one of the 2 requests drawn branches at the root: no "
                                                    "two share a first block.")


def test_kv_takeaway_says_what_stays_and_what_changes():
    assert kv_takeaway([1, 80, 80, 80], 40, 120, 0, "p", "P") == (
        "Changing byte 40 (p → P): positions 0–39 stay exactly unchanged in all 4 layers; of the 80 positions from "
        "40 on, layer 0 changes 1 and layers 1–3 change all 80")
    assert kv_takeaway([3, 5], 0, 10, 0, "a", "A") == (
        "Changing byte 0 (a → A): no position comes before it; of the 10 positions from 0 on, layer 0 changes 3 and "
        "layer 1 changes 5")
    assert kv_takeaway([1, 2], 4, 6, 2, "a", "A").startswith("Changing byte 4 (a → A): 2 of the 4 positions before it "
                                                            "change too;")


def _titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_prefix_page_titles_follow_the_url():
    at = run_page("prefix_caching", {"live": "0"})
    assert not at.exception
    assert ("Byte 72 changed (7 → 8, block 4): blocks 0–3 of B stay hits (64 tokens), blocks 4–8 must be "
            "recomputed") in _titles(at)
    at = run_page("prefix_caching", {"live": "0", "demo_pos": "3", "demo_text": "a<b>cdefghijklmnopqrstuvwxyz"})
    assert not at.exception
    titles = _titles(at)
    assert ("Byte 3 changed (&gt; → X, block 0): no block of B stays a hit, all 2 blocks must be recomputed"
            in titles)


def test_paged_page_title_follows_the_url():
    titles = _titles(run_page("paged_blocks", {"live": "0", "tab": "fork"}))  # parallel sampling's own tab
    assert ("After 24 tokens per branch, sharing saves 38%: 4 branches hold 10 blocks of 16 tokens instead of 16 as "
            "unshared copies, 2 blocks still shared") in titles
    at = run_page("paged_blocks", {"live": "0", "fork_n": "1", "tab": "fork"})
    assert not at.exception
    assert any(t.startswith("After 24 tokens per branch, sharing saves nothing: 1 branch holds") for t in _titles(at))
