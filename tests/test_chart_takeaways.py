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
from sim.words.catalog import PSEUDO
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
    assert roofline_takeaway(_step("decode", 200, 200), _step("prefill", 250_000, 100), hw, lang=PSEUDO) == (
        "roofline.s.takeaway(d=1.00, d_where=roofline.s.below_ridge(x=100×), ridge=100, p=2,500, "
        "p_where=roofline.s.above_ridge(x=25×))")
    assert roofline_takeaway(_step("decode", 400, 1), _step("prefill", 50, 1), hw, lang=PSEUDO) == (
        "roofline.s.takeaway(d=400.00, d_where=roofline.s.above_ridge(x=4.0×), ridge=100, p=50, "
        "p_where=roofline.s.below_ridge(x=2.0×))")
    assert roofline_takeaway(_step("decode", 100, 1), _step("prefill", 100, 1), hw, lang=PSEUDO) == (
        "roofline.s.takeaway(d=100.00, d_where=roofline.s.at_ridge, ridge=100, p=100, p_where=roofline.s.at_ridge)")


def test_tiny_decode_point_blames_launch_overhead_only_when_far_below_the_roof():
    far = TinyDecodePoint(2e6, 4e6, measured_s=1e-3, predicted_s=1e-4, num_ops=700, intensity=2.0,
                          achieved_flops=4e9, attainable_flops=4e10)
    assert tiny_takeaway(far, lang=PSEUDO) == "roofline.s.tiny.takeaway(share=10.0%)"
    assert "share=10.0%)" in tiny_verdict(far, lang=PSEUDO) and "roofline.s.tiny.launch(ops=700)" in tiny_verdict(
        far, lang=PSEUDO)
    near = TinyDecodePoint(2e6, 4e6, measured_s=1e-4, predicted_s=0.8e-4, num_ops=700, intensity=2.0,
                           achieved_flops=4e10, attainable_flops=5e10)
    assert tiny_takeaway(near, lang=PSEUDO) == "roofline.s.tiny.takeaway(share=80.0%)"
    assert "roofline.s.tiny.launch" not in tiny_verdict(near, lang=PSEUDO) and "roofline.s.tiny.close(ops=700)" in (
        tiny_verdict(near, lang=PSEUDO))


def _capacity(weights_gib: int, kv_gib: int) -> Capacity:
    return Capacity(80 * GiB, 72 * GiB, weights_gib * GiB, kv_gib * GiB, 0, 0, "memory")


def test_capacity_takeaway_fits_or_not_with_the_gib():
    assert fit_takeaway(_capacity(16, 4), "H100 SXM", lang=PSEUDO) == (
        "kvmem.fit.t_fits(need=kvmem.fit.need(weights=16 GiB, kv=4 GiB), usable=kvmem.fit.usable(usable=72 GiB, "
        "gpu=H100 SXM), spare=52 GiB)")
    assert fit_takeaway(_capacity(16, 80), "2 × L4", lang=PSEUDO) == (
        "kvmem.fit.t_over(need=kvmem.fit.need(weights=16 GiB, kv=80 GiB), over=24 GiB, "
        "usable=kvmem.fit.usable(usable=72 GiB, gpu=2 × L4))")
    assert fit_takeaway(_capacity(100, 1), "H100 SXM", lang=PSEUDO) == (
        "kvmem.fit.t_no_room(weights=100 GiB, usable=kvmem.fit.usable(usable=72 GiB, gpu=H100 SXM))")


def _policies(paged: float) -> Comparison:
    shares = {"paged": paged, "reserve_max_len": 0.204, "reserve_max_tokens": 0.382, "first_fit": 0.3}
    return Comparison(None, None, {p: SimpleNamespace(token_share=s) for p, s in shares.items()})


def test_paging_takeaway_places_paged_against_the_contiguous_range():
    assert memory_takeaway(_policies(0.963), lang=PSEUDO) == (
        "paged.s.mem.more(paged=96.3%, span=20.4–38.2%, policies=paged.s.mem.policies)")
    assert memory_takeaway(_policies(0.1), lang=PSEUDO) == (
        "paged.s.mem.less(paged=10.0%, span=20.4–38.2%, policies=paged.s.mem.policies)")
    assert memory_takeaway(_policies(0.3), lang=PSEUDO) == (
        "paged.s.mem.within(paged=30.0%, span=20.4–38.2%, policies=paged.s.mem.policies)")


def _serving(static_s: float, cont_s: float) -> ServingComparison:
    run = {p: SimpleNamespace(num_requests=200, makespan_s=s, tokens_per_s=50_000 / s)
           for p, s in (("static", static_s), ("continuous", cont_s))}
    return ServingComparison(None, None, 0, 0, 0, 0, 0.0, run)


