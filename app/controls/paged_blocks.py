"""The Paged KV blocks page's URL values and widgets, turned into the configs it simulates."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.controls.declared import Among, Choice, Number, Slider, Text, Toggle
from app.i18n import t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from app.workload import draw_workload, register_workload, workload_config
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.pool_views import NUM_FRAMES
from sim.alloc.schedule import PoolConfig
from sim.alloc.workload import ARRIVALS, MAX_LENGTH_WORKLOAD_REQUESTS, MAX_MODEL_LEN, LengthWorkloadConfig

LIVE_MAX_PROMPT = 200
LIVE_BLOCK_SIZES = (4, 8, 16, 32)
DEFAULT_LIVE_PROMPT = "To be, or not to be, that is the question:"


MAX_SEED = 2**31 - 1
CAPACITY = Number("capacity", 16_384, 1024, MAX_CAPACITY_TOKENS, step=1024, label="paged.c.capacity",
                  url_label="paged.url.kv_capacity")
BLOCK_SIZE = Slider("block_size", 16, 1, 256, label="paged.c.block_size", url_label="paged.url.block_size")
ARRIVAL = Choice("arrival", "burst", ARRIVALS, widget="radio", label="wl.arrivals", url_label="paged.url.arrivals")
RATE = Number("rate", 0.5, 0.001, 1000.0, step=0.1, label="paged.c.rate", url_label="paged.url.arrival_rate")
SEED = Number("seed", 0, 0, MAX_SEED, label="wl.seed", url_label="paged.url.seed")
FRAME = Slider("frame", NUM_FRAMES // 2, 0, NUM_FRAMES - 1, label="paged.c.frame", url_label="paged.url.time_frame")
REQ = Among("req", 0, 0, MAX_LENGTH_WORKLOAD_REQUESTS - 1, label="paged.c.req", url_label="paged.url.request_to_inspect")
TOKENS = Number("tokens", 17, 1, MAX_MODEL_LEN, label="paged.c.tokens", url_label="paged.url.tokens_in_the_block_example")
FORK_PROMPT = Number("fork_prompt", 40, 1, 2048, label="paged.c.fork_prompt", url_label="paged.url.shared_prompt_length")
FORK_N = Number("fork_n", 4, 1, 16, label="paged.c.branches", url_label="paged.url.branches")
FORK_GEN = Number("fork_gen", 24, 0, 512, label="paged.c.fork_gen", url_label="paged.url.tokens_per_branch")
LIVE = Toggle("live", True, label="paged.c.live", url_label="paged.url.decode_on_the_real_model")
LIVE_PROMPT = Text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, max_chars=LIVE_MAX_PROMPT,
                   label="paged.c.prompt", url_label="paged.url.live_prompt")
LIVE_NEW = Number("live_new", 48, 1, 256, label="paged.c.new", url_label="paged.url.live_new_tokens")
LIVE_BRANCHES = Number("live_branches", 2, 1, 4, label="paged.c.branches", url_label="paged.url.live_branches")
LIVE_TEMP = Slider("live_temp", 0.8, 0.0, 2.0, step=0.05, label="paged.c.temp", url_label="paged.url.live_temperature")
LIVE_BS = Choice("live_bs", "8", tuple(str(b) for b in LIVE_BLOCK_SIZES), label="paged.c.live_bs",
                 url_label="paged.url.live_block_size")
LIVE_SEED = Number("live_seed", 0, 0, MAX_SEED, label="paged.c.seed", url_label="paged.url.live_seed")
CONTROLS = (CAPACITY, BLOCK_SIZE, ARRIVAL, RATE, SEED, FRAME, REQ, TOKENS, FORK_PROMPT, FORK_N, FORK_GEN, LIVE,
            LIVE_PROMPT, LIVE_NEW, LIVE_BRANCHES, LIVE_TEMP, LIVE_BS, LIVE_SEED)


def register(url: UrlState) -> None:
    register_workload(url, MAX_LENGTH_WORKLOAD_REQUESTS)
    url.add(*CONTROLS)
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


def workload_and_memory() -> tuple[LengthWorkloadConfig, PoolConfig]:
    """The workload and the pool every allocator gets; raises ValueError for settings that cannot be simulated."""
    with st.container(border=True):
        st.markdown(t("paged.c.box"))
        c = draw_workload(MAX_LENGTH_WORKLOAD_REQUESTS, SEED, ARRIVAL, RATE, "%.3f",
                          {"max_len": t("paged.c.max_len_help"), "max_tokens": t("paged.c.max_tokens_help")})
        CAPACITY.draw(c[0], help=t("paged.c.capacity_help"))
        BLOCK_SIZE.draw(c[1], help=t("paged.c.block_size_help"))
    ss = st.session_state
    return workload_config(), PoolConfig(capacity_tokens=ss["capacity"], block_size=ss["block_size"])


def time_frame(help_text: str) -> int:
    return FRAME.draw(help=help_text)


def request_to_inspect(running: list[int]) -> int:
    """One of the requests holding blocks (the URL's, if it is one of them)."""
    if st.session_state["req"] not in running:
        st.session_state["req"] = running[0]
    return REQ.draw(options=running, help=t("paged.c.req_help"))


def tokens_in_one_request() -> int:
    return TOKENS.draw()


@dataclass(frozen=True)
class ForkChoice:
    prompt_len: int
    num_branches: int
    num_generated: int


def fork() -> ForkChoice:
    c = st.columns(3)
    FORK_PROMPT.draw(c[0])
    FORK_N.draw(c[1])
    FORK_GEN.draw(c[2])
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
    LIVE.draw(help=t("paged.c.live_help"))
    ss = st.session_state
    if not ss["live"]:
        return None
    c = st.columns([4, 1, 1, 1, 1, 1])
    LIVE_PROMPT.draw(c[0])
    LIVE_NEW.draw(c[1])
    LIVE_BRANCHES.draw(c[2])
    LIVE_TEMP.draw(c[3])
    LIVE_BS.draw(c[4])
    LIVE_SEED.draw(c[5])
    return LiveChoice(ss["live_prompt"], ss["live_new"], ss["live_branches"], ss["live_temp"], int(ss["live_bs"]),
                      ss["live_seed"])
