"""sim/attention readouts, sweep results and seed claims: built from hand-made results, no torch, no timing."""

import pytest

from sim.attention import online_softmax as FL
from sim.attention.limits import Limits
from sim.attention.measure import STATS, KernelTiming, Stats
from sim.attention.shapes import HEAD_DIMS, AttentionShape, nearest
from sim.attention.timing import SweepResult, TimingResult, sweep_attention
from sim.claims import Verdict
from sim.words import attention as R
from sim.words.attention import (
    flex_note,
    held_bytes_model,
    masked_tile_warning,
    memory_model_rows,
    shape_metrics,
    shape_traffic,
    sweep_metrics,
    tile_updates,
    timing_metrics,
    timing_rows,
    traffic_metrics,
)
from sim.words.catalog import PSEUDO
from sim.words.kernel_claims import kernel_claims


def fake_result(n: int, eager_peak: int | None = 1 << 20, flash_peak: int | None = 1 << 14) -> TimingResult:
    """eager: median 3 ms, fastest 2 ms; FLASH: median 1 ms, fastest 0.5 ms; EFFICIENT unavailable."""
    shape = AttentionShape(batch=1, heads=1, seq_len=n, head_dim=16)
    rows = (
        KernelTiming("eager", "ok", "", Stats((4e-3, 2e-3, 3e-3)), shape.flops, eager_peak, 1e-7),
        KernelTiming("math", "ok", "", Stats((2e-3, 2e-3, 2e-3)), shape.flops, 1 << 20, 0.0),
        KernelTiming("flash", "ok", "", Stats((1e-3, 0.5e-3, 2e-3)), shape.flops, flash_peak, 2e-7),
        KernelTiming("efficient", "unavailable", "not built for CPU"),
    )
    return TimingResult(shape, "cpu", 2, rows, "a test")


def test_nearest_snaps_to_the_closest_allowed_value():
    assert nearest(48, HEAD_DIMS) == 32  # 32 and 64 are equally close: the first wins
    assert nearest(100, (16, 32, 64, 128, 256)) == 128
    assert nearest(5000, [128, 256, 512, 1024, 2048, 4096]) == 4096
    assert nearest(64, HEAD_DIMS) == 64


def test_shape_bytes_and_labels():
    shape = AttentionShape(batch=2, heads=3, seq_len=10, head_dim=16, dtype="float16")
    assert shape.output_bytes == 2 * 3 * 10 * 16 * 2 == 1920
    assert AttentionShape(seq_len=10, kind="decode").output_bytes == 1 * 4 * 1 * 32 * 4
    assert shape.sweep_label() == "B=2, H=3, N queries × N keys, d=16, causal, float16"
    assert AttentionShape(kind="decode").sweep_label() == "B=1, H=4, 1 query × N keys, d=32, no mask, float32"


def test_caps_sentence_states_the_caps():
    text = R.caps_sentence(Limits("cpu", 1 << 24, 1 << 33, 3 << 30), PSEUDO)
    assert "elems=16,777,216," in text and "flops=8,589,934,592," in text
    assert text == "kernels.s.caps(elems=16,777,216, flops=8,589,934,592, memory=3 GiB)"


def test_stats_by_statistic():
    s = Stats((4.0, 1.0, 3.0, 2.0))
    assert s.of("median") == 2.5 and s.of("fastest block") == 1.0
    assert set(STATS) == {"median", "fastest block"}
    with pytest.raises(ValueError, match="statistic 'mean' is not one of"):
        s.of("mean")


def test_timing_ratios_by_statistic():
    r = fake_result(256)
    assert r.speedup("flash") == pytest.approx(3.0) and r.speedup("flash", stat="fastest block") == pytest.approx(4.0)
    assert r.memory_ratio("flash") == 64.0
    assert r.speedup("efficient") is None


def test_sweep_result_ratio_at_the_largest_n():
    sweep = sweep_attention(AttentionShape(batch=1, heads=1, head_dim=16), [128, 256], fake_result_for, 2e12)
    assert sweep.lengths == [128, 256] and sweep.ceiling_flops == 2e12
    assert sweep.label == "B=1, H=1, N queries × N keys, d=16, causal, float32"
    got = sweep.flash_vs_eager()
    assert (got.num_keys, got.time_ratio, got.memory_ratio) == (256, pytest.approx(3.0), 64.0)
    assert sweep.flash_vs_eager("fastest block").time_ratio == pytest.approx(4.0)
    df = sweep.to_frame()
    assert len(df) == 8 and sorted(df["keys"].unique()) == [128, 256]
    no_peak = SweepResult((fake_result(128, flash_peak=None),), 1e12).flash_vs_eager()
    assert no_peak.memory_ratio is None and no_peak.time_ratio == pytest.approx(3.0)
    seen = []
    sweep_attention(AttentionShape(), [128, 256, 512], fake_result_for, 1.0, lambda i, n: seen.append((i, n)))
    assert seen == [(0, 128), (1, 256), (2, 512)]


def fake_result_for(shape: AttentionShape) -> TimingResult:
    return fake_result(shape.seq_len)


def test_sweep_metrics():
    sweep = SweepResult((fake_result(128), fake_result(4096)), 1.5e12)
    m = sweep_metrics(sweep, "median", 1024, PSEUDO)
    assert [(x.label, x.value) for x in m] == [
        ("kernels.m.sweep_time(n=4,096)", "3.0×"), ("kernels.m.sweep_memory(n=4,096)", "64×"),
        ("kernels.m.ceiling", "1.5 TFLOP/s")]
    assert m[2].help == "kernels.m.ceiling_help(n=1,024)"
    assert sweep_metrics(sweep, "fastest block", 1024)[0].value == "4.0×"


