"""The Prefix caching page's URL values and widgets: each function draws one section's controls (the widget
keys are the URL keys) and returns what the section's simulation takes."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.controls.declared import Choice, Number, Slider, Text, Toggle
from app.i18n import lang, t
from app.urlstate import UrlState
from sim.alloc import workload as wk
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.byte_tokens import to_bytes
from sim.alloc.prefix_cache import MAX_RUNNING, CacheConfig
from sim.alloc.prefix_sweeps import demo_prompt_problem
from sim.model import prefix_run as pr
from sim.words import say

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


MAX_SEED = 2**32 - 1
DEMO_TEXT_C = Text("demo_text", DEMO_TEXT, max_len=DEMO_MAX_BYTES, max_chars=DEMO_MAX_BYTES, widget="text_area",
                   label="prefix.c.prompt_a", url_label="prefix.url.prompt_a")
DEMO_POS = Slider("demo_pos", DEMO_TEXT.index("27.") + 1, 0, DEMO_MAX_BYTES - 1, narrows=True,
                  label="prefix.c.demo_pos", url_label="prefix.url.changed_byte")
DEMO_BS = Choice("demo_bs", "16", DEMO_BLOCK_SIZES, widget="radio", label="prefix.c.block_size",
                 url_label="prefix.url.demo_block_size")
WORKLOAD = Choice("workload", "system_prompt", wk.PREFIX_WORKLOADS, label="prefix.c.workload",
                  url_label="prefix.url.workload")
LAYOUT = Choice("layout", "fixed_first", wk.LAYOUTS, widget="radio", label="prefix.c.layout",
                url_label="prefix.url.layout")
REQUESTS = Number("requests", 200, 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, step=50, label="prefix.c.requests",
                  url_label="prefix.url.requests")
SHARED = Number("shared", 500, 1, wk.MAX_SHARED_LEN, step=64, label="prefix.c.shared",
                url_label="prefix.url.shared_tokens")
VARIABLE = Number("variable", 64, 1, wk.MAX_VARIABLE_LEN, step=16, label="prefix.c.new",
                  url_label="prefix.url.new_tokens_per_request")
OUTPUT = Number("output", 64, 1, wk.MAX_OUTPUT_LEN, step=16, label="prefix.c.output",
                url_label="prefix.url.output_tokens")
GROUPS = Number("groups", 4, 1, wk.MAX_GROUPS, label="prefix.c.groups", url_label="prefix.url.groups")
SEED = Number("seed", 0, 0, MAX_SEED, label="prefix.c.seed", url_label="prefix.url.seed")
BLOCK_SIZE = Choice("block_size", "16", BLOCK_SIZES, label="prefix.c.block_size", url_label="prefix.url.block_size")
CAPACITY = Number("capacity", 16_384, 256, MAX_CAPACITY_TOKENS, step=4096, label="prefix.c.capacity",
                  url_label="prefix.url.cache_capacity")
RUNNING = Number("running", 8, 1, MAX_RUNNING, label="prefix.c.running",
                 url_label="prefix.url.requests_running_at_once")
DECODE_WEIGHT = Number("decode_weight", 10.0, 0.0, 100.0, step=1.0, label="prefix.c.decode_weight",
                       url_label="prefix.url.decode_step_cost")
TREE_N = Slider("tree_n", 8, 2, MAX_TREE, label="prefix.c.tree_n", url_label="prefix.url.requests_in_the_tree")
LIVE = Toggle("live", True, label="prefix.c.live", url_label="prefix.url.run_on_the_real_model")
PREFIX = Text("prefix", LIVE_PREFIX, max_len=pr.MAX_PREFIX_BYTES, max_chars=pr.MAX_PREFIX_BYTES, widget="text_area",
              label="prefix.c.prefix", url_label="prefix.url.shared_prefix")
SUFFIXES = Text("suffixes", LIVE_SUFFIXES, max_len=pr.MAX_BRANCHES * (pr.MAX_SUFFIX_BYTES + 1), widget="text_area",
                label="prefix.c.suffixes", url_label="prefix.url.continuations")
LIVE_NEW = Number("live_new", 16, 1, MAX_LIVE_NEW, label="prefix.c.live_new",
                  url_label="prefix.url.new_tokens_per_branch")
REPEATS = Number("repeats", 3, 1, pr.MAX_REPEATS, label="prefix.c.repeats", url_label="prefix.url.timing_repeats")
KV_POS = Slider("kv_pos", 40, 0, pr.KV_DEMO_BYTES - 1, narrows=True, label="prefix.c.kv_pos",
                url_label="prefix.url.changed_byte_k_v")
CONTROLS = (DEMO_TEXT_C, DEMO_POS, DEMO_BS, WORKLOAD, LAYOUT, REQUESTS, SHARED, VARIABLE, OUTPUT, GROUPS, SEED,
            BLOCK_SIZE, CAPACITY, RUNNING, DECODE_WEIGHT, TREE_N, LIVE, PREFIX, SUFFIXES, LIVE_NEW, REPEATS, KV_POS)


def register(url: UrlState) -> None:
    """Every value the page keeps in its URL, with its default and range."""
    url.add(*CONTROLS)


def demo_prompt() -> DemoChoice | None:
    """Prompt A, the changed byte and the block size in one row; None (with the reason shown) for a bad prompt."""
    ss = st.session_state
    c = st.columns([5, 3, 3])
    DEMO_TEXT_C.draw(c[0], height=110)
    ids = to_bytes(ss["demo_text"])
    problem = demo_prompt_problem(ids, DEMO_MAX_BYTES)
    if problem:
        st.error(say(lang(), problem))
        return None
    DEMO_POS.draw(c[1], hi=len(ids) - 1, help=t("prefix.c.demo_pos_help"))
    DEMO_BS.draw(c[2], horizontal=True)
    return DemoChoice(tuple(ids), ss["demo_pos"], int(ss["demo_bs"]))


def workload_and_cache() -> tuple[wk.PrefixWorkloadConfig, CacheConfig]:
    """The boxed workload and cache settings; ValueError (with the numbers) for settings that cannot run."""
    ss = st.session_state
    with st.container(border=True):
        st.markdown(t("prefix.c.box"))
        c = st.columns([4, 4, 2, 2])
        workloads = {w: t(f"prefix.workload.{w}") for w in wk.PREFIX_WORKLOADS}  # worded now: format_func runs later
        layouts = {x: t(f"prefix.layout.{x}") for x in wk.LAYOUTS}
        WORKLOAD.draw(c[0], format_func=workloads.get)
        LAYOUT.draw(c[1], format_func=layouts.get, horizontal=True, help=t("prefix.c.layout_help"))
        REQUESTS.draw(c[2])
        SEED.draw(c[3])
        c = st.columns(7)
        SHARED.draw(c[0], help=t("prefix.c.shared_help"))
        VARIABLE.draw(c[1], help=t("prefix.c.new_help"))
        OUTPUT.draw(c[2], help=t("prefix.c.output_help"))
        GROUPS.draw(c[3], help="; ".join(f"{workloads[w]}: {t(f'prefix.group.{w}')}" for w in wk.GROUP_MEANING))
        BLOCK_SIZE.draw(c[4], help=t("prefix.c.block_size_help"))
        CAPACITY.draw(c[5], help=t("prefix.c.capacity_help"))
        RUNNING.draw(c[6], help=t("prefix.c.running_help"))
    cfg = wk.PrefixWorkloadConfig(ss["workload"], ss["layout"], ss["requests"], ss["shared"], ss["variable"],
                                  ss["output"], ss["groups"], ss["seed"])
    return cfg, CacheConfig(int(ss["block_size"]), ss["capacity"], ss["running"])


def decode_weight() -> float:
    """What one decode step costs in prefill tokens (the box, drawn in a narrow column)."""
    DECODE_WEIGHT.draw(st.columns([2, 3])[0], help=t("prefix.c.decode_weight_help"))
    return decode_weight_value()


def decode_weight_value() -> float:
    """The decode weight in force (the URL's or the box's), also where the box was not drawn."""
    return float(st.session_state["decode_weight"])


def tree_requests() -> int:
    return TREE_N.draw()


def branch_inputs() -> pr.BranchInputs | None:
    """The real-model switch, then the prefix, the continuations and the two counts; None while it is off."""
    ss = st.session_state
    LIVE.draw()
    if not ss["live"]:
        return None
    c = st.columns([3, 2])
    PREFIX.draw(c[0], height=230)
    SUFFIXES.draw(c[1], height=120)
    c2 = c[1].columns(2)
    LIVE_NEW.draw(c2[0])
    REPEATS.draw(c2[1], help=t("prefix.c.repeats_help"))
    return pr.branch_inputs(ss["prefix"], ss["suffixes"], num_new=ss["live_new"], repeats=ss["repeats"])


def kv_position(num_bytes: int) -> int:
    """The K/V view's changed byte, within its num_bytes-byte prompt."""
    return KV_POS.draw(hi=num_bytes - 1)
