"""The Decode cost and Attention masks pages' chart titles and captions are sentences worded from the result they
describe: each one here with exact strings, both ways round, on results small enough to work by hand; and on the
pages, a title that follows the link's values."""

import json
from types import SimpleNamespace as NS

import numpy as np

from sim.attention.maps import CacheValidity
from sim.cost.decode import computed_grid, flop_shape, scale_curve
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
    assert per_step_takeaway(NAIVE, CACHED) == (
        "At step 2, a naive step did 3.2× the FLOPs of a cached one: 162 kFLOP vs 51 kFLOP")  # 162/51 = 3.18
    assert per_step_takeaway(CACHED, NAIVE) == (
        "At step 2, a cached step did 3.2× the FLOPs of a naive one: 162 kFLOP vs 51 kFLOP")
    assert per_step_takeaway(NAIVE[:2], CACHED) == (  # naive stopped early: its last step is the one compared
        "At step 1, naive's last before its budget ran out, a naive step did 2.1× the FLOPs of a cached one: "
        "101 kFLOP vs 49 kFLOP")
    assert per_step_takeaway(NAIVE[:1], CACHED[:1]) == (
        "At step 0 (the prefill), a naive and a cached step did the same FLOPs: 53 kFLOP each")


def test_formula_agreement_counts_the_steps_that_differ():
    formula = {"naive": [1, 2, 3], "cached": [1, 1, 1]}
    assert formula_agreement({"naive": [1, 2, 3], "cached": [1, 1, 1]}, formula) == (
        "They agree exactly at all 6 steps of both runs.")
    assert formula_agreement({"naive": [1, 2], "cached": [1, 1, 1]}, formula) == (  # naive stopped after 2
        "They agree exactly at all 5 steps of both runs.")
    assert formula_agreement({"naive": [1, 2, 1_003], "cached": [1, 2, 1]}, formula) == (
        "They differ at 1 of 3 naive steps and 1 of 3 cached steps, by up to 1,000 FLOPs.")


def test_parts_takeaway_says_which_part_grows_with_n():
    # cached attention scores 2,000 -> 3,000 (1.5×), naive attention scores 8,000 -> 19,000 (2.375×)
    assert parts_takeaway(NAIVE, CACHED) == (
        "From step 1 to step 2, in cached decoding only attention scores QKᵀ and attention · V grow (up to 1.5×) "
        "while the other 4 parts stay flat; in naive decoding every part but LM head grows, attention scores QKᵀ "
        "fastest (2.4×)")
    assert parts_takeaway(CACHED, NAIVE) == (
        "From step 1 to step 2, in cached decoding every part but LM head grows, attention scores QKᵀ fastest "
        "(2.4×); in naive decoding only attention scores QKᵀ and attention · V grow (up to 1.5×) while the other 4 "
        "parts stay flat")
    flat = [CACHED[0], CACHED[1], CACHED[1]]
    assert parts_takeaway(flat, flat) == (
        "From step 1 to step 2, in cached decoding every part stays flat; in naive decoding every part stays flat")
    assert parts_takeaway(NAIVE[:2], CACHED) == (
        "With 2 steps there are not two decode steps to compare: generate at least 3 tokens to see which part of a "
        "step grows with N")


def test_grid_takeaway_counts_computed_and_read_cells():
    # prompt of 2, 3 steps: naive computes 2 + 3 + 4 = 9 rows of Q, K, V; cached 2 + 1 + 1 = 4 and reads 2 + 3 = 5
    naive, cached = computed_grid(2, 3, "naive"), computed_grid(2, 3, "cached")
    assert grid_takeaway(naive, cached) == (
        "In the first 3 steps, naive decoding computes Q, K, V 9 times, cached 4 (2.2× fewer), reading K, V from "
        "its cache 5 times instead")
    assert grid_takeaway(cached, naive) == "In the first 3 steps, cached decoding computes Q, K, V 9 times, 2.2× naive's 4"
    assert grid_takeaway(computed_grid(2, 1, "naive"), computed_grid(2, 1, "cached")) == (
        "In the one step shown (the prefill), naive and cached decoding both compute Q, K, V 2 times")


def point(length, naive_step, cached_step, naive_total, cached_total) -> NS:
    return NS(length=length, naive_step=naive_step, cached_step=cached_step, naive_total=naive_total,
              cached_total=cached_total)


