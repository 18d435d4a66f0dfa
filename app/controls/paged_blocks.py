"""The Paged KV blocks page's URL values and widgets, turned into the configs it simulates."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.i18n import t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from app.workload import RateInput, draw_workload, register_workload, workload_config
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.pool_views import NUM_FRAMES
from sim.alloc.schedule import ServingConfig
from sim.alloc.workload import ARRIVALS, MAX_LENGTH_WORKLOAD_REQUESTS, MAX_MODEL_LEN, LengthWorkloadConfig

LIVE_MAX_PROMPT = 200
LIVE_BLOCK_SIZES = (4, 8, 16, 32)
DEFAULT_LIVE_PROMPT = "To be, or not to be, that is the question:"


def register(url: UrlState) -> None:
    register_workload(url, MAX_LENGTH_WORKLOAD_REQUESTS)
    url.int("capacity", 16_384, 1024, MAX_CAPACITY_TOKENS, label=t("paged.url.kv_capacity"))
    url.int("block_size", 16, 1, 256, label=t("paged.url.block_size"))
    url.choice("arrival", "burst", ARRIVALS, label=t("paged.url.arrivals"))
    url.float("rate", 0.5, 0.001, 1000.0, label=t("paged.url.arrival_rate"))
    url.int("seed", 0, 0, 2**31 - 1, label=t("paged.url.seed"))
    url.int("frame", NUM_FRAMES // 2, 0, NUM_FRAMES - 1, label=t("paged.url.time_frame"))
    url.int("req", 0, 0, MAX_LENGTH_WORKLOAD_REQUESTS - 1, label=t("paged.url.request_to_inspect"))
    url.int("tokens", 17, 1, MAX_MODEL_LEN, label=t("paged.url.tokens_in_the_block_example"))
    url.int("fork_prompt", 40, 1, 2048, label=t("paged.url.shared_prompt_length"))
    url.int("fork_n", 4, 1, 16, label=t("paged.url.branches"))
    url.int("fork_gen", 24, 0, 512, label=t("paged.url.tokens_per_branch"))
    url.bool("live", True, label=t("paged.url.decode_on_the_real_model"))
    url.text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, label=t("paged.url.live_prompt"))
    url.int("live_new", 48, 1, 256, label=t("paged.url.live_new_tokens"))
    url.int("live_branches", 2, 1, 4, label=t("paged.url.live_branches"))
    url.float("live_temp", 0.8, 0.0, 2.0, label=t("paged.url.live_temperature"))
    url.choice("live_bs", "8", [str(b) for b in LIVE_BLOCK_SIZES], label=t("paged.url.live_block_size"))
    url.int("live_seed", 0, 0, 2**31 - 1, label=t("paged.url.live_seed"))
    page_tabs().register(url)
    url.show_problems()


def page_tabs() -> LazyTabs:
    """The page's sections, one open at a time (tab= in the link), labelled in the page language: it opens on
    where the memory goes and how many requests fit."""
    return LazyTabs("paged_blocks", {k: t(f"paged.tab.{k}") for k in ("memory", "pool", "block_size", "fork", "live")})


def settings_label() -> str:
    """The workload's fold, named by what it holds now."""
    ss = st.session_state
    return t("paged.c.settings", n=f"{ss['requests']:,}", cap=f"{ss['capacity']:,}", bs=f"{ss['block_size']}")


def workload_and_memory() -> tuple[LengthWorkloadConfig, ServingConfig]:
    """The workload and the pool every allocator gets; raises ValueError for settings that cannot be simulated."""
    with st.container(border=True):
        st.markdown(t("paged.c.box"))
        c = draw_workload(MAX_LENGTH_WORKLOAD_REQUESTS,
                          RateInput(t("paged.c.rate"), 0.001, 1000.0, 0.1, "%.3f"),
                          {"max_len": t("paged.c.max_len_help"), "max_tokens": t("paged.c.max_tokens_help")})
        c[0].number_input(t("paged.c.capacity"), 1024, MAX_CAPACITY_TOKENS, step=1024, key="capacity",
                          help=t("paged.c.capacity_help"))
        c[1].slider(t("paged.c.block_size"), 1, 256, key="block_size", help=t("paged.c.block_size_help"))
    ss = st.session_state
    return workload_config(), ServingConfig(capacity_tokens=ss["capacity"], block_size=ss["block_size"])


def time_frame(help_text: str) -> int:
    st.slider(t("paged.c.frame"), 0, NUM_FRAMES - 1, key="frame", help=help_text)
    return st.session_state["frame"]


def request_to_inspect(running: list[int]) -> int:
    """One of the requests holding blocks (the URL's, if it is one of them)."""
    if st.session_state["req"] not in running:
        st.session_state["req"] = running[0]
    st.selectbox(t("paged.c.req"), running, key="req", help=t("paged.c.req_help"))
    return st.session_state["req"]


def tokens_in_one_request() -> int:
    st.number_input(t("paged.c.tokens"), 1, MAX_MODEL_LEN, key="tokens")
    return st.session_state["tokens"]


@dataclass(frozen=True)
class ForkChoice:
    prompt_len: int
    num_branches: int
    num_generated: int


def fork() -> ForkChoice:
    c = st.columns(3)
    c[0].number_input(t("paged.c.fork_prompt"), 1, 2048, key="fork_prompt")
    c[1].number_input(t("paged.c.branches"), 1, 16, key="fork_n")
    c[2].number_input(t("paged.c.fork_gen"), 0, 512, key="fork_gen")
    ss = st.session_state
    return ForkChoice(ss["fork_prompt"], ss["fork_n"], ss["fork_gen"])


@dataclass(frozen=True)
class LiveChoice:
    prompt: str
    max_new_tokens: int
    num_branches: int
    temperature: float
    block_size: int
    seed: int


def live() -> LiveChoice | None:
    """The real-model run's settings, or None while it is switched off."""
    st.toggle(t("paged.c.live"), key="live", help=t("paged.c.live_help"))
    ss = st.session_state
    if not ss["live"]:
        return None
    c = st.columns([4, 1, 1, 1, 1, 1])
    c[0].text_input(t("paged.c.prompt"), key="live_prompt", max_chars=LIVE_MAX_PROMPT)
    c[1].number_input(t("paged.c.new"), 1, 256, key="live_new")
    c[2].number_input(t("paged.c.branches"), 1, 4, key="live_branches")
    c[3].slider(t("paged.c.temp"), 0.0, 2.0, step=0.05, key="live_temp")
    c[4].selectbox(t("paged.c.live_bs"), [str(b) for b in LIVE_BLOCK_SIZES], key="live_bs")
    c[5].number_input(t("paged.c.seed"), 0, 2**31 - 1, key="live_seed")
    return LiveChoice(ss["live_prompt"], ss["live_new"], ss["live_branches"], ss["live_temp"], int(ss["live_bs"]),
                      ss["live_seed"])
