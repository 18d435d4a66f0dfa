"""The Decode cost and Attention masks pages' chart titles and captions are sentences worded from the result they
describe: each one here with exact strings, both ways round, on results small enough to work by hand; and on the
pages, a title that follows the link's values."""

import json
from types import SimpleNamespace as NS

import numpy as np

from sim.attention.maps import CacheValidity
from sim.cost.decode import computed_grid, flop_shape, scale_curve
from sim.words import text
from sim.words.catalog import PSEUDO
from sim.words.decode import (
    formula_agreement,
    grid_takeaway,
    parts_takeaway,
    per_step_takeaway,
    scale_takeaway,
    speedup_caption,
    times,
    wall_time_caption,
)
from sim.words.maps import append_caption
from sim.words.masks import (
    leak_caption,
    mask_name,
    mask_takeaway,
    masked_row_caption,
    row_takeaway,
    window_caption,
    window_takeaway,
)
from tests.conftest import run_page


def rec(step: int, parts: dict[str, int], wall_s: float = 1e-3) -> NS:
    """A step record as sim.model.generate.StepRecord has it (only what the sentences read)."""
    return NS(step=step, part_to_flops=parts, flops=sum(parts.values()), wall_s=wall_s)


def parts(qkv, scores, av, out, mlp, head) -> dict[str, int]:
    return {"qkv_proj": qkv, "attn_scores": scores, "attn_v": av, "out_proj": out, "mlp": mlp, "lm_head": head}


# naive re-feeds the prefix: every part but the LM head (last position only) grows; cached: only attention
NAIVE = [rec(0, parts(10_000, 4_000, 4_000, 10_000, 20_000, 5_000)),
         rec(1, parts(20_000, 8_000, 8_000, 20_000, 40_000, 5_000)),
         rec(2, parts(30_000, 19_000, 18_000, 30_000, 60_000, 5_000))]  # 162 kFLOP
CACHED = [rec(0, parts(10_000, 4_000, 4_000, 10_000, 20_000, 5_000)),
          rec(1, parts(10_000, 2_000, 2_000, 10_000, 20_000, 5_000)),
          rec(2, parts(10_000, 3_000, 3_000, 10_000, 20_000, 5_000))]  # 51 kFLOP


def test_times_keeps_one_decimal_below_100_and_separators_above():
    assert (times(3.16), times(99.94), times(7745.6)) == ("3.2×", "99.9×", "7,746×")


def test_per_step_takeaway_names_the_mode_that_did_more():
    assert per_step_takeaway(NAIVE, CACHED, lang=PSEUDO) == (
        "decode.s.per_step.naive_more(at=decode.s.at.step(step=2), x=3.2×, a=162 kFLOP, b=51 kFLOP)")  # 162/51 = 3.18
    assert per_step_takeaway(CACHED, NAIVE, lang=PSEUDO) == (
        "decode.s.per_step.cached_more(at=decode.s.at.step(step=2), x=3.2×, a=162 kFLOP, b=51 kFLOP)")
    # naive stopped early: its last step is the one compared
    assert per_step_takeaway(NAIVE[:2], CACHED, lang=PSEUDO) == (
        "decode.s.per_step.naive_more(at=decode.s.at.last(at=decode.s.at.step(step=1)), x=2.1×, a=101 kFLOP, b=49 "
        "kFLOP)")
    assert per_step_takeaway(NAIVE[:1], CACHED[:1], lang=PSEUDO) == (
        "decode.s.per_step.same(at=decode.s.at.prefill, a=53 kFLOP)")


def test_formula_agreement_counts_the_steps_that_differ():
    formula = {"naive": [1, 2, 3], "cached": [1, 1, 1]}
    assert formula_agreement({"naive": [1, 2, 3], "cached": [1, 1, 1]}, formula, lang=PSEUDO) == (
        "decode.s.agree.all(steps=decode.s.n.step.other(n=6))")
    assert formula_agreement({"naive": [1, 2], "cached": [1, 1, 1]}, formula, lang=PSEUDO) == (  # naive stopped after 2
        "decode.s.agree.all(steps=decode.s.n.step.other(n=5))")
    assert formula_agreement({"naive": [1, 2, 1_003], "cached": [1, 2, 1]}, formula, lang=PSEUDO) == (
        "decode.s.agree.differ(off=[decode.s.agree.off(wrong=1, total=3, mode=decode.mode.naive) + "
        "decode.s.agree.off(wrong=1, total=3, mode=decode.mode.cached)], worst=decode.s.n.flop.other(n=1,000))")


