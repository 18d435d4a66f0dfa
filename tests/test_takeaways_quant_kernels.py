"""The KV quantization and Attention kernels charts' titles state their takeaway, worded from the result each
chart draws: every sentence is checked both ways round, from hand-made results (no model run, no timing)."""

import json

import numpy as np
import pandas as pd
import pytest

from sim.attention.measure import KernelTiming, Stats
from sim.attention.online_softmax import SoftmaxDemo, run_softmax_demo
from sim.attention.shapes import AttentionShape
from sim.attention.timing import SweepResult, TimingResult
from sim.claims import Verdict
from sim.model.quant_cache import make_scheme
from sim.model.quant_channels import OutlierCase
from sim.model.quant_errors import PositionErrors
from sim.model.transformer import ModelConfig
from sim.words import attention as R
from sim.words import quant as qr
from sim.words.catalog import PSEUDO
from sim.words.kernel_claims import kernel_claims
from sim.words.quant import bytes_curves, exact_prefix_sentence, metric_grid, outlier_caption
from sim.words.quant_claims import seed_claims
from tests.conftest import run_page

# --- KV quantization ------------------------------------------------------------------------------------


def errors(kind="kivi", bits=4, kl=(0.0, 0.0, 1e-3, 3e-3), agreement=1.0, loss_q=0.51) -> PositionErrors:
    s = make_scheme(kind, bits=bits, residual=128)
    kl = np.array(kl)
    return PositionErrors(key=s.key, bits=s.bits, delta_loss=np.full(len(kl), loss_q - 0.5), agreement=np.full(len(kl), agreement),
                          kl=kl, loss_ref=0.5, loss_q=loss_q, bytes_per_token=600.0, window_delta_loss=np.array([loss_q - 0.5]), residual=s.residual)


KIVI = errors()
NAIVE = errors("token", kl=(0.01, 0.01, 0.02, 0.04), agreement=0.9, loss_q=0.6)


def test_position_takeaway_names_the_better_scheme_on_each_metric():
    assert qr.position_takeaway(KIVI, NAIVE, "kl", lang=PSEUDO) == (
        "quant.t.pos.kl_below(bits=4, k=1.00e-03, T=4, x=20×, n=2.00e-02)")
    assert qr.position_takeaway(NAIVE, KIVI, "kl", lang=PSEUDO) == (
        "quant.t.pos.kl_above(bits=4, k=2.00e-02, T=4, x=20×, n=1.00e-03)")
    assert qr.position_takeaway(errors(kl=(0.0, 0.0)), errors("token", kl=(0.0, 0.0)), "kl", lang=PSEUDO) == (
        "quant.t.pos.kl_same(bits=4, k=0.00e+00, T=2)")
    assert qr.position_takeaway(errors(kl=(0.0, 0.0)), errors("token", kl=(0.5, 0.5)), "kl", lang=PSEUDO) == (
        "quant.t.pos.kl_kivi_zero(bits=4, T=2, n=5.00e-01)")
    assert qr.position_takeaway(KIVI, NAIVE, "agreement", lang=PSEUDO) == (
        "quant.t.pos.agree_more(bits=4, T=4, k=100.00%, n=90.00%)")
    assert qr.position_takeaway(NAIVE, KIVI, "agreement", lang=PSEUDO) == (
        "quant.t.pos.agree_less(bits=4, T=4, k=90.00%, n=100.00%)")
    assert qr.position_takeaway(KIVI, NAIVE, "delta_loss", lang=PSEUDO) == (
        "quant.t.pos.dl_kivi(bits=4, k=+0.01000, n=+0.10000, T=4)")
    assert qr.position_takeaway(NAIVE, KIVI, "delta_loss", lang=PSEUDO) == (
        "quant.t.pos.dl_naive(bits=4, k=+0.10000, n=+0.01000, T=4)")


