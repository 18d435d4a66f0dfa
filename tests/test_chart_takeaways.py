"""The main charts' titles state their takeaway, worded from the numbers: each comparison both ways."""

from types import SimpleNamespace

from sim.alloc.policies import Comparison
from sim.alloc.prefix_cache import HitTotals
from sim.alloc.prefix_sweeps import WorkloadOverview
from sim.cost.capacity import Capacity
from sim.cost.memory import GiB
from sim.cost.roofline import Hardware, StepCost, TinyDecodePoint
from sim.serving.comparison import ServingComparison
from sim.words import comparison as cw
from sim.words import decode as dw
from sim.words.capacity import fit_takeaway
from sim.words.paging import concurrency_takeaway, memory_takeaway
from sim.words.prefix import layout_takeaway
from sim.words.roofline import (
    roofline_takeaway,
    tiny_takeaway,
    tiny_verdict,
)


def _step(phase: str, flops: float, num_bytes: float) -> StepCost:
    return StepCost(phase, flops, 0.0, num_bytes, 0.0, 0.0, 1)


def test_roofline_takeaway_says_which_side_of_the_ridge():
    hw = Hardware("GPU", peak_flops=1000.0, bandwidth=10.0)  # ridge 100 FLOP/B
    assert roofline_takeaway(_step("decode", 200, 200), _step("prefill", 250_000, 100), hw) == (
        "Decode at 1.00 FLOP/B is memory-bound, 100× below the ridge of 100 FLOP/B; "
        "prefill at 2,500 FLOP/B is compute-bound, 25× above the ridge")
    assert roofline_takeaway(_step("decode", 400, 1), _step("prefill", 50, 1), hw) == (
        "Decode at 400.00 FLOP/B is compute-bound, 4.0× above the ridge of 100 FLOP/B; "
        "prefill at 50 FLOP/B is memory-bound, 2.0× below the ridge")
    assert roofline_takeaway(_step("decode", 100, 1), _step("prefill", 100, 1), hw).endswith(
        "prefill at 100 FLOP/B is exactly at the ridge")


def test_tiny_decode_point_blames_launch_overhead_only_when_far_below_the_roof():
    far = TinyDecodePoint(2e6, 4e6, measured_s=1e-3, predicted_s=1e-4, num_ops=700, intensity=2.0,
                          achieved_flops=4e9, attainable_flops=4e10)
    assert tiny_takeaway(far) == "The tiny model's measured decode step reaches 10.0% of its roofline"
    assert "10.0% of what the roof allows" in tiny_verdict(far) and "fixed cost of launching each of its ~700" in tiny_verdict(far)
    near = TinyDecodePoint(2e6, 4e6, measured_s=1e-4, predicted_s=0.8e-4, num_ops=700, intensity=2.0,
                           achieved_flops=4e10, attainable_flops=5e10)
    assert tiny_takeaway(near).endswith("reaches 80.0% of its roofline")
    assert "fixed cost" not in tiny_verdict(near) and "bandwidth or compute does" in tiny_verdict(near)


def _capacity(weights_gib: int, kv_gib: int) -> Capacity:
    return Capacity(80 * GiB, 72 * GiB, weights_gib * GiB, kv_gib * GiB, 0, 0, "memory")


def test_capacity_takeaway_fits_or_not_with_the_gib():
    assert fit_takeaway(_capacity(16, 4), "H100 SXM") == (
        "Fits: 16 GiB of weights + 4 GiB of KV within the 72 GiB usable on H100 SXM, 52 GiB to spare")
    assert fit_takeaway(_capacity(16, 80), "2 × L4") == (
        "Does not fit: 16 GiB of weights + 80 GiB of KV is 24 GiB over the 72 GiB usable on 2 × L4")
    assert fit_takeaway(_capacity(100, 1), "H100 SXM") == (
        "Does not fit: the weights alone (100 GiB) leave no room for KV in the 72 GiB usable on H100 SXM")


def _policies(paged: float) -> Comparison:
    shares = {"paged": paged, "reserve_max_len": 0.204, "reserve_max_tokens": 0.382, "first_fit": 0.3}
    return Comparison(None, None, {p: SimpleNamespace(token_share=s) for p, s in shares.items()})


