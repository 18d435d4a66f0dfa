"""The Serving page's chart titles and sentences (sim/words/serving_readouts.py) are worded from the numbers: every
sentence both ways round (exact strings), and titles that follow the link's values on the page."""

import json

from sim.alloc.workload import LengthWorkloadConfig
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.words import comparison as cw
from sim.words import serving_readouts as ro
from sim.words import speculative as sw
from sim.words.catalog import PSEUDO
from tests.conftest import run_page

PAIR = "Llama 3.1 70B drafted by Llama 3.1 8B"


def test_occupancy_names_the_scheduler_with_fuller_passes():
    assert ro.occupancy_takeaway(75.87, 177.68, 256, lang=PSEUDO) == "serving.s.occ.continuous(c=178, s=76, cap=256)"
    assert ro.occupancy_takeaway(250.2, 246.4, 256, lang=PSEUDO) == "serving.s.occ.static(s=250, c=246, cap=256)"
    assert ro.occupancy_takeaway(100.2, 99.8, 1024, lang=PSEUDO) == "serving.s.occ.same(c=100, cap=1,024)"


def test_kv_memory_names_the_scheduler_that_claims_more():
    assert ro.kv_takeaway(400_000, 399_990, 100_000, 380_000.0, 60_000.0, lang=PSEUDO) == (  # 99.9975% is not 100.0%
        "serving.s.kv.static(ps=99.9%, cap=400,000, pc=25.0%, ms=95.0%, mc=15.0%)")
    assert ro.kv_takeaway(8_000, 4_000, 8_000, 3_000.0, 7_200.0, lang=PSEUDO) == (
        "serving.s.kv.continuous(pc=100.0%, cap=8,000, ps=50.0%, mc=90.0%, ms=37.5%)")
    assert ro.kv_takeaway(8_000, 4_000, 4_000, 3_000.0, 2_000.0, lang=PSEUDO) == (
        "serving.s.kv.same(pc=50.0%, cap=8,000, ms=37.5%, mc=25.0%)")


def test_latency_names_the_lower_scheduler_and_by_how_much():
    assert ro.latency_takeaway((53.55, 110.52), (6.23, 14.94), lang=PSEUDO) == (
        "serving.s.lat.continuous(p50=serving.s.lat.lower_by(by=8.60×, q=p50, a=6.23 s, b=53.55 s), "
        "p99=serving.s.lat.lower_by(by=7.40×, q=p99, a=14.94 s, b=110.52 s))")
    assert ro.latency_takeaway((6.88, 13.59), (7.31, 13.54), lang=PSEUDO) == (
        "serving.s.lat.static(p50=serving.s.lat.lower_by(by=1.06×, q=p50, a=6.88 s, b=7.31 s), "
        "p99=serving.s.lat.higher_by(by=0.4%, q=p99, a=13.59 s, b=13.54 s))")
    assert ro.latency_takeaway((3.04, 3.10), (3.04, 3.05), lang=PSEUDO) == (
        "serving.s.lat.continuous(p50=serving.s.lat.same_at(q=p50, a=3.04 s), p99=serving.s.lat.lower_by(by=1.02×, "
        "q=p99, a=3.05 s, b=3.10 s))")
    assert ro.latency_takeaway((1_234.5, 2_000.0), (1_234.5, 2_000.0), lang=PSEUDO) == (
        "serving.s.lat.both(p50=1,234.50 s, p99=2,000.00 s)")


def test_sweep_says_where_throughput_stops_growing_and_who_leads():
    assert ro.sweep_takeaway((16, 32, 64), (1000.0, 2000.0, 2000.0), (3000.0, 6000.0, 9000.0), lang=PSEUDO) == (
        "serving.s.sweep(cont=serving.s.grow.keeps(b=64, v=9,000), static=serving.s.grow.stops(b=32, v=2,000), "
        "lead=serving.s.lead.continuous(lo=3.00, hi=4.50))")
    assert ro.sweep_takeaway((16, 32, 64), (3000.0, 6000.0, 9000.0), (1000.0, 2000.0, 1500.0), lang=PSEUDO) == (
        "serving.s.sweep(cont=serving.s.grow.peaks(b=32, v=2,000), static=serving.s.grow.keeps(b=64, v=9,000), "
        "lead=serving.s.lead.static(lo=3.00, hi=6.00))")
    assert ro.sweep_takeaway((16, 32, 64), (1000.0, 2000.0, 3000.0), (500.0, 2500.0, 3500.0), lang=PSEUDO) == (
        "serving.s.sweep(cont=serving.s.grow.keeps(b=64, v=3,500), static=serving.s.grow.keeps(b=64, v=3,000), "
        "lead=serving.s.lead.split(ahead=2, n=3, behind=1))")
    sweep = cp.BatchSweep((16, 32), (1000.0, 1000.0), (1000.0, 1000.0))
    assert cw.sweep_takeaway(sweep, lang=PSEUDO) == (
        "serving.s.sweep(cont=serving.s.grow.stops(b=16, v=1,000), static=serving.s.grow.stops(b=16, v=1,000), "
        "lead=serving.s.lead.equal)")