def test_the_position_caption_says_where_kivi_is_exact_from_its_measured_kl():
    assert exact_prefix_sentence(KIVI, 128, lang=PSEUDO) == "quant.s.exact_first(n=2, R=128)"
    assert exact_prefix_sentence(errors(kl=(0.0, 0.0)), 256, lang=PSEUDO) == "quant.s.exact_all(T=2, R=256)"
    assert exact_prefix_sentence(NAIVE, 128, lang=PSEUDO) == "quant.s.exact_none"
    # on a log scale a 0 is not drawn: the curve begins where the exact positions end; another metric: no curve claim
    assert exact_prefix_sentence(KIVI, 128, curve="log", lang=PSEUDO) == "quant.s.exact_first_log(n=2, R=128)"
    assert exact_prefix_sentence(KIVI, 128, curve=None, lang=PSEUDO) == "quant.s.exact_first_plain(n=2, R=128)"


def test_heatmap_takeaway_ranks_the_schemes_at_the_lowest_width():
    results = {("kivi", 2): errors("kivi", 2, kl=(1.0,), agreement=0.8), ("token", 2): errors("token", 2, kl=(3.0,),
                                                                                          agreement=0.5),
               ("fp8_e4m3", 8): errors("fp8_e4m3", 8, kl=(2.0,))}
    grid = metric_grid(results, "kl", ["kivi", "token", "fp8_e4m3"], (8, 4, 3, 2))
    assert qr.heatmap_takeaway(grid, "kl", lang=PSEUDO) == (
        "quant.t.grid.kl(width=2 bits, best=KIVI (R=128), b=quant.s.kl_value(x=1.00e+00), x=3.0×, worst=per-token "
        "(naive), w=quant.s.kl_value(x=3.00e+00))")
    flipped = {k: errors(k[0], 2, kl=(4.0 if k[0] == "kivi" else 0.5,)) for k in results if k[1] == 2}
    assert qr.heatmap_takeaway(metric_grid(flipped, "kl", ["kivi", "token"], (8, 4, 3, 2)), "kl", lang=PSEUDO) == (
        "quant.t.grid.kl(width=2 bits, best=per-token (naive), b=quant.s.kl_value(x=5.00e-01), x=8.0×, worst=KIVI "
        "(R=128), w=quant.s.kl_value(x=4.00e+00))")
    agree = metric_grid(results, "agreement", ["kivi", "token", "fp8_e4m3"], (8, 4, 3, 2))
    assert qr.heatmap_takeaway(agree, "agreement", lang=PSEUDO) == (
        "quant.t.grid.higher(width=2 bits, best=KIVI (R=128), name=quant.metric.agreement, b=80.00%, worst=per-token "
        "(naive), w=50.00%)")
    same = metric_grid({k: errors(k[0], 2, kl=(1.0,)) for k in flipped}, "kl", ["kivi", "token"], (8, 4, 3, 2))
    assert qr.heatmap_takeaway(same, "kl", lang=PSEUDO) == (
        "quant.t.grid.same(width=2 bits, name=quant.metric.kl, b=quant.s.kl_value(x=1.00e+00))")


def test_context_takeaway_follows_the_curve_both_ways():
    cfg = ModelConfig(n_layers=4, n_kv_heads=4, max_seq_len=1024)
    curves = bytes_curves(cfg, {k: make_scheme(k, bits=4, residual=128) for k in ("kivi", "token", "kivi_nores",
                                                                             "fp8_e4m3")})
    assert qr.context_takeaway(curves, lang=PSEUDO) == (
        "quant.t.ctx.falls(label=KIVI (R=128), a=2,048.0, first=quant.s.token_one(n=1), b=728.0, last=1,024, "
        "share=35.5%, fp16=2,048)")
    assert qr.context_takeaway(curves, "fp8_e4m3", lang=PSEUDO) == (
        "quant.t.ctx.stays(label=FP8 e4m3, a=1,024.0, first=quant.s.token_one(n=1), last=1,024, share=50.0%, "
        "fp16=2,048)")
    rising = {"fp16": ("full precision", [4, 8], [100.0, 100.0]), "x": ("scheme x", [4, 8], [10.0, 20.0])}
    assert qr.context_takeaway(rising, "x", lang=PSEUDO) == (
        "quant.t.ctx.rises(label=Scheme x, a=10.0, first=quant.s.tokens(n=4), b=20.0, last=8, share=20.0%, fp16=100)")