def test_parts_takeaway_says_which_part_grows_with_n():
    # cached attention scores 2,000 -> 3,000 (1.5×), naive attention scores 8,000 -> 19,000 (2.375×)
    assert parts_takeaway(NAIVE, CACHED, lang=PSEUDO) == (
        "decode.s.parts.head(first=1, last=2, cached=decode.s.parts.in_mode(mode=decode.mode.cached, "
        "said=decode.s.parts.only_grow.other(labels=[decode.part.attn_scores + decode.part.attn_v], "
        "up=decode.s.parts.up_to(ratio=1.5×))decode.s.parts.whiledecode.s.parts.other_flat(n=4)), "
        "naive=decode.s.parts.in_mode(mode=decode.mode.naive, said=decode.s.parts.all_but(flat=decode.part.lm_head, "
        "fastest=decode.s.parts.fastest(label=decode.part.attn_scores, ratio=2.4×))))")
    assert parts_takeaway(CACHED, NAIVE, lang=PSEUDO) == (
        "decode.s.parts.head(first=1, last=2, cached=decode.s.parts.in_mode(mode=decode.mode.cached, "
        "said=decode.s.parts.all_but(flat=decode.part.lm_head, "
        "fastest=decode.s.parts.fastest(label=decode.part.attn_scores, ratio=2.4×))), "
        "naive=decode.s.parts.in_mode(mode=decode.mode.naive, "
        "said=decode.s.parts.only_grow.other(labels=[decode.part.attn_scores + decode.part.attn_v], "
        "up=decode.s.parts.up_to(ratio=1.5×))decode.s.parts.whiledecode.s.parts.other_flat(n=4)))")
    flat = [CACHED[0], CACHED[1], CACHED[1]]
    assert parts_takeaway(flat, flat, lang=PSEUDO) == (
        "decode.s.parts.head(first=1, last=2, cached=decode.s.parts.in_mode(mode=decode.mode.cached, "
        "said=decode.s.parts.all_flat), naive=decode.s.parts.in_mode(mode=decode.mode.naive, "
        "said=decode.s.parts.all_flat))")
    assert parts_takeaway(NAIVE[:2], CACHED, lang=PSEUDO) == "decode.s.parts.too_few(steps=decode.s.n.step.other(n=2))"


def test_grid_takeaway_counts_computed_and_read_cells():
    # prompt of 2, 3 steps: naive computes 2 + 3 + 4 = 9 rows of Q, K, V; cached 2 + 1 + 1 = 4 and reads 2 + 3 = 5
    naive, cached = computed_grid(2, 3, "naive"), computed_grid(2, 3, "cached")
    assert grid_takeaway(naive, cached, lang=PSEUDO) == (
        "decode.s.grid.naive_more(steps=decode.s.grid.first(steps=decode.s.n.step.other(n=3)), "
        "times=decode.s.n.time.other(n=9), c=4, x=2.2×, reads=decode.s.grid.reads(times=decode.s.n.time.other(n=5)))")
    assert grid_takeaway(cached, naive, lang=PSEUDO) == (
        "decode.s.grid.cached_more(steps=decode.s.grid.first(steps=decode.s.n.step.other(n=3)), "
        "times=decode.s.n.time.other(n=9), x=2.2×, n=4, reads=)")
    assert grid_takeaway(computed_grid(2, 1, "naive"), computed_grid(2, 1, "cached"), lang=PSEUDO) == (
        "decode.s.grid.same(steps=decode.s.grid.one, times=decode.s.n.time.other(n=2), reads=)")


def point(length, naive_step, cached_step, naive_total, cached_total) -> NS:
    return NS(length=length, naive_step=naive_step, cached_step=cached_step, naive_total=naive_total,
              cached_total=cached_total)


