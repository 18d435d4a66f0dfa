"""No page states a verdict on a quantization scheme that its own measurement contradicts (issue 40, item 4).

The KV quantization page once called FP8 "nearly safe" (the seed's words, checked only by top-1 agreement) while
its own table showed FP8's KL 32× INT8's and hundreds of times INT4 KIVI's. Each verdict is now checked against the
ranking of the measured numbers it is computed from: in the sim, over any table, and on the rendered page, against
the table the page shows beside it.
"""

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.claims import Verdict
from sim.model.quant_claims import KL_GAP, SAFE_AGREEMENT, fp8_verdict
from sim.words.catalog import PSEUDO
from sim.words.quant_claims import seed_claims
from tests.conftest import run_page

KINDS = (("kivi", 8), ("token", 8), ("fp8_e4m3", 8), ("kivi", 4), ("token", 4), ("kivi", 2), ("token", 2))
kl_values = st.floats(1e-9, 1.0, allow_nan=False)
agreements = st.sampled_from([0.95, 0.985, 0.99, 0.995, 1.0])


def table(kl: dict, agree: dict) -> pd.DataFrame:
    return pd.DataFrame([{"scheme": k, "bits": b, "delta_loss": 0.0, "kl": kl[(k, b)], "top1_agreement": agree[(k, b)],
                          "kl_first_quarter": kl[(k, b)], "kl_last_quarter": kl[(k, b)]} for k, b in KINDS])


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({k: kl_values for k in KINDS}), st.fixed_dictionaries({k: agreements for k in KINDS}))
def test_a_nearly_safe_verdict_never_outranks_the_numbers(kl, agree):
    claims = {c.statement.split(":")[0]: c for c in seed_claims(table(kl, agree), 4).claims}
    fp8, int8 = claims["FP8"], claims["INT8"]
    f, t = ("fp8_e4m3", 8), ("token", 8)
    # FP8 is "nearly safe like INT8" exactly when it keeps SAFE_AGREEMENT and its KL is within KL_GAP of INT8's
    holds = agree[f] >= SAFE_AGREEMENT and kl[f] <= KL_GAP * kl[t]
    assert (fp8.verdict is Verdict.RIGHT) == holds
    if kl[f] > KL_GAP * kl[t]:  # measurably worse than INT8: the sentence says so, with the ratio
        keyed = {c.statement.split(":")[0]: c for c in seed_claims(table(kl, agree), 4, lang=PSEUDO).claims}["FP8"]
        assert fp8.verdict is Verdict.WRONG and keyed.why.startswith("quant.claim.fp8.why.worse(")
    assert fp8.value == kl[f] / kl[t]
    # INT8 holds only when both INT8 schemes keep SAFE_AGREEMENT of the predictions
    assert (int8.verdict is Verdict.RIGHT) == all(agree[(k, 8)] >= SAFE_AGREEMENT for k in ("kivi", "token"))
    assert (int8.verdict is Verdict.WRONG) == all(agree[(k, 8)] < SAFE_AGREEMENT for k in ("kivi", "token"))
    # INT4 "needs KIVI's recipe; per-token collapses": right only when per-token's KL is more than 3× KIVI's
    int4 = claims["INT4 works with K per channel, small groups and a residual window; per-token all the way collapses"]
    ratio = kl[("token", 4)] / kl[("kivi", 4)]
    assert int4.verdict is (Verdict.RIGHT if ratio > KL_GAP else Verdict.NEEDS_CONTEXT if ratio >= 1 else Verdict.WRONG)
    # INT2 "research territory": right only when even INT2 KIVI loses more than 2% of the top-1 predictions
    int2 = claims["2-bit is research territory"]
    assert (int2.verdict is Verdict.RIGHT) == (agree[("kivi", 2)] < 0.98)


def test_fp8_verdict_keys():
    row = lambda kl, a: {"kl": kl, "top1_agreement": a}  # noqa: E731
    assert fp8_verdict(row(2e-5, 1.0), row(1e-5, 1.0)) == (Verdict.RIGHT, "holds")
    assert fp8_verdict(row(4e-5, 1.0), row(1e-5, 1.0)) == (Verdict.WRONG, "worse")
    assert fp8_verdict(row(2e-5, 0.98), row(1e-5, 1.0)) == (Verdict.WRONG, "flips")
    assert fp8_verdict(row(3e-5, 0.99), row(1e-5, 1.0)) == (Verdict.RIGHT, "holds")  # the bounds are inclusive