def test_channel_takeaways_say_whether_k_or_v_stands_out():
    k = np.ones((6, 8))
    k[:, 3] = 5.0
    k[0, 3] = 0.5  # channel 3 holds the largest |K| at 5 of 6 tokens
    v = np.ones((6, 8))
    v[[0, 1], 5] = v[[2, 3], 6] = v[[4, 5], 7] = 2.0  # no channel holds the largest |V| at more than 2 of 6
    assert qr.heatmaps_takeaway(k, v, 0, 1, lang=PSEUDO) == (
        "quant.t.maps.k(layer=0, head=1, T=6, ck=3, sk=83%, cv=5, sv=33%)")
    assert qr.heatmaps_takeaway(v, k, 2, 0, lang=PSEUDO) == (
        "quant.t.maps.v(layer=2, head=0, T=6, cv=3, sv=83%, ck=5, sk=33%)")
    assert qr.bars_takeaway(k.mean(0), v.mean(0), lang=PSEUDO) == "quant.t.bars.k(ck=3, rk=4.2, cv=5, rv=1.3)"
    assert qr.bars_takeaway(v.mean(0), k.mean(0), lang=PSEUDO) == "quant.t.bars.v(ck=5, rk=1.3, cv=3, rv=4.2)"


def test_outlier_takeaway_and_caption_flip_with_the_errors():
    per_channel_wins = [OutlierCase(case="injected", axis="token", rel_error_other=0.5, rel_error_outlier=0.01, rel_error_scores=0.4),
                        OutlierCase(case="injected", axis="channel", rel_error_other=0.05, rel_error_outlier=0.02, rel_error_scores=0.03)]
    per_token_wins = [OutlierCase(case="injected", axis="token", rel_error_other=0.05, rel_error_outlier=0.01, rel_error_scores=0.4),
                      OutlierCase(case="injected", axis="channel", rel_error_other=0.5, rel_error_outlier=0.02, rel_error_scores=0.03)]
    assert qr.outlier_takeaway(per_channel_wins, 5, 8.0, 2, lang=PSEUDO) == (
        "quant.t.outlier.channel(ch=5, factor=8, bits=2, c=5.0%, t=50.0%, tail=quant.t.outlier.more(x=10×))")
    assert qr.outlier_takeaway(per_token_wins, 5, 8.0, 2, lang=PSEUDO) == (
        "quant.t.outlier.token(ch=5, factor=8, bits=2, t=5.0%, c=50.0%, tail=quant.t.outlier.more(x=10×))")
    assert outlier_caption(per_channel_wins, 1, 0, 5, 8.0, 2, 32, 16, lang=PSEUDO) == (
        "quant.s.outlier_caption(layer=1, head=0, ch=5, factor=8, bits=2, g=16, link=quant.s.outlier_link_more, "
        "t=50%, c=5%, G=32, st=40%, sc=3%)")
    assert outlier_caption(per_token_wins, 1, 0, 5, 8.0, 2, 32, 16, lang=PSEUDO) == (
        "quant.s.outlier_caption(layer=1, head=0, ch=5, factor=8, bits=2, g=16, link=quant.s.outlier_link_less, "
        "t=5%, c=50%, G=32, st=40%, sc=3%)")


def claims_table(res_kl: float, first_kl: float) -> pd.DataFrame:
    rows = [{"scheme": k, "bits": 4, "delta_loss": 0.0, "kl": v, "top1_agreement": 1.0, "kl_first_quarter": v,
             "kl_last_quarter": v} for k, v in (("token", 1e-2), ("token_res", res_kl), ("token_first", first_kl))]
    return pd.DataFrame(rows)


RECENT = "Recent tokens stored coarsely hurt more than old tokens stored coarsely"


