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
    assert qr.position_takeaway(KIVI, NAIVE, "kl") == (
        "INT4 KIVI's KL averages 1.00e-03 nats per prediction over 4 positions, 20× below naive per-token's 2.00e-02")
    assert qr.position_takeaway(NAIVE, KIVI, "kl") == (
        "INT4 KIVI's KL averages 2.00e-02 nats per prediction over 4 positions, 20× above naive per-token's 1.00e-03")
    assert qr.position_takeaway(errors(kl=(0.0, 0.0)), errors("token", kl=(0.0, 0.0)), "kl") == (
        "INT4 KIVI and naive per-token both average a KL of 0.00e+00 nats per prediction over 2 positions")
    assert qr.position_takeaway(errors(kl=(0.0, 0.0)), errors("token", kl=(0.5, 0.5)), "kl") == (
        "INT4 KIVI's KL is exactly 0 over 2 positions (it reads every key and value in full precision); naive "
        "per-token's averages 5.00e-01 nats")
    assert qr.position_takeaway(KIVI, NAIVE, "agreement") == (
        "INT4 KIVI keeps full precision's top-1 next byte more often than naive per-token over 4 positions: "
        "100.00% vs 90.00%")
    assert qr.position_takeaway(NAIVE, KIVI, "agreement") == (
        "INT4 KIVI keeps full precision's top-1 next byte less often than naive per-token over 4 positions: "
        "90.00% vs 100.00%")
    assert qr.position_takeaway(KIVI, NAIVE, "delta_loss") == (
        "INT4 KIVI changes the loss by +0.01000 nats per byte, naive per-token by +0.10000 over 4 positions: "
        "KIVI's loss is lower")
    assert qr.position_takeaway(NAIVE, KIVI, "delta_loss") == (
        "INT4 KIVI changes the loss by +0.10000 nats per byte, naive per-token by +0.01000 over 4 positions: "
        "naive per-token's loss is lower")


def test_the_position_caption_says_where_kivi_is_exact_from_its_measured_kl():
    assert exact_prefix_sentence(KIVI, 128) == (
        "KIVI's KL is exactly 0 at the first 2 positions (R=128: only full-precision keys and values are read "
        "there), which is why its curve starts at zero.")
    assert exact_prefix_sentence(errors(kl=(0.0, 0.0)), 256) == (
        "KIVI's KL is exactly 0 at all 2 positions: with R=256, every key and value it reads is still in full "
        "precision.")
    assert exact_prefix_sentence(NAIVE, 128) == "KIVI's KL is above 0 from the first position."
    # on a log scale a 0 is not drawn: the curve begins where the exact positions end; another metric: no curve claim
    assert exact_prefix_sentence(KIVI, 128, curve="log") == (
        "KIVI's KL is exactly 0 at the first 2 positions (R=128: only full-precision keys and values are read "
        "there); a log scale has no 0, so its curve begins only where they end.")
    assert exact_prefix_sentence(KIVI, 128, curve=None) == (
        "KIVI's KL is exactly 0 at the first 2 positions (R=128: only full-precision keys and values are read there).")


def test_heatmap_takeaway_ranks_the_schemes_at_the_lowest_width():
    results = {("kivi", 2): errors("kivi", 2, kl=(1.0,), agreement=0.8), ("token", 2): errors("token", 2, kl=(3.0,),
                                                                                          agreement=0.5),
               ("fp8_e4m3", 8): errors("fp8_e4m3", 8, kl=(2.0,))}
    grid = metric_grid(results, "kl", ["kivi", "token", "fp8_e4m3"], (8, 4, 3, 2))
    assert qr.heatmap_takeaway(grid, "kl") == (
        "At 2 bits, KIVI (R=128) has the lowest KL, 1.00e+00 nats, 3.0× below per-token (naive)'s 3.00e+00 nats")
    flipped = {k: errors(k[0], 2, kl=(4.0 if k[0] == "kivi" else 0.5,)) for k in results if k[1] == 2}
    assert qr.heatmap_takeaway(metric_grid(flipped, "kl", ["kivi", "token"], (8, 4, 3, 2)), "kl") == (
        "At 2 bits, per-token (naive) has the lowest KL, 5.00e-01 nats, 8.0× below KIVI (R=128)'s 4.00e+00 nats")
    agree = metric_grid(results, "agreement", ["kivi", "token", "fp8_e4m3"], (8, 4, 3, 2))
    assert qr.heatmap_takeaway(agree, "agreement") == (
        "At 2 bits, KIVI (R=128) has the highest top-1 agreement, 80.00%, and per-token (naive) the lowest, 50.00%")
    same = metric_grid({k: errors(k[0], 2, kl=(1.0,)) for k in flipped}, "kl", ["kivi", "token"], (8, 4, 3, 2))
    assert qr.heatmap_takeaway(same, "kl") == "At 2 bits, every scheme measured has the same KL: 1.00e+00 nats"


