"""AppTest for the Attention kernels page: the numbers shown are the numbers sim/ returns."""

import pytest
from streamlit.testing.v1 import AppTest

from app.tabs import LazyTabs
from sim.attention import online_softmax as FL
from sim.attention import shapes as S
from sim.cost.memory import fmt_bytes
from sim.msg import Msg
from sim.words import say, text
from sim.words.attention import fmt_num, fmt_ratio
from tests.conftest import metric_value as metric
from tests.conftest import run_page, unescaped

TAB_KEY = LazyTabs("attention_kernels", {}).widget_key  # holds the open tab's label: what a click sends


def tab_label(slug: str) -> str:
    return text("en", f"density.kernels.tab.{slug}")

SMALL = {"n": "128", "h": "1", "d": "16", "threads": "1"}  # a timing of a few milliseconds per kernel


def page(params=None) -> AppTest:
    return run_page("attention_kernels", params, timeout=180)


def click(at, label):
    return next(b for b in at.button if b.label == label).click().run()


def test_default_render_opens_on_the_bytes_chart_with_the_exact_numbers_without_timing():
    at = page()
    assert not at.exception and not at.error
    assert at.query_params["tab"] == "shape"  # the page opens on its finding: the bytes each way moves
    tiny = S.SHAPE_PRESETS["tiny"]  # the page's defaults
    assert metric(at, "FLOPs per call") == f"{tiny.flops / 1e9:,.4f} GFLOP" == "0.2684 GFLOP"
    assert metric(at, "Score entries B·H·N_q·N_k") == "4,194,304"
    assert metric(at, text("en", "kernels.m.n2")) == "16 MiB"  # 1·4·1024·1024·4 bytes
    assert "ak_timing" not in at.session_state  # nothing timed until the button
    backends = at.dataframe[0].value
    assert list(backends["Runs here"][:3]) == ["yes", "yes", "yes"]  # eager, MATH, FLASH on this CPU build
    tr = FL.hbm_traffic(1, 4, 1024, 1024, 32, 4, 128, 128, True)
    assert metric(at, "Standard: bytes moved") == fmt_bytes(tr.standard_bytes)
    assert metric(at, "Tiled: bytes moved") == fmt_bytes(tr.tiled_bytes)
    assert metric(at, "Standard / tiled") == f"{tr.standard_bytes / tr.tiled_bytes:,.1f}×"
    # one chart, the traffic model's; the other sections are one click away and do not run
    assert len(at.get("plotly_chart")) == 1 and not at.table
    assert "Tile 1 of 3" not in [m.label for m in at.metric]


def test_the_stepper_tab_at_its_defaults():
    at = page({"tab": "stepper"})
    assert not at.exception and not at.error
    trace = FL.run_softmax_demo(FL.SoftmaxDemo())  # 10 keys, tiles of 4, step 1
    s = trace.steps[0]
    assert metric(at, "Tile 1 of 3") == "keys 0–3"
    assert metric(at, "Running max m") == f"−∞ → {fmt_num(float(s.m_new[0]))}"
    assert metric(at, "Running sum l") == f"0 → {fmt_num(float(s.l_new[0]))}"
    assert metric(at, "max |tiled − plain|") == f"{trace.max_abs_diff:.2e}"
    assert len(at.get("plotly_chart")) == 2  # the step and the trace table


def test_the_claims_tab_before_any_measurement():
    at = page({"tab": "claims"})
    assert not at.exception
    claims = at.table[-1].value  # the seed's claims, checked; nothing measured yet, nothing quoted from elsewhere
    assert len(claims) == 6 and "Measured on this page" not in " ".join(claims["We compute"])
    assert not any("earlier run" in t.value for t in [*at.markdown, *at.caption])