def test_recent_tokens_claim_is_untestable_when_r_covers_the_window():
    # R=256 over 256-token windows: both caches keep every token in full precision, KL exactly 0 for both
    check = seed_claims(claims_table(0.0, 0.0), 4, residual=256, num_tokens=256, lang=PSEUDO)
    assert RECENT not in [c.statement for c in check.claims]  # no verdict, in particular not WRONG
    assert check.untestable_sentence() == (
        "quant.claim.untestable(what=quant.claim.recent.covers(what=quant.claim.recent.short, R=256, n=256, "
        "kr=0.0e+00, kf=0.0e+00))")
    same = seed_claims(claims_table(1e-3, 1e-3), 4, residual=64, num_tokens=256, lang=PSEUDO)
    assert RECENT not in [c.statement for c in same.claims] and same.untestable == (
        "quant.claim.recent.same(what=quant.claim.recent.short, kl=1.0e-03)",)


def test_recent_tokens_claim_verdict_follows_the_numbers_below_the_window():
    right = next(c for c in seed_claims(claims_table(1e-3, 1e-1), 4, residual=64, num_tokens=256, lang=PSEUDO).claims
                 if c.statement == RECENT)
    assert right.verdict is Verdict.RIGHT and right.why == "quant.claim.recent.why.holds(x=100)"
    wrong = next(c for c in seed_claims(claims_table(1e-1, 1e-3), 4, residual=64, num_tokens=256, lang=PSEUDO).claims
                 if c.statement == RECENT)
    assert wrong.verdict is Verdict.WRONG
    assert wrong.why == "quant.claim.recent.why.not(x=100.0)"
    assert seed_claims(claims_table(1e-3, 1e-1), 4).untestable == ()


# --- Attention kernels ----------------------------------------------------------------------------------


def shape(n: int = 1024, kind: str = "prefill") -> AttentionShape:
    return AttentionShape(batch=1, heads=4, seq_len=n, head_dim=32, causal=True, kind=kind, dtype="float32")


def timing(n: int, eager_ms: float, flash_ms: float, eager_peak: int = 4 << 20, flash_peak: int = 1 << 20,
           device: str = "cpu") -> TimingResult:
    """A made-up timing: one block per kernel, so every statistic is that block."""
    def row(impl, ms, peak):
        return KernelTiming(impl, "ok", "", Stats((ms / 1e3,)), 10**9, peak, 0.0)

    rows = (row("eager", eager_ms, eager_peak), row("math", 2 * eager_ms, eager_peak), row("flash", flash_ms, flash_peak))
    return TimingResult(shape(n), device, 2, rows, "peak bytes")


def test_timing_takeaway_names_the_faster_kernel_as_measured():
    assert R.timing_takeaway(timing(1024, 3.1, 1.0), lang=PSEUDO) == (
        "kernels.s.timing.peak_eager(said=kernels.s.faster.faster(a=FLASH, x=3.1×, b=kernels.eager, "
        "where=kernels.s.where(n=1,024, device=kernels.device.cpu), times=kernels.s.times(a=1, b=3.1, "
        "stat=kernels.stat.median)), peak=4 MiB, x=4.0×, name=FLASH)")
    assert R.timing_takeaway(timing(2048, 1.0, 1.5, flash_peak=8 << 20, device="cuda:0"), lang=PSEUDO) == (
        "kernels.s.timing.peak_other(said=kernels.s.faster.faster(a=kernels.eager_cap, x=1.5×, "
        "b=kernels.s.fastest_other(name=FLASH), where=kernels.s.where(n=2,048, device=kernels.device.cuda), "
        "times=kernels.s.times(a=1, b=1.5, stat=kernels.stat.median)), name=FLASH, peak=8 MiB, x=2.0×)")
    assert R.timing_takeaway(timing(512, 1.0, 1.01, flash_peak=4 << 20), lang=PSEUDO) == (
        "kernels.s.timing.peak_same(said=kernels.s.faster.same(a=kernels.eager_cap, "
        "b=kernels.s.fastest_other(name=FLASH), where=kernels.s.where(n=512, device=kernels.device.cpu), "
        "times=kernels.s.times(a=1, b=1.01, stat=kernels.stat.median)), peak=4 MiB)")


