"""The real model in the pages: the recorded Shrink-the-cache grid (its verdict computed from its table, its
provenance, shown without torch), the model picker's install line when the wheel is missing, and the attention
sink and K/V probes worded from what they measured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.work import SHOWN_KEY
from sim.cost.shrink import EVICT_METHODS, QUANT_METHODS
from sim.model.real_recorded import RealShrinkSetup, cell_key, load_recorded
from sim.model.real_source import INSTALL_COMMAND
from sim.words import text
from sim.words.catalog import PSEUDO
from sim.words.shrink import recorded_rows as frame_rows
from sim.words.shrink import recorded_score as score
from sim.words.shrink import recorded_verdict as verdict
from tests.conftest import run_in_app, unescaped

ROOT = Path(__file__).resolve().parent.parent


def _row(method, budget, frac, long_same, quote, chat, num_new=32):
    return {"method": method, "budget": budget, "byte_fraction": frac, "kept_tokens": 1, "num_tokens": 100,
            "long_same": long_same, "long_first_divergence": None if long_same == num_new else long_same,
            "num_new": num_new, "quote_prefix": quote, "quote_matched": quote, "quote_max": 48, "chat_prefix": chat,
            "chat_max": 8, "seconds": 1.0, "chat_answer": "Your code is 1234.", "long_text": "x"}


def _table(quote_window=6, quote_kivi=40):
    return [_row("full", None, 1.0, 32, 44, 8), _row("window", 0.25, 0.25, 10, quote_window, 0),
            _row("window", 0.5, 0.5, 20, 30, 8), _row("fp8", None, 0.5, 30, 44, 8),
            _row("kivi2", None, 0.2, 12, quote_kivi, 4)]


def test_verdict_pairs_each_quantized_cache_with_the_nearest_discarding_one_on_every_check():
    head, sentence = verdict(_table(), PSEUDO)
    # fp8 (50%) against window@50% (50%): quote 44 vs 30 -> discarding lower; kivi2 (20%) against window@25%: 40 vs 6
    assert head == "real.v.as_lecture"
    assert "real.v.check(check=real.check.quote, worse=2, better=0, same=0, n=2, full=92%)" in sentence
    # long: fp8 30 vs 20 (lower), kivi2 12 vs 10 (lower); chat: fp8 8 vs 8 (same), kivi2 4 vs 0 (lower)
    assert "real.v.check(check=real.check.long, worse=2, better=0, same=0, n=2," in sentence
    assert "real.v.check(check=real.check.chat, worse=1, better=0, same=1, n=2," in sentence


def test_verdict_says_when_the_table_goes_against_the_lecture_or_is_mixed():
    head, _ = verdict(_table(quote_window=46, quote_kivi=40), PSEUDO)  # kivi2 loses to window@25%; fp8 still wins
    assert head == "real.v.mixed(worse=1, n=2)"
    rows = _table()
    rows[0]["quote_prefix"] = 10  # the full cache itself quotes 21%
    assert verdict(rows, PSEUDO)[0] == "real.v.cannot(full=21%)"
    assert verdict(rows, "ko")[0] != verdict(rows)[0]


def test_scores_and_table_rows_come_from_the_recorded_numbers():
    rows = _table()
    s = score(rows[4])
    assert (s.method, s.kind, s.byte_fraction, s.long_agreement, s.quote, s.turns) == \
        ("kivi2", "blur", 0.2, 12 / 32, 40 / 48, 4 / 8)
    table = frame_rows(rows)
    assert table[1]["Method"] == "A sliding window @ 25.0%" and table[1]["Exact quote (% of tokens)"] == 100 * 6 / 48


def test_the_shipped_recorded_grid_is_complete_and_carries_its_provenance():
    data = load_recorded()
    if data is None:
        pytest.skip("no recorded grid in assets/models/smollm2_shrink.json (python -m sim.model.record_shrink)")
    setup = RealShrinkSetup.from_dict(data["setup"])
    assert setup == RealShrinkSetup()  # recorded with the setup the code runs today
    assert [cell_key(r["method"], r["budget"]) for r in data["rows"]] == \
        [cell_key(m, b) for m, b in setup.cells()]
    assert {m for m, _ in setup.cells()} == {"full", *EVICT_METHODS, *QUANT_METHODS}
    prov = data["provenance"]
    assert set(prov) >= {"command", "commit", "machine", "torch", "date", "threads", "gguf_sha256"}
    assert prov["command"].startswith("python -m sim.model.record_shrink")
    for r in data["rows"]:
        assert 0 <= r["long_same"] <= r["num_new"] == setup.num_new
        assert 0 <= r["quote_prefix"] <= r["quote_matched"] <= r["quote_max"] == 24 * setup.num_trials
        assert 0 <= r["chat_prefix"] <= r["chat_max"]


def test_recorded_byte_shares_equal_the_byte_account():
    data = load_recorded()
    if data is None:
        pytest.skip("no recorded grid")
    from sim.model.config import ModelConfig
    from sim.model.evict_cache import budget_for, shrunk_bytes

    cfg = ModelConfig(name="smollm2", vocab_size=49_152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3,
                      d_ff=1536, max_seq_len=8192, rope_theta=100_000.0, tie_word_embeddings=True)
    for r in data["rows"]:
        n = r["num_tokens"]
        acct = shrunk_bytes(cfg, method=r["method"], budget_tokens=budget_for(r["budget"], n) if r["budget"] is not None else None, num_tokens=n)
        assert acct.fraction_of_full == r["byte_fraction"]


def test_shrink_page_shows_the_recorded_grid_and_its_verdict_on_the_real_model():
    data = load_recorded()
    if data is None:
        pytest.skip("no recorded grid")
    at = run_in_app("shrink_cache", {"model": "smollm2"})
    assert not at.exception
    shown = [unescaped(m.value) for m in at.markdown]
    _, sentence = verdict(data["rows"])
    assert f"**{sentence}**" in shown
    assert any("Recorded by" in unescaped(c.value) and data["provenance"]["torch"] in unescaped(c.value)
               for c in at.caption)
    assert at.session_state["model"] == "smollm2"


def test_the_recorded_view_needs_no_torch():
    if load_recorded() is None:
        pytest.skip("no recorded grid")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(ROOT / 'pages' / 'shrink_cache.py')!r}, default_timeout=300)\n"
        "at.query_params['model'] = 'smollm2'\n"
        "at.run()\n"
        "assert not at.exception, [e.value for e in at.exception]\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_without_the_wheel_the_pages_say_in_one_line_how_to_add_it(monkeypatch):
    from tests.test_real_pages import _no_wheel

    _no_wheel(monkeypatch)
    for slug, params in (("shrink_cache", {"model": "smollm2"}), ("attention_masks", {"model": "smollm2"})):
        at = run_in_app(slug, params)
        assert not at.exception
        lines = [unescaped(i.value) for i in at.info]
        assert any(INSTALL_COMMAND in line and "\n" not in line for line in lines), lines


@pytest.fixture(scope="module")
def real():
    from sim.model.real_source import wheel_gguf
    from sim.refusal import Refusal

    try:
        wheel_gguf()
    except Refusal as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but the real model is not usable: {exc}")
        pytest.skip(f"the real model is not installed ({exc})")
    from app.resources import real_model

    return real_model()


def test_attention_sink_on_the_page_is_the_measured_one(real):
    from sim.model.real_probe import attention_sink, probe_ids

    at = run_in_app("attention_masks", {"model": "smollm2"}, timeout=600)
    assert not at.exception
    at.button(key=next(b.key for b in at.button if b.label == "Measure the sink")).click().run(timeout=600)
    assert not at.exception
    sink = attention_sink(real.model, probe_ids(real, 256))
    assert sink.median > 10 * sink.uniform  # the sink: a real model's layers attend to token 0 far above chance
    captions = [unescaped(c.value) for c in at.caption]
    from sim.attention.mask_view import sink_figures

    fig = sink_figures(sink.share, sink.median, sink.uniform)
    pct = {k: f"{v:.1%}" for k, v in (("median", fig.median), ("uniform", fig.uniform), ("min", fig.lowest),
                                      ("max", fig.highest))}
    assert pct["median"] == f"{100 * sink.median:.1f}%"  # the sentence's median is the one measured here
    sentence = text("en", "real.sink.sentence", n=f"{sink.num_tokens:,}", skip=f"{sink.skip}", lo=f"{fig.lowest_layer}",
                    hi=f"{fig.highest_layer}", many=f"{sink.layers_above(10)}", **pct)
    assert any(sentence in c for c in captions), captions


def test_k_has_large_fixed_channels_and_per_channel_int2_beats_per_token_on_the_real_model(real):
    import numpy as np

    from sim.model.real_probe import kv_channels, probe_ids

    kv = kv_channels(real.model, probe_ids(real, 128))
    assert kv.k_mean.shape == kv.v_mean.shape == (30, 3 * 64) and kv.num_tokens == 128
    assert np.array_equal(kv.k_ratio, kv.k_mean.max(-1) / np.median(kv.k_mean, axis=-1))
    assert kv.claim_holds() == bool((kv.k_ratio > kv.v_ratio).mean() > 0.5 and (kv.k_ratio > 4).mean() >= 0.5)
    for bits in (4, 2):
        per_channel, per_token = kv.bits_to_mse[bits]
        assert per_channel < per_token  # KIVI's reason for K per channel, on a real model's K


def test_attention_sink_baseline_is_the_even_spread():
    import numpy as np

    from sim.model.real_probe import SinkResult

    share = np.array([0.5, 0.01, 0.3])
    s = SinkResult(num_tokens=64, skip=16, share=share, uniform=float(np.mean([1 / (i + 1) for i in range(16, 64)])))
    assert s.median == 0.3 and s.layers_above(10) == 2


def test_decode_cost_runs_on_the_real_model_with_its_tokens(real):
    prompt = "The capital of France is"
    at = run_in_app("decode_cost", {"model": "smollm2", "prompt": prompt, "n": "4", "budget": "5"}, timeout=600)
    assert not at.exception
    assert at.session_state["model"] == "smollm2"
    # it waits for its button when the estimate is over budget
    if SHOWN_KEY not in at.session_state or "decode_cost.compare" not in at.session_state[SHOWN_KEY]:
        next(b for b in at.button if b.label == "Run naive and cached").click().run(timeout=600)
        assert not at.exception
    res = at.session_state[SHOWN_KEY]["decode_cost.compare"]
    ids = real.encode(prompt)
    assert res.first_difference is None and res.cached[0].position == len(ids)  # the real tokens, not bytes
    from sim.model.generate import generate

    assert [r.token for r in res.cached] == generate(real.model, ids, 4, mode="cached", attn_impl="sdpa", count=False).new_ids


def test_kv_quantization_measures_k_and_v_of_the_real_model(real):
    from sim.model.real_probe import kv_channels, probe_ids

    at = run_in_app("kv_quantization", {"lm": "smollm2"}, timeout=600)
    assert not at.exception
    at.button(key=next(b.key for b in at.button if b.label == "Measure K and V")).click().run(timeout=600)
    assert not at.exception
    kv = kv_channels(real.model, probe_ids(real, 256))
    shown = [unescaped(m.value) for m in at.markdown]
    from sim.words.quant import real_kv_sentence

    assert f"k_ratio={kv.k_ratio.mean():.1f}," in real_kv_sentence(kv, PSEUDO)  # the mean measured here
    assert any(real_kv_sentence(kv) in s for s in shown), shown[:5]
    per_channel, per_token = kv.bits_to_mse[2]
    kivi = text("en", "real.kv.kivi", bits="2", per_channel=f"{per_channel:.2e}", per_token=f"{per_token:.2e}",
                which=text("en", "real.kv.lower" if per_channel <= per_token else "real.kv.higher"),
                ratio=f"{max(per_channel, per_token) / max(min(per_channel, per_token), 1e-30):.1f}")
    assert any(kivi in s for s in shown)


def test_one_cell_of_the_recorded_grid_reruns_live(real):
    data = load_recorded()
    if data is None:
        pytest.skip("no recorded grid")
    at = run_in_app("shrink_cache", {"model": "smollm2", "cell": "full"}, timeout=600)
    assert not at.exception
    at.button(key=next(b.key for b in at.button if b.label == "Rerun this cell")).click().run(timeout=600)
    assert not at.exception
    rec = data["rows"][0]
    said = [unescaped(m.value) for m in (*at.success, *at.warning) if "Live rerun of The full FP16 cache" in m.value]
    assert len(said) == 1
    if said[0].startswith("Live rerun of The full FP16 cache: the same scores"):  # same arithmetic as when recorded
        assert f"quote {100 * rec['quote_prefix'] / rec['quote_max']:.0f}%" in said[0]
