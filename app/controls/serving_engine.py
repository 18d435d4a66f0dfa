"""The Serving page's tabs beyond batching: their URL values and widgets, turned into sim.serving.studies setups."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from app.controls.declared import Choice, Number, Slider, Toggle
from app.controls.serving import GPU, MODEL
from app.i18n import lang, t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from sim.alloc.workload import LengthWorkloadConfig
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.serving import disagg as dg
from sim.serving import offload as of
from sim.serving import routing as rt
from sim.serving import studies as sd
from sim.serving.comparison import ARRIVAL_TICK_S, DeploymentConfig
from sim.serving.config import MAX_CPU_CAPACITY_TOKENS, MAX_NUM_SPECULATIVE_TOKENS, EngineConfig
from sim.serving.engine import MAX_RECORDED_STEPS
from sim.serving.links import GPU_LINKS, HOST_LINKS
from sim.serving.schedulers import MAX_BATCH
from sim.serving.shared_prefix import MAX_SHARED_GROUPS, MAX_SHARED_REQUESTS, SharedPrefixConfig
from sim.serving.tiers import OffloadConfig
from sim.words import LANGS, text
from sim.words.engine_readouts import scenario_words
from sim.words.shrink_table import link_name

TAB_SLUGS = ("batching", "spec", "chunked", "preemption", "steps", "offload", "disagg", "routing", "trace")
TABS = LazyTabs("serving", {slug: text("en", f"serving.tab.{slug}") for slug in TAB_SLUGS})
STUDY_MAX_LEN = 8192
MAX_STEP_BLOCKS = 64
MAX_PASTE_CHARS = 200_000
MAX_SHARED_PREFIX_HERE = 16_384  # the page's bound (prompts stay within every preset's context)
MAX_TIER_SLOTS = 1 << 26
MAX_POOL_HERE = 8


MAX_SEED = 2**31 - 1


def _n(key: str, default, lo, hi, step=None, **kw) -> Number:
    """A number box labelled serving.e.<key>, named in the link's warning by serving.url.<key>."""
    return Number(key, default, lo, hi, step=step, label=f"serving.e.{key}", url_label=f"serving.url.{key}", **kw)


def _c(key: str, default: str, options) -> Choice:
    return Choice(key, default, tuple(options), label=f"serving.e.{key}", url_label=f"serving.url.{key}")


CK_REQUESTS = _n("ck_requests", 100, 1, sd.MAX_STUDY_REQUESTS, 50)
CK_PROMPT = _n("ck_prompt", 3000, 1, STUDY_MAX_LEN - 1, 500)
CK_OUTPUT = _n("ck_output", 100, 1, 1024, 50)
CK_RATE = _n("ck_rate", 30.0, 0.1, 1000.0, 5.0)
CK_BATCH = _n("ck_batch", 64, 1, MAX_BATCH, 16)
CK_SEED = _n("ck_seed", 0, 0, MAX_SEED)
PE_REQUESTS = _n("pe_requests", 300, 1, sd.MAX_STUDY_REQUESTS, 50)
PE_PROMPT = _n("pe_prompt", 600, 1, STUDY_MAX_LEN - 1, 100)
PE_OUTPUT = _n("pe_output", 400, 1, 2048, 100)
PE_BATCH = _n("pe_batch", 128, 1, MAX_BATCH, 16)
PE_KV = _n("pe_kv", 40_000, 8192, 1 << 22, 8192)
PE_CPU = _n("pe_cpu", 400_000, 0, MAX_CPU_CAPACITY_TOKENS, 50_000)
PE_LINK = _c("pe_link", "pcie5", HOST_LINKS)
PE_CHUNKED = Toggle("pe_chunked", True, label="serving.e.pe_chunked", url_label="serving.url.pe_chunked")
ST_SCENARIO = _c("st_scenario", "chunked", sd.STEP_SCENARIOS)
ST_STEP = Slider("st_step", 0, 0, MAX_RECORDED_STEPS - 1, narrows=True, label="serving.e.st_step",
                 url_label="serving.url.st_step")
