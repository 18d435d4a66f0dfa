"""sim/cost/roofline_view.py: the roofline page's figures in its units."""

from dataclasses import replace

from sim.cost.presets import load_presets
from sim.cost.roofline import Hardware, StepCost
from sim.cost.roofline_view import machine_figures, prefill_contexts, step_figures


def test_step_figures_in_ms_and_tokens_per_s():
    step = StepCost("decode", flops_linear=2e12, flops_attention=0.0, bytes_weights=4e9, bytes_kv=0.0,
                    bytes_activations=0.0, tokens=8)
    fig = step_figures(step, Hardware("h", peak_flops=1e15, bandwidth=2e12))
    assert step.time(Hardware("h", 1e15, 2e12)) == 2e-3  # memory-bound: 4e9 B ÷ 2e12 B/s
    assert (fig.ms, fig.tokens_per_s) == (2e-3 * 1e3, 8 / 2e-3)


def test_prefill_contexts_stop_at_the_models_context_but_reach_128():
    arch = next(iter(load_presets().values()))
    contexts = [64, 128, 256, 4096]
    assert prefill_contexts(replace(arch, max_position_embeddings=256), contexts) == [64, 128, 256]
    assert prefill_contexts(replace(arch, max_position_embeddings=32), contexts) == [64, 128]


def test_machine_figures():
    fig = machine_figures(peak_flops=3e12, bandwidth=1.5e11)
    assert (fig.gb_per_s, fig.gflop_per_s, fig.ridge) == (1.5e11 / 1e9, 3e12 / 1e9, 3e12 / 1.5e11)
