"""The Prefix caching page's URL values and widgets: each function draws one section's controls (the widget
keys are the URL keys) and returns what the section's simulation takes."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.i18n import lang, t
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
    url.text("demo_text", DEMO_TEXT, max_len=DEMO_MAX_BYTES, label=t("prefix.url.prompt_a"))
    url.int("demo_pos", DEMO_TEXT.index("27.") + 1, 0, DEMO_MAX_BYTES - 1, label=t("prefix.url.changed_byte"))
    url.choice("demo_bs", "16", DEMO_BLOCK_SIZES, label=t("prefix.url.demo_block_size"))
    url.choice("workload", "system_prompt", wk.PREFIX_WORKLOADS, label=t("prefix.url.workload"))
    url.choice("layout", "fixed_first", wk.LAYOUTS, label=t("prefix.url.layout"))
    url.int("requests", 200, 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, label=t("prefix.url.requests"))
    url.int("shared", 500, 1, wk.MAX_SHARED_LEN, label=t("prefix.url.shared_tokens"))
    url.int("variable", 64, 1, wk.MAX_VARIABLE_LEN, label=t("prefix.url.new_tokens_per_request"))
    url.int("output", 64, 1, wk.MAX_OUTPUT_LEN, label=t("prefix.url.output_tokens"))
    url.int("groups", 4, 1, wk.MAX_GROUPS, label=t("prefix.url.groups"))
    url.int("seed", 0, 0, 2**32 - 1, label=t("prefix.url.seed"))
    url.choice("block_size", "16", BLOCK_SIZES, label=t("prefix.url.block_size"))
    url.int("capacity", 16_384, 256, MAX_CAPACITY_TOKENS, label=t("prefix.url.cache_capacity"))
    url.int("running", 8, 1, MAX_RUNNING, label=t("prefix.url.requests_running_at_once"))
    url.float("decode_weight", 10.0, 0.0, 100.0, label=t("prefix.url.decode_step_cost"))
    url.int("tree_n", 8, 2, MAX_TREE, label=t("prefix.url.requests_in_the_tree"))
    url.bool("live", True, label=t("prefix.url.run_on_the_real_model"))
    url.text("prefix", LIVE_PREFIX, max_len=pr.MAX_PREFIX_BYTES, label=t("prefix.url.shared_prefix"))
    url.text("suffixes", LIVE_SUFFIXES, max_len=pr.MAX_BRANCHES * (pr.MAX_SUFFIX_BYTES + 1), label=t("prefix.url.continuations"))
    url.int("live_new", 16, 1, MAX_LIVE_NEW, label=t("prefix.url.new_tokens_per_branch"))
    url.int("repeats", 3, 1, pr.MAX_REPEATS, label=t("prefix.url.timing_repeats"))
    url.int("kv_pos", 40, 0, pr.KV_DEMO_BYTES - 1, label=t("prefix.url.changed_byte_k_v"))


def _clamp(key: str, hi: int) -> None:
    """A position kept from a longer prompt moves to the new prompt's last byte."""
    if st.session_state[key] > hi:
        st.session_state[key] = hi


def demo_prompt() -> DemoChoice | None:
    """Prompt A, the changed byte and the block size in one row; None (with the reason shown) for a bad prompt."""
    ss = st.session_state
    c = st.columns([5, 3, 3])
    c[0].text_area(t("prefix.c.prompt_a"), key="demo_text", height=110, max_chars=DEMO_MAX_BYTES)
    ids = to_bytes(ss["demo_text"])
    problem = demo_prompt_problem(ids, DEMO_MAX_BYTES, lang())
    if problem:
        st.error(problem)
        return None
    _clamp("demo_pos", len(ids) - 1)
    c[1].slider(t("prefix.c.demo_pos"), 0, len(ids) - 1, key="demo_pos", help=t("prefix.c.demo_pos_help"))
    c[2].radio(t("prefix.c.block_size"), DEMO_BLOCK_SIZES, key="demo_bs", horizontal=True)
    return DemoChoice(tuple(ids), ss["demo_pos"], int(ss["demo_bs"]))