def test_speculation_in_a_batch_says_where_it_stops_paying():
    assert ro.spec_batch_takeaway(PAIR, 0.8, 4, (1, 128, 256), (2.305, 1.42, 0.953), lang=PSEUDO) == (
        f"serving.s.sb.upto(head=serving.s.sb.head(label={PAIR}, a=0.8, k=4), b0=128, s0=1.42, b1=256, s1=0.95)")
    assert ro.spec_batch_takeaway(PAIR, 0.95, 4, (1, 256), (3.1, 1.283), lang=PSEUDO) == (
        f"serving.s.sb.every(head=serving.s.sb.head(label={PAIR}, a=0.95, k=4), s0=3.10, b0=1, s1=1.28, b1=256)")
    assert ro.spec_batch_takeaway(PAIR, 0.3, 4, (1, 256), (0.977, 0.6), lang=PSEUDO) == (
        f"serving.s.sb.none(head=serving.s.sb.head(label={PAIR}, a=0.3, k=4), s=0.98, b=1)")
    assert ro.spec_batch_takeaway(PAIR, 0.8, 4, (1, 2), (1.004, 0.9), lang=PSEUDO) == (  # 1.00× does not pay
        f"serving.s.sb.none(head=serving.s.sb.head(label={PAIR}, a=0.8, k=4), s=1.00, b=1)")
    assert ro.spec_batch_takeaway(PAIR, 0.8, 4, (1, 2, 4), (0.9, 1.2, 0.95), lang=PSEUDO) == (
        f"serving.s.sb.some(head=serving.s.sb.head(label={PAIR}, a=0.8, k=4), m=1, n=3, s=1.20, b=2)")


def test_the_real_batch_sweep_title():
    points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 0.8, 4)
    assert sw.batch_sweep_takeaway(points, PAIR, 0.8, 4, lang=PSEUDO) == (
        f"serving.s.sb.upto(head=serving.s.sb.head(label={PAIR}, a=0.8, k=4), b0=128, s0=1.42, b1=256, s1=0.95)")


def test_speculative_curves_name_the_best_k_or_that_none_pays():
    assert ro.spec_curves_takeaway(0.8, 0.115, 4, 2.31, 5, 2.35, lang=PSEUDO) == (
        "serving.s.sc.best(head=serving.s.sc.head(a=0.8, c=0.115), best_k=5, best=2.35, "
        "chosen=serving.s.sc.chosen(k=4, s=2.31))")
    assert ro.spec_curves_takeaway(0.8, 0.115, 5, 2.35, 5, 2.35, lang=PSEUDO) == (
        "serving.s.sc.chosen_best(head=serving.s.sc.head(a=0.8, c=0.115), k=5, s=2.35)")
    assert ro.spec_curves_takeaway(0.8, 0.1, 12, 0.98, 6, 2.47, lang=PSEUDO) == (
        "serving.s.sc.best(head=serving.s.sc.head(a=0.8, c=0.100), best_k=6, best=2.47, "
        "chosen=serving.s.sc.chosen(k=12, s=0.98)serving.s.sc.slower)")
    assert sw.curves_takeaway(sps.run_speculative(sps.SpecSetup(alpha=0.8, k=4, c=0.1, mc_passes=1000)),
                              lang=PSEUDO) == (
        "serving.s.sc.best(head=serving.s.sc.head(a=0.8, c=0.100), best_k=6, best=2.47, "
        "chosen=serving.s.sc.chosen(k=4, s=2.40))")
    assert sw.curves_takeaway(sps.run_speculative(sps.SpecSetup(alpha=0.1, k=2, c=0.5, mc_passes=1000)),
                              lang=PSEUDO) == (
        "serving.s.sc.none(head=serving.s.sc.head(a=0.1, c=0.500), best_k=1, best=0.73)")


def test_monte_carlo_caption_counts_the_means_on_the_formula():
    assert ro.monte_carlo_sentence(0.8, 12, 12, lang=PSEUDO) == "serving.s.mc.all(a=0.8, n=12)"
    assert ro.monte_carlo_sentence(0.8, 11, 12, lang=PSEUDO) == "serving.s.mc.some(a=0.8, m=11, n=12)"
    few = sps.run_speculative(sps.SpecSetup(alpha=0.8, k=4, c=0.1, mc_passes=1000))  # seed 0: one mean off
    assert few.num_mc_within == 11 and "serving.s.mc.some(a=0.8, m=11, n=12)" in sw.curves_caption(
        few, measured=False, lang=PSEUDO)
    assert sw.curves_caption(few, measured=True, lang=PSEUDO) == (
        "serving.s.curves.diamondsserving.s.mc.some(a=0.8, m=11, n=12)serving.s.curves.star")