def test_timing_readouts():
    r = fake_result(128)
    rows = timing_rows(r)
    assert [x["Kernel"] for x in rows] == ["eager", "MATH", "FLASH", "EFFICIENT"]
    assert rows[0]["Median ms"] == "3" and rows[0]["25–75th pct ms"] == "2.5–3.5" and rows[0]["Peak memory"] == "1 MiB"
    assert rows[1]["Max |Δ| vs MATH"] == "0 (reference)" and rows[2]["× vs eager"] == "3.00"
    assert rows[3]["Status"] == "unavailable (see above)" and rows[3]["Peak memory"] == ""
    assert "Compile s (once)" not in rows[0]
    assert timing_rows(fake_result(128, flash_peak=None))[2]["Peak memory"] == "n/a"
    m = {x.label: x for x in timing_metrics(r)}
    assert m["FLASH vs eager, time"].value == "3.0×" and m["Eager / FLASH peak memory"].value == "64.0×"
    assert m["Fastest kernel"].value == "FLASH" and m["Fastest kernel"].delta == "1 ms per call"
    assert m["Largest |Δ| vs MATH"].value == "2.00e-07"
    assert flex_note(r) is None
    failed = TimingResult(r.shape, "cpu", 2, (*r.rows, KernelTiming("flex", "timed out", "took over 1 s")), "a test")
    assert flex_note(failed, PSEUDO) == (
        False, "kernels.s.flex_failed(status=kernels.status.timed_out, reason=took over 1 s)")


def test_shape_metrics():
    shape = AttentionShape()  # B=1, H=4, N=1,024, d=32, causal, fp32
    m = shape_metrics(shape, 4 * shape.score_bytes + shape.qkvo_bytes, PSEUDO)
    assert [x.value for x in m] == ["0.2684 GFLOP", "4,194,304", "16 MiB", "66 MiB"]  # 4 × 16 MiB + Q, K, V, O (2 MiB)
    assert m[0].help == "kernels.m.flops_help(n=268,435,456)kernels.m.flops_halved"


def test_held_bytes_model_by_hand():
    shape = AttentionShape(batch=1, heads=2, seq_len=8, head_dim=16, causal=False)
    traffic = shape_traffic(shape, 4)
    held = held_bytes_model(shape, traffic, PSEUDO)
    assert held["eager"] == ("kernels.held.eager", 2 * 8 * 8 * 4)  # 512 B
    assert held["flash"] == ("kernels.held.flash", 2 * 8 * 4 + 2 * 8 * 16 * 4)  # 64 + 1,024 B
    rows = memory_model_rows(fake_result(128), shape_traffic(fake_result(128).shape, 64))
    assert [r["Kernel"] for r in rows] == ["eager (matmul + mask + softmax + matmul)", "SDPA · FLASH_ATTENTION"]
    assert rows[0]["Model bytes"] == "64 KiB" and rows[0]["Measured peak"] == "1 MiB"
    assert rows[1]["Model bytes"] == "8.5 KiB"  # 128 rows × 4 B + 128 × 16 × 4 B


def test_traffic_metrics():
    t = FL.hbm_traffic(1, 1, 4, 4, 2, elem_bytes=4, tile_q=2, tile_k=2, causal=False)  # 384 vs 208 B (by hand)
    assert [x.value for x in traffic_metrics(t)] == ["384 B", "208 B", "1.8×", "64 B"]


def test_stepper_sentences():
    demo = FL.SoftmaxDemo(num_keys=10, tile=4, masked_prefix=4, dtype="float64")
    trace = FL.run_softmax_demo(demo)
    first = tile_updates(trace, 1, 0, PSEUDO)
    assert first.startswith("kernels.s.tile_updates(step=1, row=0,")
    assert "m_old=−∞, tile_max=−∞, m_new=−∞," in first and "l_new=0," in first
    warning = masked_tile_warning(demo, 0)
    assert "The first 4 keys are masked" in warning and "[nan, nan, nan]" in warning
    assert masked_tile_warning(FL.SoftmaxDemo(num_keys=10, tile=4, masked_prefix=3), 0) is None
    assert FL.max_masked_prefix(10, 4, causal=True) == 6 and FL.max_masked_prefix(10, 4, causal=False) == 9


def test_claims_carry_only_this_page_s_measurement():
    claims = kernel_claims()
    assert len(claims) == 6 and all(c.seed == "002" for c in claims)
    speed = next(c for c in claims if "24×" in c.statement)
    assert speed.verdict is Verdict.WRONG and speed.value is None and "Measured" not in speed.computed
    text = " ".join(c.computed + c.why for c in claims)
    assert "earlier run" not in text and "8.7" not in text and "117" not in text
    sweep = SweepResult((fake_result(128), fake_result(4096)), 1e12)
    measured = kernel_claims(sweep, "fastest block", PSEUDO)
    speed = next(c for c in measured if "24×" in c.statement)
    assert speed.value == pytest.approx(4.0)
    assert speed.computed.endswith("kernels.c.measured_time(n=4,096, device=cpu, speed=kernels.c.faster(x=4.0), "
                                   "stat=kernels.stat.fastest_block)")
    memory = next(c for c in measured if "O(N²) → O(N)" in c.statement)
    assert memory.value == 64.0 and "kernels.c.measured_eager(n=4,096, device=cpu, x=64)" in memory.computed