def test_paging_takeaway_places_paged_against_the_contiguous_range():
    assert memory_takeaway(_policies(0.963)) == (
        "Paged blocks keep 96.3% of claimed KV memory for real tokens vs 20.4–38.2% for the contiguous policies")
    assert memory_takeaway(_policies(0.1)) == (
        "Paged blocks keep only 10.0% of claimed KV memory for real tokens vs 20.4–38.2% for the contiguous "
        "policies")
    assert memory_takeaway(_policies(0.3)) == (
        "Paged blocks keep 30.0% of claimed KV memory for real tokens, within 20.4–38.2% for the contiguous "
        "policies")


def _serving(static_s: float, cont_s: float) -> ServingComparison:
    run = {p: SimpleNamespace(num_requests=200, makespan_s=s, tokens_per_s=50_000 / s)
           for p, s in (("static", static_s), ("continuous", cont_s))}
    return ServingComparison(None, None, 0, 0, 0, 0, 0.0, run)


def test_serving_takeaway_names_the_scheduler_that_finished_sooner():
    assert cw.gantt_takeaway(_serving(100.0, 40.0), 40) == (
        "Continuous batching finished all 200 requests 2.50× sooner: 1,250 tokens/s continuous vs 500 static "
        "(first 40 shown)")
    assert cw.gantt_takeaway(_serving(40.0, 100.0), 400) == (
        "Static batching finished all 200 requests 2.50× sooner: 500 tokens/s continuous vs 1,250 static "
        "(first 200 shown)")
    assert cw.gantt_takeaway(_serving(50.0, 50.0), 40) == (
        "Both schedulers finished all 200 requests in 50.0 s: 1,000 tokens/s continuous vs 1,000 static "
        "(first 40 shown)")


def _overview(fixed_hits: int, variable_hits: int) -> WorkloadOverview:
    def totals(hits):
        return HitTotals(num_prompt_tokens=1000, num_hit_tokens=hits, num_decode_steps=0, num_evictions=0,
                         num_requests_with_hit=0)

    return WorkloadOverview({("chat", "fixed_first"): totals(fixed_hits),
                             ("chat", "variable_first"): totals(variable_hits)})


def test_prefix_takeaway_names_the_layout_with_more_hits():
    assert layout_takeaway(_overview(923, 81), "chat") == (
        "Multi-turn chat: fixed content first serves 92.3% of prompt tokens from the cache, variable first only 8.1%")
    assert layout_takeaway(_overview(300, 400), "chat") == (
        "Multi-turn chat: variable content first serves 40.0% of prompt tokens from the cache, fixed first only "
        "30.0%")
    assert layout_takeaway(_overview(0, 0), "chat") == (
        "Multi-turn chat: both layouts serve 0.0% of prompt tokens from the cache")


def test_decode_takeaway_compares_the_counted_flops():
    from sim.model.generate import DecodeComparison, StepRecord

    def recs(flops):
        return [StepRecord(step=i, position=8 + i, token=65, num_new=1, kv_len=8 + i, part_to_flops={"mlp": f}, bytes_weights=0, bytes_kv=0, wall_s=0.001) for i, f in enumerate(flops)]

    full = DecodeComparison(naive=recs([3_000_000, 5_000_000]), cached=recs([3_000_000, 1_000_000]), num_requested=2, naive_budget_s=None)
    assert dw.flops_takeaway(full) == (
        "Naive decoding did 2.0× the FLOPs of cached over all 2 tokens: 8 MFLOP vs 4 MFLOP")
    cut = DecodeComparison(naive=recs([1_000_000, 1_000_000]), cached=recs([3_000_000, 3_000_000, 3_000_000]), num_requested=3, naive_budget_s=1.0)
    assert dw.flops_takeaway(cut) == (
        "Cached decoding did 3.0× the FLOPs of naive over the first 2 tokens (naive's budget ran out): "
        "2 MFLOP vs 6 MFLOP")
    same = DecodeComparison(naive=recs([1_000_000]), cached=recs([1_000_000]), num_requested=1, naive_budget_s=None)
    assert dw.flops_takeaway(same) == "Naive and cached decoding did the same FLOPs over all 1 token: 1 MFLOP each"


