"""The model and its decoding: cached == naive, counted FLOPs == formulas, cache bytes, errors."""

import pytest
import torch

from sim.cost.opcount import kv_cache_bytes, step_flops
from sim.model.errors import CheckpointError
from sim.model.fast import has_fast_paths
from sim.model.generate import (
    SamplingConfig,
    check_lengths,
    decode_loop,
    encode,
    first_difference,
    generate,
    prefill,
)
from sim.model.kvcache import ContiguousKVCache
from sim.model.transformer import PRESETS, AttnOptions, ModelConfig, load_model, save_checkpoint
from sim.refusal import Refusal
from tests.conftest import random_model

PROMPT = encode("HAMLET.\nTo be, or not to be")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_cached_equals_naive_for_220_tokens(shipped_models, name):
    model = shipped_models[name]
    naive = generate(model, PROMPT, 220, mode="naive", keep_logits=True, count=False)
    cached = generate(model, PROMPT, 220, mode="cached", keep_logits=True, count=False)
    assert first_difference(naive.new_ids, cached.new_ids) is None
    for a, b in zip(naive.steps, cached.steps, strict=True):
        torch.testing.assert_close(a.logits, b.logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_sdpa_backends_match_eager(n_kv_heads):
    model = random_model(n_kv_heads)
    ids = torch.tensor([PROMPT * 3])  # (1, T)
    ref = model(ids, attn_impl="eager")
    for backend in (None, "math", "flash"):
        out = model(ids, attn_impl="sdpa", sdpa_backend=backend)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_chunked_prefill_matches_one_shot():
    """Feeding the prompt in two chunks through the cache (a T×S mask that is not square)
    gives the same logits as feeding it at once."""
    model = random_model(2)
    ids = torch.tensor([PROMPT])
    full = model(ids, attn_impl="eager")[:, -1]
    for impl in ("eager", "sdpa"):
        cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=64)
        model(ids[:, :10], cache=cache, attn_impl=impl)
        last = model(ids[:, 10:], start_pos=10, cache=cache, attn_impl=impl)[:, -1]
        torch.testing.assert_close(last, full, rtol=1e-5, atol=1e-5)


def test_seeded_sampling_is_reproducible_and_mode_independent():
    model = random_model(1)
    s = SamplingConfig(temperature=0.8, top_k=20, seed=7)
    a = generate(model, PROMPT, 60, mode="cached", sampling=s, count=False)
    b = generate(model, PROMPT, 60, mode="naive", sampling=s, count=False)
    c = generate(model, PROMPT, 60, mode="cached", sampling=SamplingConfig(0.8, 20, seed=8), count=False)
    assert a.new_ids == b.new_ids
    assert a.new_ids != c.new_ids


@pytest.mark.parametrize("mode", ["naive", "cached"])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_counted_flops_equal_closed_form(mode, n_kv_heads):
    model = random_model(n_kv_heads)
    result = generate(model, PROMPT, 12, mode=mode)
    for s in result.steps:
        assert s.part_to_flops == step_flops(model.cfg, s.num_new, s.kv_len), s.step
    # cached steps after prefill feed one token; naive steps feed the whole sequence
    expected_num_new = [len(PROMPT)] + [len(PROMPT) + i if mode == "naive" else 1 for i in range(1, 12)]
    assert [s.num_new for s in result.steps] == expected_num_new


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cache_bytes_from_real_tensors(n_kv_heads):
    model = random_model(n_kv_heads)
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=128)
    model(torch.tensor([PROMPT]), cache=cache)
    n = len(PROMPT)
    cfg = model.cfg
    assert cache.num_tokens == n
    assert cache.used_bytes() == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 * n
    assert cache.used_bytes() == kv_cache_bytes(cfg, n, 4)
    assert cache.reserved_bytes() == kv_cache_bytes(cfg, 128, 4)


def test_cache_rejects_gaps_and_overflow():
    cfg = ModelConfig()
    cache = ContiguousKVCache(cfg, batch_size=1, max_seq_len=8)
    with pytest.raises(ValueError, match="gap"):
        cache.begin_step(3, 2, batch_size=1)
    with pytest.raises(ValueError, match="holds 8 positions"):
        cache.begin_step(7, 2, batch_size=1)
    with pytest.raises(ValueError, match="the batch has 2 rows but the cache was made for 1"):
        cache.begin_step(0, 2, batch_size=2)
    assert cache.num_tokens == 0  # a refused step changes nothing


def test_generation_that_exactly_fills_the_context():
    """prompt + new - 1 == max_seq_len: the cache holds exactly the positions that are fed."""
    model = random_model(1, max_seq_len=32)
    res = generate(model, PROMPT[:8], 25, mode="cached", count=False)
    assert len(res.new_ids) == 25 and res.steps[-1].kv_len == 32


def test_length_cap_names_the_numbers():
    model = random_model(4)
    with pytest.raises(Refusal) as info:
        check_lengths(model, 10, 1016)
    assert (info.value.key, info.value.fields) == ("model.err.past_context",
                                                   {"prompt": 10, "n": 1016, "limit": 1024, "most": 1015})
    check_lengths(model, 10, 1015)  # exactly fills the context: fine
    with pytest.raises(ValueError, match="exceed the trained context"):
        model(torch.zeros(1, 1025, dtype=torch.long))


def test_config_validation():
    with pytest.raises(Refusal) as info:
        ModelConfig(n_kv_heads=3)
    assert (info.value.key, info.value.fields) == ("model.err.kv_heads_split", {"n_heads": 4, "n_kv_heads": 3})
    with pytest.raises(Refusal) as info:
        ModelConfig.from_dict({"d_model": 64, "n_expert": 8})
    assert (info.value.key, info.value.fields) == ("model.err.unknown_fields", {"fields": "'n_expert'"})
    assert [PRESETS[n].attention_kind for n in ("mha", "gqa", "mqa")] == ["MHA", "GQA", "MQA"]


