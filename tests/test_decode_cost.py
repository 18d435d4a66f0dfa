"""The Decode cost page's simulator: the computed grid, the seeds' counts, the analytic view."""

import pytest

from sim.claims import Claim, Verdict
from sim.cost.decode import (
    COMPUTED,
    NOTHING,
    READ,
    computed_grid,
    flop_shape,
    kv_rows_computed,
    scale_curve,
    score_entries,
)
from sim.cost.opcount import generation_flops, step_flops
from sim.model.generate import encode, generate
from sim.model.transformer import PRESETS
from sim.words.catalog import PSEUDO
from sim.words.decode_claims import seed_claims

C, R, _ = COMPUTED, READ, NOTHING


def test_grid_by_hand():
    naive = computed_grid(prompt_len=2, num_steps=3, mode="naive")
    cached = computed_grid(prompt_len=2, num_steps=3, mode="cached")
    assert naive.tolist() == [[C, C, _, _], [C, C, C, _], [C, C, C, C]]
    assert cached.tolist() == [[C, C, _, _], [R, R, C, _], [R, R, R, C]]
    # computed cells are exactly the tokens each mode feeds through the model
    assert (naive == C).sum() == 2 + 3 + 4 and (cached == C).sum() == 2 + 1 + 1
    with pytest.raises(ValueError, match="mode"):
        computed_grid(2, 3, "lazy")


def test_seed_counts():
    assert (kv_rows_computed(100, "naive"), kv_rows_computed(100, "cached")) == (5050, 100)
    assert (score_entries(100, "naive"), score_entries(100, "cached")) == (338_350, 5050)
    claims = seed_claims(PRESETS["mha"])
    assert all(isinstance(c, Claim) and isinstance(c.verdict, Verdict) for c in claims)
    by_claim = {c.statement: c for c in claims}
    hundred = by_claim["100 tokens: naive O(N²) = 5,050, cached O(N) = 100"]
    assert seed_claims(PRESETS["mha"], PSEUDO)[claims.index(hundred)].computed == 'decode.claim.counted(what=decode.claim.5050.what, naive=5,050, cached=100)'
    assert hundred.value == 5050 and hundred.verdict is Verdict.NEEDS_CONTEXT
    per_step = by_claim["naive: n² work per step"]
    assert per_step.value == 10_000 and per_step.computed.endswith("naive 10,000, cached 100")
    assert by_claim["naive: n³ over a whole answer"].computed.endswith("naive 338,350, cached 5,050")
    four_k = by_claim["a 4K-token response: 16 million attention operations"]
    assert four_k.value == 4096 * 4097 // 2 == 8_390_656 and four_k.computed.endswith("naive 8,390,656, cached 4,096")
    assert four_k.verdict is Verdict.CLOSE
    qkv = by_claim["per step: QKV projection O(N·D²) → O(D²)"]
    assert seed_claims(PRESETS["mha"], PSEUDO)[claims.index(qkv)].computed == (
        'decode.claim.counted(what=decode.claim.qkv.what(n=100), naive=39,321,600, '
        'cached=393,216)')
    for c in claims:
        if c.seed == "004":
            assert c.value == 100  # O(N·…) -> O(…): exactly N times fewer at N = 100


def test_seed_hundred_tokens_from_the_op_counter():
    """The same 5,050 vs 100 from the per-step FLOP counter (qkv FLOPs / one token's qkv FLOPs)."""
    cfg = PRESETS["gqa"]
    one = step_flops(cfg, 1, 1)["qkv_proj"]
    for mode, rows in (("naive", 5050), ("cached", 100)):
        assert sum(s["qkv_proj"] for s in generation_flops(cfg, 1, 100, mode)) == rows * one


@pytest.mark.parametrize("n_new", [1, 17, 100])
def test_counted_equals_formula_on_the_real_model(shipped_models, n_new):
    model = shipped_models["mha"]
    prompt = encode("KING.\n")
    for mode in ("naive", "cached"):
        counted = [s.part_to_flops for s in generate(model, prompt, n_new, mode=mode).steps]
        assert counted == generation_flops(model.cfg, len(prompt), n_new, mode)


class _Llama8B:  # published config.json of Llama 3.1 8B
    name, attention = "Llama 3.1 8B", "GQA"
    d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, vocab_size, num_experts_per_tok = (
        4096, 32, 32, 8, 128, 14336, 128256, 1)


def test_scale_curve_llama_8b():
    shape = flop_shape(_Llama8B)
    (p,) = scale_curve(shape, [8192])
    # cached step at N = 8192: projections + MLP + head are N-independent; attention 2·2·L·H·D·N
    fixed = 32 * 2 * 4096 * (4096 + 2 * 1024) + 32 * 2 * 4096 * 4096 + 32 * 2 * 3 * 4096 * 14336 + 2 * 4096 * 128256
    assert p.cached_step == fixed + 2 * 2 * 32 * 32 * 128 * 8192
    assert p.naive_step == 8192 * (fixed - 2 * 4096 * 128256) + 2 * 4096 * 128256 + 2 * 2 * 32 * 32 * 128 * 8192**2
    ratios = [q.naive_total / q.cached_total for q in scale_curve(shape, [128, 1024, 8192])]
    assert ratios == sorted(ratios) and ratios[0] > 60


def test_mla_is_refused_and_moe_counts_active_experts():
    class Mla(_Llama8B):
        name, attention = "DeepSeek-V3", "MLA"

    with pytest.raises(ValueError, match="MLA"):
        flop_shape(Mla)

    class Moe(_Llama8B):  # Mixtral-like: 8 experts, 2 per token
        num_experts, num_experts_per_tok = 8, 2

    class Gpt2(_Llama8B):
        mlp_gated = False

    assert flop_shape(Moe).d_ff == 2 * 14336
    assert flop_shape(_Llama8B).d_ff == 14336 and flop_shape(_Llama8B).mlp_matrices == 3
    assert flop_shape(Gpt2).mlp_matrices == 2
    assert step_flops(flop_shape(Gpt2), 1, 1)["mlp"] == 32 * 2 * 2 * 4096 * 14336


def test_human_flops():
    from sim.cost.decode import human_flops

    assert [human_flops(x) for x in (999, 12_300_000, 1.93e10, 5.65e17)] == [
        "999 FLOP", "12.3 MFLOP", "19.3 GFLOP", "565 PFLOP"]
