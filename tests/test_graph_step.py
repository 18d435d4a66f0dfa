"""The static-shape decode step a CUDA graph captures (sim/model/graph_step.py), run op by op on the CPU: the
same tokens as the eager step, its FLOPs those of every cache slot, the cache's length kept, clear errors; and
the eager step's cheaper operators give the same bits as the ones they replace."""

import pytest
import torch
import torch.nn.functional as F

from sim.cost.opcount import step_bytes, step_flops
from sim.model.fast import FastRMSNorm, apply_fast_paths
from sim.model.generate import SamplingConfig, decode_loop, encode, first_difference, generate, prefill, run_comparison
from sim.model.graph_step import StaticDecodeStep, graph_unavailable
from sim.model.kvcache import ContiguousKVCache
from sim.model.quant_cache import FULL, QuantizedKVCache
from sim.model.transformer import PRESETS, RMSNorm
from sim.words import say
from sim.words.decode import step_caption
from tests.conftest import random_model

PROMPT = encode("HAMLET.\nTo be, or not to be")


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("attn_impl", ["sdpa", "eager"])
def test_static_step_gives_the_eager_steps_tokens(shipped_models, name, attn_impl):
    model = shipped_models[name]
    eager = generate(model, PROMPT, 150, mode="cached", attn_impl=attn_impl, keep_logits=True, count=False)
    static = generate(model, PROMPT, 150, mode="cached", attn_impl=attn_impl, keep_logits=True, count=False,
                      step="static")
    assert first_difference(eager.new_ids, static.new_ids) is None
    for a, b in zip(eager.steps, static.steps, strict=True):  # the cached-vs-naive tolerance of test_model
        torch.testing.assert_close(a.logits, b.logits, rtol=1e-4, atol=1e-4)


def test_static_steps_count_every_slot_and_keep_the_cache_length():
    """A cache of 24 + 10 - 1 = 33 slots: every decode step scores one query against all 33 (the unwritten ones
    masked), so its FLOPs are the formula's at kv_len 33 and it reads all 33 positions' K/V."""
    model = random_model(2)
    n = 10
    steps = list(generate(model, PROMPT, n, mode="cached", step="static").steps)
    slots = len(PROMPT) + n - 1
    assert steps[0].part_to_flops == step_flops(model.cfg, len(PROMPT), len(PROMPT))  # the prefill is eager
    for s in steps[1:]:
        assert s.part_to_flops == step_flops(model.cfg, 1, slots), s.step
        assert s.bytes_kv == step_bytes(model.cfg, 1, slots, 4, cached=True)["kv"]
        assert s.kv_len == s.position  # the keys a step may attend to are still the written ones
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=40)
    list(decode_loop(model, PROMPT, 5, cache=cache, step="static"))
    assert cache.num_tokens == len(PROMPT) + 4  # the last token is never fed back
    assert cache.used_bytes() == 2 * 4 * 2 * 32 * 4 * (len(PROMPT) + 4)  # 2 · L · Hkv · D · 4 B · tokens


def test_static_step_writes_the_same_cache_rows_as_the_eager_step():
    model = random_model(1)
    caches = {}
    for step in ("eager", "static"):
        caches[step] = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=40)
        list(decode_loop(model, PROMPT, 8, cache=caches[step], attn_impl="sdpa", step=step))
    for layer in range(model.cfg.n_layers):
        for a, b in zip(caches["eager"].filled(layer), caches["static"].filled(layer), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_repeated_position_overwrites_and_forgets_what_came_after():
    """Writing position p again (the same token) gives the same logits and leaves p + 1 positions."""
    model = random_model(4)
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=32)
    ids = torch.tensor([PROMPT[:6]])
    prefill(model, ids, cache)
    step = StaticDecodeStep(model, cache, attn_impl="sdpa")
    first = step(torch.tensor([[7]]), 6).clone()
    step(torch.tensor([[8]]), 7)
    again = step(torch.tensor([[7]]), 6)
    assert torch.equal(first, again) and cache.num_tokens == 7