def test_scale_takeaway_flips_with_the_ratio_and_its_trend():
    growing = [point(128, 1_000, 10, 50_000, 1_000), point(4096, 1_000_000, 50, 10**9, 40_000)]
    assert scale_takeaway(growing, 4096, False, "M") == (
        "M at N = 4,096: a naive step does 20,000× the FLOPs of a cached one; the naive/cached ratio grows with N "
        "(100× at N = 128, 20,000× at N = 4,096)")
    assert scale_takeaway(growing, 128, True, "M") == (
        "M, 128 tokens: naive generation does 50.0× the FLOPs of cached; the naive/cached ratio grows with N "
        "(50.0× at N = 128, 25,000× at N = 4,096)")
    shrinking = [point(128, 10, 100, 7, 7), point(4096, 10, 50, 7, 7)]
    assert scale_takeaway(shrinking, 128, False, "M") == (
        "M at N = 128: a naive step does 10.0× fewer FLOPs than a cached one; the naive/cached ratio grows with N "
        "(0.1× at N = 128, 0.2× at N = 4,096)")
    assert scale_takeaway(shrinking, 4096, True, "M") == (
        "M, 4,096 tokens: naive generation does the same FLOPs as cached (7 FLOP); the naive/cached ratio stays "
        "flat across N (1.0×)")
    assert scale_takeaway([point(1, 9, 3, 1, 1), point(2, 9, 9, 1, 1)], 1, False, "M").endswith(
        "the naive/cached ratio shrinks as N grows (3.0× at N = 1, 1.0× at N = 2)")


def test_speedup_caption_compares_time_per_flop():
    cached = [rec(s, parts(1_000, 0, 0, 0, 0, 0), 2e-3) for s in range(3)]  # 3,000 FLOPs in 6 ms
    slow_naive = [rec(s, parts(1_000, 1_000, 0, 0, 0, 0), 4e-3) for s in range(3)]  # 2× the FLOPs, 2× the time
    assert speedup_caption(slow_naive, cached) == (
        "The measured speedup matches the FLOP ratio (2.0×): both modes spent the same time per FLOP.")
    fast_cached_flops = [rec(s, parts(1_000, 5_000, 0, 0, 0, 0), 4e-3) for s in range(3)]  # 6× FLOPs, 2× time
    assert speedup_caption(fast_cached_flops, cached) == (
        "Why is the measured speedup (2.0×) smaller than the FLOP ratio (6.0×)? Per FLOP, cached decoding spent "
        "3.0× as long as naive. A model this small does little arithmetic per token: a cached step took 2.00 ms "
        "(median), mostly a fixed cost per operation; the naive step's extra FLOPs dominate only as N grows. Try "
        "512 tokens.")
    very_slow = [rec(s, parts(1_000, 5_000, 0, 0, 0, 0), 40e-3) for s in range(3)]  # 6× FLOPs, 20× time
    assert speedup_caption(very_slow, cached) == (
        "The measured speedup (20.0×) is larger than the FLOP ratio (6.0×): per FLOP, naive decoding spent 3.3× as "
        "long as cached; a cached step took 2.00 ms (median).")


def timed(*ms: float) -> list[NS]:
    return [rec(s, parts(1, 0, 0, 0, 0, 0), t / 1e3) for s, t in enumerate(ms)]


def test_wall_time_caption_says_whether_a_cached_step_grows():
    # 8 decode steps after a slow prefill: the first and last quarter are steps 1-2 and 7-8
    assert wall_time_caption(timed(90, 1, 1, 2, 2, 3, 4, 5, 6)) == (
        "Measured on this machine, this run: a cached step took 1.00 ms early (steps 1–2, median) and 5.50 ms late "
        "(steps 7–8): it grows 5.5× with N, as attention over the longer cache starts to outweigh the fixed "
        "per-operation overhead.")
    assert wall_time_caption(timed(90, 2, 2, 2, 2, 2, 2, 2, 2.1)) == (
        "Measured on this machine, this run: a cached step took 2.00 ms early (steps 1–2, median) and 2.05 ms late "
        "(steps 7–8): it barely grows with N, because fixed per-operation overhead dominates a step of a model "
        "this small.")
    assert wall_time_caption(timed(90, 2.1, 2, 2, 2, 2, 2, 2, 2)) .endswith(
        "2.00 ms late (steps 7–8): it does not grow with N, because fixed per-operation overhead dominates a step "
        "of a model this small.")
    assert wall_time_caption(timed(90, 6, 5, 4, 2, 3, 1, 1, 1)) == (
        "Measured on this machine, this run: a cached step took 5.50 ms early (steps 1–2, median) and 1.00 ms late "
        "(steps 7–8): it got 5.5× faster although its FLOPs grew, so at this size a step's time follows the "
        "machine's load and warm-up more than N.")
    assert wall_time_caption(timed(90, 1, 1)) == (
        "Measured on this machine, this run: with 2 decode steps there are too few to tell how a cached step's time "
        "moves with N.")


