"""The Serving page: the numbers it shows are sim.serving's for the same inputs, its state lives in the URL."""


import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import _calculate_file_id
from streamlit.testing.v1 import AppTest

from app.controls.serving_engine import TABS
from sim.alloc.workload import LengthWorkloadConfig
from sim.model import speculative as sp
from sim.msg import Msg
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.words import say
from sim.words.catalog import PSEUDO
from sim.words.serving_claims import lookahead_claim
from sim.words.speculative import timing_caption
from tests.conftest import run_page


def open_page(**params) -> AppTest:
    params.setdefault("live", "0")  # the real-model section has its own test
    at = run_page("serving", params)
    assert not at.exception, at.exception
    return at


def expected(batch=256, block_size=16, watermark=0.01, max_batched=8192, model="llama-3.1-8b", gpu="h100-sxm",
             wdtype="bf16", kvdtype="fp16", util=0.9, kv_limit=0, rate=20.0, **wkw) -> cp.ServingComparison:
    if wkw.get("arrival") == "poisson":
        wkw["arrival_rate"] = rate * cp.ARRIVAL_TICK_S
    dep = cp.DeploymentConfig(model, gpu, wdtype, kvdtype, util, kv_limit)
    return cp.run_serving(cp.ServingSetup(LengthWorkloadConfig(**wkw), dep, batch, block_size, watermark, max_batched))


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def url_value(at: AppTest, key: str) -> str:
    got = at.query_params[key]
    return got[0] if isinstance(got, list) else got


def assert_batching_matches(at: AppTest, cmp: cp.ServingComparison) -> None:
    shown = metrics(at)
    static, cont = cmp.results["static"], cmp.results["continuous"]
    assert shown["Static batching (tokens/s)"] == f"{static.tokens_per_s:,.0f}"
    assert shown[say("en", Msg("serving.m.continuous"))] == f"{cont.tokens_per_s:,.0f}"
    assert shown["Continuous ÷ static"] == f"{cmp.speedup:.2f}×"
    assert shown["Preemptions (continuous)"] == f"{cont.num_preemptions:,}"
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), cmp.to_frame().round(3))
    assert any(f"**{cmp.speedup:.2f}×** the throughput" in m.value for m in at.markdown)


def test_defaults_show_the_simulators_numbers_and_export_them():
    at = open_page()
    cmp = expected()
    assert_batching_matches(at, cmp)
    assert cmp.speedup > 3  # the default workload: continuous batching wins clearly
    csv = cmp.to_frame().round(3).to_csv(index=False).encode()
    button = at.get("download_button")[0]
    assert button.proto.url.endswith(f"/{_calculate_file_id(csv, 'text/csv', 'serving.csv')}.csv")
    assert csv.decode().startswith("policy,throughput_tok_s,") and len(csv.decode().splitlines()) == 3
    assert say("en", Msg("serving.m.tokens_formula")) not in metrics(at)  # speculation has its own tab
    assert not at.error and not at.warning
    # speculative decoding at the defaults: α = 0.8, k = 4, c from the roofline (70B drafted by 8B on an H100)
    at = open_page(tab="spec")
    shown = metrics(at)
    timing = sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    mc = sps.simulate_speculative(0.8, 4, 20_000, 0)
    assert shown[say("en", Msg("serving.m.tokens_formula"))] == f"{sps.expected_tokens_per_pass(0.8, 4):.3f}"
    assert shown["Monte Carlo"] == f"{mc.mean:.3f} ± {2 * mc.stderr:.3f}"
    assert shown["Speedup"] == f"{sps.speculative_speedup(0.8, 4, timing.c):.2f}×"
    assert shown["Best k here"] == str(sps.optimal_k(0.8, timing.c, 12))
    assert not at.error and not at.warning


def test_widgets_change_the_numbers_and_the_url():
    at = open_page()
    at.number_input(key="requests").set_value(300)
    at.number_input(key="batch").set_value(32)
    at.selectbox(key="lengths").set_value("uniform")
    at.selectbox(key="gpu").set_value("a100-80gb")
    at.run()
    assert not at.exception
    assert_batching_matches(at, expected(num_requests=300, batch=32, length_dist="uniform", gpu="a100-80gb"))
    at.session_state[TABS.widget_key] = TABS.tabs["spec"]  # what a click on the tab sends: the values stay
    at.run()
    assert not at.exception
    at.slider(key="alpha").set_value(0.6)
    at.slider(key="k").set_value(3)
    at.radio(key="c_mode").set_value("manual")
    at.run()
    assert not at.exception
    at.slider(key="c").set_value(0.1)
    at.run()
    assert not at.exception
    shown = metrics(at)
    assert shown[say("en", Msg("serving.m.tokens_formula"))] == f"{sps.expected_tokens_per_pass(0.6, 3):.3f}"
    assert shown["Speedup"] == f"{sps.speculative_speedup(0.6, 3, 0.1):.2f}×"
    for key, value in (("tab", "spec"), ("requests", "300"), ("batch", "32"), ("lengths", "uniform"),
                       ("gpu", "a100-80gb"), ("alpha", "0.6"), ("k", "3"), ("c_mode", "manual"), ("c", "0.1")):
        assert url_value(at, key) == value


