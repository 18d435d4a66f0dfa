"""The Attention kernels page's URL values and widgets: the shape to time (an `AttentionShape`), the sweep's
largest N, the online-softmax stepper (a `SoftmaxDemo`) and the traffic tile. Widget keys are the URL keys."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.i18n import lang, t
from app.tabs import LazyTabs
from app.urlstate import UrlState
from sim.attention import online_softmax as FL
from sim.attention import shapes as S
from sim.attention.limits import Limits, check_shape
from sim.attention.measure import STATS
from sim.attention.readouts import lengths_up_to, one_length_caption, stat_word
from sim.work.threads import pick_num_threads

FLEX_TIMEOUT_S = 120
TRAFFIC_TILES = (16, 32, 64, 128, 256)
TAB_SLUGS = ("shape", "sweep", "stepper", "claims")


def page_tabs() -> LazyTabs:
    """The page's sections, one open at a time (tab= in the link), labelled in the page language: it opens on the
    bytes each kernel moves at one shape, with the shape's controls and the timing under the chart."""
    return LazyTabs("attention_kernels", {k: t(f"density.kernels.tab.{k}") for k in TAB_SLUGS})


def snap(key: str, allowed) -> None:
    st.session_state[key] = S.nearest(st.session_state[key], allowed)


def register(dtypes: tuple[str, ...], num_cpus: int) -> UrlState:
    """Every value the page keeps in its link, checked (bad ones fall back with one warning)."""
    url = UrlState("attention_kernels")
    url.int("b", 1, 1, S.MAX_BATCH, label=t("kernels.url.b"))
    url.int("h", 4, 1, S.MAX_HEADS, label=t("kernels.url.h"))
    url.int("n", 1024, 1, S.MAX_SEQ_LEN, label=t("kernels.url.n"))
    url.int("d", 32, S.HEAD_DIMS[0], S.HEAD_DIMS[-1], label=t("kernels.url.d"))
    url.bool("causal", True, label=t("kernels.url.causal"))
    url.choice("kind", "prefill", list(S.KINDS), label=t("kernels.url.kind"))
    url.choice("dtype", dtypes[0], list(dtypes), label=t("kernels.url.dtype"))
    url.int("threads", min(pick_num_threads(), num_cpus), 1, num_cpus, label=t("kernels.url.threads"))
    url.bool("flex", False, label=t("kernels.url.flex"))
    url.int("sweep_max", 4096, 128, S.MAX_SEQ_LEN, label=t("kernels.url.sweep_max"))
    url.int("sm_keys", 10, 1, FL.MAX_DEMO_KEYS, label=t("kernels.url.sm_keys"))
    url.int("sm_tile", 4, 1, FL.MAX_DEMO_KEYS, label=t("kernels.url.sm_tile"))
    url.int("sm_rows", 1, 1, FL.MAX_DEMO_QUERIES, label=t("kernels.url.sm_rows"))
    url.int("sm_row", 0, 0, FL.MAX_DEMO_QUERIES - 1, label=t("kernels.url.sm_row"))
    url.bool("sm_causal", False, label=t("kernels.url.sm_causal"))
    url.int("sm_pad", 0, 0, FL.MAX_DEMO_KEYS - 1, label=t("kernels.url.sm_pad"))
    url.float("sm_scale", 1.0, 0.01, 1000.0, label=t("kernels.url.sm_scale"))
    url.int("sm_seed", 0, 0, 9999, label=t("kernels.url.sm_seed"))
    url.choice("sm_dtype", "float32", ["float32", "float64"], label=t("kernels.url.sm_dtype"))
    url.int("sm_step", 1, 1, FL.MAX_DEMO_KEYS, label=t("kernels.url.sm_step"))
    url.int("tile", 128, TRAFFIC_TILES[0], TRAFFIC_TILES[-1], label=t("kernels.url.tile"))
    url.choice("stat", "median", list(STATS), label=t("kernels.url.stat"))
    page_tabs().register(url)
    url.show_problems()
    snap("d", S.HEAD_DIMS)
    snap("tile", TRAFFIC_TILES)
    return url


# --- one shape -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TimeForm:
    submitted: bool  # the form's button, or "Measure again"
    threads: int | None  # torch threads for the timing (None: not a CPU)
    flex: bool  # FlexAttention too


def load_preset() -> None:
    if (p := S.SHAPE_PRESETS.get(st.session_state.get("preset"))) is not None:
        st.session_state.update(b=p.batch, h=p.heads, n=p.seq_len, d=p.head_dim, causal=p.causal, kind=p.kind)
    st.session_state["preset"] = None


def measure_again() -> None:
    st.session_state["trial"] = st.session_state.get("trial", 0) + 1
    st.session_state["ak_again"] = True


def trial() -> int:
    """How many times "Measure again" was pressed: part of the timing cache's key."""
    return st.session_state.get("trial", 0)