def test_context_takeaway_follows_the_curve_both_ways():
    cfg = ModelConfig(n_layers=4, n_kv_heads=4, max_seq_len=1024)
    curves = bytes_curves(cfg, {k: make_scheme(k, bits=4, residual=128) for k in ("kivi", "token", "kivi_nores",
                                                                             "fp8_e4m3")})
    assert qr.context_takeaway(curves) == (
        "KIVI (R=128) falls from 2,048.0 B per token at 1 token to 728.0 at 1,024 tokens (35.5% of FP16's 2,048)")
    assert qr.context_takeaway(curves, "fp8_e4m3") == (
        "FP8 e4m3 stays at 1,024.0 B per token from 1 token to 1,024 tokens (50.0% of FP16's 2,048)")
    rising = {"fp16": ("full precision", [4, 8], [100.0, 100.0]), "x": ("scheme x", [4, 8], [10.0, 20.0])}
    assert qr.context_takeaway(rising, "x") == (
        "Scheme x rises from 10.0 B per token at 4 tokens to 20.0 at 8 tokens (20.0% of FP16's 100)")


def test_channel_takeaways_say_whether_k_or_v_stands_out():
    k = np.ones((6, 8))
    k[:, 3] = 5.0
    k[0, 3] = 0.5  # channel 3 holds the largest |K| at 5 of 6 tokens
    v = np.ones((6, 8))
    v[[0, 1], 5] = v[[2, 3], 6] = v[[4, 5], 7] = 2.0  # no channel holds the largest |V| at more than 2 of 6
    assert qr.heatmaps_takeaway(k, v, 0, 1) == (
        "Layer 0, KV head 1, 6 tokens: a token's largest |K| is in channel 3 for 83% of them, its largest |V| in "
        "channel 5 for only 33%")
    assert qr.heatmaps_takeaway(v, k, 2, 0) == (
        "Layer 2, KV head 0, 6 tokens: a token's largest |V| is in channel 3 for 83% of them, its largest |K| in "
        "channel 5 for only 33%")
    assert qr.bars_takeaway(k.mean(0), v.mean(0)) == (
        "K's largest channel (3) averages 4.2× the median channel, V's (5) 1.3×: K's stands out more")
    assert qr.bars_takeaway(v.mean(0), k.mean(0)) == (
        "K's largest channel (5) averages 1.3× the median channel, V's (3) 4.2×: V's stands out more")


def test_outlier_takeaway_and_caption_flip_with_the_errors():
    per_channel_wins = [OutlierCase(case="injected", axis="token", rel_error_other=0.5, rel_error_outlier=0.01, rel_error_scores=0.4),
                        OutlierCase(case="injected", axis="channel", rel_error_other=0.05, rel_error_outlier=0.02, rel_error_scores=0.03)]
    per_token_wins = [OutlierCase(case="injected", axis="token", rel_error_other=0.05, rel_error_outlier=0.01, rel_error_scores=0.4),
                      OutlierCase(case="injected", axis="channel", rel_error_other=0.5, rel_error_outlier=0.02, rel_error_scores=0.03)]
    assert qr.outlier_takeaway(per_channel_wins, 5, 8.0, 2) == (
        "Channel 5 raised 8× the mean |K|, INT2: the ordinary channels lose 5.0% (RMS) per-channel and 50.0% "
        "per-token, 10× more")
    assert qr.outlier_takeaway(per_token_wins, 5, 8.0, 2) == (
        "Channel 5 raised 8× the mean |K|, INT2: the ordinary channels lose 5.0% (RMS) per-token and 50.0% "
        "per-channel, 10× more")
    assert "share one scale with the outlier, so the ordinary channels lose 50% (RMS) vs 5%" in outlier_caption(
        per_channel_wins, 1, 0, 5, 8.0, 2, 32, 16)
    assert "share one scale with the outlier, yet the ordinary channels lose only 5% (RMS) vs 50%" in (
        outlier_caption(per_token_wins, 1, 0, 5, 8.0, 2, 32, 16))


