"""The main charts' titles state their takeaway, worded from the numbers: each comparison both ways."""

from types import SimpleNamespace

from sim.alloc.policies import Comparison
from sim.alloc.prefix_cache import HitTotals
from sim.alloc.prefix_sweeps import WorkloadOverview
from sim.cost.capacity import Capacity
from sim.cost.memory import GiB
from sim.cost.roofline import Hardware, StepCost, roofline_takeaway
from sim.serving.comparison import ServingComparison


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


def _capacity(weights_gib: int, kv_gib: int) -> Capacity:
    return Capacity(80 * GiB, 72 * GiB, weights_gib * GiB, kv_gib * GiB, 0, 0, "memory")


def test_capacity_takeaway_fits_or_not_with_the_gib():
    assert _capacity(16, 4).takeaway("H100 SXM") == (
        "Fits: 16 GiB of weights + 4 GiB of KV within the 72 GiB usable on H100 SXM, 52 GiB to spare")
    assert _capacity(16, 80).takeaway("2 × L4") == (
        "Does not fit: 16 GiB of weights + 80 GiB of KV is 24 GiB over the 72 GiB usable on 2 × L4")
    assert _capacity(100, 1).takeaway("H100 SXM") == (
        "Does not fit: the weights alone (100 GiB) leave no room for KV in the 72 GiB usable on H100 SXM")


def _policies(paged: float) -> Comparison:
    shares = {"paged": paged, "reserve_max_len": 0.204, "reserve_max_tokens": 0.382, "first_fit": 0.3}
    return Comparison(None, None, {p: SimpleNamespace(token_share=s) for p, s in shares.items()})


def test_paging_takeaway_places_paged_against_the_contiguous_range():
    assert _policies(0.963).memory_takeaway() == (
        "Paged blocks keep 96.3% of claimed KV memory for real tokens vs 20.4–38.2% for the contiguous policies")
    assert _policies(0.1).memory_takeaway() == (
        "Paged blocks keep only 10.0% of claimed KV memory for real tokens vs 20.4–38.2% for the contiguous "
        "policies")
    assert _policies(0.3).memory_takeaway() == (
        "Paged blocks keep 30.0% of claimed KV memory for real tokens, within 20.4–38.2% for the contiguous "
        "policies")


def _serving(static_s: float, cont_s: float) -> ServingComparison:
    run = {p: SimpleNamespace(num_requests=200, makespan_s=s, tokens_per_s=50_000 / s)
           for p, s in (("static", static_s), ("continuous", cont_s))}
    return ServingComparison(None, None, 0, 0, 0, 0, 0.0, run)


def test_serving_takeaway_names_the_scheduler_that_finished_sooner():
    assert _serving(100.0, 40.0).takeaway(40) == (
        "Continuous batching finished all 200 requests 2.50× sooner: 1,250 tokens/s continuous vs 500 static "
        "(first 40 shown)")
    assert _serving(40.0, 100.0).takeaway(400) == (
        "Static batching finished all 200 requests 2.50× sooner: 500 tokens/s continuous vs 1,250 static "
        "(first 200 shown)")
    assert _serving(50.0, 50.0).takeaway(40) == (
        "Both schedulers finished all 200 requests in 50.0 s: 1,000 tokens/s continuous vs 1,000 static "
        "(first 40 shown)")


def _overview(fixed_hits: int, variable_hits: int) -> WorkloadOverview:
    def totals(hits):
        return HitTotals(num_prompt_tokens=1000, num_hit_tokens=hits, num_decode_steps=0, num_evictions=0,
                         num_requests_with_hit=0)

    return WorkloadOverview({("chat", "fixed_first"): totals(fixed_hits),
                             ("chat", "variable_first"): totals(variable_hits)})


def test_prefix_takeaway_names_the_layout_with_more_hits():
    assert _overview(923, 81).layout_takeaway("chat") == (
        "Multi-turn chat: fixed content first serves 92.3% of prompt tokens from the cache, variable first only 8.1%")
    assert _overview(300, 400).layout_takeaway("chat") == (
        "Multi-turn chat: variable content first serves 40.0% of prompt tokens from the cache, fixed first only "
        "30.0%")
    assert _overview(0, 0).layout_takeaway("chat") == (
        "Multi-turn chat: both layouts serve 0.0% of prompt tokens from the cache")


def test_decode_takeaway_compares_the_counted_flops():
    from sim.model.generate import DecodeComparison, StepRecord

    def recs(flops):
        return [StepRecord(i, 8 + i, 65, 1, 8 + i, {"mlp": f}, 0, 0, 0.001) for i, f in enumerate(flops)]

    full = DecodeComparison(recs([3_000_000, 5_000_000]), recs([3_000_000, 1_000_000]), 2, None)
    assert full.flops_takeaway() == (
        "Naive decoding did 2.0× the FLOPs of cached over all 2 tokens: 8 MFLOP vs 4 MFLOP")
    cut = DecodeComparison(recs([1_000_000, 1_000_000]), recs([3_000_000, 3_000_000, 3_000_000]), 3, 1.0)
    assert cut.flops_takeaway() == (
        "Cached decoding did 3.0× the FLOPs of naive over the first 2 tokens (naive's budget ran out): "
        "2 MFLOP vs 6 MFLOP")
    same = DecodeComparison(recs([1_000_000]), recs([1_000_000]), 1, None)
    assert same.flops_takeaway() == "Naive and cached decoding did the same FLOPs over all 1 token: 1 MFLOP each"


def test_builders_show_the_takeaway_as_their_title():
    from app.figures.memory import memory_breakdown

    cap = _capacity(16, 4)
    fig = memory_breakdown(cap, "H100 SXM", cap.takeaway("H100 SXM"))
    assert fig.layout.title.text.replace("<br>", " ") == cap.takeaway("H100 SXM")
    lines = fig.layout.title.text.count("<br>") + 1
    assert lines == 3 and fig.layout.margin.t == 10 + 28 * lines + 16 + 24  # + the GPU's label under it
    assert fig.layout.height == 260 + fig.layout.margin.t - 50  # the bar keeps its height
    assert fig.layout.xaxis.title.text == "GPU memory (GiB)"