def test_builders_show_the_takeaway_as_their_title():
    from app.figures.memory import memory_breakdown

    cap = _capacity(16, 4)
    fig = memory_breakdown(cap, "H100 SXM", fit_takeaway(cap, "H100 SXM"))
    assert fig.layout.title.text.replace("<br>", " ") == fit_takeaway(cap, "H100 SXM")
    lines = fig.layout.title.text.count("<br>") + 1
    assert lines == 4 and fig.layout.margin.t == 10 + 28 * lines + 16 + 52  # + two rows of line labels under it
    assert fig.layout.height == 260 + fig.layout.margin.t - 50  # the bar keeps its height
    assert fig.layout.xaxis.title.text == "GPU memory (GiB)"


def test_more_builders_show_the_takeaway_and_keep_their_axes():
    import pandas as pd

    from app.figures.decode import wall_time_per_step
    from app.figures.masks import row_diffs
    from app.figures.paging import concurrency_over_time
    from app.figures.quant import bytes_by_part
    from app.figures.roofline import bytes_breakdown

    steps = pd.DataFrame({"step": [0, 1], "wall_s": [0.002, 0.001]})
    series = pd.DataFrame({"policy": ["paged", "paged"], "step": [0, 1], "running": [1, 2]})
    part = {"codes": 10, "scales": 1, "zero_points": 1, "full_precision": 0}
    cases = [
        (bytes_breakdown([("decode", 1e9, 2e9, 0.0)], "T1"), "moved per step (GB, 10⁹ bytes)", "step"),
        (concurrency_over_time(series, "T2"), "decode step", "running requests"),
        (wall_time_per_step(steps, steps, "T3"), "step", "milliseconds"),
        (row_diffs([0.0], [1.0], "T4"), "position", "max |Δ logit|"),
        (bytes_by_part([{"short": "KIVI", **part}], 4, "T5"), "bytes per token (B)", "scheme"),
    ]
    for i, (fig, x, y) in enumerate(cases, 1):
        assert fig.layout.title.text == f"T{i}"
        assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == (x, y)


def test_bytes_takeaway_names_the_larger_share_of_a_decode_step():
    from sim.words.roofline import bytes_takeaway

    def step(weights, kv, acts=0.0):
        return StepCost("decode", 1.0, 0.0, weights, kv, acts, 1)

    assert bytes_takeaway(step(141.1e9, 1.342e9, 0.1e9)) == (
        "Decode reads 141.1 GB of weights and 1.342 GB of KV cache a step: 99% of it is weights")
    assert bytes_takeaway(step(16e9, 1.1e12)) == (
        "Decode reads 16 GB of weights and 1.1 TB of KV cache a step: 99% of it is KV cache")
    assert bytes_takeaway(step(811.7e9, 2.1e9)) == (
        "Decode reads 811.7 GB of weights and 2.1 GB of KV cache a step: over 99% of it is weights")
    assert bytes_takeaway(step(1e9, 1e9)) == (
        "Decode reads 1 GB of weights and 1 GB of KV cache a step: 50% of it each")


def _running(paged: float, max_len: float) -> Comparison:
    return Comparison(None, None, {"paged": SimpleNamespace(mean_running=paged),
                                   "reserve_max_len": SimpleNamespace(mean_running=max_len)})


def test_concurrency_takeaway_compares_paged_with_reserving_the_maximum():
    assert concurrency_takeaway(_running(12.34, 3.1)) == (
        "Paged blocks run 12.3 requests at once on average vs 3.1 when every request reserves the maximum length: "
        "4.0× as many")
    assert concurrency_takeaway(_running(2.0, 5.0)) == (
        "Paged blocks run only 2.0 requests at once on average vs 5.0 when every request reserves the maximum length")
    assert concurrency_takeaway(_running(4.01, 4.04)) == (
        "Paged blocks and reserving the maximum length both run 4.0 requests at once on average")


