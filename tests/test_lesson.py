"""The Lesson page: every step from its link, Back / Next, the filling cache equal to the real cache, and
check-yourself answers computed by the same sim/ functions as the full pages."""

import base64
import json

import numpy as np
import pytest
import torch

from app.lesson.nav import DEFAULT_PROMPT
from sim.cost.memory import MemoryConfig, kv_memory, variant_curves
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step
from sim.lesson import quiz
from sim.lesson.steps import STEPS
from sim.msg import Msg
from sim.words import lesson as say
from sim.words import say as word
from sim.words import text as fill
from sim.words.catalog import PSEUDO
from sim.words.lesson import step_label
from tests.conftest import run_in_app, unescaped


def plotly_array(z) -> np.ndarray:
    """A figure's array as plotly's JSON carries it: a list, or {dtype, bdata (base64), shape}."""
    if isinstance(z, dict):
        shape = tuple(int(n) for n in str(z["shape"]).split(","))
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"])).reshape(shape)
    return np.asarray(z, dtype=float)


def lesson(params=None):
    return run_in_app("lesson", params, timeout=300)


def claims(at) -> list[str]:
    return [m.value[5:] for m in at.markdown if m.value.startswith("#### ")]


@pytest.mark.parametrize("k", range(1, len(STEPS) + 1))
def test_every_step_opens_from_its_link_draws_a_chart_and_next_goes_on(k):
    at = lesson({"step": str(k)})
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.header[0].value == word("en", STEPS[k - 1].title) and at.query_params["step"] == str(k)
    assert len(at.get("plotly_chart")) >= 1 and len(claims(at)) == 1
    nxt = next(b for b in at.button if b.key == "next_top")
    if k == len(STEPS):  # Next leads to the recap (tests/test_lesson_recap.py)
        assert not nxt.disabled
        return
    nxt.click().run()
    assert not at.exception and at.query_params["step"] == str(k + 1)
    assert at.header[0].value == word("en", STEPS[k].title)
    next(b for b in at.button if b.key == "back_bottom").click().run()
    assert at.query_params["step"] == str(k)


def test_a_bad_step_in_the_link_is_named_and_the_lesson_starts_at_step_one():
    at = lesson({"step": "99", "n": "3", "text": "x" * 500})
    assert not at.exception and at.query_params["step"] == "1"
    text = " ".join(w.value for w in at.warning)
    assert "`99` is outside 1..13" in text and "prompt" in text
    assert step_label(1, PSEUDO) == "lesson.step_label(k=1, n=12, title=lesson.step.repeat.title)"


def test_the_filling_cache_shows_the_real_cache_rows():
    from app.resources import model
    from sim.model.cache_filling import fill_cache
    from sim.model.generate import encode, generate

    m = model("mha")
    run = fill_cache(m, encode(DEFAULT_PROMPT), 24)
    assert run.generated == [s.token for s in generate(m, encode(DEFAULT_PROMPT), 24).steps]  # same greedy tokens
    last = len(run.frames) - 1
    for layer in range(m.cfg.n_layers):
        k, v = run.cache.filled(layer)  # (1, Hkv, S, D): what the cache holds at the end
        for h in range(m.cfg.n_kv_heads):
            assert torch.equal(run.keys(last, layer, h), k[0, h].float().cpu())
            assert torch.equal(run.values(last, layer, h), v[0, h].float().cpu())
    assert [f.end for f in run.frames] == list(range(len(encode(DEFAULT_PROMPT)), len(encode(DEFAULT_PROMPT)) + 24))
    assert all(f.used_bytes == f.end * run.bytes_per_token() for f in run.frames)
    assert all(torch.allclose(f.weights.sum(-1), torch.ones(4, 4)) for f in run.frames)
    # the page's heatmaps at decode step 10 are exactly those rows
    at = lesson({"step": "4", "t": "10", "layer": "2"})
    assert not at.exception
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    z_k, z_v = (plotly_array(fig["data"][i]["z"]) for i in (0, 1))  # (max rows, D); unfilled rows NaN
    rows = run.frames[10].end
    assert np.array_equal(z_k[:rows], run.keys(10, 2).numpy()) and np.isnan(z_k[rows:]).all()
    assert np.array_equal(z_v[:rows], run.values(10, 2).numpy())


