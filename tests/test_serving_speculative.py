"""Speculative decoding (sim/serving/speculative.py, sim/model/speculative.py).

The Monte Carlo must agree with the closed form; the roofline-timed rounds must equal sim.cost.roofline's
steps; the page's curves and sentences are worded from their numbers; greedy speculative decoding on the
real model must return exactly the target's tokens.
"""

import numpy as np
import pytest

from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware
from sim.model import speculative as sp
from sim.serving import speculative as sps
from sim.words import speculative as sw
from sim.words.catalog import PSEUDO
from sim.words.spec_run import draft_label, spec_cost_summary, spec_summary
from tests.conftest import run_page

# --- speculative decoding ---------------------------------------------------------------------------


def test_expected_tokens_closed_form_by_hand():
    assert sps.expected_tokens_per_pass(0.5, 2) == 1.75  # 1 + 0.5 + 0.25
    assert sps.expected_tokens_per_pass(0.0, 5) == 1.0
    assert sps.expected_tokens_per_pass(1.0, 5) == 6.0
    assert sps.expected_tokens_per_pass(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)
    assert sps.speculative_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert sps.speculative_speedup(0.5, 1, 0.0) == 1.5
    for a, c in ((0.6, 0.05), (0.8, 0.05), (0.9, 0.02), (0.3, 0.2)):
        best = max(range(1, 17), key=lambda k, a=a, c=c: sps.speculative_speedup(a, k, c))
        assert sps.optimal_k(a, c) == best
    assert sps.optimal_k(0.8, 0.05) == 8 and sps.optimal_k(0.8, 0.2) == 4 and sps.optimal_k(0.3, 0.2) == 1


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.8, 0.9])
@pytest.mark.parametrize("k", [1, 3, 5, 8])
def test_monte_carlo_matches_the_closed_form(alpha, k):
    mc = sps.simulate_speculative(alpha, k, num_passes=20_000, seed=0)
    # tolerance: 4 standard errors of the mean (a fixed seed, so this is deterministic)
    assert abs(mc.mean - mc.expected) <= 4 * mc.stderr
    assert mc.stderr < 0.025
    assert abs(mc.acceptance_rate - alpha) < 0.015
    again = sps.simulate_speculative(alpha, k, num_passes=20_000, seed=0)
    assert np.array_equal(mc.accepted, again.accepted)
    assert mc.accepted.min() >= 0 and mc.accepted.max() <= k


def test_speculative_bounds():
    for bad in (dict(alpha=1.1, k=2), dict(alpha=-0.1, k=2), dict(alpha=0.5, k=0), dict(alpha=0.5, k=17),
                dict(alpha=float("nan"), k=2)):
        with pytest.raises(ValueError):
            sps.expected_tokens_per_pass(**bad)
    with pytest.raises(ValueError, match="num_passes"):
        sps.simulate_speculative(0.5, 2, num_passes=0)
    with pytest.raises(ValueError, match="cost ratio"):
        sps.speculative_speedup(0.5, 2, -1.0)


def test_roofline_timed_speculation():
    t = sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    presets, hw = load_presets(), hardware(load_gpus()["h100-sxm"])
    t70 = decode_step(RooflineConfig(presets["llama-3.1-70b"], 1, 1024)).time(hw)
    t8 = decode_step(RooflineConfig(presets["llama-3.1-8b"], 1, 1024)).time(hw)
    assert t.c == pytest.approx(t8 / t70, rel=1e-12)
    assert 0.09 < t.c < 0.13  # about the ratio of the weights read
    # a 5-token verify pass at batch 1 is still memory-bound: barely longer than one step
    assert t.target_step_s <= t.verify_s[4] < 1.01 * t.target_step_s
    assert t.speedup(0.8, 4) == pytest.approx(sps.expected_tokens_per_pass(0.8, 4) * t70 / (4 * t8 + t.verify_s[4]))
    points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 0.8, 4)
    assert points[0].batch == 1 and points[0].verify_bound == "memory"
    assert points[0].speedup > 2 and points[-1].speedup < points[0].speedup
    assert points[-1].verify_bound == "compute"


# --- the real model -----------------------------------------------------------------------------------


def test_truncated_draft_shares_the_targets_weights():
    from tests.conftest import random_model

    target = random_model()
    draft = sp.truncated_draft(target, 2)
    assert draft.cfg.n_layers == 2 and draft.lm_head is target.lm_head
    assert draft.model.layers[1] is target.model.layers[1]
    for bad in (0, target.cfg.n_layers):
        with pytest.raises(ValueError, match="keeps 1"):
            sp.truncated_draft(target, bad)