ST_BLOCKS = _n("st_blocks", 0, 0, MAX_STEP_BLOCKS)
ST_BUDGET = _n("st_budget", 0, 0, 256)
ST_K = _n("st_k", -1, -1, MAX_NUM_SPECULATIVE_TOKENS)
OF_REQUESTS = _n("of_requests", 400, 1, MAX_SHARED_REQUESTS, 100)
OF_GROUPS = _n("of_groups", 40, 1, MAX_SHARED_GROUPS, 10)
OF_PREFIX = _n("of_prefix", 2048, 16, MAX_SHARED_PREFIX_HERE, 512)
OF_RATE = _n("of_rate", 60.0, 0.1, 1000.0, 10.0)
OF_GPU = _n("of_gpu", 60_000, 8192, 1 << 22, 8192)
OF_CPU = _n("of_cpu", 50_000, 0, MAX_TIER_SLOTS, 10_000)
OF_CPU_LINK = _c("of_cpu_link", "pcie5", HOST_LINKS)
OF_DISK = _n("of_disk", 1_000_000, 0, MAX_TIER_SLOTS, 100_000)
OF_DISK_LINK = _c("of_disk_link", "nvme", HOST_LINKS)
DG_PREFILL = _n("dg_prefill", 2, 1, MAX_POOL_HERE)
DG_DECODE = _n("dg_decode", 2, 1, MAX_POOL_HERE)
DG_LINK = _c("dg_link", "nvlink4", GPU_LINKS)
DG_REQUESTS = _n("dg_requests", 300, 1, sd.MAX_STUDY_REQUESTS, 50)
DG_PROMPT = _n("dg_prompt", 3000, 1, STUDY_MAX_LEN - 1, 500)
DG_OUTPUT = _n("dg_output", 200, 1, 1024, 50)
DG_RATE = _n("dg_rate", 28.0, 0.1, 1000.0, 4.0)
DG_TTFT = _n("dg_ttft", 1.0, 0.01, 600.0, 0.5)
DG_TPOT = _n("dg_tpot", 8.0, 1.0, 10_000.0, 1.0)
RT_REPLICAS = _n("rt_replicas", 4, 1, rt.MAX_REPLICAS)
RT_REQUESTS = _n("rt_requests", 600, 1, MAX_SHARED_REQUESTS, 100)
RT_GROUPS = _n("rt_groups", 48, 1, MAX_SHARED_GROUPS, 8)
RT_RATE = _n("rt_rate", 250.0, 0.1, 5000.0, 25.0)
RT_GPU = _n("rt_gpu", 60_000, 8192, 1 << 22, 8192)
TR_BATCH = _n("tr_batch", 256, 1, MAX_BATCH, 16)
TR_BUDGET = _n("tr_budget", 8192, 256, 1 << 20, 1024)
CONTROLS = (CK_REQUESTS, CK_PROMPT, CK_OUTPUT, CK_RATE, CK_BATCH, CK_SEED, PE_REQUESTS, PE_PROMPT, PE_OUTPUT, PE_BATCH,
            PE_KV, PE_CPU, PE_LINK, PE_CHUNKED, ST_SCENARIO, ST_STEP, ST_BLOCKS, ST_BUDGET, ST_K, OF_REQUESTS,
            OF_GROUPS, OF_PREFIX, OF_RATE, OF_GPU, OF_CPU, OF_CPU_LINK, OF_DISK, OF_DISK_LINK, DG_PREFILL, DG_DECODE,
            DG_LINK, DG_REQUESTS, DG_PROMPT, DG_OUTPUT, DG_RATE, DG_TTFT, DG_TPOT, RT_REPLICAS, RT_REQUESTS,
            RT_GROUPS, RT_RATE, RT_GPU, TR_BATCH, TR_BUDGET)


def register(url: UrlState) -> None:
    """This module's URL values (the page's own controls register theirs; `model` and `gpu` are shared)."""
    TABS.register(url)
    url.add(*CONTROLS)


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
    MODEL.draw(c[0], label="serving.e.model", format_func=lambda k: presets[k].name)
    GPU.draw(c[1], label="serving.e.gpu", format_func=lambda k: gpus[k].name)
    ss = st.session_state
    return DeploymentConfig(ss["model"], ss["gpu"], ss["wdtype"], ss["kvdtype"], ss["util"])


def chunk_setup() -> sd.StudySetup:
    dep = deployment_row()
    c = st.columns(6)
    for col, control in zip(c, (CK_REQUESTS, CK_PROMPT, CK_OUTPUT, CK_RATE, CK_BATCH, CK_SEED), strict=True):
        control.draw(col)
    ss = st.session_state
    wl = LengthWorkloadConfig(num_requests=ss["ck_requests"], prompt_mean=ss["ck_prompt"],
                              output_mean=ss["ck_output"], spread=0.5, max_model_len=STUDY_MAX_LEN, max_tokens=1024,
                              arrival="poisson", arrival_rate=ss["ck_rate"] * ARRIVAL_TICK_S, seed=ss["ck_seed"])
    return sd.StudySetup(deployment=dep, workload=wl, max_num_seqs=ss["ck_batch"])


def preemption_setup() -> sd.PreemptionSetup:
    dep = deployment_row()
    c = st.columns(4)
    for col, control in zip(c, (PE_REQUESTS, PE_PROMPT, PE_OUTPUT, PE_BATCH), strict=True):
        control.draw(col)
    c = st.columns(4)
    PE_KV.draw(c[0], help=t("serving.e.pe_kv_help"))
    PE_CPU.draw(c[1], help=t("serving.e.pe_cpu_help"))
    PE_LINK.draw(c[2], format_func=lambda k, L=lang(): link_name(HOST_LINKS[k], L))
    PE_CHUNKED.draw(c[3])
    ss = st.session_state
    wl = LengthWorkloadConfig(num_requests=ss["pe_requests"], prompt_mean=ss["pe_prompt"], output_mean=ss["pe_output"],
                              max_model_len=STUDY_MAX_LEN, max_tokens=2048, seed=0)
    study = sd.StudySetup(deployment=dep, workload=wl, max_num_seqs=ss["pe_batch"])
    return sd.PreemptionSetup(study=study, kv_limit_tokens=ss["pe_kv"], cpu_tokens=ss["pe_cpu"], link=ss["pe_link"],
                              chunked=ss["pe_chunked"])