def claims_table(res_kl: float, first_kl: float) -> pd.DataFrame:
    rows = [{"scheme": k, "bits": 4, "delta_loss": 0.0, "kl": v, "top1_agreement": 1.0, "kl_first_quarter": v,
             "kl_last_quarter": v} for k, v in (("token", 1e-2), ("token_res", res_kl), ("token_first", first_kl))]
    return pd.DataFrame(rows)


RECENT = "Recent tokens stored coarsely hurt more than old tokens stored coarsely"


def test_recent_tokens_claim_is_untestable_when_r_covers_the_window():
    # R=256 over 256-token windows: both caches keep every token in full precision, KL exactly 0 for both
    check = seed_claims(claims_table(0.0, 0.0), 4, residual=256, num_tokens=256)
    assert RECENT not in [c.statement for c in check.claims]  # no verdict, in particular not WRONG
    assert check.untestable_sentence() == (
        "Not testable at this setting: “Recent tokens stored coarsely hurt more”: R=256 covers all 256 tokens of "
        "each window, so both caches keep every token in full precision (KL 0.0e+00 and 0.0e+00); choose R below "
        "256 to test it.")
    same = seed_claims(claims_table(1e-3, 1e-3), 4, residual=64, num_tokens=256)
    assert RECENT not in [c.statement for c in same.claims] and "gave the same KL (1.0e-03)" in same.untestable[0]


def test_recent_tokens_claim_verdict_follows_the_numbers_below_the_window():
    right = next(c for c in seed_claims(claims_table(1e-3, 1e-1), 4, residual=64, num_tokens=256).claims
                 if c.statement == RECENT)
    assert right.verdict is Verdict.RIGHT and right.why == "Holds: KL 100× higher with the recent tokens quantized"
    wrong = next(c for c in seed_claims(claims_table(1e-1, 1e-3), 4, residual=64, num_tokens=256).claims
                 if c.statement == RECENT)
    assert wrong.verdict is Verdict.WRONG
    assert wrong.why == "Not on the tiny model: KL 100.0× higher with the old tokens quantized"
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
    assert R.timing_takeaway(timing(1024, 3.1, 1.0)) == (
        "FLASH ran 3.1× faster than eager at N = 1,024 on this CPU: 1 vs 3.1 ms per call (median); eager's peak "
        "memory, 4 MiB, was 4.0× FLASH's")
    assert R.timing_takeaway(timing(2048, 1.0, 1.5, flash_peak=8 << 20, device="cuda:0")) == (
        "Eager ran 1.5× faster than FLASH, the fastest other kernel, at N = 2,048 on this GPU: 1 vs 1.5 ms per call "
        "(median); FLASH's peak memory, 8 MiB, was 2.0× eager's")
    assert R.timing_takeaway(timing(512, 1.0, 1.01, flash_peak=4 << 20)) == (
        "Eager and FLASH, the fastest other kernel, took about as long at N = 512 on this CPU: 1 vs 1.01 ms per "
        "call (median); both peaked at about 4 MiB")


