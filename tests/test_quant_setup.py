"""The KV quantization page's config (QuantSetup) and the sentences, tables and estimates it and the quant
modules build for the page: worked out by hand, no model run."""

import numpy as np
import pytest

from sim.cost.presets import load_presets
from sim.cost.vllm_rules import version_label
from sim.model.quant import fp8_backend
from sim.model.quant_bytes import context_for, scale_presets
from sim.model.quant_cache import FP8_KINDS, SCHEME_KINDS, make_scheme
from sim.model.quant_channels import OutlierCase, outlier_frame
from sim.model.quant_errors import EvalConfig
from sim.model.quant_setup import (
    ALL_KINDS,
    MAX_PROMPT,
    POSITION_KINDS,
    QuantSetup,
    free_seconds,
    prompt_problem,
)
from sim.model.transformer import ModelConfig
from sim.msg import Msg
from sim.refusal import Refusal
from sim.words import say
from sim.words.quant import (
    binned_frame,
    blank_cells_note,
    bytes_formula,
    channels_caption,
    free_sentence,
    grid_caption,
    jobs_sentence,
    standard_error_caption,
    text_heading,
    title_of,
)
from sim.work.run_cost import ModelRates, cached_work, prefill_work
from tests.test_quant_results import errors

SETUP = QuantSetup(variant="gqa", bits=2, chunk=16, channel_group=8, residual=64, symmetric=True, eval=EvalConfig(3, 128))
RATES = ModelRates(per_call_s=1e-3, per_token_s=1e-5, per_pair_s=1e-8)


def test_schemes_at_the_chosen_width_and_fp8_at_8():
    schemes = SETUP.schemes()
    assert list(schemes) == [*SCHEME_KINDS, *FP8_KINDS] == list(ALL_KINDS)
    assert schemes["kivi"] == make_scheme("kivi", bits=2, chunk=16, channel_group=8, residual=64, symmetric=True)
    assert schemes["fp8_e4m3"] == make_scheme("fp8_e4m3")
    assert SETUP.scheme("token", 8) == make_scheme("token", bits=8, chunk=16, channel_group=8, residual=64, symmetric=True)
    assert [title_of(s) for s in SETUP.scale_schemes()] == [
        title_of(make_scheme("kivi", bits=2, chunk=16, channel_group=8, residual=64, symmetric=True)), title_of(make_scheme("token", bits=2, chunk=16, channel_group=8, residual=64, symmetric=True)),
        title_of(make_scheme("kivi_nores", bits=2, chunk=16, channel_group=8, residual=64, symmetric=True)), title_of(make_scheme("kivi", bits=8, chunk=16, channel_group=8, residual=64, symmetric=True)),
        "FP8 e4m3 (K and V)"]
    assert POSITION_KINDS == (*SCHEME_KINDS, "fp8_e4m3")
    with pytest.raises(Refusal) as info:
        QuantSetup(chunk=128, residual=64).schemes()
    assert (info.value.key, info.value.fields) == ("model.err.residual_groups", {"R": 64, "name": "K", "G": 128, "fix": 128})


def test_jobs_and_the_results_they_name():
    assert SETUP.chosen_jobs == [(k, 2) for k in SCHEME_KINDS] + [("fp8_e4m3", 8), ("fp8_e5m2", 8)]
    assert SETUP.grid_jobs(False, (8, 4)) == [("kivi", 8), ("token", 8), ("kivi", 4), ("token", 4)]
    assert SETUP.grid_jobs(True, (3,)) == [(k, 3) for k in SCHEME_KINDS]
    results = {job: errors(job[0], job[1]) for job in SETUP.chosen_jobs + SETUP.grid_jobs(False, (8,))}
    chosen = SETUP.chosen(results)
    assert list(chosen) == list(ALL_KINDS)
    assert chosen["kivi"] is results[("kivi", 2)] and chosen["fp8_e5m2"] is results[("fp8_e5m2", 8)]
    assert SETUP.job_params([("kivi", 8)]) == ("gqa", EvalConfig(3, 128), 16, 8, 64, True, (("kivi", 8),))
    assert SETUP.free_key([65, 66], 24, "kivi") == ("gqa", (65, 66), 24, "kivi", 2, 16, 8, 64, True)


def test_estimates_are_the_cost_model_times_the_measured_factors():
    # one run: 2 × (1 call + 3·128 tokens + 3·128·129/2 pairs)
    assert SETUP.eval_seconds(RATES) == pytest.approx(2 * (1e-3 + 384e-5 + 24768e-8))
    assert SETUP.eval_seconds(RATES) == pytest.approx(2 * RATES.seconds(prefill_work(128, 3)))
    got = free_seconds(7, num_new=24, sdpa=RATES, eager=RATES)
    assert got == pytest.approx(4 * RATES.seconds(cached_work(7, 24)) + 2 * 8 * RATES.seconds(prefill_work(31)))
    assert free_seconds(7, num_new=24, sdpa=RATES, eager=RATES, num_schemes=0) == pytest.approx(4 * RATES.seconds(cached_work(7, 24)))