def test_errors_name_what_is_wrong():
    model = random_model(1)
    with pytest.raises(ValueError, match="needs a ContiguousKVCache, got QuantizedKVCache"):
        StaticDecodeStep(model, QuantizedKVCache(model.cfg, scheme=FULL, batch_size=1, max_seq_len=16))
    with pytest.raises(ValueError, match="naive decoding has none"):
        next(decode_loop(model, PROMPT, 2, cache=None, step="static"))
    with pytest.raises(ValueError, match=r"step must be one of \('eager', 'static', 'graph'\), got 'jit'"):
        next(decode_loop(model, PROMPT, 2, cache=ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=32), step="jit"))
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=8)
    prefill(model, torch.tensor([PROMPT[:3]]), cache)
    step = StaticDecodeStep(model, cache)
    with pytest.raises(ValueError, match="only 3 positions are filled"):
        step(torch.tensor([[1]]), 5)
    with pytest.raises(ValueError, match="cache holds 8 positions; asked to write position 8"):
        step(torch.tensor([[1]]), 8)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without CUDA gives")
def test_without_cuda_the_graph_step_says_why():
    model = random_model(1)
    reason = "this machine has no CUDA device (torch.cuda.is_available() is False)"
    assert say("en", graph_unavailable(model.device)) == reason
    with pytest.raises(ValueError, match=r"a CUDA graph step needs a CUDA device: this machine has no CUDA"):
        StaticDecodeStep(model, ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=8), graph=True)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        run_comparison(model, PROMPT, 4, sampling=SamplingConfig(), step="graph")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_graph_step_replays_the_eager_steps_tokens_on_cuda():
    from sim.model.transformer import load_model

    model = load_model("mha", "cuda")
    for impl in ("sdpa", "eager"):
        eager = generate(model, PROMPT, 120, mode="cached", attn_impl=impl, keep_logits=True, count=False)
        graph = generate(model, PROMPT, 120, mode="cached", attn_impl=impl, keep_logits=True, count=False, step="graph")
        assert first_difference(eager.new_ids, graph.new_ids) is None
        for a, b in zip(eager.steps, graph.steps, strict=True):
            torch.testing.assert_close(a.logits, b.logits, rtol=1e-4, atol=1e-4)


def test_comparison_with_the_static_step_and_its_caption():
    model = random_model(2)
    res = run_comparison(model, PROMPT, 6, sampling=SamplingConfig(), attn_impl="sdpa", step="static")
    assert res.first_difference is None and res.step == "static"
    assert step_caption("static", 29) == (
        "Cached steps ran with static shapes (what a CUDA graph captures), op by op: each attends over all 29 "
        "cache slots, the unwritten ones masked, so its attention FLOPs are those of 29 keys.")
    assert step_caption("graph", 29) == (
        "Cached steps ran as a CUDA graph: captured once before the first decode step (not counted in any step's "
        "time), then replayed, one launch per token. Each step attends over all 29 cache slots, the unwritten ones "
        "masked, so its attention FLOPs are those of 29 keys.")
    assert step_caption("eager", 29) == ""


# --- the fast paths' cheaper operators: the same bits ---------------------------------------------------


@pytest.mark.parametrize("rows", [1, 7, 300])
def test_rms_norm_is_llamas_arithmetic_bit_for_bit(rows):
    torch.manual_seed(rows)
    norm = RMSNorm(128, 1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(128) * 0.3 + 1)
    x = torch.randn(rows, 128)
    llama = norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))  # HF LlamaRMSNorm, fp32
    with torch.inference_mode():
        reference = norm(x)
        norm.__class__, norm.contiguous = FastRMSNorm, False
        norm.derive()
        fast = norm(x)  # the 8-call path (with gradients on, the reference)
    assert torch.equal(reference, llama) and torch.equal(fast, llama)
    assert torch.equal(fast, F.rms_norm(x, (128,), norm.weight, 1e-5))


def test_a_moved_model_derives_its_fused_views_again():
    """.to() converts the fused copies separately from the weights: they are derived again, as views."""
    model = apply_fast_paths(random_model(2))
    ids = torch.tensor([PROMPT])
    before = model(ids)
    model = model.to(torch.float64)
    att = model.model.layers[0].self_attn
    assert att.wqkv_t.dtype == torch.float64 and not att.wqkv_t.is_contiguous()  # a (d, out) view of the copy
    assert torch.equal(att.wqkv_t.t(), torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]))
    assert model.lm_head.weight_t.data_ptr() == model.lm_head.weight.data_ptr()
    torch.testing.assert_close(model(ids).float(), before, rtol=1e-5, atol=1e-5)