@pytest.mark.parametrize("layers,k", [(1, 1), (2, 4)])
def test_greedy_speculative_output_equals_the_target_on_a_random_model(layers, k):
    from tests.conftest import random_model

    target = random_model(seed=1)
    run = sp.speculative_generate(target, sp.truncated_draft(target, layers), list(b"to be or not"), max_new_tokens=24, k=k, repeats=1)
    assert run.identical and len(run.new_ids) == 24
    assert run.num_passes == len(run.accepted) and all(0 <= a <= k for a in run.accepted)
    assert (run.target_layers, run.draft_layers) == (target.cfg.n_layers, layers)  # the summary's layer ratio
    produced = sum(a + 1 for a in run.accepted)  # the prefill gave the first token; the last pass may overshoot
    assert 23 <= produced <= 23 + k


def test_greedy_speculative_output_equals_the_target_on_the_shipped_model():
    from sim.model.transformer import checkpoint_path, load_model

    if not checkpoint_path("mha").is_file():
        pytest.skip("the bundled mha checkpoint is missing")
    target = load_model("mha")
    prompt = list(b"ROMEO.\nBut soft, what light through yonder window breaks?\n")
    for layers, k in ((3, 4), (1, 2)):
        run = sp.speculative_generate(target, sp.truncated_draft(target, layers), prompt, max_new_tokens=48, k=k, repeats=1)
        assert run.identical, f"first difference at token {run.first_difference}"
        # every pass yields its accepted drafts plus one target token; the last pass may overshoot
        produced = sum(a + 1 for a in run.accepted)
        assert 47 <= produced <= 47 + k
        assert 0 < run.acceptance_rate < 1


# --- the page's curves and sentences ---------------------------------------------------------------


def test_curves_by_hand():
    curves = sps.run_speculative(sps.SpecSetup(alpha=0.75, k=2, c=0.0, mc_passes=1000, ks=(1, 2, 3), alphas=(0.5,)))
    assert curves.timing is None and curves.timed is None and curves.c == 0.0
    assert curves.alphas == [0.5, 0.75]  # the chosen α joins the drawn ones
    assert curves.tokens(0.5) == [1.5, 1.75, 1.875]
    assert curves.speedups(0.5) == curves.tokens(0.5)  # a free draft: speedup = tokens per pass
    assert curves.best_k(0.5) == 3
    assert curves.chosen_monte_carlo.k == 2 and curves.chosen_monte_carlo.num_passes == 1000
    frame = curves.mc_frame()
    assert list(frame["k"]) == [1, 2, 3] and list(frame.columns) == ["k", "closed_form", "mean", "stderr",
                                                                     "acceptance_rate"]
    assert frame.loc[1, "mean"] == sps.simulate_speculative(0.75, 2, 1000, 0).mean


def test_curves_take_c_from_the_roofline():
    curves = sps.run_speculative(sps.SpecSetup())
    timing = sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    assert curves.timing == timing and curves.c == timing.c
    assert curves.timed == [timing.speedup(0.8, k) for k in sps.SPEC_KS]
    assert curves.best_k(0.8) == sps.optimal_k(0.8, timing.c, 12)
    with pytest.raises(ValueError, match="one of 1..3"):
        sps.run_speculative(sps.SpecSetup(k=4, c=0.1, ks=(1, 2, 3)))
    with pytest.raises(ValueError, match="cheaper than its target"):
        sps.run_speculative(sps.SpecSetup(target="llama-3.1-8b", draft="llama-3.1-70b"))