@dataclass(frozen=True)
class StepChoice:
    scenario: str
    config: EngineConfig
    about: str


def step_choice() -> StepChoice:
    """The scenario and its config with the user's changes (raises ValueError for a config that cannot run)."""
    c = st.columns([3, 2, 2, 2])
    ST_SCENARIO.draw(c[0], format_func=lambda k: scenario_words(k, lang())[0])
    ST_BLOCKS.draw(c[1])
    ST_BUDGET.draw(c[2])
    ST_K.draw(c[3])
    ss = st.session_state
    sc = sd.STEP_SCENARIOS[ss["st_scenario"]]
    cfg = sc.config
    if ss["st_blocks"]:
        cfg = replace(cfg, capacity_tokens=ss["st_blocks"] * cfg.block_size)
    if ss["st_budget"]:
        cfg = replace(cfg, max_num_batched_tokens=ss["st_budget"])
    if ss["st_k"] >= 0:
        cfg = replace(cfg, num_speculative_tokens=ss["st_k"])
    return StepChoice(ss["st_scenario"], cfg, scenario_words(ss["st_scenario"], lang())[1])


def step_slider(num_steps: int) -> int:
    last = num_steps - 1
    ST_STEP.clamp(last)
    if num_steps > 1:
        ST_STEP.draw(hi=last)
    return ST_STEP.value()


def trace_settings() -> tuple[DeploymentConfig, int, int]:
    dep = deployment_row()
    c = st.columns(2)
    TR_BATCH.draw(c[0])
    TR_BUDGET.draw(c[1])
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
    OF_REQUESTS.draw(c[0])
    OF_GROUPS.draw(c[1], help=t("serving.e.zipf_help"))
    OF_PREFIX.draw(c[2])
    OF_RATE.draw(c[3])
    OF_GPU.draw(c[4], help=t("serving.e.of_gpu_help"))
    c = st.columns(4)
    OF_CPU.draw(c[0])
    OF_CPU_LINK.draw(c[1], format_func=lambda k, L=lang(): link_name(HOST_LINKS[k], L))
    OF_DISK.draw(c[2])
    OF_DISK_LINK.draw(c[3], format_func=lambda k, L=lang(): link_name(HOST_LINKS[k], L))
    ss = st.session_state
    wl = SharedPrefixConfig(ss["of_requests"], ss["of_groups"], ss["of_prefix"], 128, 64, ss["of_rate"])
    return of.OffloadSetup(deployment=replace(dep, kv_limit_tokens=ss["of_gpu"]), workload=wl,
                           offload=OffloadConfig(ss["of_cpu"], ss["of_cpu_link"], ss["of_disk"], ss["of_disk_link"]))


def disagg_setup() -> dg.DisaggSetup:
    dep = deployment_row()
    c = st.columns(5)
    DG_PREFILL.draw(c[0])
    DG_DECODE.draw(c[1])
    DG_LINK.draw(c[2], format_func=lambda k, L=lang(): link_name(GPU_LINKS[k], L))
    DG_TTFT.draw(c[3])
    DG_TPOT.draw(c[4], help=t("serving.e.dg_tpot_help"))
    c = st.columns(4)
    for col, control in zip(c, (DG_REQUESTS, DG_PROMPT, DG_OUTPUT, DG_RATE), strict=True):
        control.draw(col)
    ss = st.session_state
    # the study's lengths stop at the model's trained context (Llama 2 7B: 4,096), as a server would cap max_model_len
    max_len = min(STUDY_MAX_LEN, dep.arch.max_position_embeddings)
    wl = LengthWorkloadConfig(num_requests=ss["dg_requests"], prompt_mean=ss["dg_prompt"], output_mean=ss["dg_output"],
                              spread=0.5, max_model_len=max_len, max_tokens=min(1024, max_len - 1), arrival="poisson",
                              arrival_rate=ss["dg_rate"] * ARRIVAL_TICK_S, seed=0)
    return dg.DisaggSetup(deployment=dep, workload=wl, pools=dg.DisaggConfig(ss["dg_prefill"], ss["dg_decode"]),
                          link=ss["dg_link"], ttft_slo_s=ss["dg_ttft"], tpot_slo_ms=ss["dg_tpot"])


def routing_setup() -> rt.RoutingSetup:
    dep = deployment_row()
    c = st.columns(5)
    for col, control in zip(c, (RT_REPLICAS, RT_REQUESTS, RT_GROUPS, RT_RATE, RT_GPU), strict=True):
        control.draw(col)
    ss = st.session_state
    wl = SharedPrefixConfig(ss["rt_requests"], ss["rt_groups"], 2048, 128, 64, ss["rt_rate"])
    return rt.RoutingSetup(deployment=replace(dep, kv_limit_tokens=ss["rt_gpu"]), workload=wl,
                           num_replicas=ss["rt_replicas"])