def test_sweep_takeaways_flip_with_the_measurements():
    fast = SweepResult((timing(128, 0.1, 0.05), timing(1024, 3.1, 1.0)), 5e11)
    slow = SweepResult((timing(128, 0.1, 0.05), timing(1024, 1.0, 1.5, flash_peak=8 << 20)), 5e12)
    assert R.sweep_time_takeaway(fast, lang=PSEUDO) == (
        "kernels.s.sweep_time.more(lo=128, hi=1,024, longer=8, e=31×, name=FLASH, o=20×, stat=kernels.stat.median)")
    assert R.sweep_time_takeaway(slow, lang=PSEUDO) == (
        "kernels.s.sweep_time.less(lo=128, hi=1,024, longer=8, e=10×, name=FLASH, o=30×, stat=kernels.stat.median)")
    assert R.sweep_memory_takeaway(fast, lang=PSEUDO) == (
        "kernels.s.sweep_mem.eager(n=1,024, e=4 MiB, x=4.0×, name=FLASH, o=1 MiB)")
    assert R.sweep_memory_takeaway(slow, lang=PSEUDO) == (
        "kernels.s.sweep_mem.other(n=1,024, name=FLASH, o=8 MiB, x=2.0×, e=4 MiB)")
    assert R.sweep_speedup_takeaway(fast, lang=PSEUDO) == (
        "kernels.s.speedup.faster(n=1,024, where=kernels.device.cpu, name=FLASH, x=3.1×, stat=kernels.stat.median)")
    assert R.sweep_speedup_takeaway(slow, lang=PSEUDO) == (
        "kernels.s.speedup.slower(n=1,024, where=kernels.device.cpu, name=FLASH, x=1.5×, stat=kernels.stat.median)")
    assert R.sweep_tflops_takeaway(fast, "median", "1,024³ matmul here", lang=PSEUDO) == (
        "kernels.s.tflops.above(said=kernels.s.tflops.said(n=1,024, name=FLASH, t=1, stat=kernels.stat.median), "
        "x=2.0×, c=0.5, label=1,024³ matmul here)")
    assert R.sweep_tflops_takeaway(slow, "median", "1,024³ matmul here", lang=PSEUDO) == (
        "kernels.s.tflops.below(said=kernels.s.tflops.said(n=1,024, name=eager, t=1, stat=kernels.stat.median), "
        "share=20%, c=5, label=1,024³ matmul here)")
    assert R.sweep_caption(fast, lang=PSEUDO) == (
        "kernels.s.caption(lo=128, hi=1,024, stat=kernels.stat.median, growth=kernels.s.caption.part(name=eager, "
        "k=1.65, mem=kernels.s.caption.mem(k=0.00))clause.sepkernels.s.caption.part(name=MATH, k=1.65, "
        "mem=kernels.s.caption.mem(k=0.00))clause.sepkernels.s.caption.part(name=FLASH, k=1.44, "
        "mem=kernels.s.caption.mem(k=0.00)), device=kernels.device.cpu)")
    assert R.sweep_intro([128, 256, 512], lang=PSEUDO) == (
        "kernels.s.intro(start=kernels.s.intro.doubling(lo=128, hi=512))")


def test_kernel_claims_say_slower_when_flash_is_slower():
    fast = SweepResult((timing(1024, 3.1, 1.0),), 5e11)
    slow = SweepResult((timing(1024, 1.0, 2.0, flash_peak=8 << 20),), 5e11)
    by = {c.claimed: c.computed for c in kernel_claims(fast, lang=PSEUDO)}
    assert "speed=kernels.c.faster(x=3.1), stat=kernels.stat.median)" in by["kernels.c.speedup.claimed"]
    by = {c.claimed: c.computed for c in kernel_claims(slow, lang=PSEUDO)}
    assert "speed=kernels.c.slower(x=2.0), stat=kernels.stat.median)" in by["kernels.c.speedup.claimed"]
    assert "kernels.c.measured_flash(n=1,024, device=cpu, x=2.0)" in by["kernels.c.memory.claimed"]


DEMO = SoftmaxDemo(num_keys=10, tile=4, num_queries=1, causal=False, masked_prefix=0, score_scale=1.0, seed=0,
                   dtype="float32")