def test_sweep_takeaways_flip_with_the_measurements():
    fast = SweepResult((timing(128, 0.1, 0.05), timing(1024, 3.1, 1.0)), 5e11)
    slow = SweepResult((timing(128, 0.1, 0.05), timing(1024, 1.0, 1.5, flash_peak=8 << 20)), 5e12)
    assert R.sweep_time_takeaway(fast) == (
        "From N = 128 to 1,024 (8× longer), eager's time per call grew 31×, more than FLASH's 20× (median)")
    assert R.sweep_time_takeaway(slow) == (
        "From N = 128 to 1,024 (8× longer), eager's time per call grew 10×, less than FLASH's 30× (median)")
    assert R.sweep_memory_takeaway(fast) == "At N = 1,024, eager's peak memory was 4 MiB, 4.0× FLASH's 1 MiB"
    assert R.sweep_memory_takeaway(slow) == "At N = 1,024, FLASH's peak memory was 8 MiB, 2.0× eager's 4 MiB"
    assert R.sweep_speedup_takeaway(fast) == (
        "At N = 1,024 on this CPU, FLASH ran 3.1× faster than eager, the most of any kernel (median)")
    assert R.sweep_speedup_takeaway(slow) == (
        "At N = 1,024 on this CPU, every kernel ran slower than eager: the closest, FLASH, took 1.5× as long (median)")
    assert R.sweep_tflops_takeaway(fast, "median", "1,024³ matmul here") == (
        "At N = 1,024, FLASH reached the highest rate, 1 TFLOP/s (median): 2.0× the 0.5 TFLOP/s of one 1,024³ "
        "matmul here")
    assert R.sweep_tflops_takeaway(slow, "median", "1,024³ matmul here") == (
        "At N = 1,024, eager reached the highest rate, 1 TFLOP/s (median): 20% of the 5 TFLOP/s of one 1,024³ "
        "matmul here")
    assert R.sweep_caption(fast).startswith(
        "From N = 128 to 1,024, measured (median): eager's time grew as N^1.65, peak memory as N^0.00; ")
    assert R.sweep_intro([128, 256, 512]).startswith("The same B, H, d, mask and dtype as above, N doubling from 128 "
                                                     "to 512 — ")


def test_kernel_claims_say_slower_when_flash_is_slower():
    fast = SweepResult((timing(1024, 3.1, 1.0),), 5e11)
    slow = SweepResult((timing(1024, 1.0, 2.0, flash_peak=8 << 20),), 5e11)
    by = {c.claimed: c.computed for c in kernel_claims(fast)}
    assert "FLASH is 3.1× faster than eager (median)." in by["24× (A100), 510× (H100, FP8)"]
    by = {c.claimed: c.computed for c in kernel_claims(slow)}
    assert "FLASH is 2.0× slower than eager (median)." in by["24× (A100), 510× (H100, FP8)"]
    assert "FLASH's peak memory is 2.0× eager's." in by["O(N²) → O(N)"]


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
    assert R.stepper_takeaway(trace, 0, 1) == (
        f"Row 0, tile 1 of 3 (keys 0–3) sets the running max to {R.fmt_num(m1)}: nothing was seen before, so "
        "nothing is rescaled")
    assert R.stepper_takeaway(trace, 0, 2) == (
        f"Row 0, tile 2 of 3 (keys 4–7) raises the running max from {R.fmt_num(m1)} to {R.fmt_num(m2)}, so l and "
        f"acc shrink by α = {R.fmt_num(float(s2.rescale[0]))}")
    assert float(s2.rescale[0]) == pytest.approx(np.exp(m1 - m2), rel=FLOAT32_SOFTMAX_BOUND)
    assert R.stepper_takeaway(trace, 0, 3) == (
        f"Row 0, tile 3 of 3 (keys 8–9) leaves the running max at {R.fmt_num(m2)} (its own max is "
        f"{R.fmt_num(tile3)}), so nothing is rescaled (α = 1)")
    masked = run_softmax_demo(SoftmaxDemo(num_keys=10, tile=4, num_queries=1, causal=False, masked_prefix=4,
                                          score_scale=1.0, seed=0, dtype="float32"))
    assert R.stepper_takeaway(masked, 0, 1) == (
        "Row 0, tile 1 of 3 (keys 0–3) is fully masked: the running max stays −∞ and nothing is added")
    diff = float(np.max(np.abs(trace.output[0].astype(np.float64) - trace.reference[0].astype(np.float64))))
    assert diff <= FLOAT32_SOFTMAX_BOUND
    end = ("the final acc / l equals the softmax over all keys exactly" if diff == 0
           else f"the final acc / l is within {diff:.1e} of the softmax over all keys")
    assert R.trace_table_takeaway(trace, 0) == (
        f"Row 0: 1 of the 2 tiles after the first raised the running max, each rescaling l and acc; {end}")
    one = run_softmax_demo(SoftmaxDemo(num_keys=4, tile=4, num_queries=1, causal=False, masked_prefix=0,
                                       score_scale=1.0, seed=0, dtype="float64"))
    assert R.trace_table_takeaway(one, 0).startswith("Row 0: one tile holds every key, so nothing is rescaled; ")