def test_serving_takeaway_names_the_scheduler_that_finished_sooner():
    assert cw.gantt_takeaway(_serving(100.0, 40.0), 40, lang=PSEUDO) == (
        "serving.s.gantt.continuous(n=200, x=2.50, c=1,250, s=500, shown=40)")
    assert cw.gantt_takeaway(_serving(40.0, 100.0), 400, lang=PSEUDO) == (
        "serving.s.gantt.static(n=200, x=2.50, c=500, s=1,250, shown=200)")
    assert cw.gantt_takeaway(_serving(50.0, 50.0), 40, lang=PSEUDO) == (
        "serving.s.gantt.same(n=200, t=50.0, c=1,000, s=1,000, shown=40)")


def _overview(fixed_hits: int, variable_hits: int) -> WorkloadOverview:
    def totals(hits):
        return HitTotals(num_prompt_tokens=1000, num_hit_tokens=hits, num_decode_steps=0, num_evictions=0,
                         num_requests_with_hit=0)

    return WorkloadOverview({("chat", "fixed_first"): totals(fixed_hits),
                             ("chat", "variable_first"): totals(variable_hits)})


def test_prefix_takeaway_names_the_layout_with_more_hits():
    assert layout_takeaway(_overview(923, 81), "chat", lang=PSEUDO) == (
        "prefix.s.overview.fixed(name=prefix.workload.chat, fixed=92.3, var=8.1)")
    assert layout_takeaway(_overview(300, 400), "chat", lang=PSEUDO) == (
        "prefix.s.overview.variable(name=prefix.workload.chat, var=40.0, fixed=30.0)")
    assert layout_takeaway(_overview(0, 0), "chat", lang=PSEUDO) == (
        "prefix.s.overview.same(name=prefix.workload.chat, fixed=0.0)")


def test_decode_takeaway_compares_the_counted_flops():
    from sim.model.generate import DecodeComparison, StepRecord

    def recs(flops):
        return [StepRecord(step=i, position=8 + i, token=65, num_new=1, kv_len=8 + i, part_to_flops={"mlp": f}, bytes_weights=0, bytes_kv=0, wall_s=0.001) for i, f in enumerate(flops)]

    full = DecodeComparison(naive=recs([3_000_000, 5_000_000]), cached=recs([3_000_000, 1_000_000]), num_requested=2, naive_budget_s=None)
    assert dw.flops_takeaway(full, lang=PSEUDO) == (
        "decode.s.flops.naive_more(x=2.0×, over=decode.s.flops.over_all(tokens=decode.s.n.token.other(n=2)), a=8 "
        "MFLOP, b=4 MFLOP)")
    cut = DecodeComparison(naive=recs([1_000_000, 1_000_000]), cached=recs([3_000_000, 3_000_000, 3_000_000]), num_requested=3, naive_budget_s=1.0)
    assert dw.flops_takeaway(cut, lang=PSEUDO) == (
        "decode.s.flops.cached_more(x=3.0×, over=decode.s.flops.over_first(tokens=decode.s.n.token.other(n=2)), a=2 "
        "MFLOP, b=6 MFLOP)")
    same = DecodeComparison(naive=recs([1_000_000]), cached=recs([1_000_000]), num_requested=1, naive_budget_s=None)
    assert dw.flops_takeaway(same, lang=PSEUDO) == (
        "decode.s.flops.same(over=decode.s.flops.over_all(tokens=decode.s.n.token.one(n=1)), a=1 MFLOP)")


def test_builders_show_the_takeaway_as_their_title():
    from app.figures.memory import memory_breakdown

    cap = _capacity(16, 4)
    fig = memory_breakdown(cap, "H100 SXM", fit_takeaway(cap, "H100 SXM"))
    assert fig.layout.title.text.replace("<br>", " ") == fit_takeaway(cap, "H100 SXM")
    assert fig.layout.xaxis.title.text == "GPU memory (GiB)"
    # a title of several lines, whatever length the catalog's sentence has: the top margin grows by its lines
    long = memory_breakdown(cap, "H100 SXM", " ".join(["word"] * 60))
    lines = long.layout.title.text.count("<br>") + 1
    assert lines >= 3 and long.layout.margin.t == 10 + 28 * lines + 16 + 52  # + two rows of line labels under it
    assert long.layout.height == 260 + long.layout.margin.t - 50  # the bar keeps its height


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

    assert bytes_takeaway(step(141.1e9, 1.342e9, 0.1e9), lang=PSEUDO) == (
        "roofline.s.bytes.weights(w=141.1 GB, kv=1.342 GB, share=99%)")
    assert bytes_takeaway(step(16e9, 1.1e12), lang=PSEUDO) == "roofline.s.bytes.kv(w=16 GB, kv=1.1 TB, share=99%)"
    assert bytes_takeaway(step(811.7e9, 2.1e9), lang=PSEUDO) == (
        "roofline.s.bytes.weights(w=811.7 GB, kv=2.1 GB, share=roofline.s.over_99)")
    assert bytes_takeaway(step(1e9, 1e9), lang=PSEUDO) == "roofline.s.bytes.each(w=1 GB, kv=1 GB, share=50%)"


def _running(paged: float, max_len: float) -> Comparison:
    return Comparison(None, None, {"paged": SimpleNamespace(mean_running=paged),
                                   "reserve_max_len": SimpleNamespace(mean_running=max_len)})


