"""The Prefix caching page: the numbers it shows are the simulator's, its state lives in the URL."""

from dataclasses import replace

import pytest
from streamlit.runtime.memory_media_file_storage import _calculate_file_id
from streamlit.testing.v1 import AppTest

from sim.alloc.block_pool import cdiv
from sim.alloc.byte_tokens import other_byte
from sim.alloc.prefix_cache import CacheConfig, simulate_prefix_cache
from sim.alloc.prefix_sweeps import compare_two_prompts, compare_workloads
from sim.alloc.workload import LAYOUT_LABELS, LAYOUTS, PrefixWorkloadConfig, make_trace
from sim.model.transformer import checkpoint_path
from sim.msg import Msg
from sim.words import say
from sim.words.alloc import requests_frame
from tests.conftest import run_page, unescaped


def open_page(**params) -> AppTest:
    params.setdefault("live", "0")  # the real-model section has its own test
    at = run_page("prefix_caching", params)
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def param(at: AppTest, key: str) -> str:
    got = at.query_params[key]
    return got[0] if isinstance(got, list) else got


def assert_shows(at: AppTest, cfg: PrefixWorkloadConfig, cache: CacheConfig, decode_weight: float = 10.0) -> None:
    shown = metrics(at)
    res = simulate_prefix_cache(make_trace(cfg), cache)
    assert shown["Token hit rate"] == f"{100 * res.hit_rate:.1f}%"
    assert shown["Prefill tokens computed"] == f"{res.num_computed_tokens:,}"
    assert shown["Prefill tokens saved"] == f"{res.num_hit_tokens:,}"
    assert shown["Prefill speed-up"] == f"{res.prefill_speedup:.2f}×"
    assert shown["Blocks reused"] == f"{res.num_hit_blocks:,}"
    assert shown["Evictions"] == f"{res.num_evictions:,}"
    assert shown[say("en", Msg("prefix.m.gain"))] == f"{res.throughput_gain(decode_weight):.2f}×"
    for layout in LAYOUTS:
        other = simulate_prefix_cache(make_trace(replace(cfg, layout=layout)), cache)
        assert shown[f"Hit rate · {LAYOUT_LABELS[layout]}"] == f"{100 * other.hit_rate:.1f}%"
    agent = simulate_prefix_cache(make_trace(replace(cfg, workload="agent", layout="fixed_first")), cache)
    assert shown["Agent loop: hit rate"] == f"{100 * agent.hit_rate:.1f}%"
    assert shown["Agent loop: throughput gain"] == f"{agent.throughput_gain(decode_weight):.2f}×"


def test_defaults_show_the_simulators_numbers_and_export_them():
    at = open_page()
    cfg, cache = PrefixWorkloadConfig(), CacheConfig()
    assert_shows(at, cfg, cache)
    shown = metrics(at)
    assert float(shown["Token hit rate"].rstrip("%")) > 80 and shown[say("en", Msg("prefix.m.layout", layout=Msg("prefix.layout.variable_first")))] == "0.0%"
    # the first view: the default prompt with byte 72 (the seconds' last digit) changed, blocks of 16
    text = at.text_area(key="demo_text").value
    a = list(text.encode())
    b = list(a)
    b[72] = other_byte(a[72])
    demo = compare_two_prompts(a, b, 16).result
    assert shown["Blocks of B reused"] == f"{demo.hit_tokens[1] // 16} of {cdiv(len(b), 16)}" == "4 of 9"
    assert shown[say("en", Msg("prefix.m.demo_read"))] == "64"
    assert shown["Tokens of B computed"] == f"{len(b) - 64}"
    # the cache's rules are vLLM's, and the page names the release (issue 38)
    from sim.cost.vllm_rules import version_label

    assert any(version_label() in c.value and "does not de-duplicate" in c.value for c in at.caption)
    # the CSV behind the first download button is the per-request table
    res = simulate_prefix_cache(make_trace(cfg), cache)
    csv = requests_frame(res).to_csv(index=False).encode()
    button = at.get("download_button")[0]
    assert button.proto.url.endswith(
        f"/{_calculate_file_id(csv, 'text/csv', 'prefix_cache_system_prompt_fixed_first.csv')}.csv")
    assert csv.decode().startswith("request,label,prompt_tokens,hit_tokens,computed_tokens,")
    group = res.labels[0].fields["a"]  # the labels are worded in English, as the traces once stored them
    assert csv.decode().splitlines()[1].startswith(f"0,\"system prompt {group}, request 0\",")
    # the seeds table quotes the overview's RAG numbers
    table = compare_workloads(cfg, cache).to_frame().set_index(["workload", "layout"])
    claims = at.table[0].value
    assert f"before the question: {100 * table.loc[('rag', 'fixed_first'), 'hit_rate']:.1f}% hit" in claims["We compute"].iloc[1]