def time_form(dtypes: tuple[str, ...], cpu: bool, num_cpus: int) -> TimeForm:
    presets = {k: t(f"kernels.preset.{k}") for k in S.SHAPE_PRESETS}  # worded now: format_func runs later too
    st.selectbox(t("kernels.w.preset"), list(S.SHAPE_PRESETS), index=None, key="preset", on_change=load_preset,
                 format_func=presets.get, placeholder=t("kernels.w.preset_placeholder"))
    with st.form("time_form"):
        c = st.columns(4)
        c[0].number_input(t("kernels.w.batch"), 1, S.MAX_BATCH, key="b")
        c[1].number_input(t("kernels.w.heads"), 1, S.MAX_HEADS, key="h")
        c[2].number_input(t("kernels.w.seq_len"), 1, S.MAX_SEQ_LEN, key="n", help=t("kernels.w.seq_len_help"))
        c[3].select_slider(t("kernels.w.head_dim"), list(S.HEAD_DIMS), key="d")
        c = st.columns(4)
        kinds = {k: t(f"kernels.w.kind.{k}") for k in S.KINDS}
        c[0].radio(t("kernels.w.shape"), list(S.KINDS), key="kind", horizontal=True, format_func=kinds.get)
        c[1].toggle(t("kernels.w.causal"), key="causal", help=t("kernels.w.causal_help"))
        c[2].selectbox("dtype", list(dtypes), key="dtype")
        c[3].number_input(t("kernels.w.threads"), 1, num_cpus, key="threads", disabled=not cpu,
                          help=t("kernels.w.threads_help"))
        compile_note = t("kernels.w.compile_cpu") if cpu else t("kernels.w.compile_gpu")
        st.checkbox(t("kernels.w.flex", note=compile_note, timeout=f"{FLEX_TIMEOUT_S}"), key="flex")
        submitted = st.form_submit_button(t("kernels.w.time"), type="primary")
    go = submitted or st.session_state.pop("ak_again", False)
    return TimeForm(go, chosen_threads(cpu), st.session_state["flex"])


def chosen_threads(cpu: bool) -> int | None:
    """torch threads for a timing on a CPU (the form's value; it holds on every tab), None on a GPU."""
    return st.session_state["threads"] if cpu else None


def chosen_shape(limits: Limits) -> S.AttentionShape:
    """The form's shape; ValueError (with the numbers) when it is not a shape or over this device's caps."""
    ss = st.session_state
    shape = S.AttentionShape(batch=ss["b"], heads=ss["h"], seq_len=ss["n"], head_dim=ss["d"], causal=ss["causal"],
                             kind=ss["kind"], dtype=ss["dtype"])
    check_shape(shape, limits)
    return shape


# --- the sweep -------------------------------------------------------------------------------------

def sweep_form(lengths: list[int]) -> list[int] | None:
    """The lengths to sweep once its button is pressed, else None."""
    snap("sweep_max", lengths)
    with st.form("sweep_form"):
        if len(lengths) > 1:
            st.select_slider(t("kernels.w.largest_n"), lengths, key="sweep_max", format_func=lambda v: f"{v:,}")
        else:
            st.caption(one_length_caption(lengths, lang()))
        go = st.form_submit_button(t("kernels.w.sweep"), type="primary")
    return lengths_up_to(lengths, st.session_state["sweep_max"]) if go else None


def sweep_stat() -> str:
    words = {s: stat_word(s, lang()) for s in STATS}
    st.radio(t("kernels.w.stat"), list(STATS), key="stat", horizontal=True, format_func=words.get,
             help=t("kernels.w.stat_help"))
    return st.session_state["stat"]


# --- the online softmax stepper --------------------------------------------------------------------

def stepper() -> FL.SoftmaxDemo:
    """The stepper's widgets (each bounded by the others) and its demo; ValueError when it is not one."""
    ss = st.session_state
    keys_now = ss["sm_keys"]
    ss.update(sm_tile=min(ss["sm_tile"], keys_now), sm_rows=min(ss["sm_rows"], keys_now))
    c = st.columns(5)
    c[0].number_input(t("kernels.w.keys"), 1, FL.MAX_DEMO_KEYS, key="sm_keys")
    c[1].number_input(t("kernels.w.tile"), 1, keys_now, key="sm_tile", help=t("kernels.w.tile_help"))
    c[2].number_input(t("kernels.w.rows"), 1, min(FL.MAX_DEMO_QUERIES, keys_now), key="sm_rows")
    c[3].toggle(t("kernels.w.sm_causal"), key="sm_causal", help=t("kernels.w.sm_causal_help"))
    c[4].selectbox("dtype", ["float32", "float64"], key="sm_dtype")
    rows_now = ss["sm_rows"]
    max_pad = FL.max_masked_prefix(keys_now, rows_now, ss["sm_causal"])
    ss.update(sm_pad=min(ss["sm_pad"], max_pad), sm_row=min(ss["sm_row"], rows_now - 1))
    c = st.columns(4)
    c[0].number_input(t("kernels.w.pad"), 0, max_pad, key="sm_pad", help=t("kernels.w.pad_help"))
    c[1].number_input(t("kernels.w.scale"), 0.01, 1000.0, key="sm_scale", step=10.0, format="%.2f",
                      help=t("kernels.w.scale_help"))
    c[2].number_input(t("kernels.w.seed"), 0, 9999, key="sm_seed")
    c[3].number_input(t("kernels.w.row"), 0, rows_now - 1, key="sm_row")
    return FL.SoftmaxDemo(num_keys=keys_now, tile=ss["sm_tile"], num_queries=rows_now, causal=ss["sm_causal"],
                          masked_prefix=ss["sm_pad"], score_scale=float(ss["sm_scale"]), seed=ss["sm_seed"],
                          dtype=ss["sm_dtype"])


def step_and_row(num_steps: int) -> tuple[int, int]:
    """The step slider (a caption when one tile holds every key): (tiles processed, query row shown)."""
    st.session_state["sm_step"] = max(1, min(st.session_state["sm_step"], num_steps))
    if num_steps > 1:
        st.slider(t("kernels.w.step"), 1, num_steps, key="sm_step")
    else:
        st.caption(t("kernels.w.one_step"))
    return st.session_state["sm_step"], st.session_state["sm_row"]


def traffic_tile_now() -> int:
    """The traffic model's tile as set now: the chart is drawn above its slider."""
    return st.session_state["tile"]


def traffic_tile() -> int:
    st.select_slider(t("kernels.w.traffic_tile"), list(TRAFFIC_TILES), key="tile")
    return st.session_state["tile"]
