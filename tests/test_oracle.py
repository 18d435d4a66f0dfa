"""Oracle: our weights loaded into Hugging Face's LlamaForCausalLM give the same logits and the
same greedy continuation (offline; transformers is a test-only dependency)."""

import pytest
import torch

from sim.model.generate import encode, generate
from sim.model.transformer import PRESETS, hf_twin

pytest.importorskip("transformers")

PROMPT = encode("ROMEO.\nBut, soft! what light through yonder window breaks?")


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("attn_impl,tol", [("sdpa", 1e-6), ("eager", 1e-4)])
def test_logits_match_hf_llama(shipped_models, name, attn_impl, tol):
    model = shipped_models[name]
    hf = hf_twin(model, attn_impl)
    ids = torch.tensor([PROMPT * 4])
    with torch.no_grad():
        ref = hf(ids).logits
    ours = model(ids, attn_impl=attn_impl)
    torch.testing.assert_close(ours, ref, rtol=0, atol=tol)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_greedy_continuation_matches_hf_generate(shipped_models, name):
    model = shipped_models[name]
    hf = hf_twin(model, "sdpa")
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        out = hf.generate(ids, max_new_tokens=120, min_new_tokens=120, do_sample=False)
    ours = generate(model, PROMPT, 120, mode="cached", attn_impl="sdpa", count=False)
    assert out[0, len(PROMPT):].tolist() == ours.new_ids
