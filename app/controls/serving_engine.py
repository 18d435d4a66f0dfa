"""The Serving page's tabs beyond batching: their URL values and widgets, turned into sim.serving.studies setups."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from app.i18n import lang, t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from sim.alloc.workload import LengthWorkloadConfig
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.i18n import LANGS, text
from sim.serving import disagg as dg
from sim.serving import offload as of
from sim.serving import routing as rt
from sim.serving import studies as sd
from sim.serving.comparison import ARRIVAL_TICK_S, DeploymentConfig
from sim.serving.engine import MAX_RECORDED_STEPS, MAX_SPEC_K, EngineConfig
from sim.serving.links import GPU_LINKS, HOST_LINKS
from sim.serving.schedulers import MAX_BATCH
from sim.serving.shared_prefix import MAX_SHARED_GROUPS, MAX_SHARED_REQUESTS, SharedPrefixConfig
from sim.serving.tiers import OffloadConfig

TAB_SLUGS = ("batching", "spec", "chunked", "preemption", "steps", "offload", "disagg", "routing", "trace")
TABS = LazyTabs("serving", {slug: text("en", f"serving.tab.{slug}") for slug in TAB_SLUGS})
STUDY_MAX_LEN = 8192
MAX_STEP_BLOCKS = 64
MAX_PASTE_CHARS = 200_000
MAX_SHARED_PREFIX_HERE = 16_384  # the page's bound (prompts stay within every preset's context)
MAX_TIER_SLOTS = 1 << 26
MAX_POOL_HERE = 8


def register(url: UrlState) -> None:
    """This module's URL values (the page's own controls register theirs; `model` and `gpu` are shared)."""
    TABS.register(url)
    url.int("ck_requests", 100, 1, sd.MAX_STUDY_REQUESTS, label=t("serving.url.ck_requests"))
    url.int("ck_prompt", 3000, 1, STUDY_MAX_LEN - 1, label=t("serving.url.ck_prompt"))
    url.int("ck_output", 100, 1, 1024, label=t("serving.url.ck_output"))
    url.float("ck_rate", 30.0, 0.1, 1000.0, label=t("serving.url.ck_rate"))
    url.int("ck_batch", 64, 1, MAX_BATCH, label=t("serving.url.ck_batch"))
    url.int("ck_seed", 0, 0, 2**31 - 1, label=t("serving.url.ck_seed"))
    url.int("pe_requests", 300, 1, sd.MAX_STUDY_REQUESTS, label=t("serving.url.pe_requests"))
    url.int("pe_prompt", 600, 1, STUDY_MAX_LEN - 1, label=t("serving.url.pe_prompt"))
    url.int("pe_output", 400, 1, 2048, label=t("serving.url.pe_output"))
    url.int("pe_batch", 128, 1, MAX_BATCH, label=t("serving.url.pe_batch"))
    url.int("pe_kv", 40_000, 8192, 1 << 22, label=t("serving.url.pe_kv"))
    url.int("pe_cpu", 400_000, 0, 1 << 26, label=t("serving.url.pe_cpu"))
    url.choice("pe_link", "pcie5", list(HOST_LINKS), label=t("serving.url.pe_link"))
    url.bool("pe_chunked", True, label=t("serving.url.pe_chunked"))
    url.choice("st_scenario", "chunked", list(sd.STEP_SCENARIOS), label=t("serving.url.st_scenario"))
    url.int("st_step", 0, 0, MAX_RECORDED_STEPS - 1, label=t("serving.url.st_step"))
    url.int("st_blocks", 0, 0, MAX_STEP_BLOCKS, label=t("serving.url.st_blocks"))
    url.int("st_budget", 0, 0, 256, label=t("serving.url.st_budget"))
    url.int("st_k", -1, -1, MAX_SPEC_K, label=t("serving.url.st_k"))
    url.int("of_requests", 400, 1, MAX_SHARED_REQUESTS, label=t("serving.url.of_requests"))
    url.int("of_groups", 40, 1, MAX_SHARED_GROUPS, label=t("serving.url.of_groups"))
    url.int("of_prefix", 2048, 16, MAX_SHARED_PREFIX_HERE, label=t("serving.url.of_prefix"))
    url.float("of_rate", 60.0, 0.1, 1000.0, label=t("serving.url.of_rate"))
    url.int("of_gpu", 60_000, 8192, 1 << 22, label=t("serving.url.of_gpu"))
    url.int("of_cpu", 50_000, 0, MAX_TIER_SLOTS, label=t("serving.url.of_cpu"))
    url.choice("of_cpu_link", "pcie5", list(HOST_LINKS), label=t("serving.url.of_cpu_link"))
    url.int("of_disk", 1_000_000, 0, MAX_TIER_SLOTS, label=t("serving.url.of_disk"))
    url.choice("of_disk_link", "nvme", list(HOST_LINKS), label=t("serving.url.of_disk_link"))
    url.int("dg_prefill", 2, 1, MAX_POOL_HERE, label=t("serving.url.dg_prefill"))
    url.int("dg_decode", 2, 1, MAX_POOL_HERE, label=t("serving.url.dg_decode"))
    url.choice("dg_link", "nvlink4", list(GPU_LINKS), label=t("serving.url.dg_link"))
    url.int("dg_requests", 300, 1, sd.MAX_STUDY_REQUESTS, label=t("serving.url.dg_requests"))
    url.int("dg_prompt", 3000, 1, STUDY_MAX_LEN - 1, label=t("serving.url.dg_prompt"))
    url.int("dg_output", 200, 1, 1024, label=t("serving.url.dg_output"))
    url.float("dg_rate", 28.0, 0.1, 1000.0, label=t("serving.url.dg_rate"))
    url.float("dg_ttft", 1.0, 0.01, 600.0, label=t("serving.url.dg_ttft"))
    url.float("dg_tpot", 8.0, 1.0, 10_000.0, label=t("serving.url.dg_tpot"))
    url.int("rt_replicas", 4, 1, rt.MAX_REPLICAS, label=t("serving.url.rt_replicas"))
    url.int("rt_requests", 600, 1, MAX_SHARED_REQUESTS, label=t("serving.url.rt_requests"))
    url.int("rt_groups", 48, 1, MAX_SHARED_GROUPS, label=t("serving.url.rt_groups"))
    url.float("rt_rate", 250.0, 0.1, 5000.0, label=t("serving.url.rt_rate"))
    url.int("rt_gpu", 60_000, 8192, 1 << 22, label=t("serving.url.rt_gpu"))
    url.int("tr_batch", 256, 1, MAX_BATCH, label=t("serving.url.tr_batch"))
    url.int("tr_budget", 8192, 256, 1 << 20, label=t("serving.url.tr_budget"))


def open_tab(url: UrlState):
    """(the open tab's slug, its container), the tabs labelled in the page language. The tab widget holds the open
    tab's label, so a label in the other language (the language was just switched) is mapped to its tab first."""
    tabs = LazyTabs("serving", {slug: t(f"serving.tab.{slug}") for slug in TAB_SLUGS})
    ss = st.session_state
    held = ss.get(tabs.widget_key)
    if held is not None and held not in tabs.tabs.values():
        slug = next((s for s in TAB_SLUGS for lg in LANGS if text(lg, f"serving.tab.{s}") == held), TAB_SLUGS[0])
        ss[tabs.widget_key] = tabs.tabs[slug]
    return tabs.open(url)


def deployment_row() -> DeploymentConfig:
    """Model and GPU (the same keys as the batching tab, so every tab serves the same deployment)."""
    presets, gpus = load_presets(), load_gpus()
    c = st.columns(2)
    c[0].selectbox(t("serving.e.model"), list(presets), key="model", format_func=lambda k: presets[k].name)
    c[1].selectbox(t("serving.e.gpu"), list(gpus), key="gpu", format_func=lambda k: gpus[k].name)
    ss = st.session_state
    return DeploymentConfig(ss["model"], ss["gpu"], ss["wdtype"], ss["kvdtype"], ss["util"])


def chunk_setup() -> sd.StudySetup:
    dep = deployment_row()
    c = st.columns(6)
    c[0].number_input(t("serving.e.ck_requests"), 1, sd.MAX_STUDY_REQUESTS, step=50, key="ck_requests")
    c[1].number_input(t("serving.e.ck_prompt"), 1, STUDY_MAX_LEN - 1, step=500, key="ck_prompt")
    c[2].number_input(t("serving.e.ck_output"), 1, 1024, step=50, key="ck_output")
    c[3].number_input(t("serving.e.ck_rate"), 0.1, 1000.0, step=5.0, key="ck_rate")
    c[4].number_input(t("serving.e.ck_batch"), 1, MAX_BATCH, step=16, key="ck_batch")
    c[5].number_input(t("serving.e.ck_seed"), 0, 2**31 - 1, key="ck_seed")
    ss = st.session_state
    wl = LengthWorkloadConfig(num_requests=ss["ck_requests"], prompt_mean=ss["ck_prompt"],
                              output_mean=ss["ck_output"], spread=0.5, max_model_len=STUDY_MAX_LEN, max_tokens=1024,
                              arrival="poisson", arrival_rate=ss["ck_rate"] * ARRIVAL_TICK_S, seed=ss["ck_seed"])
    return sd.StudySetup(dep, wl, ss["ck_batch"])


def preemption_setup() -> sd.PreemptionSetup:
    dep = deployment_row()
    c = st.columns(4)
    c[0].number_input(t("serving.e.pe_requests"), 1, sd.MAX_STUDY_REQUESTS, step=50, key="pe_requests")
    c[1].number_input(t("serving.e.pe_prompt"), 1, STUDY_MAX_LEN - 1, step=100, key="pe_prompt")
    c[2].number_input(t("serving.e.pe_output"), 1, 2048, step=100, key="pe_output")
    c[3].number_input(t("serving.e.pe_batch"), 1, MAX_BATCH, step=16, key="pe_batch")
    c = st.columns(4)
    c[0].number_input(t("serving.e.pe_kv"), 8192, 1 << 22, step=8192, key="pe_kv",
                      help=t("serving.e.pe_kv_help"))
    c[1].number_input(t("serving.e.pe_cpu"), 0, 1 << 26, step=50_000, key="pe_cpu",
                      help=t("serving.e.pe_cpu_help"))
    c[2].selectbox(t("serving.e.pe_link"), list(HOST_LINKS), key="pe_link", format_func=lambda k, L=lang(): HOST_LINKS[k].name_in(L))
    c[3].toggle(t("serving.e.pe_chunked"), key="pe_chunked")
    ss = st.session_state
    wl = LengthWorkloadConfig(num_requests=ss["pe_requests"], prompt_mean=ss["pe_prompt"], output_mean=ss["pe_output"],
                              max_model_len=STUDY_MAX_LEN, max_tokens=2048, seed=0)
    study = sd.StudySetup(dep, wl, ss["pe_batch"])
    return sd.PreemptionSetup(study, ss["pe_kv"], ss["pe_cpu"], ss["pe_link"], ss["pe_chunked"])


@dataclass(frozen=True)
class StepChoice:
    scenario: str
    config: EngineConfig
    about: str


def step_choice() -> StepChoice:
    """The scenario and its config with the user's changes (raises ValueError for a config that cannot run)."""
    c = st.columns([3, 2, 2, 2])
    c[0].selectbox(t("serving.e.st_scenario"), list(sd.STEP_SCENARIOS), key="st_scenario",
                   format_func=lambda k: sd.scenario_words(k, lang())[0])
    c[1].number_input(t("serving.e.st_blocks"), 0, MAX_STEP_BLOCKS, key="st_blocks")
    c[2].number_input(t("serving.e.st_budget"), 0, 256, key="st_budget")
    c[3].number_input(t("serving.e.st_k"), -1, MAX_SPEC_K, key="st_k")
    ss = st.session_state
    sc = sd.STEP_SCENARIOS[ss["st_scenario"]]
    cfg = sc.config
    if ss["st_blocks"]:
        cfg = replace(cfg, capacity_tokens=ss["st_blocks"] * cfg.block_size)
    if ss["st_budget"]:
        cfg = replace(cfg, token_budget=ss["st_budget"])
    if ss["st_k"] >= 0:
        cfg = replace(cfg, spec_k=ss["st_k"])
    return StepChoice(ss["st_scenario"], cfg, sd.scenario_words(ss["st_scenario"], lang())[1])


def step_slider(num_steps: int) -> int:
    ss = st.session_state
    if ss["st_step"] > num_steps - 1:
        ss["st_step"] = num_steps - 1
    if num_steps > 1:
        st.slider(t("serving.e.st_step"), 0, num_steps - 1, key="st_step")
    return ss["st_step"]


def trace_settings() -> tuple[DeploymentConfig, int, int]:
    dep = deployment_row()
    c = st.columns(2)
    c[0].number_input(t("serving.e.tr_batch"), 1, MAX_BATCH, step=16, key="tr_batch")
    c[1].number_input(t("serving.e.tr_budget"), 256, 1 << 20, step=1024, key="tr_budget")
    ss = st.session_state
    return dep, ss["tr_batch"], ss["tr_budget"]


EXAMPLE_TRACE = [{"arrival": round(0.05 * i, 2), "prompt_len": 400 + 60 * (i % 5), "prefix_group": f"system {i % 2}",
                  "prefix_len": 320, "output_len": 40 + 25 * (i % 4)} for i in range(24)]


def trace_input() -> tuple[bytes | None, str]:
    """The trace's bytes (an uploaded file, else the pasted text) and where they came from; None when there is none.
    An upload over the page's limit is refused before it is read."""
    from sim.alloc.trace import MAX_PAGE_TRACE_BYTES, write_trace

    c = st.columns(2)
    up = c[0].file_uploader(t("serving.e.tr_file"), type=["jsonl", "json", "txt"], key="tr_file",
                            help=t("serving.e.tr_file_help", mib=f"{MAX_PAGE_TRACE_BYTES // 2**20}"))
    if c[1].button(t("serving.e.tr_example"), key="tr_example"):
        st.session_state["tr_text"] = write_trace(EXAMPLE_TRACE)
    c[1].text_area(t("serving.e.tr_text"), key="tr_text", height=150, max_chars=MAX_PASTE_CHARS,
                   placeholder='{"arrival": 0.0, "prompt": [1, 2, 3], "output_len": 16}')
    if up is not None:
        if up.size > MAX_PAGE_TRACE_BYTES:
            raise ValueError(t("serving.e.tr_too_big", n=f"{up.size:,}", max=f"{MAX_PAGE_TRACE_BYTES:,}"))
        return up.getvalue(), t("serving.e.tr_uploaded")
    pasted = st.session_state.get("tr_text") or ""
    return (pasted.encode(), t("serving.e.tr_pasted")) if pasted.strip() else (None, "")


def offload_setup() -> of.OffloadSetup:
    dep = deployment_row()
    c = st.columns(5)
    c[0].number_input(t("serving.e.of_requests"), 1, MAX_SHARED_REQUESTS, step=100, key="of_requests")
    c[1].number_input(t("serving.e.of_groups"), 1, MAX_SHARED_GROUPS, step=10, key="of_groups",
                      help=t("serving.e.zipf_help"))
    c[2].number_input(t("serving.e.of_prefix"), 16, MAX_SHARED_PREFIX_HERE, step=512, key="of_prefix")
    c[3].number_input(t("serving.e.of_rate"), 0.1, 1000.0, step=10.0, key="of_rate")
    c[4].number_input(t("serving.e.of_gpu"), 8192, 1 << 22, step=8192, key="of_gpu",
                      help=t("serving.e.of_gpu_help"))
    c = st.columns(4)
    c[0].number_input(t("serving.e.of_cpu"), 0, MAX_TIER_SLOTS, step=10_000, key="of_cpu")
    c[1].selectbox(t("serving.e.of_cpu_link"), list(HOST_LINKS), key="of_cpu_link", format_func=lambda k, L=lang(): HOST_LINKS[k].name_in(L))
    c[2].number_input(t("serving.e.of_disk"), 0, MAX_TIER_SLOTS, step=100_000, key="of_disk")
    c[3].selectbox(t("serving.e.of_disk_link"), list(HOST_LINKS), key="of_disk_link", format_func=lambda k, L=lang(): HOST_LINKS[k].name_in(L))
    ss = st.session_state
    wl = SharedPrefixConfig(ss["of_requests"], ss["of_groups"], ss["of_prefix"], 128, 64, ss["of_rate"])
    return of.OffloadSetup(replace(dep, kv_limit_tokens=ss["of_gpu"]), wl,
                           OffloadConfig(ss["of_cpu"], ss["of_cpu_link"], ss["of_disk"], ss["of_disk_link"]))


def disagg_setup() -> dg.DisaggSetup:
    dep = deployment_row()
    c = st.columns(5)
    c[0].number_input(t("serving.e.dg_prefill"), 1, MAX_POOL_HERE, key="dg_prefill")
    c[1].number_input(t("serving.e.dg_decode"), 1, MAX_POOL_HERE, key="dg_decode")
    c[2].selectbox(t("serving.e.dg_link"), list(GPU_LINKS), key="dg_link", format_func=lambda k, L=lang(): GPU_LINKS[k].name_in(L))
    c[3].number_input(t("serving.e.dg_ttft"), 0.01, 600.0, step=0.5, key="dg_ttft")
    c[4].number_input(t("serving.e.dg_tpot"), 1.0, 10_000.0, step=1.0, key="dg_tpot",
                      help=t("serving.e.dg_tpot_help"))
    c = st.columns(4)
    c[0].number_input(t("serving.e.dg_requests"), 1, sd.MAX_STUDY_REQUESTS, step=50, key="dg_requests")
    c[1].number_input(t("serving.e.dg_prompt"), 1, STUDY_MAX_LEN - 1, step=500, key="dg_prompt")
    c[2].number_input(t("serving.e.dg_output"), 1, 1024, step=50, key="dg_output")
    c[3].number_input(t("serving.e.dg_rate"), 0.1, 1000.0, step=4.0, key="dg_rate")
    ss = st.session_state
    wl = LengthWorkloadConfig(num_requests=ss["dg_requests"], prompt_mean=ss["dg_prompt"], output_mean=ss["dg_output"],
                              spread=0.5, max_model_len=STUDY_MAX_LEN, max_tokens=1024, arrival="poisson",
                              arrival_rate=ss["dg_rate"] * ARRIVAL_TICK_S, seed=0)
    return dg.DisaggSetup(dep, wl, dg.DisaggConfig(ss["dg_prefill"], ss["dg_decode"]), ss["dg_link"],
                          ttft_slo_s=ss["dg_ttft"], tpot_slo_ms=ss["dg_tpot"])


def routing_setup() -> rt.RoutingSetup:
    dep = deployment_row()
    c = st.columns(5)
    c[0].number_input(t("serving.e.rt_replicas"), 1, rt.MAX_REPLICAS, key="rt_replicas")
    c[1].number_input(t("serving.e.rt_requests"), 1, MAX_SHARED_REQUESTS, step=100, key="rt_requests")
    c[2].number_input(t("serving.e.rt_groups"), 1, MAX_SHARED_GROUPS, step=8, key="rt_groups")
    c[3].number_input(t("serving.e.rt_rate"), 0.1, 5000.0, step=25.0, key="rt_rate")
    c[4].number_input(t("serving.e.rt_gpu"), 8192, 1 << 22, step=8192, key="rt_gpu")
    ss = st.session_state
    wl = SharedPrefixConfig(ss["rt_requests"], ss["rt_groups"], 2048, 128, 64, ss["rt_rate"])
    return rt.RoutingSetup(replace(dep, kv_limit_tokens=ss["rt_gpu"]), wl, ss["rt_replicas"])