def test_scale_takeaway_flips_with_the_ratio_and_its_trend():
    growing = [point(128, 1_000, 10, 50_000, 1_000), point(4096, 1_000_000, 50, 10**9, 40_000)]
    assert scale_takeaway(growing, 4096, False, "M", lang=PSEUDO) == (
        "decode.s.scale.grows(head=decode.s.scale.step.more(model=M, n=4,096, x=20,000×), "
        "span=decode.s.scale.span(r0=100×, n0=128, r1=20,000×, n1=4,096))")
    assert scale_takeaway(growing, 128, True, "M", lang=PSEUDO) == (
        "decode.s.scale.grows(head=decode.s.scale.total.more(model=M, tokens=decode.s.n.token.other(n=128), "
        "x=50.0×), span=decode.s.scale.span(r0=50.0×, n0=128, r1=25,000×, n1=4,096))")
    shrinking = [point(128, 10, 100, 7, 7), point(4096, 10, 50, 7, 7)]
    assert scale_takeaway(shrinking, 128, False, "M", lang=PSEUDO) == (
        "decode.s.scale.grows(head=decode.s.scale.step.fewer(model=M, n=128, x=10.0×), "
        "span=decode.s.scale.span(r0=0.1×, n0=128, r1=0.2×, n1=4,096))")
    assert scale_takeaway(shrinking, 4096, True, "M", lang=PSEUDO) == (
        "decode.s.scale.flat(head=decode.s.scale.total.same(model=M, tokens=decode.s.n.token.other(n=4,096), flops=7 "
        "FLOP), r=1.0×)")
    assert scale_takeaway([point(1, 9, 3, 1, 1), point(2, 9, 9, 1, 1)], 1, False, "M", lang=PSEUDO) == (
        "decode.s.scale.shrinks(head=decode.s.scale.step.more(model=M, n=1, x=3.0×), "
        "span=decode.s.scale.span(r0=3.0×, n0=1, r1=1.0×, n1=2))")


def test_speedup_caption_compares_time_per_flop():
    cached = [rec(s, parts(1_000, 0, 0, 0, 0, 0), 2e-3) for s in range(3)]  # 3,000 FLOPs in 6 ms
    slow_naive = [rec(s, parts(1_000, 1_000, 0, 0, 0, 0), 4e-3) for s in range(3)]  # 2× the FLOPs, 2× the time
    assert speedup_caption(slow_naive, cached, lang=PSEUDO) == "decode.s.speedup.same(s=2.0×)"
    fast_cached_flops = [rec(s, parts(1_000, 5_000, 0, 0, 0, 0), 4e-3) for s in range(3)]  # 6× FLOPs, 2× time
    assert speedup_caption(fast_cached_flops, cached, lang=PSEUDO) == (
        "decode.s.speedup.smaller(s=2.0×, f=6.0×, x=3.0×, step=decode.s.speedup.step(ms=2.00 ms), "
        "tip=decode.s.speedup.tip(n=512))")
    very_slow = [rec(s, parts(1_000, 5_000, 0, 0, 0, 0), 40e-3) for s in range(3)]  # 6× FLOPs, 20× time
    assert speedup_caption(very_slow, cached, lang=PSEUDO) == (
        "decode.s.speedup.larger(s=20.0×, f=6.0×, x=3.3×, step=decode.s.speedup.step(ms=2.00 ms))")


def timed(*ms: float) -> list[NS]:
    return [rec(s, parts(1, 0, 0, 0, 0, 0), t / 1e3) for s, t in enumerate(ms)]