def test_check_yourself_answers_come_from_the_full_pages_functions():
    presets = load_presets()
    q = quiz.kib_per_token("llama-3.1-8b", "bf16")
    assert q.answer == kv_memory(MemoryConfig(presets["llama-3.1-8b"], 1, 1, kv_dtype="bf16")).bytes_per_token / 1024
    assert q.answer == 128
    assert q.check("128").correct and q.check("128 KiB").correct and not q.check("64").correct
    # the question's words are message values with the numbers as numbers
    assert q.why == Msg("lesson.q.kib.why", layers=32, heads=8, dim=128, b=2, bpt=131_072, kib=128.0)
    assert q.check("64").message == Msg("lesson.q.hint", hint=Msg("lesson.q.kib.hint", b=2, dtype="BF16"))
    assert q.check("128").message == Msg("lesson.q.right", why=q.why)
    assert q.reveal() == Msg("lesson.q.answer", answer="128 KiB", why=q.why)
    assert q.check("lots").message == Msg("lesson.q.not_number", given="'lots'")
    # a wrong answer gets the hint, not the answer; the answer comes when asked for
    hint = word("en", q.check("64").message)
    assert word(PSEUDO, q.check("64").message) == "lesson.q.hint(hint=lesson.q.kib.hint(b=2, dtype=BF16))" \
        and "128" not in hint
    assert word(PSEUDO, q.reveal()) == ("lesson.q.answer(answer=128 KiB, why=lesson.q.kib.why(layers=32, heads=8, dim=128, "
                                        "b=2, bpt=131,072, kib=128))")
    assert q.check("") is None and not q.check("lots").correct
    q = quiz.decode_intensity("llama-3.1-70b", 4096, "fp8")
    fp8 = decode_step(RooflineConfig(presets["llama-3.1-70b"], 1, 4096, weight_dtype="fp8"))
    assert q.answer == round(fp8.intensity, 2) and q.answer > 2 * round(
        decode_step(RooflineConfig(presets["llama-3.1-70b"], 1, 4096)).intensity, 2) * 0.95
    q = quiz.mqa_vs_mha("llama-3.1-8b")
    c = variant_curves(MemoryConfig(presets["llama-3.1-8b"], 1, 1024), contexts=(1024,)).name_to_token_bytes
    assert q.answer == c["MHA"] / c["GQA"] == 4
    q = quiz.better_layout("system_prompt")
    assert q.answer == "fixed" and q.check("fixed").correct and q.choices == ("fixed", "variable", "same")
    assert q.why.key == "lesson.q.layout.why2" and q.why.fields["n"] == 100
    assert q.why.fields["w"] == Msg("lesson.workload.system_prompt") and q.why.fields["f"] > q.why.fields["v"]
    assert word(PSEUDO, q.label(q.answer)) == "lesson.q.layout.fixed"
    assert quiz.other_workload("system_prompt") == "few_shot" and quiz.other_workload("rag") == "system_prompt"
    assert quiz.other_model("llama-3.1-8b") == "llama-3.1-70b" and quiz.other_model("llama-3.1-70b") == "llama-3.1-8b"
    # in the page: the question asks the model the step does not show; a typed answer gets the computed feedback
    at = lesson({"step": "6"})
    box = "quiz_kib_llama-3.1-70b_bf16"
    at.text_input(key=box).set_value("64").run()
    assert any(unescaped(w.value).startswith("Not quite. Hint:") for w in at.warning)
    assert not any("320" in unescaped(w.value) for w in [*at.warning, *at.info])  # 70B: 320 KiB, not yet shown
    at.toggle(key=f"{box}_show").set_value(True).run()
    q70 = quiz.kib_per_token("llama-3.1-70b", "bf16")  # the 70B answer: 2 × 80 layers × 8 heads × 128 × 2 B = 320 KiB
    assert q70.answer == 320 and q70.why.fields["layers"] == 80
    assert any(unescaped(i.value).startswith(word("en", q70.reveal())) for i in at.info)
    at.text_input(key=box).set_value("320").run()
    assert any(unescaped(s.value).startswith(word("en", q70.check("320").message)) for s in at.success)
    at.text_input(key=box).set_value("[x](http://127.0.0.1:9/)").run()
    assert any(unescaped(w.value).startswith("Type a number") and "\\[x\\]" in w.value for w in at.warning)


def test_step_sentences_follow_the_numbers_both_ways():
    assert say.share_claim(0.98, 0.2, 30.0, 7.5, lang=PSEUDO) == (
        "lesson.s.share.claim(head=lesson.s.share.paged(p=98.0%, r=20.0%), tail=lesson.s.share.more(pr=30.0, rr=7.5))")
    assert say.share_claim(0.5, 0.6, 3.0, 4.0, lang=PSEUDO) == (
        "lesson.s.share.claim(head=lesson.s.share.reserved(r=60.0%, p=50.0%), tail=lesson.s.share.fewer(pr=3.0, rr=4.0))")
    assert say.layout_claim(0.85, 0.0, lang=PSEUDO) == "lesson.s.layout.fixed(f=85.0%, v=0.0%)"
    assert say.layout_claim(0.1, 0.3, lang=PSEUDO) == "lesson.s.layout.variable(v=30.0%, f=10.0%)"
    assert say.layout_claim(0.2, 0.2, lang=PSEUDO) == "lesson.s.layout.same(f=20.0%)"
    assert say.speculate_claim(0.8, 4, 3.36, 2.8, lang=PSEUDO) == (
        "lesson.s.spec.claim(k=4, a=0.80, t=3.36, gain=lesson.s.spec.faster(x=2.80))")
    assert "lesson.s.spec.slower(x=1.25)" in say.speculate_claim(0.1, 8, 1.1, 0.8, lang=PSEUDO)
    assert say.repeat_claim(256, 76_300_000_000, 554_000_000, 20_000_000_000, 270_000_000, lang=PSEUDO) == (
        "lesson.s.repeat.tail(head=lesson.s.repeat.more(n=256, naive=76.3 GFLOP, x=138×, cached=554 MFLOP), half=128, "
        "xn=3.8×, xc=2.1×)")
    assert say.batching_claim({512: 156, 131072: None}, lang=PSEUDO) == (
        "lesson.s.batch.head(parts=lesson.s.batch.turns(S=512, b=156)lesson.s.batch.seplesson.s.batch.stays(S=131,072, "
        "max=4,096))")