def test_claim_sentences_state_the_trends():
    assert ro.near_best_sentence(0.8, [4, 5, 6, 7, 8, 9], 6, lang=PSEUDO) == (
        "serving.s.near.flat(a=0.8, lo=4, hi=9, near=5%, k=6)")
    assert ro.near_best_sentence(0.8, [1], 1, lang=PSEUDO) == "serving.s.near.sharp(a=0.8, k=1, near=5%)"
    assert ro.batch_gain_sentence(0.8, 4, (1, 512), (2.305, 0.69), lang=PSEUDO) == (
        "serving.s.gain(a=0.8, k=4, how=serving.s.gain.fades_loss, span=serving.s.gain.span(s0=2.31, b0=1, s1=0.69, "
        "b1=512))")
    assert ro.batch_gain_sentence(0.8, 4, (1, 512), (2.305, 1.5), lang=PSEUDO) == (
        "serving.s.gain(a=0.8, k=4, how=serving.s.gain.fades, span=serving.s.gain.span(s0=2.31, b0=1, s1=1.50, "
        "b1=512))")
    assert ro.batch_gain_sentence(0.8, 4, (1, 512), (1.5, 2.0), lang=PSEUDO) == (
        "serving.s.gain(a=0.8, k=4, how=serving.s.gain.grows, span=serving.s.gain.span(s0=1.50, b0=1, s1=2.00, "
        "b1=512))")
    assert ro.batching_trend_sentence((16, 512), (3.0, 8.27), lang=PSEUDO) == (
        "serving.s.trend.grows(r0=3.00, b0=16, r1=8.27, b1=512)")
    assert ro.batching_trend_sentence((16, 512), (3.0, 2.71), lang=PSEUDO) == (
        "serving.s.trend.shrinks(r0=3.00, b0=16, r1=2.71, b1=512)")
    assert ro.batching_trend_sentence((16, 512), (3.0, 3.0), lang=PSEUDO) == "serving.s.trend.stays(r=3.00)"


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
    said = {}  # each page's takeaways in the keys language: which message, which numbers
    for name, lengths, alpha in (("base", "chat", 0.8), ("flipped", "fixed", 0.3)):
        cmp = cp.run_serving(cp.ServingSetup(LengthWorkloadConfig(length_dist=lengths, arrival_rate=20.0)))
        spec = sps.run_speculative(sps.SpecSetup(alpha=alpha))
        points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", alpha, 4)
        assert pages[name, "batching"] == [cw.gantt_takeaway(cmp, 40), cw.occupancy_takeaway(cmp), cw.kv_takeaway(cmp),
                                           cw.latency_takeaway(cmp)]
        assert pages[name, "spec"] == [sw.curves_takeaway(spec), sw.batch_sweep_takeaway(points, PAIR, alpha, 4)]
        assert all(pages[name, "batching"] + pages[name, "spec"])  # no chart without its takeaway
        said[name] = (cw.occupancy_takeaway(cmp, lang=PSEUDO), cw.latency_takeaway(cmp, lang=PSEUDO),
                      sw.batch_sweep_takeaway(points, PAIR, alpha, 4, lang=PSEUDO))
    assert said["base"][0].startswith("serving.s.occ.continuous(c=178, ")
    assert said["flipped"][0].startswith("serving.s.occ.static(s=250, ")
    assert said["base"][1].startswith("serving.s.lat.continuous(p50=serving.s.lat.lower_by(by=8.59×, q=p50, ")
    assert said["flipped"][1].startswith("serving.s.lat.static(")
    assert said["base"][2].startswith(f"serving.s.sb.upto(head=serving.s.sb.head(label={PAIR}, a=0.8, k=4), b0=128, ")
    assert said["flipped"][2].startswith("serving.s.sb.none(")


def test_sweep_title_follows_the_link():
    at = run_page("serving", {"live": "0", "sweep": "1", "requests": "200"})
    assert not at.exception, at.exception
    setup = cp.ServingSetup(LengthWorkloadConfig(num_requests=200, arrival_rate=20.0))
    sweep = cp.sweep_max_batch(setup)
    assert titles(at)[4] == cw.sweep_takeaway(sweep)
    assert cw.sweep_takeaway(sweep, lang=PSEUDO).startswith(
        "serving.s.sweep(cont=serving.s.grow.stops(b=256, v=8,854), ")