def test_the_kv_quantization_page_s_verdicts_agree_with_the_table_it_shows():
    """Rendered: the FP8 and INT8 verdicts against the bits × scheme table on the same page (its format, KL and
    agreement columns), and the FP8 scale section's sentence against its own table."""
    at = run_page("kv_quantization", {"win": "1", "len": "128", "n": "24"}, timeout=300)
    assert not at.exception and not at.error
    shown = next(d.value for d in at.dataframe if "format" in d.value.columns)
    by = {(r["format"], r["label"]): r for _, r in shown.iterrows()}  # as the page shows it: format and scheme
    f8, t8 = by[("FP8 e4m3", "FP8 e4m3 (K and V)")], by[("INT8", "K and V per-token (naive)")]
    k8 = by[("INT8", "KIVI: K per-channel, V per-token, residual R=128")]
    claims = at.table[0].value
    fp8 = claims.loc["FP8: nearly safe like INT8, the quality difference is hard to measure"]
    int8 = claims.loc["INT8: nearly safe, the quality difference is hard to measure"]
    fp8_holds = f8["top1_agreement"] >= SAFE_AGREEMENT and f8["kl"] <= KL_GAP * t8["kl"]
    assert (fp8["Verdict"] == "right") == fp8_holds
    assert (int8["Verdict"] == "right") == (min(t8["top1_agreement"], k8["top1_agreement"]) >= SAFE_AGREEMENT)
    # at this view FP8 keeps 99% of the predictions yet its KL is many times INT8's: the old check called it safe
    assert f8["kl"] > KL_GAP * t8["kl"] and fp8["Verdict"] == "wrong"
    assert f"{f8['kl'] / t8['kl']:,.0f}× INT8 per-token's" in fp8["Why"]
    # the scale section: its sentence says "not the scale" exactly when no calibrated scale moved FP8's KL past 3×
    scale = next(d.value for d in at.dataframe if "k_error" in d.value.columns)
    kls = list(scale["kl"])
    assert kls[0] == f8["kl"]  # the scale-1.0 row is the page's FP8 cache
    apart = max(kls[:3]) > KL_GAP * min(kls[:3])
    said = " ".join(m.value for m in at.markdown)
    assert ("**The scale matters here.**" in said) == apart and ("**Not the scale.**" in said) == (not apart)
    assert kls[3] == t8["kl"]  # INT8 per-token, the contrast, is the table's INT8 row


# --- Shrink the cache: the quantized caches ranked by what the page's table shows -----------------------------------


def _score(method, long, quote=0.5, turns=1.0, nbytes=0.5, kind="blur"):
    from sim.cost.shrink import Score

    return Score(method, method.upper(), kind, nbytes, long, quote, turns)


def test_the_blur_ranking_names_the_caches_the_numbers_rank_first_and_last():
    from sim.model.shrink_quant import blur_ranking
    from sim.words import say

    scores = [_score("h2o@0.5", 0.8, kind="discard"), _score("fp8", 0.099), _score("int8", 0.5), _score("kivi4", 1.0),
              _score("kivi2", 0.19, nbytes=0.25)]
    ranking, why = blur_ranking(scores)
    assert ranking.key == "shrinkq.ranking" and ranking.fields["b"] == 1.0 and ranking.fields["w"] == 0.099
    assert [s for s in ranking.fields["best"].items] == ["KIVI4"] and list(ranking.fields["worst"].items) == ["FP8"]
    assert say(PSEUDO, ranking) == (
        'shrinkq.ranking(best=KIVI4, b=100%, worst=FP8, w=10%, each=[shrinkq.each(label=KIVI4, '
        'long=100%, quote=50%, turns=100%, bytes=50%) + shrinkq.each(label=INT8, long=50%, '
        'quote=50%, turns=100%, bytes=50%) + shrinkq.each(label=KIVI2, long=19%, quote=50%, '
        'turns=100%, bytes=25%) + shrinkq.each(label=FP8, long=10%, quote=50%, turns=100%, '
        'bytes=50%)])')
    assert why.key == "shrinkq.why_fp8" and "3 mantissa bits" in say("en", why) and "last 128 tokens" in say("en", why)
    assert "가수 3비트" in say("ko", why)
    # FP8 not last: no FP8 reason; all equal: one sentence, no best or worst
    assert [m.key for m in blur_ranking([_score("fp8", 0.5), _score("kivi2", 0.2)])] == ["shrinkq.ranking"]
    assert [m.key for m in blur_ranking([_score("fp8", 1.0), _score("kivi2", 1.0)])] == ["shrinkq.same"]
    assert blur_ranking([_score("fp8", 1.0), _score("h2o@0.5", 0.5, kind="discard")]) == ()
    # ties at the bottom name every cache there
    tied = blur_ranking([_score("fp8", 0.2), _score("int8", 0.2), _score("kivi4", 0.9)])
    assert list(tied[0].fields["worst"].items) == ["FP8", "INT8"] and tied[1].key == "shrinkq.why_fp8"