def test_timing_caption_states_the_steps():
    t = sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    text = sw.timing_caption(t, 4, lang=PSEUDO)
    assert text.startswith("serving.s.timing(gpu=NVIDIA H100 SXM 80GB, ctx=1,024, draft=Llama 3.1 8B, "
                           f"d={t.draft_step_s * 1e3:.2f}, ")
    assert f"c={t.c:.3f}, k1=5, v={t.verify_s[4] * 1e3:.2f}, why=serving.s.timing.one_step)" in text
    slow = sps.SpecTiming("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 1024, 0.04, 0.004, {4: 0.06})
    assert "why=serving.s.timing.steps(r=1.50))" in sw.timing_caption(slow, 4, lang=PSEUDO)


def test_batch_sweep_caption_names_the_first_compute_bound_batch():
    def points(*bounds):
        return [sps.SpecBatchPoint(2 ** i, 1.0, 1.0, 1.0, b) for i, b in enumerate(bounds)]

    assert "serving.s.bc.stays(b=4, s=1.00)" in sw.batch_sweep_caption(points("memory", "memory", "compute"), PSEUDO)
    assert "serving.s.bc.stays_memory" in sw.batch_sweep_caption(points("memory", "memory"), PSEUDO)
    assert sw.batch_sweep_caption(points("compute"), PSEUDO).startswith("serving.s.bc(where=serving.s.bc.already(b=1,")
    assert "serving.s.bc.stays(b=2, s=1.00)" in sw.batch_sweep_caption(points("memory", "compute"), PSEUDO)
    real = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 0.8, 4)
    assert "serving.s.bc.falls(b=128, s0=2.05, b0=64, s=1.42)" in sw.batch_sweep_caption(real, PSEUDO)
    assert sw.batch_sweep_caption(points("compute"), PSEUDO) == (  # the speedup there, computed
        "serving.s.bc(where=serving.s.bc.already(b=1, s=1.00))")


def test_spec_run_summary_is_worded_from_the_run():
    run = sp.SpecRun(k=3, prompt_ids=[1, 2], new_ids=[5, 6, 7, 8, 9], target_ids=[5, 6, 7, 8, 9], accepted=[3, 0],
                     spec_s=0.125, target_s=0.0675, draft_step_s=0.001, target_step_s=0.00227, verify_s=0.0029,
                     target_layers=4, draft_layers=1)
    text = spec_summary(run, PSEUDO)
    assert text.startswith("serving.spec.head(passes=2, tokens=5, rate=75%)serving.spec.same")
    assert "serving.spec.times(device=cpu, spec=125, target=68, k1=4, verify=2.90, step=2.27)" in text
    assert "serving.spec.c_far(tl=4, dl=1," in text
    # c = 1 / 2.27 = 0.44, far above the draft's 1 of 4 layers; verify = 2.9 / 2.27 = 1.28 steps; 67.5 / 125 = 0.54×
    assert text.endswith(
        "step=2.27)serving.spec.c_far(tl=4, dl=1, c=0.44, ratio=0.25) serving.spec.verify_costly(k1=4, v=1.28) "
        "serving.spec.not_paid(x=0.54)")
    differs = sp.SpecRun(k=3, prompt_ids=[1], new_ids=[5, 6, 1], target_ids=[5, 6, 7], accepted=[1], spec_s=0.1, target_s=0.1, draft_step_s=0.01, target_step_s=0.02, verify_s=0.03, device="cuda", dtype="bfloat16")
    assert "serving.spec.differs(first=2," in spec_summary(differs, PSEUDO)
    assert "dtype=bfloat16, device=cuda)" in spec_summary(differs, PSEUDO)
    assert "serving.spec.c_only(c=0.50)" in spec_summary(differs, PSEUDO)  # no layer counts: no ratio


def test_spec_run_cost_summary_follows_the_measurements():
    def run(draft_step_s, verify_s, spec_s, draft_layers=2):
        return sp.SpecRun(k=4, prompt_ids=[1], new_ids=[5, 6], target_ids=[5, 6], accepted=[4], spec_s=spec_s, target_s=0.16, draft_step_s=draft_step_s, target_step_s=0.01, verify_s=verify_s,
                          target_layers=4, draft_layers=draft_layers)

    # c = 0.0055 / 0.01 = 0.55 against 2 / 4 layers; verify 0.011 / 0.01 = 1.1 steps; 0.16 / 0.1 = 1.6×
    assert spec_cost_summary(run(0.0055, 0.011, 0.1), PSEUDO) == (
        "serving.spec.c_near(dl=2, tl=4, c=0.55, ratio=0.50) serving.spec.verify_one(k1=5, v=1.10) "
        "serving.spec.paid(x=1.60)")
    assert "serving.spec.c_below(dl=2, tl=4, c=0.10, ratio=0.50)" in spec_cost_summary(run(0.001, 0.011, 0.1), PSEUDO)
    assert "serving.spec.c_far(tl=4, dl=2, c=0.75, ratio=0.50)" in spec_cost_summary(run(0.0075, 0.011, 0.1), PSEUDO)
    assert "serving.spec.c_near(dl=4, tl=4, c=0.90, ratio=1.00)" in spec_cost_summary(run(0.009, 0.011, 0.1,
                                                                                          draft_layers=4), PSEUDO)