def test_sentences_carry_the_setting():
    assert jobs_sentence(SETUP, "Comparing", 8) == "Comparing: 8 teacher-forced runs over 3 × 128 tokens"
    assert standard_error_caption(SETUP).startswith("± is the standard error over the 3 windows. Δ loss can be noisy")
    assert "the other schemes only at INT2. Switch on" in blank_cells_note(SETUP)
    assert SETUP.csv_name() == "kv_quantization_gqa_G16_g8_R64.csv"
    assert free_sentence(24) == "Generating 24 tokens through the full-precision and the quantized cache"
    assert channels_caption(256).endswith("on the first held-out window of 256 tokens.")
    fp8 = "torch float8 dtypes" if fp8_backend("e4m3") == "torch" else "emulated, this torch has no float8"
    assert grid_caption(128) == ("The metric chosen above for the position chart. FP8 is 8 bits only (per-tensor "
                                 f"scale 1.0, {version_label()}'s default, so each value is cast on its own; {fp8}). Bytes per token "
                                 "at 128 tokens are in the table below.")
    assert text_heading(make_scheme("kivi", bits=3, residual=64)) == "**KIVI: K per-channel, V per-token, residual R=64, INT3**"
    assert text_heading(make_scheme("fp8_e5m2")) == "**FP8 e5m2 (K and V)**"


def test_outlier_tokens_are_whole_chunks():
    assert SETUP.outlier_tokens() == 128  # 8 chunks of 16
    assert QuantSetup(chunk=64, residual=128, eval=EvalConfig(1, 100)).outlier_tokens() == 64
    with pytest.raises(Refusal, match="The window of 16 tokens is shorter than one chunk of G=32") as exc:
        QuantSetup(eval=EvalConfig(1, 16)).outlier_tokens()
    assert exc.value.msg == Msg("quant.s.window_short", S=16, G=32)


def test_prompt_problems():
    assert prompt_problem([]) == Msg("quant.s.prompt_empty")
    assert say("en", prompt_problem([])) == "The prompt is empty: type at least one character."
    assert prompt_problem([65] * MAX_PROMPT) is None
    assert prompt_problem([65] * 130) == Msg("quant.s.prompt_long", n=130, max=128)
    assert say("en", prompt_problem([65] * 130)) == "The prompt is 130 bytes; the limit is 128. Shorten it."


def test_context_is_cut_to_what_the_model_was_trained_for():
    arch = load_presets()["llama-2-7b"]  # trained for 4,096 tokens
    assert context_for(arch, 2048) == (2048, None)
    assert context_for(arch, 32768) == (4096, Msg("quant.s.context_cut", model="Llama 2 7B", max=4096, ctx=4096))
    assert say("en", context_for(arch, 32768)[1]) == "Llama 2 7B was trained for 4,096 tokens: counting 4,096 per request."


def test_scale_presets_leave_out_mla_and_sliding_windows():
    presets = load_presets()
    kept = scale_presets(presets)
    assert "llama-3.1-8b" in kept and "qwen2.5-7b" in kept
    assert "deepseek-v3" not in kept and "gemma-2-9b" not in kept  # MLA; sliding-window layers
    assert all(p.attention != "MLA" and not p.sliding_window for p in kept.values())


def test_bytes_formula_has_the_model_numbers():
    cfg = ModelConfig(n_layers=4, n_kv_heads=2, max_seq_len=1024)  # 512 numbers a token
    tex = bytes_formula(cfg, 2, 392.0, 128)
    assert r"= 2 \cdot 4\cdot 2 \cdot 32 \cdot p" in tex
    assert r"p_{\mathrm{KIVI\,INT2}} = 0.7656\,\mathrm{B}\ \text{at 128 tokens}" in tex  # 392 / 512


def test_frames_for_the_charts():
    frame = binned_frame({"kivi": errors("kivi", 4), "token": errors("token", 4, kl=(1.0, 3.0, 5.0, 7.0))}, 2)
    assert list(frame["key"]) == ["kivi", "kivi", "token", "token"]
    assert list(frame["kl"]) == pytest.approx([0.0, 2e-3, 2.0, 6.0]) and list(frame["position"]) == [0.5, 2.5] * 2
    cases = [OutlierCase(case="injected", axis="token", rel_error_other=0.5, rel_error_outlier=0.25, rel_error_scores=0.1), OutlierCase(case="real", axis="channel", rel_error_other=0.1, rel_error_outlier=0.05, rel_error_scores=0.01)]
    df = outlier_frame(cases)
    assert list(df.columns) == list(vars(cases[0])) and list(df["case"]) == ["injected", "real"]
    assert np.allclose(df.iloc[0, 2:].astype(float), [0.5, 0.25, 0.1])
