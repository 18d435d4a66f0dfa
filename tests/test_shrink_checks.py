"""The Shrink the cache checks: scoring on hand-made tokens, prompt layout, reproducibility, and the
copy-trained checkpoint they need (the shipped models cannot quote from far back)."""

import json

import pytest
import torch

from sim.model.kvcache import ContiguousKVCache
from sim.model.shrink_checks import (
    FACT_CUE,
    LongGenerationResult,
    RecallResult,
    Trial,
    agreement,
    copy_score,
    exact_quote,
    fact_prompts,
    full_cache,
    full_cache_scores,
    greedy_run,
    long_generation,
    multi_turn,
    quote_prompts,
)
from sim.model.transformer import checkpoint_path, load_model
from sim.refusal import Refusal
from sim.words.catalog import PSEUDO
from sim.words.shrink import long_summary, recall_summary

PROMPT = list(b"ROMEO.\nBut soft, what light through yonder window breaks?\n")


@pytest.fixture(scope="module")
def mha():
    return load_model("mha")


def test_agreement_counts_positions_and_the_first_divergence():
    assert agreement([1, 2, 3, 4], [1, 2, 3, 4]) == (4, None)
    assert agreement([1, 2, 9, 4], [1, 2, 3, 4]) == (3, 2)
    assert agreement([9, 2, 3, 9], [1, 2, 3, 4]) == (2, 0)
    with pytest.raises(ValueError, match="3 tokens against a reference of 4"):
        agreement([1, 2, 3], [1, 2, 3, 4])


def test_copy_score_counts_up_to_the_first_mismatch_and_in_total():
    assert copy_score([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == (5, 5)
    assert copy_score([1, 2, 3, 9, 5], [1, 2, 3, 4, 5]) == (3, 4)
    assert copy_score([9, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == (0, 4)
    assert copy_score([9, 9, 9], [1, 2, 3]) == (0, 0)


def test_results_sum_their_trials():
    trials = (Trial(prompt_len=800, expected=(1, 2, 3, 4), produced=(1, 2, 9, 4), num_prefix=2, num_matched=3), Trial(prompt_len=810, expected=(5, 6), produced=(5, 6), num_prefix=2, num_matched=2))
    r = RecallResult("exact quote", trials)
    assert (r.num_prefix, r.num_matched, r.max_bytes, r.fraction) == (4, 5, 6, 4 / 6)
    assert recall_summary(r, lang=PSEUDO) == (
        'shrink.s.recall_summary(check=Shrink.check.exact_quote, prefix=4, most=6, pct=67%, n=2, '
        'matched=5)')
    g = LongGenerationResult(num_new=4, prompt_len=10, num_agree=3, first_divergence=2, tokens=(1, 2, 9, 4), reference=(1, 2, 3, 4))
    assert g.agreement == 0.75 and "3 (75%)" in long_summary(g) and "at new token 2" in long_summary(g)
    assert "never departed" in long_summary(LongGenerationResult(num_new=2, prompt_len=10, num_agree=2, first_divergence=None, tokens=(1, 2), reference=(1, 2)))


def test_quote_prompt_layout():
    for ids, expected in quote_prompts(num_trials=4, seed=0):
        assert 700 <= len(ids) + len(expected) <= 900 and len(expected) == 32
        text = bytes(ids)
        cue = text[-24:]
        first = text.find(cue)
        assert first < 64 and text.count(cue) == 2  # the passage early on, its cue once more at the end
        assert text[first + 24 : first + 24 + 32] == bytes(expected)
    with pytest.raises(ValueError, match="exceed the passage"):
        quote_prompts(num_trials=1, seed=0, passage_len=40)


def test_fact_prompt_layout():
    for ids, expected in fact_prompts(num_trials=4, seed=0):
        text, fact = bytes(ids), bytes(expected)
        assert text.endswith(FACT_CUE.encode()) and text.count(fact) == 1
        assert text.find(FACT_CUE.encode() + fact) < 64 and len(ids) >= 600


def test_prompts_follow_the_seed():
    assert quote_prompts(num_trials=2, seed=0) == quote_prompts(num_trials=2, seed=0) != quote_prompts(num_trials=2, seed=1)
    assert fact_prompts(num_trials=2, seed=0) == fact_prompts(num_trials=2, seed=0) != fact_prompts(num_trials=2, seed=1)


def test_full_cache_factory_matches_the_reference_exactly(mha):
    r = long_generation(mha, full_cache(mha), prompt_ids=PROMPT, num_new=48)
    assert (r.agreement, r.first_divergence, r.num_new, r.prompt_len) == (1.0, None, 48, len(PROMPT))
    assert long_generation(mha, full_cache(mha), prompt_ids=PROMPT, num_new=48, reference=r.reference) == r
    with pytest.raises(ValueError, match="reference has 3 tokens"):
        long_generation(mha, full_cache(mha), prompt_ids=PROMPT, num_new=48, reference=[1, 2, 3])
    with pytest.raises(Refusal) as info:
        long_generation(mha, full_cache(mha), prompt_ids=PROMPT, num_new=1024)
    assert info.value.key == "model.err.past_context" and info.value.fields["n"] == 1024


class NoisyValues(ContiguousKVCache):
    """Every value row gets a fixed large perturbation: the tokens must part from the reference."""

    def write(self, layer, k, v):
        noise = torch.randn(v.shape, generator=torch.Generator().manual_seed(self.num_tokens)) * 2.0
        return super().write(layer, k, v + noise)


def test_a_damaged_cache_diverges(mha):
    ref = greedy_run(mha, full_cache(mha), ids=PROMPT, num_new=48)
    r = long_generation(mha, lambda n: NoisyValues(mha.cfg, batch_size=1, max_seq_len=n), prompt_ids=PROMPT, num_new=48, reference=ref)
    assert r.first_divergence is not None and r.agreement < 1.0
    assert r.num_agree == sum(a == b for a, b in zip(r.tokens, ref, strict=True))


def test_scores_are_reproducible_for_a_seed(mha):
    q1, q2 = (exact_quote(mha, full_cache(mha), num_trials=1, seed=3, num_scored=8) for _ in range(2))
    f1, f2 = (multi_turn(mha, full_cache(mha), num_trials=1, seed=3) for _ in range(2))
    assert q1 == q2 and f1 == f2  # the wall time is not compared
    assert q1.max_bytes == 8 and f1.max_bytes == len(fact_prompts(num_trials=1, seed=3)[0][1])


def test_the_copy_model_is_shipped_and_scores_what_its_report_says():
    path = checkpoint_path("mha_copy")
    assert path.is_file() and path.stat().st_size <= 5 * 1024 * 1024
    report = json.loads(path.with_suffix(".json").read_text())
    model = load_model(path)
    assert model.cfg.name == "mha_copy" and model.cfg.n_kv_heads == 4
    got = full_cache_scores(model)
    assert got["exact_quote"] == report["full_cache_scores"]["exact_quote"]
    assert got["multi_turn"] == report["full_cache_scores"]["multi_turn"]
