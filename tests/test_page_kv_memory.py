"""The KV memory page: what it shows equals what sim/ computes, for presets, widgets, URL state,
pasted and uploaded config.json files, and the real tiny model's measured cache."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.controls.kv_memory import TAB_WIDGET, TABS
from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import load_gpus
from sim.cost.hf_config import parse_hf_config
from sim.cost.memory import MemoryConfig, fmt_bytes, kv_memory
from sim.cost.presets import load_presets
from sim.msg import Msg
from sim.words import say
from sim.words.catalog import PSEUDO
from sim.words.cost import dtypes_caption
from sim.words.kv_claims import seed_claims
from tests.conftest import unescaped

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
PAGE = str(ROOT / "pages" / "kv_memory.py")
P = load_presets()
G = load_gpus()
LLAMA_CONFIG = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                "max_position_embeddings": 131072, "tie_word_embeddings": False, "_name_or_path": "my-llama"}



def run_page(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def expected(arch, batch, context, kv="fp16", group=128, gpu="h100-sxm", ngpu=1, util=0.9, wdt="bf16"):
    cfg = MemoryConfig(arch, batch=batch, context=context, kv_dtype=kv, group_size=group)
    m = kv_memory(cfg)
    cap = capacity(cfg, GpuConfig(G[gpu], num_gpus=ngpu, utilization=util, weight_dtype=wdt))
    return m, cap, {
        "Per token": fmt_bytes(m.bytes_per_token), "Per request": fmt_bytes(m.per_request_bytes),
        "All requests": fmt_bytes(m.total_bytes),
        "Room for KV": fmt_bytes(cap.kv_budget_bytes) if cap.kv_budget_bytes > 0 else "none",
        "Max requests": f"{cap.max_requests:,}", "Max context": f"{cap.max_context:,}",
    }


def steps_shown(at: AppTest) -> list[str]:
    return at.table[0].value["With your numbers"].tolist()


def test_default_view_shows_sim_numbers():
    at = run_page()
    assert at.title[0].value == "KV memory"
    m, cap, shown = expected(P["llama-3.1-8b"], 16, 32768)
    assert metrics(at) == shown
    assert shown["Per token"] == "128 KiB" and shown["All requests"] == "64 GiB"
    assert steps_shown(at) == [say("en", s.math) for s in m.steps]
    # seed 001's "16 requests of 32k fill an 80 GiB GPU": not at vLLM's default utilization of 0.9
    assert [w.value for w in at.warning] == [say("en", Msg(
        "kvmem.fit.m_over", kv="64 GiB", left=fmt_bytes(cap.kv_budget_bytes), weights=fmt_bytes(cap.weight_bytes),
        s="32,768", n="14", b="16", ctx=f"{cap.max_context:,}"))]
    assert at.query_params["model"] == "llama-3.1-8b" and at.query_params["ctx"] == "32768"
    assert at.query_params["tab"] == "formula"  # the first tab is open, and only its body ran
    labels = [b.proto.label for slug in TABS for b in (at if slug == "formula" else run_page({"tab": slug}))
              .get("download_button")]
    assert labels == ["Download this grid (CSV)", "Download this table (CSV)", "Download the claims (CSV)",
                      "Download the presets (CSV)"]


def test_preset_switch_and_batch_context_change():
    at = run_page()
    at.selectbox(key="model").set_value("mistral-7b-v0.1").run()
    at.number_input(key="batch").set_value(3).run()
    at.number_input(key="ctx").set_value(10_000).run()
    assert not at.exception
    m, cap, shown = expected(P["mistral-7b-v0.1"], 3, 10_000)
    assert metrics(at) == shown
    assert m.total_bytes == 32 * 4096 * 4096 * 3  # the 4,096-token window caps every layer
    assert steps_shown(at) == [say("en", s.math) for s in m.steps]
    assert (at.query_params["model"], at.query_params["batch"], at.query_params["ctx"]) == \
        ("mistral-7b-v0.1", "3", "10000")


def test_mla_preset_and_dtype_switch():
    at = run_page({"model": "deepseek-v3", "ctx": "1000", "batch": "2"})
    at.selectbox(key="kv").set_value("int4").run()
    at.selectbox(key="group").set_value("64").run()
    m, cap, shown = expected(P["deepseek-v3"], 2, 1000, kv="int4", group=64)
    assert metrics(at) == shown and m.bytes_per_token == 61 * 324
    assert at.query_params["kv"] == "int4" and at.query_params["group"] == "64"


def test_url_round_trip_restores_the_view():
    params = {"model": "gemma-2-9b", "ctx": "8192", "batch": "1", "kv": "int8", "group": "32", "gpu": "l4",
              "ngpu": "2", "util": "0.8", "wdt": "int4", "share": "2"}
    at = run_page(params)
    assert all(w.value.startswith("Does not fit") for w in at.warning)  # no URL problems
    assert at.selectbox(key="model").value == "gemma-2-9b" and at.selectbox(key="gpu").value == "l4"
    assert at.number_input(key="ngpu").value == 2 and at.slider(key="util").value == 0.8
    cfg = MemoryConfig(P["gemma-2-9b"], batch=1, context=8192, kv_dtype="int8", group_size=32, layers_per_kv=2)
    m = kv_memory(cfg)
    cap = capacity(cfg, GpuConfig(G["l4"], num_gpus=2, utilization=0.8, weight_dtype="int4"))
    shown = metrics(at)
    assert shown["All requests"] == fmt_bytes(m.total_bytes)
    assert shown["Room for KV"] == fmt_bytes(cap.kv_budget_bytes)
    assert shown["Max requests"] == f"{cap.max_requests:,}"
    for k, v in params.items():
        assert at.query_params[k] == v, k
    at.selectbox(key="gpu").set_value("b200").run()
    assert at.query_params["gpu"] == "b200"


def test_bad_url_values_fall_back_with_warnings():
    at = run_page({"model": "gpt-5", "batch": "-5", "ctx": "1e999", "util": "nan", "group": "7", "cfg": "{" * 3000})
    text = " ".join(w.value for w in at.warning)
    assert "`gpt-5` is not one of" in text and "`-5` is outside 1..65536" in text and "`nan` is outside" in text
    _, _, shown = expected(P["llama-3.1-8b"], 16, 32768)
    assert metrics(at) == shown
    assert at.query_params["batch"] == "16"


def test_pasted_config_is_parsed_and_kept_in_the_url():
    at = run_page({"model": "custom"})
    assert not at.error and not at.metric  # nothing to size until a config is given
    assert at.table  # the seeds' claims still show
    text = json.dumps(LLAMA_CONFIG)
    at.text_area(key="cfg").set_value(text).run()
    assert not at.exception and not at.error
    _, _, shown = expected(parse_hf_config(text), 16, 32768)
    assert metrics(at) == shown and shown["Per token"] == "128 KiB"
    assert at.query_params["cfg"] == text
    again = run_page({"model": "custom", "cfg": text, "batch": "2"})
    assert metrics(again)["All requests"] == fmt_bytes(2 * 32768 * 131_072)


def test_uploaded_config_and_a_bad_one():
    at = run_page({"model": "custom"})
    gemma = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
             "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096,
             "vocab_size": 256000, "max_position_embeddings": 8192}
    at.file_uploader(key="cfg_file").set_value(("config.json", json.dumps(gemma).encode(), "application/json")).run()
    assert not at.exception and not at.error
    _, _, shown = expected(parse_hf_config(json.dumps(gemma)), 16, 32768)
    assert metrics(at) == shown
    assert any("head_dim=256" in unescaped(i.value) for i in at.info)  # the note on head_dim vs hidden/heads
    hostile = dict(gemma, num_key_value_heads=5, num_hidden_layers=10**50)
    at.file_uploader(key="cfg_file").set_value(("evil.json", json.dumps(hostile).encode(), "application/json")).run()
    assert not at.exception and not at.metric
    assert say("en", Msg("kvmem.cfg.outside", key="num_hidden_layers", shown=Msg("kvmem.cfg.digits", n=51), lo="1",
                         hi="1,024")) in unescaped(at.error[0].value)
    at.file_uploader(key="cfg_file").set_value(("bin.json", b"\xff\xfe\x00", "application/json")).run()
    assert not at.exception and "not UTF-8" in unescaped(at.error[0].value)


def test_pasted_garbage_shows_an_error_not_a_traceback():
    at = run_page({"model": "custom", "cfg": '{"num_hidden_layers": "lots"}'})
    assert not at.exception
    assert say("en", Msg("kvmem.cfg.not_int", key="num_hidden_layers", shown="'lots'", type="str")) in unescaped(
        at.error[0].value)


def test_measured_on_the_real_model_matches_the_formula():
    at = run_page({"measure": "1", "tiny": "mqa", "tbatch": "2", "tctx": "50", "tab": "measured"})
    table = next(d.value for d in at.dataframe if "Count" in d.value.columns)
    expected_bytes = 2 * 4 * 1 * 32 * 4 * 2 * 50  # 2 · L · H_kv · d_h · 4 B (fp32 on CPU) · B · S
    import torch

    if torch.cuda.is_available():
        expected_bytes //= 2  # bf16 / fp16 on the GPU
    assert table["Bytes"].tolist()[:3] == [expected_bytes] * 3
    assert any("They agree" in s.value for s in at.success)
    assert at.toggle(key="measure").value is True


def test_claims_table_equals_sim():
    at = run_page({"tab": "claims"})
    claims = seed_claims(P, G)
    table = next(t.value for t in at.table if "Verdict" in t.value.columns)
    assert table["Verdict"].tolist() == [c.verdict for c in claims]
    assert table["We compute"].tolist() == [c.computed for c in claims]


@pytest.mark.parametrize("tab", ["grid", "variants", "dtypes"])
def test_absurd_but_valid_config_shows_no_traceback(tab):
    """Every field at its upper bound: byte counts past 2^63 still render (as text where Arrow can't), in
    each tab that sweeps them."""
    cfg = {"hidden_size": 2**20, "num_hidden_layers": 1024, "num_attention_heads": 16384,
           "num_key_value_heads": 16384, "head_dim": 65536, "vocab_size": 2**24, "intermediate_size": 2**24,
           "max_position_embeddings": 2**27, "sliding_window": 2**26, "sliding_window_pattern": 2}
    at = run_page({"model": "custom", "cfg": json.dumps(cfg), "batch": "65536", "ctx": str(2**27), "ngpu": "64",
                   "kv": "fp32", "tab": tab})
    _, _, shown = expected(parse_hf_config(json.dumps(cfg)), 65536, 2**27, kv="fp32", ngpu=64)
    assert metrics(at)["All requests"] == shown["All requests"] == "48 YiB"
    assert any("The weights alone" in w.value for w in at.warning)


def test_only_the_open_tab_runs_and_the_link_keeps_it():
    at = run_page()
    assert [t.label for t in at.tabs] == list(TABS.values())
    assert len(at.get("plotly_chart")) == 1 and not any("Verdict" in t.value.columns for t in at.table)  # no heatmap
    assert len(run_page({"tab": "grid"}).get("plotly_chart")) == 2  # the fit chart + the batch × context heatmap
    at.session_state[TAB_WIDGET] = TABS["presets"]  # what a click on the tab sends
    at.run()
    assert not at.exception and at.query_params["tab"] == "presets"
    assert [b.proto.label for b in at.get("download_button")] == ["Download the presets (CSV)"]
    again = run_page({"tab": "dtypes", "kv": "int8"})
    assert again.session_state[TAB_WIDGET] == TABS["dtypes"] and again.query_params["tab"] == "dtypes"
    assert dtypes_caption(128) in [c.value for c in again.caption] and "INT8 is 0.5156× FP16" in dtypes_caption(128)


def test_a_bad_tab_in_the_link_opens_the_first_with_a_warning():
    at = run_page({"tab": "nope"})
    assert say("en", Msg("url.not_one_of", value="`nope`", options=", ".join(TABS))) in " ".join(w.value for w in at.warning)
    assert at.query_params["tab"] == "formula" and at.session_state[TAB_WIDGET] == TABS["formula"]


@pytest.mark.parametrize("tab", ["engine", "variants", "dtypes"])
def test_each_tabs_chart_titles_its_axes(tab):
    """The chart axes test opens the page at its default tab; these tabs' charts are checked here."""
    from tests.test_chart_axes import charts, untitled_axes

    figs = charts(run_page({"tab": tab}))
    assert len(figs) == 2 and all(untitled_axes(f) == [] for f in figs)


def test_engine_tab_shows_the_allocator_next_to_the_formula():
    from sim.cost.kv_engine import KVEngineConfig, engine_allocation
    from sim.words.cost import engine_takeaway
    from tests.test_chart_axes import charts, title_of

    at = run_page({"model": "gpt-oss-20b", "tab": "engine", "ctx": "32768", "batch": "4"})
    cfg = MemoryConfig(P["gpt-oss-20b"], batch=4, context=32768)
    kv, alloc = kv_memory(cfg), engine_allocation(cfg, KVEngineConfig())
    cap = capacity(cfg, GpuConfig(G["h100-sxm"]))
    shown = metrics(at)
    assert shown["vLLM reserves, per request"] == fmt_bytes(alloc.per_request_bytes) == "963.4 MiB"
    assert shown["Max requests (formula)"] == f"{cap.kv_budget_bytes // kv.per_request_bytes:,}"
    assert shown["Max requests (vLLM blocks)"] == f"{alloc.max_requests(cap.kv_budget_bytes):,}"
    assert int(shown["Max requests (vLLM blocks)"]) < int(shown["Max requests (formula)"])
    figs = charts(at)
    assert unescaped(title_of(figs[-1])).replace("<br>", " ") == engine_takeaway(kv, alloc, "gpt-oss-20b")
    groups = next(t.value for t in [*at.table, *at.dataframe] if "KV cache group" in t.value.columns)
    assert groups["Blocks per request"].tolist() == [2048, 521]
    code = at.get("code")[0].proto.code_text
    assert "--max-model-len 32768" in code and "--max-num-seqs 4" in code and "vllm serve openai/gpt-oss-20b" in code


def test_formula_tab_lists_the_layer_groups():
    from sim.cost.kv_engine import KVEngineConfig, engine_allocation
    from sim.words.cost import group_rows

    at = run_page({"model": "qwen3-next-80b-a3b", "ctx": "131072", "batch": "1"})
    cfg = MemoryConfig(P["qwen3-next-80b-a3b"], batch=1, context=131072)
    rows = group_rows(kv_memory(cfg), engine_allocation(cfg, KVEngineConfig()))
    table = next(t.value for t in [*at.table, *at.dataframe] if "Group" in t.value.columns)
    assert table["Group"].tolist() == [r["Group"] for r in rows]
    assert [r["Group"] for r in group_rows(kv_memory(cfg), engine_allocation(cfg, KVEngineConfig()), PSEUDO)] == [
        "kvmem.r.group.full", "kvmem.r.group.state(name=kvmem.r.state.gated_deltanet)"]
    assert table["Per request (B)"].tolist() == [r["Per request (B)"] for r in rows] == [12 * 131072 * 2048, 39_518_208]
    assert table["Share"].tolist() == ["98.8%", "1.2%"]  # 3,221,225,472 / 3,260,743,680 = 0.9879


def test_engine_settings_round_trip_and_bad_values():
    at = run_page({"model": "gpt-oss-20b", "tab": "engine", "bs": "32", "hybrid": "0", "mnbt": "2048"})
    assert not [w for w in at.warning if "cannot use" in w.value]
    assert (at.query_params["bs"], at.query_params["hybrid"], at.query_params["mnbt"]) == ("32", "0", "2048")
    assert "--disable-hybrid-kv-cache-manager" in at.get("code")[0].proto.code_text
    bad = run_page({"model": "gpt-oss-20b", "bs": "17", "mnbt": "-1", "sdt": "fp64"})
    text = " ".join(w.value for w in bad.warning)
    assert "`17` is not one of" in text and "`-1` is outside" in text and "`fp64` is not one of" in text
    assert bad.query_params["bs"] == "16"