def test_step_through_the_online_softmax():
    at = page({"tab": "stepper", "sm_keys": "11", "sm_tile": "3", "sm_rows": "2", "sm_causal": "1", "sm_row": "1"})
    assert not at.exception
    demo = FL.SoftmaxDemo(num_keys=11, tile=3, num_queries=2, causal=True)
    trace = FL.run_softmax_demo(demo)
    assert len(trace.steps) == 4  # 3 + 3 + 3 + 2: a ragged last tile
    for step in (2, 4):
        at.slider(key="sm_step").set_value(step).run()
        cur = trace.steps[step - 1]
        assert metric(at, f"Tile {step} of 4") == f"keys {cur.start}–{cur.stop - 1}"
        assert metric(at, "Running max m") == f"{fmt_num(float(cur.m_old[1]))} → {fmt_num(float(cur.m_new[1]))}"
        assert metric(at, "Rescale e^(m_old − m_new)") == fmt_num(float(cur.rescale[1]))
    assert at.query_params["sm_step"] == "4" and at.query_params["sm_tile"] == "3"
    # a fully masked first tile: the page shows what the unguarded (seed) code would return
    at.number_input(key="sm_pad").set_value(3).run()
    assert not at.exception
    assert "e^(−∞ − (−∞)) is nan" in at.warning[0].value and "[nan, nan, nan]" in at.warning[0].value


def test_time_a_small_shape():
    at = page(SMALL)
    click(at, "Time these kernels")
    assert not at.exception and not at.error
    result, _when = at.session_state["ak_timing"]
    assert result.shape == S.AttentionShape(batch=1, heads=1, seq_len=128, head_dim=16)
    assert result.num_threads == 1
    assert metric(at, "FLASH vs eager, time") == fmt_ratio(result.speedup("flash"))
    assert metric(at, "Eager / FLASH peak memory") == fmt_ratio(result.memory_ratio("flash"))
    table = at.dataframe[1].value
    assert list(table["Kernel"]) == ["eager", "MATH", "FLASH", "EFFICIENT", "cuDNN"]
    assert list(table["Status"]) == ["ok", "ok", "ok", "unavailable (see above)", "unavailable (see above)"]
    assert table["Max |Δ| vs MATH"][1] == "0 (reference)"
    for r in result.rows[:3]:
        assert r.max_abs_diff <= S.TOLERANCE["float32"]
    assert at.get("download_button")
    # the same shape again comes from the cache; "Measure again" takes fresh numbers
    click(at, "Time these kernels")
    assert at.session_state["ak_timing"][0] == result
    click(at, "Measure again")
    assert not at.exception and at.session_state["trial"] == 1
    assert at.session_state["ak_timing"][0].shape == result.shape


def test_sweep_runs_and_draws():
    at = page({**SMALL, "sweep_max": "256", "tab": "sweep"})
    assert at.select_slider(key="sweep_max").value == 256
    click(at, "Run the sweep")
    assert not at.exception and not at.error
    sweep = at.session_state["ak_sweep"]
    df, ceiling, label = sweep.to_frame(), sweep.ceiling_flops, sweep.label
    assert sorted(df["keys"].unique()) == [128, 256] and ceiling > 0
    assert set(df[df["status"] == "ok"]["implementation"]) == {"eager", "math", "flash"}
    at256 = df[df["keys"] == 256].set_index("implementation")
    assert metric(at, text("en", "kernels.m.sweep_time", n=256)) == f"{at256.loc['eager', 'median_ms'] / at256.loc['flash', 'median_ms']:,.1f}×"
    assert len(at.get("plotly_chart")) == 4  # the sweep's charts, its tab alone
    assert "N queries × N keys" in label
    r = sweep.flash_vs_eager("median").time_ratio
    assert metric(at, text("en", "kernels.m.sweep_time", n=256)) == f"{r:,.1f}×"
    at.session_state[TAB_KEY] = tab_label("claims")  # what a click on the tab sends
    at.run()
    assert not at.exception and at.query_params["tab"] == "claims"
    speed = at.table[-1].value.loc["FlashAttention: 24× wall-clock on A100, 510× on H100 in FP8"]
    # which kernel was faster is this run's measurement (a busy machine can make FLASH the slower one at N = 256):
    # the sentence is the one the measured ratio calls for
    said = (f"FLASH is {r:,.1f}× faster than eager" if f"{r:,.1f}" != "1.0" and r > 1 else
            f"FLASH is {1 / r:,.1f}× slower than eager" if f"{1 / r:,.1f}" != "1.0" and r < 1 else
            "FLASH and eager take about as long")
    assert speed["We compute"].endswith(f"{said} (median).")
    at.session_state[TAB_KEY] = tab_label("sweep")
    at.run()
    at.radio(key="stat").set_value("fastest block").run()
    assert metric(at, text("en", "kernels.m.sweep_time", n=256)) == f"{at256.loc['eager', 'min_ms'] / at256.loc['flash', 'min_ms']:,.1f}×"
    assert at.query_params["stat"] == "fastest block"