def test_a_shared_link_opens_the_same_view():
    params = dict(requests=200, batch=48, arrival="poisson", rate=200.0, spread=1.5, seed=4, model="qwen2.5-7b",
                  block_size=32, kv_limit=8000)
    at = open_page(**params)
    cmp = expected(num_requests=200, batch=48, arrival="poisson", rate=200.0, spread=1.5, seed=4, model="qwen2.5-7b",
                   block_size=32, kv_limit=8000)
    assert_batching_matches(at, cmp)
    assert cmp.results["continuous"].num_preemptions > 0  # 8,000 slots run out: the page shows preemptions
    assert at.number_input(key="batch").value == 48 and at.selectbox(key="model").value == "qwen2.5-7b"


def test_bad_url_values_fall_back_with_a_warning():
    at = open_page(batch="-3", alpha="7", model="gpt-99", c_mode="%00", requests="lots")
    warnings = " ".join(w.value for w in at.warning)
    for key in ("batch", "alpha", "model", "c_mode", "requests"):
        assert f"`{key}`" in warnings
    assert_batching_matches(at, expected())


def test_settings_that_cannot_run_show_the_numbers_not_a_traceback():
    at = open_page(kv_limit=1000)
    assert at.error and "1,000 tokens" in at.error[0].value and "2,048" in at.error[0].value
    at = open_page(model="llama-3.1-70b", gpu="l4")
    assert at.error and "GiB" in at.error[0].value


def test_batch_size_sweep():
    at = open_page(requests=200, sweep=1)
    sweep = at.dataframe[1].value
    assert list(sweep["max_batch"]) == [16, 32, 64, 128, 256, 512]
    row = sweep.set_index("max_batch").loc[64]
    cmp = expected(num_requests=200, batch=64)
    assert row["ratio"] == pytest.approx(round(cmp.speedup, 2))


def test_live_speculation_on_the_real_model(monkeypatch):
    from sim.model.transformer import checkpoint_path

    if not checkpoint_path("mha").is_file():
        pytest.skip("the bundled mha checkpoint is missing")
    monkeypatch.setenv("KVLAB_THREADS", "1")  # one thread: a tiny model only loses time to thread sync
    at = open_page(tab="spec", live=1, live_k=3, live_new=32, live_draft="first2")
    shown = metrics(at)
    from sim.model.device import pick_device, pick_dtype
    from sim.model.generate import encode
    from sim.model.transformer import load_model

    device = pick_device()
    target = load_model("mha", device, pick_dtype(device))  # as app.resources loads it
    run = sp.speculative_generate(target, sp.truncated_draft(target, 2),
                                  encode("ROMEO.\nBut soft, what light through yonder window breaks?\n"), max_new_tokens=32, k=3,
                                  repeats=1)
    # fp32 on a CPU: exact. (In bf16 on a GPU a k+1-token pass may round differently from a 1-token one.)
    assert shown["Same tokens as target"] == ("yes" if run.identical else "NO")
    if device.type == "cpu":
        assert run.identical
    assert shown["Measured acceptance rate"] == f"{run.acceptance_rate:.2f}"
    assert shown["Tokens per target pass"] == f"{run.tokens_per_pass:.2f}"
    head = say("en", Msg("serving.spec.head", passes=run.num_passes, tokens=32, rate=f"{run.acceptance_rate:.0%}"))
    assert any(head in m.value for m in at.markdown)


def shown_text(at: AppTest) -> str:
    """Every caption, paragraph and table cell on the page, as one string."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [t.value.reset_index().to_csv(index=False) for t in at.table]
    return "\n".join(parts)


def test_captions_and_seed_checks_state_the_simulators_numbers():
    at = open_page()
    text = shown_text(at)
    cmp = expected()
    assert f"the KV budget holds **{cmp.capacity_tokens:,} tokens**" in text
    assert f"decodes a token in {cmp.decode_s_batch1 * 1e3:,.2f} ms" in text
    assert say("en", Msg("serving.cl.batching.computed", x=f"{cmp.speedup:.2f}", batch="256", sigma="1",
                         model="llama-3.1-8b", gpu="h100-sxm")) in text
    text = shown_text(open_page(tab="spec"))
    timing = sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm")
    assert f"{timing.target_step_s * 1e3:.2f} ms → c = {timing.c:.3f}" in text
    assert f"k1=5, v={timing.verify_s[4] * 1e3:.2f}, " in timing_caption(timing, 4, PSEUDO) and timing_caption(timing, 4) in text
    points = sps.spec_batch_sweep("llama-3.1-70b", "llama-3.1-8b", "h100-sxm", 0.8, 4)
    turn = next(p.batch for p in points if p.verify_bound == "compute")
    assert f"from batch {turn} on it is compute-bound" in text
    # the seed checks: each computed from the simulators
    assert say("en", Msg("serving.cl.tpp.computed", e=f"{sps.expected_tokens_per_pass(0.8, 4):.2f}", a="0.8", k="4")) in text
    assert "best k at c = 0.1: α=0.5: 2, α=0.6: 3, α=0.7: 4, α=0.8: 6" in text
    assert f"{sps.speculative_speedup(0.8, 4, 0.05):.2f}×" in text
    assert ", ".join(f"α={a:g}: {timing.speedup(a, sps.optimal_k(a, timing.c)):.2f}×" for a in (0.6, 0.8, 0.9)) in text
    assert lookahead_claim().statement in text