def test_spec_run_formula_tokens_per_pass():
    run = sp.SpecRun(k=3, prompt_ids=[1], new_ids=[5, 6, 7, 8, 9], target_ids=[5, 6, 7, 8, 9], accepted=[3, 0], spec_s=1.0, target_s=1.0, draft_step_s=0.001, target_step_s=0.002, verify_s=0.004)
    assert run.acceptance_rate == 0.75  # 3 accepted of 3 + 1 judged
    assert run.formula_tokens_per_pass == pytest.approx((1 - 0.75**4) / 0.25)  # 2.734375
    assert run.verify_steps == 2.0
    none = sp.SpecRun(k=3, prompt_ids=[1], new_ids=[5], target_ids=[5], accepted=[], spec_s=1.0, target_s=1.0, draft_step_s=0.001, target_step_s=0.002, verify_s=0.004)
    assert np.isnan(none.formula_tokens_per_pass)


def test_drafts_on_offer():
    from sim.model.transformer import ASSETS_DIR, PRESETS, checkpoint_path

    assert sp.CHECKPOINTS == ASSETS_DIR
    assert sp.target_layers() == PRESETS["mha"].n_layers == 4
    trained = [name for name in PRESETS if name != "mha" and checkpoint_path(name).is_file()]
    assert sp.available_drafts() == ["first1", "first2", "first3", *trained]
    assert draft_label("first2", PSEUDO) == "serving.spec.draft_exit(n=2, total=4)"
    assert draft_label("gqa", PSEUDO) == "serving.spec.draft_model(name=GQA)"
    assert sp.draft_layers("first3") == 3 and sp.draft_layers("mqa") is None


def test_make_draft_truncates_the_target_or_loads_the_model():
    from tests.conftest import random_model

    target = random_model()
    loaded = []
    draft = sp.make_draft(target, "first2", loaded.append)
    assert draft.cfg.n_layers == 2 and draft.lm_head is target.lm_head and not loaded
    assert sp.make_draft(target, "gqa", lambda key: f"loaded {key}") == "loaded gqa"


def test_spec_run_seconds_counts_k_plus_two_steps_per_token():
    from sim.work.run_cost import ModelRates

    # cached_work(10, 5): a prefill and 4 one-token steps = 5 calls; (k + 2) = 6 of those at 1 s a call
    assert sp.spec_run_seconds(ModelRates(1.0, 0.0, 0.0), prompt_len=10, max_new_tokens=5, k=4) == 30.0


def test_curves_chosen_and_best_speedup():
    curves = sps.run_speculative(sps.SpecSetup(alpha=0.8, k=4, c=0.1, mc_passes=100))
    # E(0.8, 4) = (1 − 0.8⁵) / 0.2 = 3.3616, over 4 · 0.1 + 1; the best k at c = 0.1 is 6: 3.951424 / 1.6
    assert curves.chosen_speedup == pytest.approx(3.3616 / 1.4)
    k, speedup = curves.best_speedup
    assert k == 6 and speedup == pytest.approx(3.951424 / 1.6)


def test_the_default_pair_says_where_it_runs():
    """70B + 8B in BF16 cannot share one 80 GB H100: the tab says so, how many it takes, and why one GPU's timing
    still gives c; a pair that fits says that."""
    from sim.serving import speculative as sps

    f = sps.spec_fit("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    assert f.usable_per_gpu == 80 * 2**30 * 9 // 10  # 90% of 80 GiB
    assert 2 * f.usable_per_gpu < f.need_bytes <= 3 * f.usable_per_gpu and f.num_gpus == 3
    said = sw.fit_caption(sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm"))
    assert sw.fit_caption(sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm"), lang=PSEUDO) == (
        "serving.s.fit.many(target=Llama 3.1 70B, draft=Llama 3.1 8B, dtype=BF16, need=157.6 GB, usable=77.31 GB, "
        "gpu=NVIDIA H100 SXM 80GB, util=90%, n=3)")
    fits = sw.fit_caption(sps.spec_timing("llama-3.1-8b", "tiny-mha", "h100-sxm"), lang=PSEUDO)
    assert fits.startswith("serving.s.fit.one(") and sps.spec_fit("llama-3.1-8b", "tiny-mha", "h100-sxm").num_gpus == 1
    at = run_page("serving", {"tab": "spec"})
    assert not at.exception and any(c.value == said for c in at.caption)
