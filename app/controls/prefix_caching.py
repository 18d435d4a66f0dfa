"""The Prefix caching page's URL values and widgets: each function draws one section's controls (the widget
keys are the URL keys) and returns what the section's simulation takes."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.urlstate import UrlState
from sim.alloc import workload as wk
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.byte_tokens import to_bytes
from sim.alloc.prefix_cache import MAX_RUNNING, CacheConfig
from sim.alloc.prefix_sweeps import demo_prompt_problem
from sim.model import prefix_run as pr

DEMO_TEXT = ("System: You are the Globe Theatre's box office. Time: 2025-05-01 14:03:27.\n"
             "Answer in one sentence.\nUser: When does Hamlet start tonight?")
DEMO_MAX_BYTES = 400
DEMO_BLOCK_SIZES = ("4", "8", "16", "32")
BLOCK_SIZES = ("2", "4", "8", "16", "32", "64", "128", "256")
MAX_TREE = 24
MAX_LIVE_NEW = 64
LIVE_PREFIX = (
    "Queen.\nI shall obey you:--\nAnd for your part, Ophelia, I do wish\nThat your good beauties be the happy "
    "cause\nOf Hamlet's wildness: so shall I hope your virtues\nWill bring him to his wonted way again,\nTo both "
    "your honours.\n\nOph.\nMadam, I wish it may.\n\n[Exit Queen.]\n\nPol.\nOphelia, walk you here.--Gracious, so "
    "please you,\nWe will bestow ourselves.--[To Ophelia.] Read on this book;\nThat show of such an exercise may "
    "colour\nYour loneliness.--We are oft to blame in this,--\n'Tis too much prov'd,--that with devotion's visage\n"
    "And pious action we do sugar o'er\nThe Devil himself.\n\n"
)
LIVE_SUFFIXES = "King.\nOph.\nPol.\nHam."


@dataclass(frozen=True)
class DemoChoice:
    """Section 1: prompt A as byte tokens, the byte that B changes, the block size."""

    ids: tuple[int, ...]
    pos: int
    block_size: int


def register(url: UrlState) -> None:
    """Every value the page keeps in its URL, with its default and range."""
    url.text("demo_text", DEMO_TEXT, max_len=DEMO_MAX_BYTES, label="prompt A")
    url.int("demo_pos", DEMO_TEXT.index("27.") + 1, 0, DEMO_MAX_BYTES - 1, label="changed byte")
    url.choice("demo_bs", "16", DEMO_BLOCK_SIZES, label="demo block size")
    url.choice("workload", "system_prompt", wk.PREFIX_WORKLOADS, label="workload")
    url.choice("layout", "fixed_first", wk.LAYOUTS, label="layout")
    url.int("requests", 200, 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, label="requests")
    url.int("shared", 500, 1, wk.MAX_SHARED_LEN, label="shared tokens")
    url.int("variable", 64, 1, wk.MAX_VARIABLE_LEN, label="new tokens per request")
    url.int("output", 64, 1, wk.MAX_OUTPUT_LEN, label="output tokens")
    url.int("groups", 4, 1, wk.MAX_GROUPS, label="groups")
    url.int("seed", 0, 0, 2**32 - 1, label="seed")
    url.choice("block_size", "16", BLOCK_SIZES, label="block size")
    url.int("capacity", 16_384, 256, MAX_CAPACITY_TOKENS, label="cache capacity")
    url.int("running", 8, 1, MAX_RUNNING, label="requests running at once")
    url.float("decode_weight", 10.0, 0.0, 100.0, label="decode step cost")
    url.int("tree_n", 8, 2, MAX_TREE, label="requests in the tree")
    url.bool("live", True, label="run on the real model")
    url.text("prefix", LIVE_PREFIX, max_len=pr.MAX_PREFIX_BYTES, label="shared prefix")
    url.text("suffixes", LIVE_SUFFIXES, max_len=pr.MAX_BRANCHES * (pr.MAX_SUFFIX_BYTES + 1), label="continuations")
    url.int("live_new", 16, 1, MAX_LIVE_NEW, label="new tokens per branch")
    url.int("repeats", 3, 1, pr.MAX_REPEATS, label="timing repeats")
    url.int("kv_pos", 40, 0, pr.KV_DEMO_BYTES - 1, label="changed byte (K/V)")


def _clamp(key: str, hi: int) -> None:
    """A position kept from a longer prompt moves to the new prompt's last byte."""
    if st.session_state[key] > hi:
        st.session_state[key] = hi


def demo_prompt() -> DemoChoice | None:
    """Prompt A, the changed byte and the block size in one row; None (with the reason shown) for a bad prompt."""
    ss = st.session_state
    c = st.columns([5, 3, 3])
    c[0].text_area("Prompt A", key="demo_text", height=110, max_chars=DEMO_MAX_BYTES)
    ids = to_bytes(ss["demo_text"])
    problem = demo_prompt_problem(ids, DEMO_MAX_BYTES)
    if problem:
        st.error(problem)
        return None
    _clamp("demo_pos", len(ids) - 1)
    c[1].slider("Position of the changed byte", 0, len(ids) - 1, key="demo_pos",
                help="Prompt B is prompt A with this byte changed (a letter's case flipped, a digit stepped by one, "
                     "anything else replaced by X).")
    c[2].radio("Block size", DEMO_BLOCK_SIZES, key="demo_bs", horizontal=True)
    return DemoChoice(tuple(ids), ss["demo_pos"], int(ss["demo_bs"]))