def test_traffic_takeaway_names_the_kernel_that_moves_more():
    standard_more = R.shape_traffic(shape(1024), 128)
    assert R.traffic_takeaway(standard_more, shape(1024).label()) == (
        "B=1, H=4, 1,024 queries × 1,024 keys, d=32, causal, float32: standard attention moves 66 MiB to and from "
        "main memory, 12× the tiled kernel's 5.516 MiB")
    tiled_more = type(standard_more)({"read_q_k": 100}, {"read_q": 50, "read_k": 250})
    assert R.traffic_takeaway(tiled_more, "x") == (
        "x: the tiled kernel moves 300 B to and from main memory, 3.0× standard attention's 100 B (it re-reads K and "
        "V for every Q tile)")


def test_parity_caption_reports_this_inputs_numbers():
    trace = run_softmax_demo(DEMO)
    d, te, pe = trace.max_abs_diff, trace.tiled_error, trace.plain_error
    assert max(d, te, pe) <= FLOAT32_SOFTMAX_BOUND  # exact up to float32 rounding, whatever the machine
    cap = R.parity_caption(trace, DEMO)
    assert cap.startswith("Exact, not approximate — but not bit-for-bit. Both compute Σ e^(s−m)·v / Σ e^(s−m);")
    if d == 0:
        assert "Here, in float32, the two came out bit-for-bit identical" in cap
        assert cap.endswith("The seed's 'bitwise identical' holds for this input only; its 'exact' is right.")
    else:
        assert f"Here, in float32, they differ by at most {d:.1e}." in cap
        assert cap.endswith("The seed's 'bitwise identical' overstates it; its 'exact' is right.")
    if te < pe:
        assert f"The tiled result is nearer the float64 truth ({te:.1e} vs {pe:.1e} for the plain one)." in cap
    elif pe < te:
        assert f"The plain result is nearer the float64 truth ({pe:.1e} vs {te:.1e} for the tiled one)." in cap
    else:
        assert f"Both are {te:.1e} from the float64 truth." in cap
    # The sentences for the other outcomes, pinned on a trace made to have them (no machine computes these):
    from dataclasses import replace
    zero = np.zeros_like(trace.exact)
    same = replace(trace, output=zero + 2e-8, reference=zero + 2e-8, exact=zero)
    assert "the two came out bit-for-bit identical" in R.parity_caption(same, DEMO)
    assert "Both are 2.0e-08 from the float64 truth." in R.parity_caption(same, DEMO)
    plain = replace(trace, output=zero + 3e-8, reference=zero + 1e-8, exact=zero)
    assert "The plain result is nearer the float64 truth (1.0e-08 vs 3.0e-08 for the tiled one)." in (
        R.parity_caption(plain, DEMO))


def test_time_hint_comes_from_the_budget():
    assert R.time_hint(4, 0.25) == (
        "Press **Time these kernels** to run them live: 4 kernel(s), each timed for about 0.25 s after one profiled "
        "call, so about 1.0 s plus warm-up when the machine is idle, more when it is busy.")


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
    steady = qr.standard_error_caption(setup, kivi([0.010, 0.012]))
    assert steady.startswith("± is the standard error over the 4 windows. KIVI's Δ loss here is +0.01100 ± 0.00100 "
                             "nats/byte: the ± is 9% of the change.")
    noisy = qr.standard_error_caption(setup, kivi([-0.010, 0.012]))
    assert ("KIVI's Δ loss here is +0.00100 ± 0.01100 nats/byte: the ± is as large as the change itself, so its sign "
            "is not settled") in noisy