def test_wall_time_caption_says_whether_a_cached_step_grows():
    # 8 decode steps after a slow prefill: the first and last quarter are steps 1-2 and 7-8
    assert wall_time_caption(timed(90, 1, 1, 2, 2, 3, 4, 5, 6), lang=PSEUDO) == (
        "decode.s.wall.grows(said=decode.s.wall.said(where=decode.s.wall.where, e=1.00 ms, "
        "early=decode.s.wall.steps(a=1, b=2), median=decode.s.wall.median, l=5.50 ms, late=decode.s.wall.steps(a=7, "
        "b=8)), x=5.5×)")
    assert wall_time_caption(timed(90, 2, 2, 2, 2, 2, 2, 2, 2.1), lang=PSEUDO) == (
        "decode.s.wall.barely(said=decode.s.wall.said(where=decode.s.wall.where, e=2.00 ms, "
        "early=decode.s.wall.steps(a=1, b=2), median=decode.s.wall.median, l=2.05 ms, late=decode.s.wall.steps(a=7, "
        "b=8)))")
    assert wall_time_caption(timed(90, 2.1, 2, 2, 2, 2, 2, 2, 2), lang=PSEUDO) == (
        "decode.s.wall.flat(said=decode.s.wall.said(where=decode.s.wall.where, e=2.05 ms, "
        "early=decode.s.wall.steps(a=1, b=2), median=decode.s.wall.median, l=2.00 ms, late=decode.s.wall.steps(a=7, "
        "b=8)))")
    assert wall_time_caption(timed(90, 6, 5, 4, 2, 3, 1, 1, 1), lang=PSEUDO) == (
        "decode.s.wall.faster(said=decode.s.wall.said(where=decode.s.wall.where, e=5.50 ms, "
        "early=decode.s.wall.steps(a=1, b=2), median=decode.s.wall.median, l=1.00 ms, late=decode.s.wall.steps(a=7, "
        "b=8)), x=5.5×)")
    assert wall_time_caption(timed(90, 1, 1), lang=PSEUDO) == (
        "decode.s.wall.too_few(where=decode.s.wall.where, steps=decode.s.n.decode_step.other(n=2))")


# --- Attention masks ------------------------------------------------------------------------------------------

