"""The KV quantization page's tables, metrics and sentences, built from hand-made results (no model run)."""

import numpy as np
import pandas as pd
import pytest

from sim.claims import Verdict
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model.quant_bytes import bytes_per_value, fp16_bytes_per_token, scale_view
from sim.model.quant_cache import FULL, make_scheme
from sim.model.quant_channels import ChannelStats, OutlierCase
from sim.model.quant_errors import PositionErrors
from sim.model.quant_generation import MARK, FreeRun
from sim.model.transformer import ModelConfig
from sim.words.catalog import PSEUDO
from sim.words.quant import (
    bytes_curves,
    divergence_frame,
    free_run_metrics,
    headline_metrics,
    metric_grid,
    outlier_caption,
    outlier_sentence,
    perplexity_sentence,
    position_caption,
    results_frame,
    scale_caption,
    scale_frame,
    scale_metrics,
)
from sim.words.quant_claims import seed_claims

CFG = ModelConfig(n_layers=4, n_kv_heads=4, max_seq_len=1024)  # 2 × 4 × 4 × 32 × 2 B = 2,048 B per token


def errors(kind="kivi", bits=4, kl=(0.0, 0.0, 1e-3, 3e-3), loss_ref=0.5, loss_q=0.51, windows=(0.01, 0.01),
           bytes_per_token=600.0) -> PositionErrors:
    s = make_scheme(kind, bits=bits, residual=128)
    kl = np.array(kl)
    return PositionErrors(key=s.key, bits=s.bits, delta_loss=np.full(len(kl), loss_q - loss_ref), agreement=np.ones(len(kl)), kl=kl,
                          loss_ref=loss_ref, loss_q=loss_q, bytes_per_token=bytes_per_token, window_delta_loss=np.array(windows), residual=s.residual)


def test_fp16_bytes_and_bytes_per_value():
    assert fp16_bytes_per_token(CFG) == 2048.0
    assert bytes_per_value(CFG, 672.0) == 672 / 1024  # 1,024 numbers a token


def test_results_frame_has_format_and_share_of_fp16():
    t = results_frame([errors("kivi", 4, bytes_per_token=512.0), errors("fp8_e4m3", 8, bytes_per_token=1024.0)], 2048)
    assert list(t["format"]) == ["INT4", "FP8 e4m3"]
    assert list(t["vs_fp16"]) == [0.25, 0.5]
    assert list(t.columns[:4]) == ["scheme", "format", "label", "bits"]
    assert t["kl_first_quarter"][0] == 0.0 and t["kl_last_quarter"][0] == 3e-3


def test_metric_grid_leaves_unmeasured_cells_blank():
    results = {("kivi", 4): errors("kivi", 4), ("kivi", 2): errors("kivi", 2, kl=(1.0,)),
               ("fp8_e4m3", 8): errors("fp8_e4m3", 8, kl=(2.0,))}
    grid = metric_grid(results, "kl", ["kivi", "fp8_e4m3"], (8, 4, 3, 2))
    assert list(grid.index) == ["KIVI (R=128)", "FP8 e4m3"] and list(grid.columns) == ["8 bits", "4 bits", "3 bits",
                                                                                     "2 bits"]
    assert grid.loc["KIVI (R=128)", "4 bits"] == pytest.approx(1e-3) and grid.loc["KIVI (R=128)", "2 bits"] == 1.0
    assert np.isnan(grid.loc["KIVI (R=128)", "8 bits"]) and grid.loc["FP8 e4m3", "8 bits"] == 2.0
    assert np.isnan(grid.loc["FP8 e4m3", "4 bits"])