def test_preset_loads_the_shape():
    at = page()
    at.selectbox(key="preset").set_value("llama").run()
    assert not at.exception
    llama = S.SHAPE_PRESETS["llama"]
    assert (at.number_input(key="h").value, at.select_slider(key="d").value) == (llama.heads, llama.head_dim)
    assert metric(at, "FLOPs per call") == f"{llama.flops / 1e9:,.4f} GFLOP"
    assert at.query_params["h"] == "8" and at.query_params["d"] == "128"


def test_url_restores_the_view():
    at = page({"n": "2048", "h": "2", "kind": "decode", "sm_keys": "12", "sm_tile": "5", "sm_step": "3", "tile": "64"})
    assert not at.exception and not at.warning
    decode = S.AttentionShape(batch=1, heads=2, seq_len=2048, head_dim=32, kind="decode")
    assert metric(at, "FLOPs per call") == f"{decode.flops / 1e9:,.4f} GFLOP"
    assert metric(at, text("en", "kernels.m.n2")) == fmt_bytes(decode.score_bytes) == "16 KiB"
    tr = FL.hbm_traffic(1, 2, 1, 2048, 32, 4, 64, 64, False)
    assert metric(at, "Tiled: bytes moved") == fmt_bytes(tr.tiled_bytes)
    # the stepper's values wait in the link while its tab is closed, and show when it opens
    assert at.query_params["sm_step"] == "3" and at.query_params["sm_tile"] == "5"
    at.session_state[TAB_KEY] = tab_label("stepper")
    at.run()
    assert not at.exception and at.query_params["tab"] == "stepper"
    assert at.slider(key="sm_step").value == 3 and metric(at, "Tile 3 of 3") == "keys 10–11"


def test_a_link_opens_its_tab():
    at = page({"tab": "stepper", "sm_keys": "12", "sm_tile": "5", "sm_step": "3"})
    assert not at.exception and at.session_state[TAB_KEY] == tab_label("stepper")
    assert at.slider(key="sm_step").value == 3 and metric(at, "Tile 3 of 3") == "keys 10–11"


@pytest.mark.parametrize("params, expected", [
    ({"n": "999999"}, "`999999` is outside 1..65536"),
    ({"sm_scale": "nan"}, "`nan` is outside 0.01..1000.0"),
    ({"kind": "train"}, "`train` is not one of prefill, decode"),
])
def test_bad_url_values_fall_back_with_a_warning(params, expected):
    at = page(params)
    assert not at.exception
    assert any(expected in w.value for w in at.warning)


def test_over_the_cap_is_an_error_with_numbers():
    at = page({"h": "64", "n": "4096"})
    assert not at.exception
    assert unescaped(at.error[0].value) == say("en", Msg("kernels.err.entries", b=1, h=64, nq=4096, nk=4096, elems=1_073_741_824,
                                                         cap=16_777_216, bits=24, bh=64, max_n=512))
    at.session_state[TAB_KEY] = tab_label("sweep")
    at.run()
    assert not at.exception and any("1,073,741,824 score entries" in unescaped(e.value) for e in at.error)
    assert not any(b.label == "Run the sweep" for b in at.button)  # nothing to sweep until it is fixed
    assert any(w.value == text("en", "density.kernels.fix_shape", tab=tab_label("shape")) for w in at.warning)


def test_off_grid_url_values_snap():
    at = page({"d": "48", "tile": "100", "sm_tile": "40", "sm_keys": "8"})
    assert not at.exception
    assert at.select_slider(key="d").value == 32 and at.select_slider(key="tile").value == 128
    at = page({"tab": "stepper", "sm_tile": "40", "sm_keys": "8"})
    assert at.number_input(key="sm_tile").value == 8  # a tile can not be longer than the keys
