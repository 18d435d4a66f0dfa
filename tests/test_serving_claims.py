"""Seed 002's serving claims (sim/words/serving_claims.py): which are checked when, and verdicts worded from the numbers."""

from types import SimpleNamespace

from sim.claims import Verdict
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.words import serving_claims as sc

TIMING = sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")


def test_which_claims_are_checked():
    base = sc.seed_claims(None, None)
    assert [c.statement for c in base] == [
        "If k drafted tokens are accepted, one target pass did k tokens' work", "Typical k is 3–5",
        "EAGLE-2 / Medusa speed decoding up with no quality loss", "Lookahead decoding needs no draft model"]
    run = SimpleNamespace(identical=True, new_ids=[0] * 32)
    every = sc.seed_claims(SimpleNamespace(speedup=7.0, setup=cp.ServingSetup()), TIMING, run)
    assert len(every) == 7 and every[0].statement.startswith("Continuous batching")
    assert all(c.seed == "002" and c.original and c.claimed for c in every)


def test_batching_gain_against_the_seeds_range():
    def claim(x):
        return sc.batching_claim(SimpleNamespace(speedup=x, setup=cp.ServingSetup()))

    c = claim(7.031)
    assert c.claimed == "5–10×" and c.value == 7.031 and c.verdict is Verdict.NEEDS_CONTEXT
    assert c.computed == "7.03× here (max batch 256, σ = 1, llama-3.1-8b on h100-sxm)"
    assert c.why.startswith("7.03× is within the range here, and it is a range with conditions")
    assert c.why.endswith("depends on the max batch. Turn on the sweep to see by how much.")
    sweep = cp.BatchSweep((16, 512), (100.0, 200.0), (300.0, 1600.0))
    with_sweep = sc.batching_claim(SimpleNamespace(speedup=7.031, setup=cp.ServingSetup()), sweep)
    assert with_sweep.why.endswith("In the sweep here it grows from 3.00× at max batch 16 to 8.00× at 512.")
    falling = cp.BatchSweep((16, 512), (100.0, 200.0), (300.0, 400.0))
    assert sc.batching_claim(SimpleNamespace(speedup=2.0, setup=cp.ServingSetup()), falling).why.endswith(
        "In the sweep here it shrinks from 3.00× at max batch 16 to 2.00× at 512.")
    assert claim(1.95).why.startswith("1.95× is below the range")
    assert claim(12.0).why.startswith("12.00× is above the range")


def test_tokens_per_pass_is_slightly_understated():
    """Seed 002: "if k tokens are accepted, one pass does k tokens' work". A pass that accepts k drafts also adds the
    target's own token: k + 1, so the seed undercounts by one (understated, not optimistic; issue 38)."""
    c = sc.tokens_per_pass_claim()
    assert c.verdict is Verdict.UNDERSTATED and c.value == sps.expected_tokens_per_pass(0.8, 4)
    # E = (1 − α^(k+1)) / (1 − α) = (1 − 0.8^5) / 0.2 = 3.3616
    assert c.computed == "k accepted → k + 1 tokens; on average E = 3.36 tokens per pass at α = 0.8, k = 4"
    assert c.why.startswith("Slightly understated, not optimistic:") and "k + 1 tokens in one pass" in c.why
    assert "3.36 tokens at k = 4" in c.why
    assert sc.tokens_per_pass_claim(0.99, 4).verdict is Verdict.UNDERSTATED


def test_typical_k_names_the_alphas_where_it_holds():
    c = sc.typical_k_claim()
    assert c.computed.startswith("best k at c = 0.1: α=0.5: 2, α=0.6: 3, α=0.7: 4, α=0.8: 6; at α = 0.8 k = 4 gives "
                                 "2.40× against 2.47× at the best k")
    assert c.verdict is Verdict.NEEDS_CONTEXT
    assert c.why.startswith("Right for a draft about 10× cheaper than the target with α of 0.6–0.7.")
    assert sc.typical_k_claim((0.7,)).why.startswith("Right for a draft about 10× cheaper than the target with α = 0.7.")
    assert sc.typical_k_claim((0.7,)).verdict is Verdict.RIGHT
    assert "The curve is flat near its top: at α = 0.8 every k from 4 to 9 is within 5% of the best (k = 6)." in c.why
    assert "The curve peaks sharply: at α = 0.8 only k = 1 comes within 5% of the best." in \
        sc.typical_k_claim(c=0.9).why  # a draft almost as slow as the target
    none = sc.typical_k_claim(c=0.0)  # a free draft: the longest k always wins
    assert none.verdict is Verdict.WRONG and none.why.startswith("Not at c = 0: the best k is outside 3–5")


def test_draft_head_and_draft_model_gains():
    head = sc.draft_head_claim()
    assert head.verdict is Verdict.RIGHT and head.why.startswith("Consistent at batch 1.")
    assert head.computed.endswith(": 2.80×")
    slow = sc.draft_head_claim(c=0.3)
    assert slow.verdict is Verdict.NEEDS_CONTEXT and slow.why.startswith("1.53× is below the range at batch 1.")
    model = sc.draft_model_claim(TIMING)
    assert model.computed == ("Llama 3.1 70B drafted by Llama 3.1 8B: c = 0.115; α=0.6: 1.62×, α=0.8: 2.34×, "
                              "α=0.9: 3.21×")
    assert model.verdict is Verdict.NEEDS_CONTEXT
    assert model.why == ("Within the range for α of 0.8–0.9 with a draft 9× cheaper (c = 0.115); below 2× at α = 0.6; "
                         "4× is not reached even at α = 0.9 (3.21×).")
    points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 0.8, 4)
    swept = sc.draft_model_claim(TIMING, points=points)  # the batch chart's trend, computed
    assert swept.why.endswith("(3.21×). At α = 0.8, k = 4 the gain fades as the batch grows, to a loss: 2.30× at "
                              "batch 1, 0.69× at batch 512 (chart above).")
    assert "; 4× from α = 0.95." in sc.draft_model_claim(TIMING, (0.6, 0.8, 0.9, 0.95, 0.99)).why


def test_quality_follows_the_real_run():
    same = sc.quality_claim(SimpleNamespace(identical=True, new_ids=[0] * 32))
    assert same.verdict is Verdict.RIGHT and same.computed == "real tiny model, greedy, 32 tokens: identical to the " \
                                                               "target alone"
    differs = sc.quality_claim(SimpleNamespace(identical=False, new_ids=[0] * 8, dtype="bfloat16", device="cuda",
                                               first_difference=5))
    assert differs.verdict is Verdict.NEEDS_CONTEXT and differs.computed.endswith("DIFFERENT")
    assert "in bfloat16 on cuda" in differs.why and "at token 5" in differs.why