def test_sentences_carry_the_numbers():
    kivi = errors("kivi", 4, loss_ref=0.5, loss_q=0.5001, windows=(0.0001,))  # one window: no ± shown
    naive = errors("token", 4, kl=(0.01, 0.01, 0.02, 0.04), loss_ref=0.5, loss_q=0.6, windows=(0.05, 0.15))
    s = perplexity_sentence(kivi, naive, PSEUDO)
    assert s.startswith(f"quant.s.perplexity(ref={np.exp(0.5):.4f}, ")
    assert f"kivi=quant.s.loss_text(ppl={np.exp(0.5001):.4f}, dl=+0.00010, se=)" in s
    assert f"naive=quant.s.loss_text(ppl={np.exp(0.6):.4f}, dl=+0.10000, se= ± 0.05000)" in s
    cap = position_caption(kivi, naive, 2, 128, PSEUDO)
    assert cap.startswith("quant.s.position_caption(w=2, T=4,")
    assert "n0=1.00e-02, n1=4.00e-02, k0=0.00e+00, k1=3.00e-03)" in cap


def test_headline_metrics():
    m = headline_metrics(errors("kivi", 3, bytes_per_token=512.0), errors("token", 3, bytes_per_token=400.0), CFG, 64,
                         PSEUDO)
    shown = {x.label: (x.value, x.delta) for x in m}
    assert shown["quant.m.fp16_bytes"] == ("2,048", None)
    assert shown["quant.m.kivi_bytes(bits=3)"] == ("512.0", "quant.m.of_fp16(share=25.0%)")
    assert shown["quant.m.naive_bytes(bits=3)"] == ("400.0", "quant.m.of_fp16(share=19.5%)")
    assert shown["quant.m.kivi_kl(bits=3)"] == ("1.00e-03", None)
    assert shown["quant.m.naive_agree(bits=3)"] == ("100.00%", None)
    assert m[1].help == "quant.m.kivi_bytes_help(S=4, R=64)" and m[0].help == "quant.m.fp16_bytes_help(L=4, H=4, D=32)"


def test_free_run_marks_where_the_texts_part():
    run = FreeRun(scheme=FULL, prompt_ids=list(b"AB"), ref_ids=list(b"xyz"), quant_ids=list(b"xqz"), used_bytes=300, full_bytes=1200)
    assert run.first_difference == 1 and run.num_same == 1
    assert run.marked_text(run.ref_ids) == f"ABx{MARK}yz" and run.marked_text(run.quant_ids) == f"ABx{MARK}qz"
    assert [(m.label, m.value, m.delta) for m in free_run_metrics(run)] == [
        ("First differing token", "1", None), ("Same tokens before it", "1 of 3", None),
        ("Cache after the run", "300 B", "25.0% of FP16")]
    same = FreeRun(scheme=FULL, prompt_ids=list(b"A"), ref_ids=list(b"xy"), quant_ids=list(b"xy"), used_bytes=1, full_bytes=1)
    assert same.marked_text(same.ref_ids) == "Axy" and free_run_metrics(same)[1].value == "2 of 2"
    schemes = [make_scheme("kivi", bits=4), make_scheme("fp8_e4m3")]
    df = divergence_frame(schemes, {"kivi": None, "fp8_e4m3": 7})
    assert df.to_dict("records") == [
        {"scheme": "INT4 KIVI: K per-channel, V per-token, residual R=128", "first differing token": "none"},
        {"scheme": "FP8 e4m3 (K and V)", "first differing token": "7"}]


def test_channel_ratios_and_sentence():
    k = np.ones((1, 1, 2, 8))
    k[..., 3] = 6.0  # channel 3: 6 × the median
    stats = ChannelStats(k, np.ones((1, 1, 2, 8)))
    row = stats.ratios_frame().iloc[0]
    assert (row["K max ÷ median"], row["V max ÷ median"]) == (6.0, 1.0)
    assert row["K's top channels"].startswith("3, ")
    assert outlier_sentence(stats, PSEUDO).startswith("quant.s.outliers(answer=quant.s.yes, k=6.0,")
    weak = outlier_sentence(ChannelStats(np.ones((1, 1, 2, 8)), np.ones((1, 1, 2, 8))), PSEUDO)
    assert "answer=quant.s.weak_only" in weak and "quant.s.outliers_none(x=5)" in weak
    cases = [OutlierCase(case="injected", axis="token", rel_error_other=0.5, rel_error_outlier=0.01, rel_error_scores=0.4), OutlierCase(case="injected", axis="channel", rel_error_other=0.05, rel_error_outlier=0.02, rel_error_scores=0.03)]
    cap = outlier_caption(cases, 1, 0, 5, 8.0, 2, 32, 16, PSEUDO)
    assert "ch=5, factor=8," in cap
    assert "t=50%, c=5%, G=32," in cap
    assert "st=40%, sc=3%)" in cap


