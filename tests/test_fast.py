"""sim.model.fast against the reference model, bit for bit: logits and every cache row, prefill and decode, eager and
sdpa, on the shipped checkpoints and on random weights; and every cache keeps the one KVCache contract."""

import copy
import inspect

import pytest
import torch

import sim.model.transformer as transformer
from sim.model.evict_cache import EvictingKVCache
from sim.model.fast import (
    FastAttention,
    FastLinear,
    FastMLP,
    FastRMSNorm,
    apply_fast_paths,
    has_fast_paths,
    remove_fast_paths,
)
from sim.model.generate import decode_loop, encode, generate
from sim.model.graph_step import StaticKVCache
from sim.model.kvcache import ContiguousKVCache, KVCache
from sim.model.paged_cache import PagedKVCache
from sim.model.quant_cache import FULL, QuantizedKVCache
from sim.model.transformer import PRESETS, load_model
from tests.conftest import random_model

PROMPT = encode("HAMLET.\nTo be, or not to be, that is the question")


def reference_of(model):
    return remove_fast_paths(copy.deepcopy(model))


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_fast_paths_give_the_reference_bits_logits_and_cache(shipped_models, name, attn_impl):
    fast = shipped_models[name]
    ref = reference_of(fast)
    assert has_fast_paths(fast) and not has_fast_paths(ref)
    caches = {}
    runs = {}
    for label, model in (("fast", fast), ("ref", ref)):
        caches[label] = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=len(PROMPT) + 40)
        runs[label] = list(decode_loop(model, PROMPT, 40, cache=caches[label], attn_impl=attn_impl, keep_logits=True))
    assert [r.token for r in runs["fast"]] == [r.token for r in runs["ref"]]
    for a, b in zip(runs["fast"], runs["ref"], strict=True):
        assert torch.equal(a.logits, b.logits), a.step
    for layer in range(fast.cfg.n_layers):
        for a, b in zip(caches["fast"].filled(layer), caches["ref"].filled(layer), strict=True):
            assert torch.equal(a, b), layer


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_fast_paths_on_random_weights_and_a_batch(n_kv_heads):
    ref = random_model(n_kv_heads, seed=n_kv_heads)
    fast = apply_fast_paths(copy.deepcopy(ref))
    ids = torch.randint(0, 256, (3, 29), generator=torch.Generator().manual_seed(n_kv_heads))
    with torch.inference_mode():
        for impl in ("eager", "sdpa"):
            assert torch.equal(fast(ids, attn_impl=impl), ref(ids, attn_impl=impl))
            assert torch.equal(fast(ids[:, :1], attn_impl=impl), ref(ids[:, :1], attn_impl=impl))  # one row each


def test_every_module_is_swapped_and_swapped_back():
    model = apply_fast_paths(random_model(2))
    kinds = {type(m) for m in model.modules()}
    assert {FastLinear, FastRMSNorm, FastAttention, FastMLP} <= kinds
    assert not kinds & {torch.nn.Linear, transformer.RMSNorm, transformer.Attention, transformer.MLP}
    remove_fast_paths(model)
    assert not has_fast_paths(model) and all("weight_t" not in vars(m) for m in model.modules())
    assert set(model.state_dict()) == set(random_model(2).state_dict())  # the checkpoint's names are untouched


def test_the_contiguous_layout_is_close_and_gives_the_same_tokens():
    """The one fast path that is not bit-identical (another summation order): close, and the same greedy tokens."""
    ref = load_model("mha")
    remove_fast_paths(ref)
    fast = apply_fast_paths(copy.deepcopy(ref), contiguous=True)
    assert fast.lm_head.weight_t.is_contiguous()
    a = generate(fast, PROMPT, 30, mode="cached", attn_impl="sdpa", keep_logits=True, count=False)
    b = generate(ref, PROMPT, 30, mode="cached", attn_impl="sdpa", keep_logits=True, count=False)
    assert a.new_ids == b.new_ids
    for x, y in zip(a.steps, b.steps, strict=True):
        torch.testing.assert_close(x.logits, y.logits, rtol=1e-5, atol=1e-5)


# --- the cache contract ---------------------------------------------------------------------------------


def test_every_cache_keeps_the_one_contract():
    for cls in (ContiguousKVCache, PagedKVCache, QuantizedKVCache, EvictingKVCache, StaticKVCache):
        assert issubclass(cls, KVCache) and not inspect.isabstract(cls), cls.__name__
        assert not hasattr(cls, "update"), cls.__name__  # the old one-method interface is gone
    cfg = PRESETS["mha"]
    assert ContiguousKVCache(cfg, batch_size=1, max_seq_len=8).attention_observer is None
    assert EvictingKVCache(cfg, policy="window", budget=4).attention_observer is None
    h2o = EvictingKVCache(cfg, policy="h2o", budget=4)
    assert h2o.attention_observer is h2o


def test_the_model_never_asks_a_cache_what_it_is():
    """No isinstance, getattr or hasattr on a cache in the model's code: it calls the contract's methods."""
    import sim.model.graph_step as graph_step

    for module in (transformer, graph_step):
        src = inspect.getsource(module)
        assert "isinstance(" not in src and "getattr(" not in src and "hasattr(" not in src, module.__name__


def test_a_step_calls_begin_write_per_layer_end_in_order():
    model = random_model(1)
    calls = []

    class Recording(ContiguousKVCache):
        def begin_step(self, start_pos, num_new_tokens, *, batch_size):
            calls.append(("begin", start_pos, num_new_tokens, batch_size))
            super().begin_step(start_pos, num_new_tokens, batch_size=batch_size)

        def write(self, layer, k, v):
            calls.append(("write", layer, k.shape[2], self.num_tokens))
            return super().write(layer, k, v)

        def end_step(self):
            calls.append(("end",))
            super().end_step()

    cache = Recording(model.cfg, batch_size=1, max_seq_len=16)
    with torch.inference_mode():
        model(torch.tensor([PROMPT[:5]]), cache=cache)
        model(torch.tensor([PROMPT[5:6]]), start_pos=5, cache=cache)
    L = model.cfg.n_layers
    assert calls == ([("begin", 0, 5, 1)] + [("write", i, 5, 0) for i in range(L)] + [("end",)]
                     + [("begin", 5, 1, 1)] + [("write", i, 1, 5) for i in range(L)] + [("end",)])


def test_a_refused_step_writes_nothing():
    model = random_model(1)
    cache = QuantizedKVCache(model.cfg, scheme=FULL, batch_size=1, max_seq_len=16)
    with torch.inference_mode():
        model(torch.tensor([PROMPT[:5]]), cache=cache)
        with pytest.raises(ValueError, match="holds 5 tokens, asked to write at 3"):
            model(torch.tensor([PROMPT[:2]]), start_pos=3, cache=cache)
    assert cache.num_tokens == 5 and all(s.length == 5 for pair in cache.stores for s in pair)


def test_options_are_keyword_only():
    model = random_model(1)
    with pytest.raises(TypeError):
        model(torch.tensor([PROMPT[:3]]), 0, None)
