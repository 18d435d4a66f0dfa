"""The one Claim type: every page's claims are Claims with a real verdict, and the frame has fixed columns in each
language, the seed's Korean and the English side by side in both."""

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from sim.claims import SEEDS, Claim, Verdict, verdict_counts
from sim.i18n import text
from sim.msg import Msg
from sim.words.claims import claims_frame, source_name, verdict_word


def test_claim_needs_a_verdict_enum():
    with pytest.raises(AssertionError):
        Claim("s", "002", "a", "b", "right")  # a string is not a Verdict


CLAIMS = (Claim("one", "002", "5×", "7.3×", Verdict.UNDERSTATED, original="하나"),
          Claim("two", "000", "n³", "n(n+1)(2n+1)/6", Verdict.RIGHT, why="sum of squares"),
          Claim("three", Msg("claims.where.this_machine"), "-", "12.7×", Verdict.RIGHT))


def test_verdict_counts_and_frame():
    assert verdict_counts(CLAIMS) == {Verdict.RIGHT: 2, Verdict.UNDERSTATED: 1}
    df = claims_frame(CLAIMS)
    assert list(df.columns) == ["Claim", "Korean original", "Source", "Seed says", "We compute", "Verdict", "Why"]
    assert list(df["Source"]) == ["seed 002", "seed 000", "this machine"]
    assert list(df["Verdict"]) == ["understated", "right", "right"]
    assert list(df["Korean original"]) == ["하나", "", ""]  # not quoted yet: an empty cell, the table still works


def test_frame_in_korean_quotes_both_and_words_the_rest():
    df = claims_frame(CLAIMS, "ko")
    assert list(df.columns) == ["원문", "영어 번역", "출처", "시드의 주장", "실습실의 계산", "판정", "이유"]
    assert list(df["원문"]) == ["하나", "", ""] and list(df["영어 번역"]) == ["one", "two", "three"]
    assert list(df["출처"]) == ["시드 002", "시드 000", "이 머신"]
    assert list(df["판정"]) == ["과소평가", "맞음", "맞음"]
    assert list(df["실습실의 계산"]) == ["7.3×", "n(n+1)(2n+1)/6", "12.7×"]  # the page's own wording, as given
    assert source_name(Claim("x", "vLLM docs", "a", "b", Verdict.RIGHT), "ko") == "vLLM docs"  # none: as given
    assert claims_frame([], "ko").columns.tolist() == df.columns.tolist()


def test_every_verdict_has_a_word_in_both_languages():
    assert [verdict_word(v) for v in Verdict] == [str(v) for v in Verdict]  # English: the enum's own value
    ko = [verdict_word(v, "ko") for v in Verdict]
    assert len(set(ko)) == len(Verdict) and all(re.search("[가-힣]", w) for w in ko)


def test_every_seed_is_named():
    assert sorted(SEEDS) == ["000", "001", "002", "004"]


# --- the table on a page ----------------------------------------------------------------------------------------

def _claims_page():
    from app.claims import render_claims
    from sim.claims import Claim, Verdict

    render_claims((Claim("one", "002", "5×", "7.3×", Verdict.UNDERSTATED, original="하나"),
                   Claim("two", "000", "n³", "n(n+1)(2n+1)/6", Verdict.RIGHT)), "demo")


def _render(lang: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_claims_page)
    at.session_state["lang"] = lang
    return at.run()


def test_claims_table_in_english_is_as_before_with_the_korean_beside():
    at = _render("en")
    assert not at.exception
    table = at.table[0].value
    assert table.loc["one", "We compute"] == "7.3×"  # looked up by the English statement, as the page tests do
    assert list(table.columns) == ["Claim", "Korean original", "Source", "Seed says", "We compute", "Verdict"]
    assert [c.value for c in at.caption] == [
        "2 claims checked: 1 right, 1 understated.",
        f"Sources: seed 000 — {SEEDS['000'][1]} ({SEEDS['000'][0]}); seed 002 — {SEEDS['002'][1]} "
        f"({SEEDS['002'][0]}). The seeds are the Korean articles this lab is built from."]
    assert at.get("download_button")[0].proto.label == "Download the claims (CSV)"


def test_claims_table_in_korean():
    at = _render("ko")
    assert not at.exception
    table = at.table[0].value
    assert table.loc["one", "실습실의 계산"] == "7.3×" and table.loc["one", "원문"] == "하나"
    assert list(table.columns)[:2] == ["원문", "영어 번역"] and "이유" not in table.columns  # no why: no column
    assert [c.value for c in at.caption] == [
        "주장 2개를 검토했다: 맞음 1개, 과소평가 1개.",
        f"출처: 시드 000 — “{SEEDS['000'][0]}” ({SEEDS['000'][1]}); 시드 002 — “{SEEDS['002'][0]}” "
        f"({SEEDS['002'][1]}). 시드는 이 실습실의 바탕이 된 한국어 글이다."]
    assert at.get("download_button")[0].proto.label == text("ko", "claims.download")


# --- every page's claims quote the seed in Korean ----------------------------------------------------------------

