"""The Paged KV blocks page's URL values and widgets, turned into the configs it simulates."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

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
    url.int("capacity", 16_384, 1024, MAX_CAPACITY_TOKENS, label="KV capacity")
    url.int("block_size", 16, 1, 256, label="block size")
    url.choice("arrival", "burst", ARRIVALS, label="arrivals")
    url.float("rate", 0.5, 0.001, 1000.0, label="arrival rate")
    url.int("seed", 0, 0, 2**31 - 1, label="seed")
    url.int("frame", NUM_FRAMES // 2, 0, NUM_FRAMES - 1, label="time frame")
    url.int("req", 0, 0, MAX_LENGTH_WORKLOAD_REQUESTS - 1, label="request to inspect")
    url.int("tokens", 17, 1, MAX_MODEL_LEN, label="tokens in the block example")
    url.int("fork_prompt", 40, 1, 2048, label="shared prompt length")
    url.int("fork_n", 4, 1, 16, label="branches")
    url.int("fork_gen", 24, 0, 512, label="tokens per branch")
    url.bool("live", True, label="decode on the real model")
    url.text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, label="live prompt")
    url.int("live_new", 48, 1, 256, label="live new tokens")
    url.int("live_branches", 2, 1, 4, label="live branches")
    url.float("live_temp", 0.8, 0.0, 2.0, label="live temperature")
    url.choice("live_bs", "8", [str(b) for b in LIVE_BLOCK_SIZES], label="live block size")
    url.int("live_seed", 0, 0, 2**31 - 1, label="live seed")
    url.show_problems()


def workload_and_memory() -> tuple[LengthWorkloadConfig, ServingConfig]:
    """The workload and the pool every allocator gets; raises ValueError for settings that cannot be simulated."""
    with st.container(border=True):
        st.markdown("**Workload and memory** — the same requests go through every allocator.")
        c = draw_workload(MAX_LENGTH_WORKLOAD_REQUESTS,
                          RateInput("Arrival rate (requests / step)", 0.001, 1000.0, 0.1, "%.3f"),
                          {"max_len": "What a server reserving 'the maximum length' sets aside per request.",
                           "max_tokens": "A server reserving 'prompt + max_tokens' sets this much aside for the "
                                         "output."})
        c[0].number_input("KV capacity (token slots)", 1024, MAX_CAPACITY_TOKENS, step=1024, key="capacity",
                          help="Slots for one token's K and V in every layer. For Llama-2-7B in fp16 a slot is "
                               "512 KiB, so 16,384 slots are 8 GiB.")
        c[1].slider("Block size (tokens)", 1, 256, key="block_size", help="vLLM's default is 16.")
    ss = st.session_state
    return workload_config(), ServingConfig(capacity_tokens=ss["capacity"], block_size=ss["block_size"])


def time_frame(help_text: str) -> int:
    st.slider("Time (frame)", 0, NUM_FRAMES - 1, key="frame", help=help_text)
    return st.session_state["frame"]


def request_to_inspect(running: list[int]) -> int:
    """One of the requests holding blocks (the URL's, if it is one of them)."""
    if st.session_state["req"] not in running:
        st.session_state["req"] = running[0]
    st.selectbox("Request to inspect", running, key="req",
                 help="Requests holding blocks at this step; its blocks are outlined in the grid.")
    return st.session_state["req"]


def tokens_in_one_request() -> int:
    st.number_input("Tokens in one request", 1, MAX_MODEL_LEN, key="tokens")
    return st.session_state["tokens"]


@dataclass(frozen=True)
class ForkChoice:
    prompt_len: int
    num_branches: int
    num_generated: int


def fork() -> ForkChoice:
    c = st.columns(3)
    c[0].number_input("Shared prompt (tokens)", 1, 2048, key="fork_prompt")
    c[1].number_input("Branches", 1, 16, key="fork_n")
    c[2].number_input("Tokens each branch writes", 0, 512, key="fork_gen")
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
    st.toggle("Decode on the real model", key="live",
              help="The tiny model writes its K/V into a pool of blocks and attends through the block table; "
                   "every branch is then decoded again alone with a contiguous cache to compare.")
    ss = st.session_state
    if not ss["live"]:
        return None
    c = st.columns([4, 1, 1, 1, 1, 1])
    c[0].text_input("Prompt", key="live_prompt", max_chars=LIVE_MAX_PROMPT)
    c[1].number_input("New tokens", 1, 256, key="live_new")
    c[2].number_input("Branches", 1, 4, key="live_branches")
    c[3].slider("Temperature", 0.0, 2.0, step=0.05, key="live_temp")
    c[4].selectbox("Block size", [str(b) for b in LIVE_BLOCK_SIZES], key="live_bs")
    c[5].number_input("Seed", 0, 2**31 - 1, key="live_seed")
    return LiveChoice(ss["live_prompt"], ss["live_new"], ss["live_branches"], ss["live_temp"], int(ss["live_bs"]),
                      ss["live_seed"])