# float32 rounding of ten exp/sum terms: each |error| is a few ulp of values below 1 (float32's ulp near 1 is
# 1.2e-7). Any machine's BLAS and SIMD kernels land within this bound; the digits inside it are theirs, so the
# expected sentences below take them from the trace the test ran, never from a literal.
FLOAT32_SOFTMAX_BOUND = 1e-6


def test_stepper_takeaways_say_what_each_tile_did():
    trace = run_softmax_demo(DEMO)
    s1, s2, s3 = trace.steps
    m1, m2, tile3 = float(s1.m_new[0]), float(s2.m_new[0]), float(s3.tile_max[0])
    # The scores are random draws far apart compared with rounding: tile 2 raises the max, tile 3 does not.
    assert m2 - m1 > 0.1 and m2 - tile3 > 0.01 and float(s3.m_new[0]) == m2
    assert R.stepper_takeaway(trace, 0, 1, lang=PSEUDO) == (
        f"kernels.s.step.first(head=kernels.s.step.head(row=0, step=1, n=3, a=0, b=3), new={R.fmt_num(m1)})")
    assert R.stepper_takeaway(trace, 0, 2, lang=PSEUDO) == (
        f"kernels.s.step.raises(head=kernels.s.step.head(row=0, step=2, n=3, a=4, b=7), old={R.fmt_num(m1)}, "
        f"new={R.fmt_num(m2)}, alpha={R.fmt_num(float(s2.rescale[0]))})")
    assert float(s2.rescale[0]) == pytest.approx(np.exp(m1 - m2), rel=FLOAT32_SOFTMAX_BOUND)
    assert R.stepper_takeaway(trace, 0, 3, lang=PSEUDO) == (
        f"kernels.s.step.leaves(head=kernels.s.step.head(row=0, step=3, n=3, a=8, b=9), new={R.fmt_num(m2)}, "
        f"tmax={R.fmt_num(tile3)})")
    masked = run_softmax_demo(SoftmaxDemo(num_keys=10, tile=4, num_queries=1, causal=False, masked_prefix=4,
                                          score_scale=1.0, seed=0, dtype="float32"))
    assert R.stepper_takeaway(masked, 0, 1, lang=PSEUDO) == (
        "kernels.s.step.masked(head=kernels.s.step.head(row=0, step=1, n=3, a=0, b=3), old=−∞)")
    diff = float(np.max(np.abs(trace.output[0].astype(np.float64) - trace.reference[0].astype(np.float64))))
    assert diff <= FLOAT32_SOFTMAX_BOUND
    end = "kernels.s.table.exact" if diff == 0 else f"kernels.s.table.within(diff={diff:.1e})"
    assert R.trace_table_takeaway(trace, 0, lang=PSEUDO) == (
        f"kernels.s.table.raised(row=0, raised=1, later=2, first=kernels.s.table.first, end={end})")
    one = run_softmax_demo(SoftmaxDemo(num_keys=4, tile=4, num_queries=1, causal=False, masked_prefix=0,
                                       score_scale=1.0, seed=0, dtype="float64"))
    assert R.trace_table_takeaway(one, 0, lang=PSEUDO).startswith("kernels.s.table.one_tile(row=0, end=")


def test_traffic_takeaway_names_the_kernel_that_moves_more():
    standard_more = R.shape_traffic(shape(1024), 128)
    assert R.traffic_takeaway(standard_more, shape(1024).label(), lang=PSEUDO) == (
        "kernels.s.traffic.standard_more(label=B=1, H=4, 1,024 queries × 1,024 keys, d=32, causal, float32, s=66 "
        "MiB, x=12×, t=5.516 MiB)")
    tiled_more = type(standard_more)({"read_q_k": 100}, {"read_q": 50, "read_k": 250})
    assert R.traffic_takeaway(tiled_more, "x", lang=PSEUDO) == (
        "kernels.s.traffic.tiled_more(label=x, t=300 B, x=3.0×, s=100 B)")