def _quant_table() -> pd.DataFrame:
    """A bits × scheme table with the columns seed_claims reads (tests/test_quant_results.py's), every claim measured."""
    kl = dict(kivi_8=1e-8, token_8=1e-5, fp8_e4m3_8=1e-4, kivi_4=1e-6, token_4=1e-2, kivi_2=1e-5, token_2=0.3,
              token_res_4=1e-3, token_first_4=1e-1)
    rows = [{"scheme": k, "bits": int(b), "delta_loss": 0.0, "kl": v, "top1_agreement": 1.0, "kl_first_quarter": v,
             "kl_last_quarter": 2 * v} for (k, b), v in ((tuple(key.rsplit("_", 1)), val) for key, val in kl.items())]
    return pd.DataFrame(rows)


def _call(fn, *args, **kwargs):
    """fn in Korean where it takes a language (a page's claims function words claimed/computed/why in it)."""
    if "lang" in inspect.signature(fn).parameters:
        kwargs["lang"] = "ko"
    return fn(*args, **kwargs)


def _decode_cost():
    from sim.cost import decode
    from sim.model.transformer import PRESETS

    return _call(decode.seed_claims, PRESETS["mha"])


def _kv_memory():
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.words import kv_claims

    return _call(kv_claims.seed_claims, load_presets(), load_gpus())


def _roofline():
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.cost.roofline_claims import roofline_claims

    return _call(roofline_claims, load_presets(), load_gpus())


def _attention_kernels():
    from sim.words.kernel_claims import kernel_claims

    return _call(kernel_claims)


def _prefix_caching():
    from sim.words.prefix_claims import prefix_claims

    return _call(prefix_claims, None, None, 10.0)


def _kv_quantization():
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.words import quant_claims

    check = _call(quant_claims.seed_claims, _quant_table(), 4, load_presets()["llama-3.1-8b"], load_gpus()["h100-sxm"])
    return tuple(check.claims)


def _serving():
    from sim.serving import comparison, speculative
    from sim.words import serving_claims

    timing = speculative.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    return _call(serving_claims.seed_claims, SimpleNamespace(speedup=7.0, setup=comparison.ServingSetup()), timing,
                 SimpleNamespace(identical=True, new_ids=[0] * 32))


# page -> its claims function, called with every section it can check (tests/test_serving_claims.py's inputs)
PAGE_CLAIMS = {"decode_cost": _decode_cost, "kv_memory": _kv_memory, "roofline": _roofline,
               "attention_kernels": _attention_kernels, "prefix_caching": _prefix_caching,
               "kv_quantization": _kv_quantization, "serving": _serving}


SEED_TEXTS = sorted((Path(__file__).resolve().parents[2] / "shared" / "seeds").glob("*.txt"))  # beside the repo


def _squeeze(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@pytest.mark.parametrize("page", list(PAGE_CLAIMS))
def test_every_claim_quotes_its_korean_original(page):
    """A seed's claim quotes the seed's own words (found in the article where it sits beside this checkout; a
    formula or code line the seed wrote is quoted as written); any other claim is worded in Korean."""
    claims = PAGE_CLAIMS[page]()
    assert claims and all(isinstance(c, Claim) for c in claims)
    assert [c.statement for c in claims if not c.original.strip()] == []
    assert [c.statement for c in claims if c.seed not in SEEDS and not re.search("[가-힣]", c.original)] == []
    if SEED_TEXTS:
        seeds = {p.name[:3]: _squeeze(p.read_text(encoding="utf-8")) for p in SEED_TEXTS}
        quoted = [c for c in claims if c.seed in SEEDS]
        assert [c.original for c in quoted if _squeeze(c.original.strip("…").strip()) not in seeds[c.seed]] == []


def test_a_seed_quote_in_latex_reads_as_plain_symbols():
    """A table cell shows text: the seeds' LaTeX is written as the symbols it means, in the table and the CSV."""
    from sim.claims import latex_as_text
    from sim.cost.decode import seed_claims as decode_claims
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.words.claims import claims_frame
    from sim.words.kv_claims import seed_claims as kv_claims

    assert latex_as_text("2 \\times 32 \\times 8 = 131{,}072 \\ \\text{바이트} = 128 \\ \\text{KiB}") == (
        "2 × 32 × 8 = 131,072 바이트 = 128 KiB")
    assert latex_as_text("KV Cache 용량이 기존 대비 $\\frac{1}{h}$만큼 감소") == "KV Cache 용량이 기존 대비 1/h만큼 감소"
    assert latex_as_text("QKV projection: $O(ND^2)\\to O(D^2)$") == "QKV projection: O(ND²) → O(D²)"
    assert latex_as_text("costs $2 and ^ stays; 3^2") == "costs $2 and ^ stays; 3^2"  # no LaTeX: unchanged
    from sim.model.transformer import PRESETS

    for claims in (kv_claims(load_presets(), load_gpus()), decode_claims(PRESETS["mha"])):
        frame = claims_frame(claims)
        cells = [str(v) for col in frame.columns for v in frame[col]]
        assert not [c for c in cells if "\\times" in c or "\\frac" in c or "\\text" in c or "\\to" in c]