def workload_and_cache() -> tuple[wk.PrefixWorkloadConfig, CacheConfig]:
    """The boxed workload and cache settings; ValueError (with the numbers) for settings that cannot run."""
    ss = st.session_state
    with st.container(border=True):
        st.markdown("**Workload and cache** — seeded synthetic requests; token ids are random, only what repeats "
                    "matters.")
        c = st.columns([4, 4, 2, 2])
        c[0].selectbox("Workload", wk.PREFIX_WORKLOADS, key="workload", format_func=wk.PREFIX_WORKLOAD_LABELS.get)
        c[1].radio("Layout", wk.LAYOUTS, key="layout", format_func=wk.LAYOUT_LABELS.get, horizontal=True,
                   help="Fixed first: the content that repeats comes first, what is new in each request last. "
                        "Variable first: the new content is moved to the top.")
        c[2].number_input("Requests", 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, step=50, key="requests")
        c[3].number_input("Seed", 0, 2**32 - 1, key="seed")
        c = st.columns(7)
        c[0].number_input("Shared tokens", 1, wk.MAX_SHARED_LEN, step=64, key="shared",
                          help="Length of the content that repeats: system prompt, examples, tool descriptions, "
                               "one document set.")
        c[1].number_input("New tokens", 1, wk.MAX_VARIABLE_LEN, step=16, key="variable",
                          help="Mean length of what is new in each request (question, message, observation); "
                               "drawn within ±50%.")
        c[2].number_input("Output tokens", 1, wk.MAX_OUTPUT_LEN, step=16, key="output",
                          help="Mean answer length, within ±50%. Outputs are cached too: a chat's next turn "
                               "reuses them.")
        c[3].number_input("Groups", 1, wk.MAX_GROUPS, key="groups",
                          help="; ".join(f"{wk.PREFIX_WORKLOAD_LABELS[w]}: {g}" for w, g in wk.GROUP_MEANING.items()))
        c[4].selectbox("Block size", BLOCK_SIZES, key="block_size", help="vLLM's default is 16 tokens.")
        c[5].number_input("Cache slots", 256, MAX_CAPACITY_TOKENS, step=4096, key="capacity",
                          help="KV slots in the pool; blocks of running requests and free cached blocks share it.")
        c[6].number_input("Running at once", 1, MAX_RUNNING, key="running",
                          help="The last N requests keep their blocks pinned; a request that does not fit "
                               "finishes the oldest running ones first.")
    cfg = wk.PrefixWorkloadConfig(ss["workload"], ss["layout"], ss["requests"], ss["shared"], ss["variable"],
                                  ss["output"], ss["groups"], ss["seed"])
    return cfg, CacheConfig(int(ss["block_size"]), ss["capacity"], ss["running"])


def decode_weight() -> float:
    """What one decode step costs in prefill tokens (the box, drawn in a narrow column)."""
    st.columns([2, 3])[0].number_input(
        "One decode step costs … prefill tokens", 0.0, 100.0, step=1.0, key="decode_weight",
        help="A prefix cache only removes prefill work; decode steps cost the same. On a GPU a prefill token is "
             "compute-bound and a decode step memory-bound: at a batch of 8–64 one decode token costs roughly "
             "3–20 prefill tokens. 0 counts prefill alone (the upper bound).")
    return decode_weight_value()


def decode_weight_value() -> float:
    """The decode weight in force (the URL's or the box's), also where the box was not drawn."""
    return float(st.session_state["decode_weight"])


def tree_requests() -> int:
    st.slider("Requests drawn", 2, MAX_TREE, key="tree_n")
    return st.session_state["tree_n"]


def branch_inputs() -> pr.BranchInputs | None:
    """The real-model switch, then the prefix, the continuations and the two counts; None while it is off."""
    ss = st.session_state
    st.toggle("Run on the real model", key="live")
    if not ss["live"]:
        return None
    c = st.columns([3, 2])
    c[0].text_area("Shared prefix P", key="prefix", height=230, max_chars=pr.MAX_PREFIX_BYTES)
    c[1].text_area("Continuations, one per line (a newline is added to each)", key="suffixes", height=120)
    c2 = c[1].columns(2)
    c2[0].number_input("New tokens per branch", 1, MAX_LIVE_NEW, key="live_new")
    c2[1].number_input("Timing repeats", 1, pr.MAX_REPEATS, key="repeats",
                       help="Each way runs this many times after a warm-up; the median is shown.")
    return pr.branch_inputs(ss["prefix"], ss["suffixes"], ss["live_new"], ss["repeats"])


def kv_position(num_bytes: int) -> int:
    """The K/V view's changed byte, within its num_bytes-byte prompt."""
    _clamp("kv_pos", num_bytes - 1)
    st.slider("Position of the changed byte (in the prefix's first bytes)", 0, num_bytes - 1, key="kv_pos")
    return st.session_state["kv_pos"]
