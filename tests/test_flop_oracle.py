"""torch's FlopCounterMode is the oracle: the FLOPs the model tallies by hand while it runs and the
closed-form counts in sim/cost/opcount.py both equal what torch counts on the real model.

What FlopCounterMode counts: only matmul-like aten ops (mm, addmm, bmm, baddbmm, the fused SDPA
kernels, convolutions), 2 FLOPs per multiply-add, attributed to the module that ran them. Under eager
attention our model's matmuls reach it as exactly two ops: every projection (nn.Linear, or F.linear
on the fused q+k+v / gate+up weights) lowers to `mm`; q·kᵀ and probs·v are `bmm`. Norms, RoPE,
softmax, SiLU and the embedding gather are not matmuls: torch does not count them, and neither do
the tally or the formula. So, like with like, summed over layers:

    self_attn's mm − o_proj's mm = qkv_proj        self_attn's bmm = attn_scores + attn_v
    o_proj's mm = out_proj      mlp's mm = mlp      lm_head's mm = lm_head
(q·kᵀ and probs·v are both bmm inside one module, so torch checks their sum; the tally splits it.)
SDPA is left out: its CPU kernels are not among the ops FlopCounterMode has formulas for.
"""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from sim.cost.opcount import FlopTally, step_flops
from sim.model.generate import decode_one_token, encode, prefill
from sim.model.kvcache import ContiguousKVCache
from sim.model.transformer import PRESETS
from tests.conftest import random_model

PROMPT = encode("HAMLET.\nTo be, or not to be")
MM, BMM = torch.ops.aten.mm, torch.ops.aten.bmm


def counted_by_torch(run) -> tuple[dict[str, int], int]:
    """Run `run()` under FlopCounterMode; its counts grouped into the tally's parts, and its total."""
    with FlopCounterMode(display=False) as counter:
        run()
    by_module = counter.get_flop_counts()
    assert set(by_module["Global"]) == {MM, BMM}, by_module["Global"]  # nothing else torch would count

    def total(suffix: str, op) -> int:
        return sum(ops.get(op, 0) for name, ops in by_module.items() if name.endswith(suffix))

    attn = total(".self_attn", BMM)
    return {
        "qkv_proj": total(".self_attn", MM) - total(".o_proj", MM),
        "attention": attn,
        "out_proj": total(".o_proj", MM),
        "mlp": total(".mlp", MM),
        "lm_head": total(".lm_head", MM),
    }, counter.get_total_flops()


def as_torch_parts(part_to_flops: dict[str, int]) -> dict[str, int]:
    p = dict(part_to_flops)
    p["attention"] = p.pop("attn_scores") + p.pop("attn_v")
    return {k: p[k] for k in ("qkv_proj", "attention", "out_proj", "mlp", "lm_head")}


def models():
    """The shipped checkpoints (fused q+k+v and gate+up weights) and unfused random ones: MHA, GQA, MQA."""
    return [pytest.param(name, id=name) for name in sorted(PRESETS)] + [
        pytest.param(n, id=f"random-kv{n}") for n in (4, 2, 1)]


@pytest.mark.parametrize("which", models())
def test_tally_and_formula_equal_flop_counter_on_prefill_and_decode(shipped_models, which):
    model = shipped_models[which] if isinstance(which, str) else random_model(which)
    cfg, T = model.cfg, len(PROMPT)
    cache = ContiguousKVCache(cfg, batch_size=1, max_seq_len=T + 1)
    steps = {
        "prefill": (T, T, lambda tally: prefill(model, torch.tensor([PROMPT]), cache, attn_impl="eager",
                                                tally=tally)),
        "decode": (1, T + 1, lambda tally: decode_one_token(model, torch.tensor([[PROMPT[0]]]), T, cache=cache,
                                                            attn_impl="eager", tally=tally)),
    }
    for step, (num_new, kv_len, run) in steps.items():  # in order: the decode step reads the prefill's cache
        tally = FlopTally()
        torch_parts, torch_total = counted_by_torch(lambda run=run, tally=tally: run(tally))
        formula = step_flops(cfg, num_new, kv_len)
        assert as_torch_parts(tally.part_to_flops) == torch_parts, step
        assert as_torch_parts(formula) == torch_parts, step
        assert tally.total == sum(formula.values()) == torch_total, step