def test_concurrency_takeaway_compares_paged_with_reserving_the_maximum():
    assert concurrency_takeaway(_running(12.34, 3.1), lang=PSEUDO) == "paged.s.conc.more(p=12.3, m=3.1, x=4.0)"
    assert concurrency_takeaway(_running(2.0, 5.0), lang=PSEUDO) == "paged.s.conc.less(p=2.0, m=5.0)"
    assert concurrency_takeaway(_running(4.01, 4.04), lang=PSEUDO) == "paged.s.conc.same(p=4.0)"


def test_wall_time_takeaway_compares_the_last_step_both_ran():
    from sim.model.generate import DecodeComparison, StepRecord

    def recs(ms):
        return [StepRecord(step=i, position=8 + i, token=65, num_new=1, kv_len=8 + i, part_to_flops={"mlp": 1}, bytes_weights=0, bytes_kv=0, wall_s=t / 1e3) for i, t in enumerate(ms)]

    assert dw.wall_time_takeaway(DecodeComparison(naive=recs([5, 8.4]), cached=recs([5, 1.2]), num_requested=2, naive_budget_s=None), lang=PSEUDO) == (
        "decode.s.wall_at.cached_faster(at=decode.s.at.step(step=1), c=1.20 ms, n=8.40 ms, x=7.0×)")
    assert dw.wall_time_takeaway(DecodeComparison(naive=recs([5, 1.0]), cached=recs([5, 3.0, 3.0]), num_requested=3, naive_budget_s=1.0), lang=PSEUDO) == (
        "decode.s.wall_at.naive_faster(at=decode.s.at.last(at=decode.s.at.step(step=1)), n=1.00 ms, c=3.00 ms, "
        "x=3.0×)")
    assert dw.wall_time_takeaway(DecodeComparison(naive=recs([2.001]), cached=recs([2.004]), num_requested=1, naive_budget_s=None), lang=PSEUDO) == (
        "decode.s.wall_at.same(at=decode.s.at.step(step=0), c=2.00 ms)")


def test_append_takeaway_compares_the_masks():
    from sim.attention.maps import CacheValidity
    from sim.words.maps import append_takeaway

    def validity(rows):
        return CacheValidity(len(rows), max(rows), 0.0, 0.0, rows)

    assert append_takeaway(validity([0.0, 0.0, 0.0]), validity([0.5, 3.214, 0.0]), lang=PSEUDO) == (
        "masks.s.app.less(causal=masks.s.app.causal_same, moved=2, n=3, f=3.21)")
    assert append_takeaway(validity([2.4e-6, 0.0]), validity([0.01, 0.02]), lang=PSEUDO) == (
        "masks.s.app.less(causal=masks.s.app.causal_moved(c=2.4e-06), moved=2, n=2, f=0.02)")
    assert append_takeaway(validity([0.3, 0.0]), validity([0.1, 0.0]), lang=PSEUDO) == (
        "masks.s.app.more(c=0.3, f=0.1)")
    assert append_takeaway(validity([0.0]), validity([0.0]), lang=PSEUDO) == "masks.s.app.both_same"
    assert append_takeaway(validity([0.25]), validity([0.25]), lang=PSEUDO) == "masks.s.app.both_moved(c=0.25)"


def test_quant_bytes_takeaway_compares_the_scheme_with_fp16():
    from sim.model.quant_bytes import tiny_bytes_rows
    from sim.model.quant_cache import make_scheme
    from sim.words.quant import bytes_takeaway, named_bytes_rows

    cfg = SimpleNamespace(n_layers=4, n_kv_heads=4, head_dim=32)
    schemes = [make_scheme("kivi", bits=3, residual=32), make_scheme("token", bits=3)]
    rows = named_bytes_rows(tiny_bytes_rows(cfg, schemes, 128), schemes)
    assert bytes_takeaway(rows, 128, 3, lang=PSEUDO) == (
        "quant.s.bytes_less(n=128, bits=3, name=KIVI (R=32), share=34.4%, per=quant.s.bytes_per(q=704.0, fp16=2,048))")
    short = named_bytes_rows(tiny_bytes_rows(cfg, schemes[:1], 16), schemes[:1])  # all 16 inside the residual
    assert bytes_takeaway(short, 16, 3, lang=PSEUDO) == (
        "quant.s.bytes_same(n=16, bits=3, name=KIVI (R=32), per=quant.s.bytes_per(q=2,048.0, fp16=2,048))")
    more = [{"scheme": "fp16", "short": "full precision", "total": 1000, "bytes_per_token": 100.0},
            {"scheme": "kivi", "short": "KIVI (R=4)", "total": 1250, "bytes_per_token": 125.0}]
    assert bytes_takeaway(more, 10, 2, lang=PSEUDO) == (
        "quant.s.bytes_more(n=10, bits=2, name=KIVI (R=4), x=1.25, per=quant.s.bytes_per(q=125.0, fp16=100))")