def test_wall_time_takeaway_compares_the_last_step_both_ran():
    from sim.model.generate import DecodeComparison, StepRecord

    def recs(ms):
        return [StepRecord(step=i, position=8 + i, token=65, num_new=1, kv_len=8 + i, part_to_flops={"mlp": 1}, bytes_weights=0, bytes_kv=0, wall_s=t / 1e3) for i, t in enumerate(ms)]

    assert dw.wall_time_takeaway(DecodeComparison(naive=recs([5, 8.4]), cached=recs([5, 1.2]), num_requested=2, naive_budget_s=None)) == (
        "At step 1, a cached step took 1.20 ms vs 8.40 ms naive: 7.0× faster")
    assert dw.wall_time_takeaway(DecodeComparison(naive=recs([5, 1.0]), cached=recs([5, 3.0, 3.0]), num_requested=3, naive_budget_s=1.0)) == (
        "At step 1, naive's last before its budget ran out, a naive step took 1.00 ms vs 3.00 ms cached: 3.0× faster")
    assert dw.wall_time_takeaway(DecodeComparison(naive=recs([2.001]), cached=recs([2.004]), num_requested=1, naive_budget_s=None)) == (
        "At step 0, a cached step and a naive step both took 2.00 ms")


def test_append_takeaway_compares_the_masks():
    from sim.attention.maps import CacheValidity
    from sim.words.maps import append_takeaway

    def validity(rows):
        return CacheValidity(len(rows), max(rows), 0.0, 0.0, rows)

    assert append_takeaway(validity([0.0, 0.0, 0.0]), validity([0.5, 3.214, 0.0])) == (
        "Appending one token leaves every earlier position's logits exactly unchanged with the causal mask; "
        "without it the logits at 2 of 3 earlier positions change, by up to 3.21")
    assert append_takeaway(validity([2.4e-6, 0.0]), validity([0.01, 0.02])) == (
        "Appending one token changes the earlier positions' logits by at most 2.4e-06 with the causal mask; "
        "without it the logits at 2 of 2 earlier positions change, by up to 0.02")
    assert append_takeaway(validity([0.3, 0.0]), validity([0.1, 0.0])) == (
        "Appending one token changes the earlier positions' logits more with the causal mask (up to 0.3) "
        "than without it (up to 0.1)")
    assert append_takeaway(validity([0.0]), validity([0.0])) == (
        "Appending one token leaves every earlier position's logits exactly unchanged, with or without the mask")
    assert append_takeaway(validity([0.25]), validity([0.25])) == (
        "Appending one token changes the earlier positions' logits by up to 0.25 with or without the mask")


def test_quant_bytes_takeaway_compares_the_scheme_with_fp16():
    from sim.model.quant_bytes import tiny_bytes_rows
    from sim.model.quant_cache import make_scheme
    from sim.words.quant import bytes_takeaway, named_bytes_rows

    cfg = SimpleNamespace(n_layers=4, n_kv_heads=4, head_dim=32)
    schemes = [make_scheme("kivi", bits=3, residual=32), make_scheme("token", bits=3)]
    rows = named_bytes_rows(tiny_bytes_rows(cfg, schemes, 128), schemes)
    assert bytes_takeaway(rows, 128, 3) == (
        "At 128 tokens, INT3 KIVI (R=32) stores 34.4% of FP16's bytes: 704.0 vs 2,048 B per token "
        "(every layer, K and V)")
    short = named_bytes_rows(tiny_bytes_rows(cfg, schemes[:1], 16), schemes[:1])  # all 16 inside the residual
    assert bytes_takeaway(short, 16, 3) == (
        "At 16 tokens, INT3 KIVI (R=32) stores as many bytes as FP16: 2,048.0 vs 2,048 B per token "
        "(every layer, K and V)")
    more = [{"scheme": "fp16", "short": "full precision", "total": 1000, "bytes_per_token": 100.0},
            {"scheme": "kivi", "short": "KIVI (R=4)", "total": 1250, "bytes_per_token": 125.0}]
    assert bytes_takeaway(more, 10, 2) == (
        "At 10 tokens, INT2 KIVI (R=4) stores 1.25× FP16's bytes: 125.0 vs 100 B per token (every layer, K and V)")
