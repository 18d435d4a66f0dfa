"""AppTest for the KV quantization page: the numbers shown are the numbers sim/ returns."""

from functools import cache

from streamlit.testing.v1 import AppTest

from sim.model.quant_cache import make_scheme, scheme_bytes
from sim.model.quant_errors import EvalConfig, evaluate_scheme, heldout_windows
from sim.model.quant_generation import free_run
from sim.model.transformer import load_model
from tests.conftest import metric_value as metric
from tests.conftest import run_page, unescaped

SMALL = {"win": "1", "len": "128", "n": "24"}  # a light view: one window of 128 tokens


def page(params=None) -> AppTest:
    return run_page("kv_quantization", params, timeout=300)


@cache
def expected(variant, kind, bits, G=32, g=32, R=128, sym=False, win=1, length=128):
    model = load_model(variant)
    return evaluate_scheme(model, heldout_windows(EvalConfig(win, length)), make_scheme(kind, bits=bits, chunk=G, channel_group=g, residual=R, symmetric=sym))


def check_headline(at, variant, bits, **kw):
    kivi, naive = expected(variant, "kivi", bits, **kw), expected(variant, "token", bits, **kw)
    assert metric(at, f"KIVI INT{bits}, bytes per token") == f"{kivi.bytes_per_token:,.1f}"
    assert metric(at, f"Naive per-token INT{bits}, bytes per token") == f"{naive.bytes_per_token:,.1f}"
    assert metric(at, "Perplexity per byte, full precision") == f"{kivi.ppl_ref:.4f}"
    assert metric(at, f"KIVI INT{bits}: KL per prediction") == f"{kivi.mean_kl:.2e}"
    assert metric(at, f"Naive INT{bits}: KL per prediction") == f"{naive.mean_kl:.2e}"
    assert metric(at, f"KIVI INT{bits}: top-1 agreement") == f"{kivi.mean_agreement:.2%}"
    assert metric(at, f"Naive INT{bits}: top-1 agreement") == f"{naive.mean_agreement:.2%}"
    text = " ".join(m.value for m in at.markdown)
    assert f"KIVI **{kivi.ppl_q:.4f} (Δ loss {kivi.mean_delta_loss:+.5f}" in text
    assert f"naive per-token **{naive.ppl_q:.4f} (Δ loss {naive.mean_delta_loss:+.5f}" in text


def test_light_view_shows_what_sim_computes():
    at = page(SMALL)
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.title[0].value == "KV quantization"
    assert metric(at, "FP16 cache, bytes per token") == "2,048"  # 2 × 4 layers × 4 heads × 32 × 2 B
    check_headline(at, "mha", 4)
    run = free_run(load_model("mha"), list(b"ROMEO.\n"), 24, scheme=make_scheme("token", bits=4))
    first = run.first_difference
    assert metric(at, "First differing token") == ("none" if first is None else str(first))
    assert metric(at, "Cache after the run") == f"{run.used_bytes:,} B"
    assert at.get("download_button")
    assert len(at.get("plotly_chart")) >= 6
    claims = at.table[0].value  # seed 001's claims, through app.claims.render_claims
    assert "reading the cache takes 17.9 ms in FP16 and 9.0 ms in FP8" in claims.loc[
        "Decoding is bandwidth-bound: a cache half the size is read in half the time", "We compute"]
    # R=128 covers every token of a 128-token window: the recent-tokens claim gets no verdict here, only a note
    assert any(c.value.startswith("7 claims checked: ") for c in at.caption)  # INT8 and FP8 each their own
    assert any("R=128 covers all 128 tokens of each window" in unescaped(i.value) for i in at.info)


def test_changing_widgets_updates_numbers_and_url():
    at = page(SMALL)
    at.segmented_control(key="bits").set_value("2")
    at.select_slider(key="R").set_value("64")
    at.select_slider(key="G").set_value("16")
    at.run()
    assert not at.exception and not at.error
    check_headline(at, "mha", 2, G=16, R=64)
    assert at.query_params["bits"] == ["2"] or at.query_params["bits"] == "2"
    assert dict(at.query_params)["R"] in ("64", ["64"])


def test_url_restores_the_view():
    at = page({**SMALL, "variant": "mqa", "bits": "8", "G": "16", "R": "64", "sym": "1", "g": "16"})
    assert not at.exception and not at.warning and not at.error
    assert at.radio(key="variant").value == "mqa"
    assert at.segmented_control(key="bits").value == "8"
    assert at.select_slider(key="G").value == "16" and at.select_slider(key="R").value == "64"
    assert at.toggle(key="sym").value is True
    s = make_scheme("kivi", bits=8, chunk=16, channel_group=16, residual=64, symmetric=True)
    assert metric(at, "KIVI INT8, bytes per token") == f"{scheme_bytes(s, num_tokens=128, n_layers=4, n_kv_heads=1, head_dim=32)['total'] / 128:,.1f}"
    assert metric(at, "FP16 cache, bytes per token") == "512"  # MQA: one KV head


def test_bad_input_is_explained():
    at = page({**SMALL, "G": "128", "R": "64"})
    assert not at.exception
    assert "R=64 is not a multiple of K's group of 128 tokens" in unescaped(at.error[0].value)
    at = page({**SMALL, "bits": "5", "n": "99999", "prompt": ""})
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "`5` is not one of 8, 4, 3, 2" in warnings and "`99999` is outside 16..512" in warnings
    assert "The prompt is empty" in " ".join(e.value for e in at.error)


def test_the_position_caption_describes_the_curve_as_drawn():
    """The sentence under the error-by-position chart says how KIVI's exact start looks on the chart shown: on the
    default log scale a 0 is not drawn (the curve starts late), on a linear one it starts at 0, and for another
    metric it makes no claim about a curve."""
    def last_sentence(params):
        caps = [c.value for c in page({**SMALL, **params}).caption if "exactly 0 at the first" in c.value]
        assert len(caps) == 1, caps
        return caps[0].rsplit("read there)", 1)[1]

    assert last_sentence({}) == "; a log scale has no 0, so its curve begins only where they end."
    assert last_sentence({"log": "0"}) == ", which is why its curve starts at zero."
    assert last_sentence({"metric": "agreement"}) == "."