def test_missing_and_corrupt_checkpoints_name_the_file(tmp_path):
    missing = tmp_path / "nope.safetensors"
    with pytest.raises(CheckpointError, match="nope.safetensors"):
        load_model(missing)
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(CheckpointError, match="corrupt.safetensors"):
        load_model(corrupt)
    truncated = tmp_path / "truncated.safetensors"
    save_checkpoint(random_model(1), truncated)
    truncated.write_bytes(truncated.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="truncated.safetensors"):
        load_model(truncated)


def test_checkpoint_whose_tensors_do_not_match_its_config(tmp_path):
    import json
    from dataclasses import asdict

    path = tmp_path / "liar.safetensors"
    save_checkpoint(random_model(2), path, {"config": json.dumps(asdict(ModelConfig(n_kv_heads=4)))})
    with pytest.raises(CheckpointError, match="liar.safetensors does not match its config"):
        load_model(path)


def test_checkpoint_round_trip(tmp_path):
    model = random_model(2)
    path = tmp_path / "m.safetensors"
    save_checkpoint(model, path)
    loaded = load_model(path)
    ids = torch.tensor([PROMPT])
    assert loaded.cfg == model.cfg
    # load_model applies the fast paths (fused q/k/v and gate/up): the same bits as the reference code
    assert has_fast_paths(loaded) and not has_fast_paths(model)
    assert torch.equal(loaded(ids), model(ids))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_shipped_checkpoints(shipped_models, name):
    from sim.model.transformer import checkpoint_path

    model = shipped_models[name]
    assert model.cfg == PRESETS[name]
    assert checkpoint_path(name).stat().st_size <= 5 * 2**20


def test_a_cache_holds_a_steps_tokens_once_the_step_ends():
    """begin_step, a write per layer, end_step: num_tokens advances at end_step, never layer by layer; each write
    returns every position the layer attends to, the new ones included."""
    cfg = ModelConfig(n_layers=3)
    cache = ContiguousKVCache(cfg, batch_size=1, max_seq_len=8)
    k = torch.ones(1, cfg.n_kv_heads, 2, cfg.head_dim)  # (B, Hkv, T, D)
    cache.begin_step(0, 2, batch_size=1)
    for layer in range(3):
        k_all, v_all = cache.write(layer, k * layer, -k * layer)
        assert k_all.shape == (1, cfg.n_kv_heads, 2, cfg.head_dim) and torch.equal(k_all, k * layer)
        assert torch.equal(v_all, -k * layer) and cache.num_tokens == 0
    cache.end_step()
    assert cache.num_tokens == 2
    with pytest.raises(ValueError, match="only 2 positions are filled"):
        cache.begin_step(3, 1, batch_size=1)  # writing at 3 leaves a gap
    cache.begin_step(2, 1, batch_size=1)
    assert [cache.write(i, k[:, :, :1], k[:, :, :1])[0].shape[2] for i in range(3)] == [3, 3, 3]
    cache.end_step()
    assert cache.num_tokens == 3
    cache.truncate(1)
    assert cache.num_tokens == 1 and [cache.filled(i)[0].shape[2] for i in range(3)] == [1, 1, 1]
    with pytest.raises(ValueError, match="can truncate to 0..1"):
        cache.truncate(2)


def test_a_forward_advances_the_cache_by_its_tokens():
    model = random_model(2)
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=64)
    model(torch.tensor([PROMPT[:10]]), cache=cache)
    assert cache.num_tokens == 10
    model(torch.tensor([PROMPT[10:13]]), start_pos=10, cache=cache)
    assert cache.num_tokens == 13 and cache.used_bytes() == kv_cache_bytes(model.cfg, 13, 4)


def test_decode_loop_from_a_chunk_on_a_cache_equals_generate():
    """The one loop fed a chunk at position 10 of a cache holding the first 10 tokens gives what
    generate gives for the whole prompt (tokens, logits, FLOPs)."""
    model = random_model(1)
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=64)
    prefill(model, torch.tensor([PROMPT[:10]]), cache)
    steps = list(decode_loop(model, PROMPT[10:], 20, cache=cache, start_pos=10, count=True, keep_logits=True))
    ref = generate(model, PROMPT, 20, mode="cached", keep_logits=True)
    assert [s.token for s in steps] == ref.new_ids
    assert [(s.position, s.kv_len) for s in steps] == [(s.position, s.kv_len) for s in ref.steps]
    for a, b in zip(steps[1:], ref.steps[1:], strict=True):
        assert a.part_to_flops == b.part_to_flops and a.num_new == b.num_new == 1
        torch.testing.assert_close(a.logits, b.logits, rtol=1e-5, atol=1e-5)
    assert steps[0].num_new == len(PROMPT) - 10 and steps[0].bytes_kv > 0 == ref.steps[0].bytes_kv
    with pytest.raises(ValueError, match="without a cache every step starts at position 0"):
        next(decode_loop(model, PROMPT, 2, cache=None, start_pos=3))


def test_device_dtype_and_attention_options():
    model = random_model(2).to(torch.float64)
    assert model.device == torch.device("cpu") and model.dtype == torch.float64
    with pytest.raises(ValueError, match=r"attn_impl must be one of \('eager', 'sdpa'\), got 'flash'"):
        model(torch.tensor([PROMPT]), attn_impl="flash")
    assert AttnOptions().impl == "eager" and AttnOptions(impl="sdpa", sdpa_backend="math").sdpa_backend == "math"
