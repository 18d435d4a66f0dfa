"""The Serving page's chart titles and sentences (sim/words/serving_readouts.py) are worded from the numbers: every
sentence both ways round (exact strings), and titles that follow the link's values on the page."""

import json

from sim.alloc.workload import LengthWorkloadConfig
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.words import comparison as cw
from sim.words import serving_readouts as ro
from sim.words import speculative as sw
from tests.conftest import run_page

PAIR = "Llama 3.1 70B drafted by Llama 3.1 8B"


def test_occupancy_names_the_scheduler_with_fuller_passes():
    assert ro.occupancy_takeaway(75.87, 177.68, 256) == (
        "Continuous batching keeps 178 requests doing useful work in an average pass vs 76 static (max batch 256)")
    assert ro.occupancy_takeaway(250.2, 246.4, 256) == (
        "Static batching keeps 250 requests doing useful work in an average pass vs 246 continuous (max batch 256)")
    assert ro.occupancy_takeaway(100.2, 99.8, 1024) == (
        "Both schedulers keep 100 requests doing useful work in an average pass (max batch 1,024)")


def test_kv_memory_names_the_scheduler_that_claims_more():
    assert ro.kv_takeaway(400_000, 399_990, 100_000, 380_000.0, 60_000.0) == (
        "Static batching claims up to 99.9% of the 400,000 KV token slots, continuous only 25.0% "
        "(mean 95.0% vs 15.0%)")  # 99.9975% is not shown as 100.0%
    assert ro.kv_takeaway(8_000, 4_000, 8_000, 3_000.0, 7_200.0) == (
        "Continuous batching claims up to 100.0% of the 8,000 KV token slots, static only 50.0% (mean 90.0% vs 37.5%)")
    assert ro.kv_takeaway(8_000, 4_000, 4_000, 3_000.0, 2_000.0) == (
        "Both schedulers claim up to 50.0% of the 8,000 KV token slots (mean 37.5% static, 25.0% continuous)")


def test_latency_names_the_lower_scheduler_and_by_how_much():
    assert ro.latency_takeaway((53.55, 110.52), (6.23, 14.94)) == (
        "Continuous batching's end-to-end latency is 8.60× lower at p50 (6.23 s vs 53.55 s) and 7.40× lower at p99 "
        "(14.94 s vs 110.52 s)")
    assert ro.latency_takeaway((6.88, 13.59), (7.31, 13.54)) == (
        "Static batching's end-to-end latency is 1.06× lower at p50 (6.88 s vs 7.31 s) and 0.4% higher at p99 "
        "(13.59 s vs 13.54 s)")
    assert ro.latency_takeaway((3.04, 3.10), (3.04, 3.05)) == (
        "Continuous batching's end-to-end latency is the same at p50 (3.04 s) and 1.02× lower at p99 "
        "(3.05 s vs 3.10 s)")
    assert ro.latency_takeaway((1_234.5, 2_000.0), (1_234.5, 2_000.0)) == (
        "Both schedulers' end-to-end latency is 1,234.50 s at p50 and 2,000.00 s at p99")


def test_sweep_says_where_throughput_stops_growing_and_who_leads():
    assert ro.sweep_takeaway((16, 32, 64), (1000.0, 2000.0, 2000.0), (3000.0, 6000.0, 9000.0)) == (
        "Continuous batching's throughput keeps growing up to max batch 64 (9,000 tokens/s), static batching's stops "
        "growing at max batch 32 (2,000 tokens/s); continuous leads at every batch, by 3.00× to 4.50×")
    assert ro.sweep_takeaway((16, 32, 64), (3000.0, 6000.0, 9000.0), (1000.0, 2000.0, 1500.0)) == (
        "Continuous batching's throughput peaks at max batch 32 (2,000 tokens/s), static batching's keeps growing up "
        "to max batch 64 (9,000 tokens/s); static leads at every batch, by 3.00× to 6.00×")
    assert ro.sweep_takeaway((16, 32, 64), (1000.0, 2000.0, 3000.0), (500.0, 2500.0, 3500.0)).endswith(
        "; continuous leads at 2 of 3 batch sizes, static at 1")
    sweep = cp.BatchSweep((16, 32), (1000.0, 1000.0), (1000.0, 1000.0))
    assert cw.sweep_takeaway(sweep) == (
        "Continuous batching's throughput stops growing at max batch 16 (1,000 tokens/s), static batching's stops "
        "growing at max batch 16 (1,000 tokens/s); the two are equal at every batch")