def test_widgets_change_the_numbers_and_the_url():
    at = open_page()
    at.selectbox(key="workload").set_value("rag")
    at.radio(key="layout").set_value("variable_first")
    at.selectbox(key="block_size").set_value("4")
    at.number_input(key="capacity").set_value(8192)
    at.number_input(key="requests").set_value(60)
    at.number_input(key="decode_weight").set_value(2.0)
    at.run()
    assert not at.exception
    cfg = PrefixWorkloadConfig("rag", "variable_first", num_requests=60)
    cache = CacheConfig(4, 8192)
    assert_shows(at, cfg, cache, decode_weight=2.0)
    # blocks of 4: the 12-token RAG header now hits three blocks per request, even with the question first
    assert metrics(at)["Token hit rate"] != "0.0%"
    assert any(say("en", Msg("prefix.s.rag.fills.other", h=12, n=3, bs=4, tokens=12)) in c.value for c in at.caption)
    for key, value in (("workload", "rag"), ("layout", "variable_first"), ("block_size", "4"), ("capacity", "8192"),
                       ("requests", "60"), ("decode_weight", "2.0")):
        assert param(at, key) == value


def test_a_shared_link_opens_the_same_view():
    at = open_page(workload="chat", requests=80, groups=3, seed=5, running=4, shared=300, output=100, tree_n=5,
                   demo_bs="8", demo_pos=3)
    assert at.selectbox(key="workload").value == "chat"
    assert at.number_input(key="groups").value == 3
    assert at.slider(key="tree_n").value == 5
    assert at.radio(key="demo_bs").value == "8"
    assert not at.warning
    cfg = PrefixWorkloadConfig("chat", num_requests=80, num_groups=3, seed=5, shared_len=300, output_len=100)
    assert_shows(at, cfg, CacheConfig(max_running=4))
    # byte 3 sits in block 0: prompt B reuses nothing
    assert metrics(at)["Blocks of B reused"].startswith("0 of ")
    assert any("The first 5 requests" in str(c.proto) for c in at.get("plotly_chart"))


def test_bad_url_values_fall_back_with_a_warning():
    at = open_page(requests="lots", block_size="3", workload="zipf", decode_weight="nan", capacity="-5", demo_pos="999")
    warned = " ".join(w.value for w in at.warning)
    for key in ("requests", "block_size", "workload", "decode_weight", "capacity", "demo_pos"):
        assert f"`{key}`" in warned
    assert "`-5` is outside 256..4194304" in warned
    assert_shows(at, PrefixWorkloadConfig(), CacheConfig())


@pytest.mark.parametrize("params, message", [
    (dict(shared=4096, capacity=2048), "but the cache holds 128 blocks (2,048 tokens): raise the capacity"),
    (dict(requests=2000, shared=4096), "past the simulator's limit of 4,000,000"),
])
def test_impossible_settings_are_an_error_not_a_traceback(params, message):
    at = open_page(**params)
    assert any(message in unescaped(e.value) for e in at.error)
    assert "Token hit rate" not in metrics(at)
    assert "Blocks of B reused" in metrics(at)  # the rest of the page still renders


def test_demo_with_a_prompt_too_short_is_an_error():
    at = open_page(demo_text="a")
    assert any("needs 2..400 bytes" in unescaped(e.value) for e in at.error)


def test_real_model_branches_from_the_cached_prefix(monkeypatch):
    monkeypatch.setenv("KVLAB_THREADS", "1")  # correctness only: no thread contention on a shared machine
    at = open_page(live="1", live_new=4, repeats=1, suffixes="King.\nHam.", kv_pos=10)
    if not checkpoint_path("mha").is_file():
        assert any("not available" in w.value for w in at.warning)
        return
    shown = metrics(at)
    assert shown["Tokens identical"] == "yes"
    assert float(shown["Largest logit diff"]) < 1e-4
    frame = at.dataframe[-1].value
    assert frame["continuation"].tolist() == ["King.", "Ham."] and frame["same"].all()
    assert (frame["branched"] == frame["from scratch"]).all()
    text = " ".join(m.value for m in at.markdown)
    assert say("en", Msg("prefix.kv.p.zero_one")) in text
    n_prefix = len(at.text_area(key="prefix").value.encode())
    after = min(n_prefix, 120) - 10
    assert f"layer 1: **{after}**" in text
    # prefill token shares come from the lengths alone
    p = n_prefix
    saved = 1 - (p + 6 + 5) / (2 * p + 6 + 5)
    assert f"removes **{100 * saved:.0f}%** of the prefill tokens" in text
    assert param(at, "live_new") == "4"