def test_parity_caption_reports_this_inputs_numbers():
    trace = run_softmax_demo(DEMO)
    d, te, pe = trace.max_abs_diff, trace.tiled_error, trace.plain_error
    assert max(d, te, pe) <= FLOAT32_SOFTMAX_BOUND  # exact up to float32 rounding, whatever the machine
    cap = R.parity_caption(trace, DEMO, lang=PSEUDO)
    assert cap.startswith("kernels.s.parity(why=kernels.s.parity.why, here=")
    if d == 0:
        assert "here=kernels.s.parity.identical(dtype=float32)" in cap
        assert cap.endswith("verdict=kernels.s.parity.verdict_identical)")
    else:
        assert f"here=kernels.s.parity.differ(dtype=float32, d={d:.1e})" in cap
        assert cap.endswith("verdict=kernels.s.parity.verdict_differ)")
    if te < pe:
        assert f"near=kernels.s.parity.tiled_nearer(te={te:.1e}, pe={pe:.1e})" in cap
    elif pe < te:
        assert f"near=kernels.s.parity.plain_nearer(pe={pe:.1e}, te={te:.1e})" in cap
    else:
        assert f"near=kernels.s.parity.both(te={te:.1e})" in cap
    # The sentences for the other outcomes, pinned on a trace made to have them (no machine computes these):
    from dataclasses import replace
    zero = np.zeros_like(trace.exact)
    same = replace(trace, output=zero + 2e-8, reference=zero + 2e-8, exact=zero)
    assert "here=kernels.s.parity.identical(dtype=float32)" in R.parity_caption(same, DEMO, lang=PSEUDO)
    assert "near=kernels.s.parity.both(te=2.0e-08)" in R.parity_caption(same, DEMO, lang=PSEUDO)
    plain = replace(trace, output=zero + 3e-8, reference=zero + 1e-8, exact=zero)
    assert R.parity_caption(plain, DEMO, lang=PSEUDO) == (
        "kernels.s.parity(why=kernels.s.parity.why, here=kernels.s.parity.differ(dtype=float32, d=2.0e-08), "
        "near=kernels.s.parity.plain_nearer(pe=1.0e-08, te=3.0e-08), verdict=kernels.s.parity.verdict_differ)")


def test_time_hint_comes_from_the_budget():
    assert R.time_hint(4, 0.25, lang=PSEUDO) == "kernels.s.time_hint(n=4, budget=0.25, total=1.0)"


# --- a chart title follows the link ---------------------------------------------------------------------


def chart_titles(at) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_traffic_and_stepper_titles_follow_the_url():
    for n, step in ((512, 1), (2048, 2)):
        at = run_page("attention_kernels", {"n": str(n), "sm_step": str(step)})
        assert not at.exception
        s = shape(n)
        assert R.traffic_takeaway(R.shape_traffic(s, 128), s.label()) in chart_titles(at)
        at = run_page("attention_kernels", {"n": str(n), "sm_step": str(step), "tab": "stepper"})  # its own tab
        assert not at.exception
        assert R.stepper_takeaway(run_softmax_demo(DEMO), 0, step) in chart_titles(at)


def test_standard_error_caption_reports_how_noisy_kivis_loss_change_was():
    from sim.model.quant_setup import QuantSetup

    def kivi(windows):
        e = errors(loss_q=0.5 + float(np.mean(windows)))
        return PositionErrors(key=e.key, bits=e.bits, delta_loss=e.delta_loss, agreement=e.agreement, kl=e.kl, loss_ref=e.loss_ref, loss_q=e.loss_q,
                              bytes_per_token=e.bytes_per_token, window_delta_loss=np.array(windows))

    setup = QuantSetup()
    steady = qr.standard_error_caption(setup, kivi([0.010, 0.012]), lang=PSEUDO)
    assert steady == "quant.s.se_share(w=4, mean=+0.01100, se=0.00100, share=9%, why=quant.s.se_why)"
    noisy = qr.standard_error_caption(setup, kivi([-0.010, 0.012]), lang=PSEUDO)
    assert noisy == "quant.s.se_unsettled(w=4, mean=+0.00100, se=0.01100, why=quant.s.se_why)"