def test_a_step_claim_changes_with_its_control():
    a, b = claims(lesson({"step": "1", "n": "64"}))[0], claims(lesson({"step": "1", "n": "1024"}))[0]
    assert a.startswith("Generating 64 tokens") and b.startswith("Generating 1,024 tokens")


def test_chart_titles_state_the_figures_takeaway_both_ways():
    assert say.repeat_title([512, 1024], [10, 38], [4, 8], lang=PSEUDO) == "lesson.t.repeat(a=512, b=1,024, xn=3.8×, xc=2.0×)"
    assert say.mask_title([0.0, 0.0], [1.5, 3.25], lang=PSEUDO) == "lesson.t.mask.none(f=3.25)"
    assert say.mask_title([1e-7, 0.0], [1.5, 3.25], lang=PSEUDO) == "lesson.t.mask.less(c=1.0e-07, f=3.25)"
    assert say.mask_title([0.0], [0.0], lang=PSEUDO) == "lesson.t.mask.none_both"
    assert say.mask_caption(0.0, 0.0, lang=PSEUDO) == "lesson.cap.mask_none"
    assert say.mask_caption(0.0, 2e-4, lang=PSEUDO) == "lesson.cap.mask(k=0, v=2.0e-04)"
    assert say.mask_title([2.0], [1.0], lang=PSEUDO) == "lesson.t.mask.more(c=2, f=1)"
    assert say.growing_title(4096, 28 * 4096, 0, lang=PSEUDO) == "lesson.t.grow(bpt=4 KiB, used=112 KiB, t=0)"
    from app.figures.headline import _wrap

    for L, width in (("en", 90), ("ko", 60)):  # the bound stays whole on whichever line it lands
        assert any("1\u00a0÷\u00a0(1\u00a0−\u00a0α)\u00a0=\u00a05.00" in line
                   for line in _wrap(say.speculate_title(0.8, 4, 3.36, lang=L), width)), L
    assert say.growing_title(4096, 29 * 4096, 1, lang="ko") == fill("ko", "lesson.t.grow", bpt="4 KiB", used="116 KiB", t=1)
    assert say.bytes_title("M", "BF16", [1024, 2048], [1, 3], 2, lang=PSEUDO) == (
        "lesson.t.bytes.over(model=M, dtype=BF16, w=2 B, over=2,048)")
    assert say.bytes_title("M", "BF16", [1024, 2048], [1, 3], 2, over=1366, lang=PSEUDO).endswith("over=1,366)")
    assert say.bytes_title("M", "BF16", [1024, 2048], [1, 1], 2, lang=PSEUDO) == (
        "lesson.t.bytes.below(model=M, dtype=BF16, w=2 B, max=2,048)")
    assert say.ridge_title({512: 494, 131072: None}, 295, lang=PSEUDO) == "lesson.t.ridge.some(r=295, list=512, m=1, n=2)"
    assert say.ridge_title({512: None}, 295, lang=PSEUDO) == "lesson.t.ridge.none(r=295)"
    assert say.smallest_title("M", {"MHA": 4096, "GQA": 1024, "MQA": 256}, "MHA", lang=PSEUDO) == (
        "lesson.t.small.less(what=M, low=MQA, lb=256 B, x=16.0×, against=MHA, b=4 KiB)")
    assert say.share_title(0.2, 0.9, lang=PSEUDO) == "lesson.t.share.reserved(r=90.0%, p=20.0%)"
    assert say.layout_title(0.1, 0.3, lang=PSEUDO) == "lesson.t.layout.variable(v=30.0%, f=10.0%)"
    assert say.speculate_title(0.8, 4, 3.36, lang=PSEUDO) == "lesson.t.spec(a=0.80, k=4, t=3.36, cap=5.00)"


def test_a_chart_title_follows_its_control():
    import json as _json

    def title(at):
        return _json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]

    a, b = title(lesson({"step": "12", "workload": "system_prompt"})), title(lesson({"step": "12", "workload": "chat"}))
    assert a != b and a.startswith("Fixed content first serves")