def test_the_blur_rankings_constants_are_the_caches_the_page_runs():
    from sim.model.evict_cache import quant_scheme
    from sim.model.quant import FP8_FORMATS
    from sim.model.shrink_quant import FP8_MANTISSA_BITS, KIVI_RESIDUAL

    assert quant_scheme("kivi4").residual == quant_scheme("kivi2").residual == KIVI_RESIDUAL
    fp8 = quant_scheme("fp8")
    assert fp8.k.kind == "e4m3" and FP8_FORMATS["e4m3"].mantissa_bits == FP8_MANTISSA_BITS
    assert fp8.k.scale == fp8.v.scale == 1.0 and not fp8.layer_scales  # vLLM's default, as the sentence says


def test_the_recorded_real_model_grid_s_ranking_agrees_with_its_rows():
    """The recorded SmolLM2 grid's FP8 cells were measured at scale 1.0, the code's FP8 today (bit for bit, see
    tests/test_quant_fp8.py): the sentence ranks its rows as they are."""
    from sim.model.real_recorded import load_recorded
    from sim.model.shrink_quant import blur_ranking
    from sim.words.shrink import recorded_score as score

    data = load_recorded()
    assert data is not None
    scores = [score(r) for r in data["rows"]]
    blur = [s for s in scores if s.kind == "blur"]
    msgs = blur_ranking(scores)
    hi, lo = max(s.long_agreement for s in blur), min(s.long_agreement for s in blur)
    assert msgs[0].fields["b"] == hi and msgs[0].fields["w"] == lo
    assert set(msgs[0].fields["worst"].items) == {s.label for s in blur if s.long_agreement == lo}
    assert (len(msgs) == 2) == any(s.method == "fp8" and s.long_agreement == lo for s in blur)


def test_the_shrink_page_ranks_the_recorded_quantized_caches_as_its_table_shows():
    from sim.model.real_recorded import load_recorded
    from tests.conftest import run_in_app, unescaped

    if load_recorded() is None:
        pytest.skip("no recorded grid")
    at = run_in_app("shrink_cache", {"model": "smollm2"})
    assert not at.exception
    shown = next(d.value for d in at.dataframe if "Long generation: tokens equal (%)" in d.value.columns)
    from sim.words import join, text

    blur = shown[shown["Method"].isin([text("en", f"shrink.method.{m}") for m in ("fp8", "int8", "kivi4", "kivi2")])]
    assert len(blur) == 4, list(shown["Method"])
    col = blur["Long generation: tokens equal (%)"]
    worst = list(blur["Method"][col == col.min()])  # in the table's order, as the sentence lists ties
    said = next(unescaped(m.value) for m in at.markdown if m.value.startswith("Among the quantized caches"))
    assert f"{join('en', worst)} the least ({col.min():.0f}%)" in said
    why_fp8 = text("en", "shrinkq.why_fp8", mant=0, step=0.0, R=0).split(":")[0]  # its first clause, release named
    assert (worst == [text("en", "shrink.method.fp8")]) == any(why_fp8 in unescaped(m.value) for m in at.markdown)