def test_speculation_in_a_batch_says_where_it_stops_paying():
    assert ro.spec_batch_takeaway(PAIR, 0.8, 4, (1, 128, 256), (2.305, 1.42, 0.953)) == (
        f"{PAIR} (α = 0.8, k = 4): speculation pays up to batch 128 (1.42×) and stops paying from batch 256 (0.95×)")
    assert ro.spec_batch_takeaway(PAIR, 0.95, 4, (1, 256), (3.1, 1.283)) == (
        f"{PAIR} (α = 0.95, k = 4): speculation pays at every batch shown, 3.10× at batch 1 and 1.28× at batch 256")
    assert ro.spec_batch_takeaway(PAIR, 0.3, 4, (1, 256), (0.977, 0.6)) == (
        f"{PAIR} (α = 0.3, k = 4): speculation pays at no batch shown: at best 0.98× (batch 1)")
    assert ro.spec_batch_takeaway(PAIR, 0.8, 4, (1, 2), (1.004, 0.9)).endswith(  # 1.00× does not pay
        "pays at no batch shown: at best 1.00× (batch 1)")
    assert ro.spec_batch_takeaway(PAIR, 0.8, 4, (1, 2, 4), (0.9, 1.2, 0.95)) == (
        f"{PAIR} (α = 0.8, k = 4): speculation pays at 1 of 3 batch sizes shown, at best 1.20× (batch 2)")


def test_the_real_batch_sweep_title():
    points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 0.8, 4)
    assert sw.batch_sweep_takeaway(points, PAIR, 0.8, 4) == (
        f"{PAIR} (α = 0.8, k = 4): speculation pays up to batch 128 (1.42×) and stops paying from batch 256 (0.95×)")


def test_speculative_curves_name_the_best_k_or_that_none_pays():
    assert ro.spec_curves_takeaway(0.8, 0.115, 4, 2.31, 5, 2.35) == (
        "At α = 0.8 and c = 0.115, the best draft length is k = 5, 2.35× faster than plain decoding; the chosen k = 4 "
        "gives 2.31×")
    assert ro.spec_curves_takeaway(0.8, 0.115, 5, 2.35, 5, 2.35) == (
        "At α = 0.8 and c = 0.115, the chosen k = 5 is the best draft length: 2.35× faster than plain decoding")
    assert ro.spec_curves_takeaway(0.8, 0.1, 12, 0.98, 6, 2.47).endswith(
        "the chosen k = 12 gives 0.98×, slower than plain decoding")
    assert sw.curves_takeaway(sps.run_speculative(sps.SpecSetup(alpha=0.8, k=4, c=0.1, mc_passes=1000))) == (
        "At α = 0.8 and c = 0.100, the best draft length is k = 6, 2.47× faster than plain decoding; the chosen k = 4 "
        "gives 2.40×")
    assert sw.curves_takeaway(sps.run_speculative(sps.SpecSetup(alpha=0.1, k=2, c=0.5, mc_passes=1000))) == (
        "At α = 0.1 and c = 0.500, speculation pays at no k: even the best, k = 1, runs at 0.73× the speed of plain "
        "decoding")


def test_monte_carlo_caption_counts_the_means_on_the_formula():
    assert ro.monte_carlo_sentence(0.8, 12, 12) == (
        "Crosses: the Monte Carlo means at α = 0.8, all 12 within 2 standard errors of the formula.")
    assert ro.monte_carlo_sentence(0.8, 11, 12) == (
        "Crosses: the Monte Carlo means at α = 0.8, 11 of 12 within 2 standard errors of the formula (about 1 in 20 "
        "falls outside by chance alone).")
    few = sps.run_speculative(sps.SpecSetup(alpha=0.8, k=4, c=0.1, mc_passes=1000))  # seed 0: one mean off
    assert few.num_mc_within == 11 and "11 of 12 within" in sw.curves_caption(few, measured=False)
    assert sw.curves_caption(few, measured=True).endswith("Star: the real model's measured tokens per pass and wall-time speedup.")