def workload_and_cache() -> tuple[wk.PrefixWorkloadConfig, CacheConfig]:
    """The boxed workload and cache settings; ValueError (with the numbers) for settings that cannot run."""
    ss = st.session_state
    with st.container(border=True):
        st.markdown(t("prefix.c.box"))
        c = st.columns([4, 4, 2, 2])
        workloads = {w: t(f"prefix.workload.{w}") for w in wk.PREFIX_WORKLOADS}  # worded now: format_func runs later
        layouts = {x: t(f"prefix.layout.{x}") for x in wk.LAYOUTS}
        c[0].selectbox(t("prefix.c.workload"), wk.PREFIX_WORKLOADS, key="workload", format_func=workloads.get)
        c[1].radio(t("prefix.c.layout"), wk.LAYOUTS, key="layout", format_func=layouts.get, horizontal=True,
                   help=t("prefix.c.layout_help"))
        c[2].number_input(t("prefix.c.requests"), 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, step=50, key="requests")
        c[3].number_input(t("prefix.c.seed"), 0, 2**32 - 1, key="seed")
        c = st.columns(7)
        c[0].number_input(t("prefix.c.shared"), 1, wk.MAX_SHARED_LEN, step=64, key="shared",
                          help=t("prefix.c.shared_help"))
        c[1].number_input(t("prefix.c.new"), 1, wk.MAX_VARIABLE_LEN, step=16, key="variable",
                          help=t("prefix.c.new_help"))
        c[2].number_input(t("prefix.c.output"), 1, wk.MAX_OUTPUT_LEN, step=16, key="output",
                          help=t("prefix.c.output_help"))
        c[3].number_input(t("prefix.c.groups"), 1, wk.MAX_GROUPS, key="groups",
                          help="; ".join(f"{workloads[w]}: {t(f'prefix.group.{w}')}" for w in wk.GROUP_MEANING))
        c[4].selectbox(t("prefix.c.block_size"), BLOCK_SIZES, key="block_size", help=t("prefix.c.block_size_help"))
        c[5].number_input(t("prefix.c.capacity"), 256, MAX_CAPACITY_TOKENS, step=4096, key="capacity",
                          help=t("prefix.c.capacity_help"))
        c[6].number_input(t("prefix.c.running"), 1, MAX_RUNNING, key="running", help=t("prefix.c.running_help"))
    cfg = wk.PrefixWorkloadConfig(ss["workload"], ss["layout"], ss["requests"], ss["shared"], ss["variable"],
                                  ss["output"], ss["groups"], ss["seed"])
    return cfg, CacheConfig(int(ss["block_size"]), ss["capacity"], ss["running"])


def decode_weight() -> float:
    """What one decode step costs in prefill tokens (the box, drawn in a narrow column)."""
    st.columns([2, 3])[0].number_input(
        t("prefix.c.decode_weight"), 0.0, 100.0, step=1.0, key="decode_weight", help=t("prefix.c.decode_weight_help"))
    return decode_weight_value()


def decode_weight_value() -> float:
    """The decode weight in force (the URL's or the box's), also where the box was not drawn."""
    return float(st.session_state["decode_weight"])


def tree_requests() -> int:
    st.slider(t("prefix.c.tree_n"), 2, MAX_TREE, key="tree_n")
    return st.session_state["tree_n"]


def branch_inputs() -> pr.BranchInputs | None:
    """The real-model switch, then the prefix, the continuations and the two counts; None while it is off."""
    ss = st.session_state
    st.toggle(t("prefix.c.live"), key="live")
    if not ss["live"]:
        return None
    c = st.columns([3, 2])
    c[0].text_area(t("prefix.c.prefix"), key="prefix", height=230, max_chars=pr.MAX_PREFIX_BYTES)
    c[1].text_area(t("prefix.c.suffixes"), key="suffixes", height=120)
    c2 = c[1].columns(2)
    c2[0].number_input(t("prefix.c.live_new"), 1, MAX_LIVE_NEW, key="live_new")
    c2[1].number_input(t("prefix.c.repeats"), 1, pr.MAX_REPEATS, key="repeats", help=t("prefix.c.repeats_help"))
    return pr.branch_inputs(ss["prefix"], ss["suffixes"], ss["live_new"], ss["repeats"], lang())


def kv_position(num_bytes: int) -> int:
    """The K/V view's changed byte, within its num_bytes-byte prompt."""
    _clamp("kv_pos", num_bytes - 1)
    st.slider(t("prefix.c.kv_pos"), 0, num_bytes - 1, key="kv_pos")
    return st.session_state["kv_pos"]