def test_bytes_curves_start_at_one_token():
    curves = bytes_curves(CFG, {k: make_scheme(k, bits=4, residual=128) for k in ("kivi", "token", "kivi_nores",
                                                                             "fp8_e4m3")})
    label, xs, ys = curves["fp16"]
    assert label == "full precision" and xs == [2**k for k in range(11)] and ys == [2048.0] * 11
    assert curves["fp8_e4m3"][2] == [1024.0] * 11


def test_scale_view_metrics_and_frame():
    arch, gpu = load_presets()["llama-3.1-8b"], load_gpus()["h100-sxm"]
    view = scale_view(arch, gpu=gpu, schemes=[make_scheme("kivi", bits=4)], context=32768, utilization=0.9)
    fp16, kivi = view.rows
    assert fp16.per_request_bytes == 4 * 2**30 and fp16.max_requests == 14  # (72 − 15) GiB ÷ 4 GiB
    m = scale_metrics(view, 4)
    assert m[0].value == "14" and m[1].delta == f"{kivi.max_requests / 14:.2f}× FP16"
    df = scale_frame(view)
    assert list(df["scheme"]) == ["full precision", "INT4 KIVI: K per-channel, V per-token, residual R=128"]
    assert df["per request"][0] == 4.0
    assert scale_caption(view, PSEUDO).startswith("quant.s.scale_caption(model=Llama 3.1 8B, ctx=32,768, gpu=NVIDIA H100")


def table(**kl) -> pd.DataFrame:
    """A bits × scheme table with the columns seed_claims reads; every agreement 100%."""
    rows = [{"scheme": k, "bits": b, "delta_loss": 0.0, "kl": v, "top1_agreement": 1.0, "kl_first_quarter": v,
             "kl_last_quarter": 2 * v} for (k, b), v in ((tuple(key.rsplit("_", 1)), val) for key, val in kl.items())]
    t = pd.DataFrame(rows)
    t["bits"] = t["bits"].astype(int)
    return t


def test_seed_claims_verdicts_come_from_the_numbers():
    t = table(kivi_8=1e-8, token_8=1e-5, fp8_e4m3_8=1e-4, kivi_4=1e-6, token_4=1e-2, kivi_2=1e-5, token_2=0.3,
              token_res_4=1e-3, token_first_4=1e-1)
    check = seed_claims(t, 4, lang=PSEUDO)
    assert check.unmeasured == () and check.unmeasured_sentence() == ""
    by = {c.statement.split(":")[0]: c for c in check.claims}
    assert all(c.seed == "001" and c.original for c in check.claims)
    assert by["INT8"].verdict is Verdict.RIGHT
    assert by["INT8"].why == "quant.claim.int8.why.holds(agree=99%)"
    # FP8's KL 10× INT8 per-token's: measurably worse, so not "nearly safe like INT8", whatever its agreement
    assert by["FP8"].verdict is Verdict.WRONG and by["FP8"].value == 10.0
    assert by["FP8"].why.startswith("quant.claim.fp8.why.worse(x=10, vs_kivi4=quant.claim.fp8.vs_kivi4(y=100),")
    assert next(c for s, c in by.items() if s.startswith("INT4 works")).why == "quant.claim.int4.why.holds(x=10,000)"
    assert by["2-bit is research territory"].verdict is Verdict.NEEDS_CONTEXT
    assert by["Errors accumulate"].verdict is Verdict.RIGHT and by["Errors accumulate"].value == 2.0
    recent = next(c for s, c in by.items() if s.startswith("Recent tokens"))
    assert recent.verdict is Verdict.RIGHT and recent.why == "quant.claim.recent.why.holds(x=100)"