# --- Attention masks ------------------------------------------------------------------------------------------

def tril(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def test_mask_takeaway_counts_pairs_against_causal():
    assert mask_takeaway(tril(6), mask_name("causal", 2, 3)) == (
        "The causal mask lets 21 of 36 query–key pairs attend (58.3%): each query sees itself and every key "
        "before it, none after")
    window = tril(6) & ~np.tril(np.ones((6, 6), dtype=bool), -2)  # each query: itself and one key back
    assert mask_takeaway(window, mask_name("sliding_window", 2, 3)) == (
        "The sliding-window mask (w = 2) lets 11 of 36 query–key pairs attend (30.6%), 10 fewer than a plain causal "
        "mask's 21; each query sees 1–2 keys")
    prefix = tril(6)
    prefix[:3, :3] = True
    assert mask_takeaway(prefix, mask_name("prefix_lm", 2, 3)) == (
        "The prefix-LM mask (p = 3) lets 24 of 36 query–key pairs attend (66.7%), 3 more than a plain causal mask's "
        "21; each query sees 3–6 keys")
    assert mask_takeaway(np.ones((4, 4), dtype=bool), mask_name("bidirectional", 2, 3)) == (
        "The bidirectional mask lets 16 of 16 query–key pairs attend (100%), 6 more than a plain causal mask's 10; "
        "every query sees all 4 keys")
    padded = tril(4)
    padded[:, 0] = padded[0, :] = False  # one pad position
    assert mask_takeaway(padded, mask_name("causal", 2, 3, pad=1)) == (
        "The causal mask, left-padded by 1, lets 6 of 16 query–key pairs attend (37.5%), 4 fewer than a plain "
        "causal mask's 10; each query sees 1–3 keys, and 1 query row sees none")


W_ALLOWED = np.array([True, True, False, False])


def test_row_takeaway_orders_the_ways_by_their_leak():
    neg_inf, times_zero = np.array([0.4, 0.6, 0, 0]), np.array([0.1, 0.2, 0.3, 0.4])
    assert row_takeaway(1, {"neg_inf": neg_inf, "times_zero": times_zero, "neg_1e4_fp16": neg_inf}, W_ALLOWED) == (
        "Query row 1: multiplying by 0 puts 70.0% of its weight on the 2 masked keys; adding −inf and adding −1e4 "
        "in fp16 put none there")
    fp16 = np.array([0.1, 0.1, 0.1, 0.7])  # a leak larger than ×0's comes first
    assert row_takeaway(1, {"neg_inf": neg_inf, "times_zero": times_zero, "neg_1e4_fp16": fp16}, W_ALLOWED) == (
        "Query row 1: adding −1e4 in fp16 puts 80.0% of its weight on the 2 masked keys, multiplying by 0 70.0%; "
        "adding −inf puts none there")
    assert row_takeaway(1, {"neg_inf": neg_inf, "neg_1e4": neg_inf}, W_ALLOWED) == (
        "Query row 1: adding −inf and adding −1e4 put none on its 2 masked keys")
    assert row_takeaway(1, {"neg_inf": np.full(4, np.nan), "times_zero": times_zero}, W_ALLOWED) == (
        "Query row 1: multiplying by 0 puts 70.0% of its weight on the 2 masked keys; adding −inf gives NaN")
    everything = np.ones(4, dtype=bool)
    assert row_takeaway(3, {"neg_inf": times_zero, "times_zero": times_zero}, everything) == (
        "Query row 3 may attend to every key, so nothing can leak: the 2 ways give identical weights")
    assert row_takeaway(3, {"neg_inf": times_zero, "times_zero": times_zero + [0, 0, 0, 5e-4]}, everything) == (
        "Query row 3 may attend to every key, so nothing can leak: the 2 ways give weights within 0.0005 of each "
        "other")


PROBS = np.array([[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.8, 0.1, 0.1, 0], [0.1, 0.1, 0.4, 0.4]])


def test_window_takeaway_says_where_the_causal_weight_sat():
    # w = 2 removes key 0 from row 2 (0.8) and keys 0-1 from row 3 (0.2): mean 0.5 over the 2 rows
    assert window_takeaway(PROBS, 2, 0, 1) == (
        "Layer 0, head 1: in the 2 rows that lose keys, the w = 2 window removes 50.0% of the causal weight on "
        "average (up to 80.0%, row 2), so half of it sat outside the window")
    assert window_takeaway(PROBS, 3, 0, 1) == (
        "Layer 0, head 1: in the 1 row that loses keys, the w = 3 window removes 10.0% of the causal weight on "
        "average (up to 10.0%, row 3), so most of it already sat inside the window")
    first_heavy = PROBS.copy()
    first_heavy[3] = [0.9, 0.0, 0.05, 0.05]  # rows 2, 3 lose 0.8 and 0.9
    assert window_takeaway(first_heavy, 2, 2, 0) == (
        "Layer 2, head 0: in the 2 rows that lose keys, the w = 2 window removes 85.0% of the causal weight on "
        "average (up to 90.0%, row 3), so most of it sat outside the window and moves to the keys left")
    assert window_takeaway(PROBS, 4, 0, 1) == (
        "Layer 0, head 1: a window of 4 reaches back over all 4 tokens, so it removes no key and both maps show "
        "causal attention")


def test_window_caption_counts_the_guesses_that_survive():
    assert window_caption(4, 4, 2) == (
        "The window removes every key more than 1 position back; the weight it held is spread over the keys that "
        "remain. The model was trained with full causal attention; under the window its next-byte guess is the "
        "same at all 4 positions.")
    assert window_caption(1, 4, 3) == (
        "The window removes every key more than 2 positions back; the weight it held is spread over the keys that "
        "remain. The model was trained with full causal attention; under the window its next-byte guess changes "
        "at 3 of 4 positions and stays the same at 1.")
    assert window_caption(0, 4, 4).startswith("A window of 4 removes no key of these 4 tokens.")
    assert window_caption(0, 4, 4).endswith("its next-byte guess changes at every one of the 4 positions.")


def test_leak_caption_names_the_ways_that_leak():
    what = "Leaked mass: the probability a query gives to keys its mask forbids."
    fp16 = "fp16 cannot hold −1e9: it overflows to −∞, and fp16 softmax rounds the weights themselves."
    assert leak_caption({"neg_inf": 0.0, "times_zero": 0.25, "neg_1e4": 0.0}, 6) == (
        f"{what} Averaged over rows, multiplying by 0 leaks 25.0% of a row's weight; adding −inf and adding −1e4 "
        "leak nothing. ×0 leaks because a zeroed score still weighs e⁰ = 1 against the others. A large finite "
        f"negative leaks nothing here because e^−10000 underflows to 0 in fp32. {fp16}")
    assert leak_caption({"neg_inf": 0.0, "times_zero": 0.1, "neg_1e4_fp16": 0.2}, 3) == (
        f"{what} Averaged over rows, adding −1e4 in fp16 leaks 20.0%, multiplying by 0 leaks 10.0% of a row's "
        f"weight; adding −inf leaks nothing. ×0 leaks because a zeroed score still weighs e⁰ = 1 against the "
        f"others. {fp16}")
    assert leak_caption({"neg_inf": 0.0, "times_zero": 0.0}, 0) == (
        f"{what} This mask forbids no key, so no way of applying it can leak.")


def test_masked_row_caption_groups_what_was_measured():
    from sim.attention.masks import MaskedRow as R

    assert masked_row_caption((R("softmax_inf", "nan"), R("softmax_1e9", "uniform", (1 / 3,)), R("math", "zeros"),
                               R("flash", "unavailable"), R("efficient", "zeros"), R("cudnn", "nan"))) == (
        "A left-pad query has no key to attend to. Plain softmax over all −∞ returns NaN (0/0), and NaN spreads "
        "through every later layer. A large finite negative (−1e9) returns a uniform row instead, attending to "
        "everything it should not. Of torch's SDPA kernels, measured just now on this device, math and efficient "
        "return zeros; flash is not available; cudnn returns NaN.")
    assert masked_row_caption((R("softmax_inf", "finite", (0.1,)), R("softmax_1e9", "nan"),
                               R("math", "uniform", (0.5,)), R("flash", "nan"))) == (
        "A left-pad query has no key to attend to. Plain softmax over all −∞ returns finite values here. A large "
        "finite negative (−1e9) returns NaN instead. Of torch's SDPA kernels, measured just now on this device, "
        "math returns a uniform row; flash returns NaN.")


def validity(n: int, k: float, v: float) -> CacheValidity:
    return CacheValidity(n, 0.0, k, v, [0.0] * n)


def test_append_caption_says_whether_the_cached_kv_stay_valid():
    assert append_caption(validity(3, 0.0, 0.0), validity(3, 1.5, 0.25)) == (
        "Prefill of the first 3 tokens, then of all 4: with the causal mask the appended token is invisible to every "
        "earlier query, so every layer's K and V at positions 0..2 stay bit-identical and the cached K/V stay "
        "correct. Without the mask each earlier token attends to the new one, its K and V change by up to 1.5, and "
        "everything cached would have to be recomputed.")
    assert append_caption(validity(3, 2e-7, 0.0), validity(3, 1.5, 0.25)).split(": ", 1)[1].startswith(
        "with the causal mask the appended token is invisible to every earlier query, so every layer's K and V at "
        "positions 0..2 change by at most 2.0e-07 and the cached K/V stay correct.")
    assert append_caption(validity(3, 0.5, 0.0), validity(3, 0.0, 0.25)) == (
        "Prefill of the first 3 tokens, then of all 4: every layer's K and V at positions 0..2 change more with the "
        "causal mask (up to 0.5) than without it (up to 0.25).")


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
    assert titles(at)[0] == ("The causal mask lets 820 of 1,600 query–key pairs attend (51.2%): each query sees "
                             "itself and every key before it, none after")
    at = run_page("attention_masks", {"kind": "sliding_window", "w": "3"}, timeout=120)
    assert not at.exception
    assert titles(at)[0] == ("The sliding-window mask (w = 3) lets 117 of 1,600 query–key pairs attend (7.3%), 703 "
                             "fewer than a plain causal mask's 820; each query sees 1–3 keys")


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
    assert shown[128][0].startswith("Llama 3.1 8B at N = 128: a naive step does 119× the FLOPs of a cached one")
    assert shown[65536][0].startswith("Llama 3.1 8B at N = 65,536: a naive step does")
    assert shown[128] != shown[65536]


def test_append_words_in_korean_are_golden():
    """sim/words/maps.py: the Korean caption and title, the numbers from the CacheValidity they describe."""
    from sim.words.maps import append_takeaway

    assert append_caption(validity(3, 0.0, 0.0), validity(3, 1.5, 0.25), lang="ko") == (
        "앞의 토큰 3개를 프리필한 뒤 4개 전체를 프리필하면, 인과 마스크가 있을 때 덧붙인 토큰은 앞선 어느 질의에도 보이지 "
        "않는다. 그래서 모든 층의 위치 0..2의 K와 V가 비트 단위로 똑같다. 캐시해 둔 K/V가 그대로 맞는 이유다. 마스크가 "
        "없으면 앞선 토큰마다 새 토큰을 보게 되어 K와 V가 최대 1.5까지 바뀌고, 캐시한 것을 모두 다시 계산해야 한다.")
    with_mask, without = CacheValidity(3, 0, 0, 0, [0.0, 0.0, 0.0]), CacheValidity(3, 0, 0, 0, [0.5, 3.214, 0.0])
    assert append_takeaway(with_mask, without, lang="ko") == (
        "토큰 하나를 덧붙여도 인과 마스크가 있으면 앞선 모든 위치의 로짓이 정확히 그대로다. 마스크가 없으면 앞선 위치 "
        "3곳 중 2곳의 로짓이 최대 3.21까지 바뀐다")