def test_claim_sentences_state_the_trends():
    assert ro.near_best_sentence(0.8, [4, 5, 6, 7, 8, 9], 6) == (
        "The curve is flat near its top: at α = 0.8 every k from 4 to 9 is within 5% of the best (k = 6).")
    assert ro.near_best_sentence(0.8, [1], 1) == (
        "The curve peaks sharply: at α = 0.8 only k = 1 comes within 5% of the best.")
    assert ro.batch_gain_sentence(0.8, 4, (1, 512), (2.305, 0.69)) == (
        "At α = 0.8, k = 4 the gain fades as the batch grows, to a loss: 2.31× at batch 1, 0.69× at batch 512 "
        "(chart above).")
    assert ro.batch_gain_sentence(0.8, 4, (1, 512), (2.305, 1.5)) == (
        "At α = 0.8, k = 4 the gain fades as the batch grows: 2.31× at batch 1, 1.50× at batch 512 (chart above).")
    assert ro.batch_gain_sentence(0.8, 4, (1, 512), (1.5, 2.0)) == (
        "At α = 0.8, k = 4 the gain grows with the batch: 1.50× at batch 1, 2.00× at batch 512 (chart above).")
    assert ro.batching_trend_sentence((16, 512), (3.0, 8.27)) == (
        "In the sweep here it grows from 3.00× at max batch 16 to 8.27× at 512.")
    assert ro.batching_trend_sentence((16, 512), (3.0, 2.71)) == (
        "In the sweep here it shrinks from 3.00× at max batch 16 to 2.71× at 512.")
    assert ro.batching_trend_sentence((16, 512), (3.0, 3.0)) == "In the sweep here it stays at 3.00×."


def test_percents_never_round_up_to_a_full_budget():
    assert (ro.pct(0.99999), ro.pct(1.0), ro.pct(0.2634)) == ("99.9%", "100.0%", "26.3%")
    assert (ro.whole_pct(0.997), ro.whole_pct(0.3), ro.whole_pct(1.0)) == ("over 99%", "30%", "100%")


def titles(at) -> list[str]:
    """Every chart's title as the reader reads it (set_headline wraps lines with <br>)."""
    out = []
    for c in at.get("plotly_chart"):
        t = json.loads(c.proto.spec)["layout"].get("title", {})
        out.append((t.get("text") if isinstance(t, dict) else t or "").replace("<br>", " "))
    return out


def test_titles_follow_the_link():
    """Equal output lengths flip the occupancy and latency titles to static batching; a low α makes
    speculation pay at no batch (on its own tab, the same link values)."""
    pages = {}
    for name, params in (("base", {}), ("flipped", {"lengths": "fixed", "alpha": "0.3"})):
        for tab in ("batching", "spec"):
            at = run_page("serving", {"live": "0", "tab": tab, **params})
            assert not at.exception, at.exception
            pages[name, tab] = titles(at)
    for name, lengths, alpha in (("base", "chat", 0.8), ("flipped", "fixed", 0.3)):
        cmp = cp.run_serving(cp.ServingSetup(LengthWorkloadConfig(length_dist=lengths, arrival_rate=20.0)))
        spec = sps.run_speculative(sps.SpecSetup(alpha=alpha))
        points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", alpha, 4)
        assert pages[name, "batching"] == [cw.gantt_takeaway(cmp, 40), cw.occupancy_takeaway(cmp), cw.kv_takeaway(cmp),
                                           cw.latency_takeaway(cmp)]
        assert pages[name, "spec"] == [sw.curves_takeaway(spec), sw.batch_sweep_takeaway(points, PAIR, alpha, 4)]
        assert all(pages[name, "batching"] + pages[name, "spec"])  # no chart without its takeaway
    base_titles, flipped_titles = pages["base", "batching"], pages["flipped", "batching"]
    assert base_titles[1].startswith("Continuous batching keeps 178 requests")
    assert flipped_titles[1].startswith("Static batching keeps 250 requests")
    assert base_titles[3].startswith("Continuous batching's end-to-end latency is 8.59× lower at p50")
    assert flipped_titles[3].startswith("Static batching's end-to-end latency is")
    assert "pays up to batch 128" in pages["base", "spec"][1] and "pays at no batch shown" in pages["flipped", "spec"][1]


def test_sweep_title_follows_the_link():
    at = run_page("serving", {"live": "0", "sweep": "1", "requests": "200"})
    assert not at.exception, at.exception
    setup = cp.ServingSetup(LengthWorkloadConfig(num_requests=200, arrival_rate=20.0))
    assert titles(at)[4] == cw.sweep_takeaway(cp.sweep_max_batch(setup))
    assert titles(at)[4].startswith("Continuous batching's throughput stops growing at max batch 256 (8,854 tokens/s)")
