"""KV memory and the other simulators know the real model the lab runs by name, with the numbers of its own file."""

from __future__ import annotations

import os

import pytest

from sim.cost.memory import MemoryConfig, estimate_num_params, kv_memory
from sim.cost.presets import load_presets


def test_the_preset_holds_the_formula():
    p = load_presets()["smollm2-135m"]
    assert (p.n_layers, p.d_model, p.n_heads, p.n_kv_heads, p.head_dim, p.d_ff) == (30, 576, 9, 3, 64, 1536)
    assert p.attention == "GQA" and p.tie_word_embeddings
    assert kv_memory(MemoryConfig(p, batch=1, context=1, kv_dtype="fp16")).bytes_per_token == 30 * 2 * 3 * 64 * 2
    # the parameter count the lab estimates against the card's 135M (tied embeddings counted once)
    assert abs(estimate_num_params(p) / 135e6 - 1) < 0.01


def test_the_preset_is_the_file_the_lab_runs():
    from sim.model.gguf_load import load_real_model, wheel_gguf
    from sim.refusal import Refusal

    try:
        source = wheel_gguf()
    except Refusal as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but the real model is not usable: {exc}")
        pytest.skip(f"the real model is not installed ({exc})")
    cfg, p = load_real_model(source).model.cfg, load_presets()["smollm2-135m"]
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff, cfg.vocab_size, cfg.max_seq_len,
            cfg.tie_word_embeddings) == (p.n_layers, p.d_model, p.n_heads, p.n_kv_heads, p.d_ff, p.vocab_size,
                                         p.max_position_embeddings, p.tie_word_embeddings)