def tril(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def test_mask_takeaway_counts_pairs_against_causal():
    assert mask_takeaway(tril(6), mask_name("causal", 2, 3, lang=PSEUDO), lang=PSEUDO) == (
        "masks.s.mask.causal(head=masks.s.mask.head(name=masks.s.name.causal, allowed=21, total=36, share=58.3%))")
    window = tril(6) & ~np.tril(np.ones((6, 6), dtype=bool), -2)  # each query: itself and one key back
    assert mask_takeaway(window, mask_name("sliding_window", 2, 3, lang=PSEUDO), lang=PSEUDO) == (
        "masks.s.mask.other(head=masks.s.mask.head(name=masks.s.name.sliding_window(w=2), allowed=11, total=36, "
        "share=30.6%), against=masks.s.against.fewer(diff=10, causal=21), keys=masks.s.keys.range(lo=1, hi=2))")
    prefix = tril(6)
    prefix[:3, :3] = True
    assert mask_takeaway(prefix, mask_name("prefix_lm", 2, 3, lang=PSEUDO), lang=PSEUDO) == (
        "masks.s.mask.other(head=masks.s.mask.head(name=masks.s.name.prefix_lm(p=3), allowed=24, total=36, "
        "share=66.7%), "
        "against=masks.s.against.more(diff=3, causal=21), keys=masks.s.keys.range(lo=3, hi=6))")
    assert mask_takeaway(np.ones((4, 4), dtype=bool), mask_name("bidirectional", 2, 3, lang=PSEUDO), lang=PSEUDO) == (
        "masks.s.mask.other(head=masks.s.mask.head(name=masks.s.name.bidirectional, allowed=16, total=16, share=100%), "
        "against=masks.s.against.more(diff=6, causal=10), keys=masks.s.keys.all(n=4))")
    padded = tril(4)
    padded[:, 0] = padded[0, :] = False  # one pad position
    assert mask_takeaway(padded, mask_name("causal", 2, 3, pad=1, lang=PSEUDO), lang=PSEUDO) == (
        "masks.s.mask.other(head=masks.s.mask.head(name=masks.s.name.padded(name=masks.s.name.causal, pad=1), "
        "allowed=6, total=16, share=37.5%), against=masks.s.against.fewer(diff=4, causal=10), "
        "keys=masks.s.keys.empty.one(keys=masks.s.keys.range(lo=1, hi=3), rows=masks.s.n.query_row.one(n=1)))")


W_ALLOWED = np.array([True, True, False, False])


def test_row_takeaway_orders_the_ways_by_their_leak():
    neg_inf, times_zero = np.array([0.4, 0.6, 0, 0]), np.array([0.1, 0.2, 0.3, 0.4])
    assert row_takeaway(1, {"neg_inf": neg_inf, "times_zero": times_zero, "neg_1e4_fp16": neg_inf}, W_ALLOWED,
                        lang=PSEUDO) == (
        "masks.s.row.head(row=1, clauses=masks.s.row.leak_first(name=masks.s.short.times_zero, share=70.0%, "
        "masked=masks.s.n.masked_key.other(n=2))clause.sepmasks.s.row.none_there.other(names=[masks.s.short.neg_inf "
        "+ masks.s.short.neg_1e4_fp16]))")
    fp16 = np.array([0.1, 0.1, 0.1, 0.7])  # a leak larger than ×0's comes first
    assert row_takeaway(1, {"neg_inf": neg_inf, "times_zero": times_zero, "neg_1e4_fp16": fp16}, W_ALLOWED,
                        lang=PSEUDO) == (
        "masks.s.row.head(row=1, clauses=masks.s.row.leak_first(name=masks.s.short.neg_1e4_fp16, share=80.0%, "
        "masked=masks.s.n.masked_key.other(n=2))masks.s.row.leak_rest(name=masks.s.short.times_zero, "
        "share=70.0%)clause.sepmasks.s.row.none_there.one(names=masks.s.short.neg_inf))")
    assert row_takeaway(1, {"neg_inf": neg_inf, "neg_1e4": neg_inf}, W_ALLOWED,
                        lang=PSEUDO) == (
        "masks.s.row.head(row=1, clauses=masks.s.row.none_on.other(names=[masks.s.short.neg_inf + "
        "masks.s.short.neg_1e4], masked=masks.s.n.masked_key.other(n=2)))")
    assert row_takeaway(1, {"neg_inf": np.full(4, np.nan), "times_zero": times_zero}, W_ALLOWED,
                        lang=PSEUDO) == (
        "masks.s.row.head(row=1, clauses=masks.s.row.leak_first(name=masks.s.short.times_zero, share=70.0%, "
        "masked=masks.s.n.masked_key.other(n=2))clause.sepmasks.s.row.nan.one(names=masks.s.short.neg_inf))")
    everything = np.ones(4, dtype=bool)
    assert row_takeaway(3, {"neg_inf": times_zero, "times_zero": times_zero}, everything,
                        lang=PSEUDO) == (
        "masks.s.row.free(row=3, k=2, agree=masks.s.row.identical)")
    assert row_takeaway(3, {"neg_inf": times_zero, "times_zero": times_zero + [0, 0, 0, 5e-4]}, everything,
                        lang=PSEUDO) == (
        "masks.s.row.free(row=3, k=2, agree=masks.s.row.within(diff=0.0005))")


PROBS = np.array([[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.8, 0.1, 0.1, 0], [0.1, 0.1, 0.4, 0.4]])


def test_window_takeaway_says_where_the_causal_weight_sat():
    # w = 2 removes key 0 from row 2 (0.8) and keys 0-1 from row 3 (0.2): mean 0.5 over the 2 rows
    assert window_takeaway(PROBS, 2, 0, 1, lang=PSEUDO) == (
        "masks.s.win.main.other(where=masks.s.win.where(layer=0, head=1), rows=masks.s.n.row.other(n=2), w=2, "
        "mean=50.0%, worst=80.0%, row=2, most=masks.s.win.half)")
    assert window_takeaway(PROBS, 3, 0, 1, lang=PSEUDO) == (
        "masks.s.win.main.one(where=masks.s.win.where(layer=0, head=1), rows=masks.s.n.row.one(n=1), w=3, "
        "mean=10.0%, worst=10.0%, row=3, most=masks.s.win.most_inside)")
    first_heavy = PROBS.copy()
    first_heavy[3] = [0.9, 0.0, 0.05, 0.05]  # rows 2, 3 lose 0.8 and 0.9
    assert window_takeaway(first_heavy, 2, 2, 0, lang=PSEUDO) == (
        "masks.s.win.main.other(where=masks.s.win.where(layer=2, head=0), rows=masks.s.n.row.other(n=2), w=2, "
        "mean=85.0%, worst=90.0%, row=3, most=masks.s.win.most_outside)")
    assert window_takeaway(PROBS, 4, 0, 1, lang=PSEUDO) == (
        "masks.s.win.all(where=masks.s.win.where(layer=0, head=1), w=4, n=4)")


def test_window_caption_counts_the_guesses_that_survive():
    assert window_caption(4, 4, 2, lang=PSEUDO) == (
        "masks.s.cap.main(what=masks.s.cap.some(back=masks.s.n.back.one(n=1)), "
        "guess=masks.s.cap.same(positions=masks.s.n.position.other(n=4)))")
    assert window_caption(1, 4, 3, lang=PSEUDO) == (
        "masks.s.cap.main(what=masks.s.cap.some(back=masks.s.n.back.other(n=2)), "
        "guess=masks.s.cap.changed_some(diff=3, positions=masks.s.n.position.other(n=4), same=1))")
    assert window_caption(0, 4, 4, lang=PSEUDO).startswith(
        "masks.s.cap.main(what=masks.s.cap.all(w=4, tokens=masks.s.n.token.other(n=4)), ")
    assert window_caption(0, 4, 4, lang=PSEUDO).endswith(
        "guess=masks.s.cap.changed_all(positions=masks.s.n.position.other(n=4)))")


def test_leak_caption_names_the_ways_that_leak():
    assert leak_caption({"neg_inf": 0.0, "times_zero": 0.25, "neg_1e4": 0.0}, 6, lang=PSEUDO) == (
        "masks.s.leak.main(what=masks.s.leak.what, "
        "said=masks.s.leak.items(items=masks.s.leak.item(name=masks.s.short.times_zero, "
        "share=25.0%))clause.sepmasks.s.leak.none.other(names=[masks.s.short.neg_inf + masks.s.short.neg_1e4]), "
        "why=masks.s.leak.why_zero masks.s.leak.why_finite masks.s.leak.why_fp16)")
    assert leak_caption({"neg_inf": 0.0, "times_zero": 0.1, "neg_1e4_fp16": 0.2}, 3, lang=PSEUDO) == (
        "masks.s.leak.main(what=masks.s.leak.what, "
        "said=masks.s.leak.items(items=masks.s.leak.item(name=masks.s.short.neg_1e4_fp16, share=20.0%), "
        "masks.s.leak.item(name=masks.s.short.times_zero, "
        "share=10.0%))clause.sepmasks.s.leak.none.one(names=masks.s.short.neg_inf), why=masks.s.leak.why_zero "
        "masks.s.leak.why_fp16)")
    assert leak_caption({"neg_inf": 0.0, "times_zero": 0.0}, 0, lang=PSEUDO) == (
        "masks.s.leak.nothing_masked(what=masks.s.leak.what)")


def test_masked_row_caption_groups_what_was_measured():
    from sim.attention.masks import MaskedRow as R

    assert masked_row_caption((R("softmax_inf", "nan"), R("softmax_1e9", "uniform", (1 / 3,)), R("math", "zeros"),
                               R("flash", "unavailable"), R("efficient", "zeros"), R("cudnn", "nan")), lang=PSEUDO) == (
        "masks.s.mrow.pad masks.s.mrow.plain_nan masks.s.mrow.big(verb=masks.s.verb.uniform.one, "
        "tail=masks.s.mrow.big_uniform) masks.s.mrow.sdpa(said=masks.s.mrow.sdpa_item(names=[math + efficient], "
        "verb=masks.s.verb.zeros.other)clause.sepmasks.s.mrow.sdpa_item(names=flash, "
        "verb=masks.s.verb.unavailable.one)clause.sepmasks.s.mrow.sdpa_item(names=cudnn, verb=masks.s.verb.nan.one))")
    assert masked_row_caption((R("softmax_inf", "finite", (0.1,)), R("softmax_1e9", "nan"),
                               R("math", "uniform", (0.5,)), R("flash", "nan")), lang=PSEUDO) == (
        "masks.s.mrow.pad masks.s.mrow.plain(verb=masks.s.verb.finite.one) "
        "masks.s.mrow.big(verb=masks.s.verb.nan.one, tail=masks.s.mrow.big_end) "
        "masks.s.mrow.sdpa(said=masks.s.mrow.sdpa_item(names=math, "
        "verb=masks.s.verb.uniform.one)clause.sepmasks.s.mrow.sdpa_item(names=flash, verb=masks.s.verb.nan.one))")


def validity(n: int, k: float, v: float) -> CacheValidity:
    return CacheValidity(n, 0.0, k, v, [0.0] * n)


def test_append_caption_says_whether_the_cached_kv_stay_valid():
    assert append_caption(validity(3, 0.0, 0.0), validity(3, 1.5, 0.25), lang=PSEUDO) == (
        "masks.s.kv.less(runs=masks.s.kv.runs(n=3, n1=4), last=2, moved=masks.s.kv.same, f=1.5)")
    assert append_caption(validity(3, 2e-7, 0.0), validity(3, 1.5, 0.25), lang=PSEUDO) == (
        "masks.s.kv.less(runs=masks.s.kv.runs(n=3, n1=4), last=2, moved=masks.s.kv.moved(c=2.0e-07), f=1.5)")
    assert append_caption(validity(3, 0.5, 0.0), validity(3, 0.0, 0.25), lang=PSEUDO) == (
        "masks.s.kv.more(runs=masks.s.kv.runs(n=3, n1=4), last=2, c=0.5, f=0.25)")


def test_padding_keeps_the_masks_own_shape():
    """A left-padded prefix-LM mask keeps its prefix both ways (padding used to AND in a causal mask)."""
    from sim.attention.masks import build, combine, padding

    mask = combine(build("prefix_lm", 5, prefix_len=3), padding([4], 5)[0]).numpy()  # pad 1, prefix of 2 real tokens
    assert mask.astype(int).tolist() == [[0, 0, 0, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 1, 0],
                                         [0, 1, 1, 1, 1]]


# --- on the pages ---------------------------------------------------------------------------------------------

def titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_mask_chart_title_follows_the_link():
    # the default prompt is 40 bytes: causal allows 40·41/2 = 820 pairs; a window of 3 allows 1 + 2 + 38·3 = 117
    at = run_page("attention_masks", timeout=120)
    assert not at.exception
    assert titles(at)[0] == text("en", "masks.s.mask.causal", head=text(
        "en", "masks.s.mask.head", name=text("en", "masks.s.name.causal"), allowed="820", total="1,600", share="51.2%"))
    at = run_page("attention_masks", {"kind": "sliding_window", "w": "3"}, timeout=120)
    assert not at.exception
    assert titles(at)[0] == text(
        "en", "masks.s.mask.other",
        head=text("en", "masks.s.mask.head", name=text("en", "masks.s.name.sliding_window", w="3"), allowed="117",
                  total="1,600", share="7.3%"),
        against=text("en", "masks.s.against.fewer", diff="703", causal="820"),
        keys=text("en", "masks.s.keys.range", lo="1", hi="3"))


def test_scale_chart_titles_follow_the_link():
    from sim.cost.presets import load_presets

    preset = load_presets()["llama-3.1-8b"]
    points = scale_curve(flop_shape(preset), [2**k for k in range(7, 18)])
    shown = {}
    for n in (128, 65536):
        at = run_page("decode_cost", {"n": "2", "scale_n": str(n)}, timeout=180)
        assert not at.exception
        shown[n] = titles(at)[-2:]  # the two at-scale charts come last
        assert shown[n] == [scale_takeaway(points, n, False, preset.name), scale_takeaway(points, n, True, preset.name)]
    assert text("en", "decode.s.scale.step.more", model="Llama 3.1 8B", n="128", x="119×") in shown[128][0]
    assert scale_takeaway(points, 65536, False, preset.name, lang=PSEUDO).startswith(
        "decode.s.scale.grows(head=decode.s.scale.step.more(model=Llama 3.1 8B, n=65,536, x=")
    assert shown[128] != shown[65536]
