"""The Attention kernels page's URL values and widgets: the shape to time (an `AttentionShape`), the sweep's
largest N, the online-softmax stepper (a `SoftmaxDemo`) and the traffic tile. Widget keys are the URL keys."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.controls.declared import Among, Choice, Number, Slider, Stops, Toggle
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


URL_LABEL = "kernels.url."


def _k(key: str, default, lo, hi, *, label: str, kind=None, **kw):
    """A control labelled by the catalog key `label`, named in the link's warning by kernels.url.<key>."""
    return (kind or Number)(key, default, lo, hi, label=label, url_label=URL_LABEL + key, **kw)


BATCH = _k("b", 1, 1, S.MAX_BATCH, label="kernels.w.batch")
HEADS = _k("h", 4, 1, S.MAX_HEADS, label="kernels.w.heads")
SEQ_LEN = _k("n", 1024, 1, S.MAX_SEQ_LEN, label="kernels.w.seq_len")
HEAD_DIM = Stops("d", 32, tuple(S.HEAD_DIMS), label="kernels.w.head_dim", url_label="kernels.url.d")
CAUSAL = Toggle("causal", True, label="kernels.w.causal", url_label="kernels.url.causal")
KIND = Choice("kind", "prefill", tuple(S.KINDS), widget="radio", label="kernels.w.shape", url_label="kernels.url.kind")
FLEX = Toggle("flex", False, widget="checkbox", fielded=True, label="kernels.w.flex", url_label="kernels.url.flex")
SWEEP_MAX = Among("sweep_max", 4096, 128, S.MAX_SEQ_LEN, widget="select_slider", narrows=True,
                  label="kernels.w.largest_n", url_label="kernels.url.sweep_max")
SM_KEYS = _k("sm_keys", 10, 1, FL.MAX_DEMO_KEYS, label="kernels.w.keys")
SM_TILE = _k("sm_tile", 4, 1, FL.MAX_DEMO_KEYS, label="kernels.w.tile", narrows=True)
SM_ROWS = _k("sm_rows", 1, 1, FL.MAX_DEMO_QUERIES, label="kernels.w.rows", narrows=True)
SM_ROW = _k("sm_row", 0, 0, FL.MAX_DEMO_QUERIES - 1, label="kernels.w.row", narrows=True)
SM_CAUSAL = Toggle("sm_causal", False, label="kernels.w.sm_causal", url_label="kernels.url.sm_causal")
SM_PAD = _k("sm_pad", 0, 0, FL.MAX_DEMO_KEYS - 1, label="kernels.w.pad", narrows=True)
SM_SCALE = _k("sm_scale", 1.0, 0.01, 1000.0, label="kernels.w.scale", step=10.0)
SM_SEED = _k("sm_seed", 0, 0, 9999, label="kernels.w.seed")
SM_DTYPE = Choice("sm_dtype", "float32", ("float32", "float64"), label="dtype", verbatim=True,
                  url_label="kernels.url.sm_dtype")
SM_STEP = _k("sm_step", 1, 1, FL.MAX_DEMO_KEYS, label="kernels.w.step", kind=Slider, narrows=True)
TILE = Stops("tile", 128, TRAFFIC_TILES, label="kernels.w.traffic_tile", url_label="kernels.url.tile")
STAT = Choice("stat", "median", tuple(STATS), widget="radio", label="kernels.w.stat", url_label="kernels.url.stat")


def dtype_control(dtypes: tuple[str, ...]) -> Choice:
    """The timing's dtype: the ones this device runs, the first by default."""
    return Choice("dtype", dtypes[0], dtypes, label="dtype", verbatim=True, url_label="kernels.url.dtype")


def threads_control(num_cpus: int) -> Number:
    """torch threads for a timing on this machine's `num_cpus` cores (the lab's own choice by default)."""
    return _k("threads", min(pick_num_threads(), num_cpus), 1, num_cpus, label="kernels.w.threads")


def register(dtypes: tuple[str, ...], num_cpus: int) -> UrlState:
    """Every value the page keeps in its link, checked (bad ones fall back with one warning)."""
    url = UrlState("attention_kernels")
    url.add(BATCH, HEADS, SEQ_LEN, HEAD_DIM, CAUSAL, KIND, dtype_control(dtypes), threads_control(num_cpus), FLEX,
            SWEEP_MAX, SM_KEYS, SM_TILE, SM_ROWS, SM_ROW, SM_CAUSAL, SM_PAD, SM_SCALE, SM_SEED, SM_DTYPE, SM_STEP,
            TILE, STAT)
    page_tabs().register(url)
    url.show_problems()
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
        BATCH.draw(c[0])
        HEADS.draw(c[1])
        SEQ_LEN.draw(c[2], help=t("kernels.w.seq_len_help"))
        HEAD_DIM.draw(c[3])
        c = st.columns(4)
        kinds = {k: t(f"kernels.w.kind.{k}") for k in S.KINDS}
        KIND.draw(c[0], horizontal=True, format_func=kinds.get)
        CAUSAL.draw(c[1], help=t("kernels.w.causal_help"))
        dtype_control(dtypes).draw(c[2])
        threads_control(num_cpus).draw(c[3], disabled=not cpu, help=t("kernels.w.threads_help"))
        compile_note = t("kernels.w.compile_cpu") if cpu else t("kernels.w.compile_gpu")
        FLEX.draw(label_fields={"note": compile_note, "timeout": f"{FLEX_TIMEOUT_S}"})
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
            SWEEP_MAX.draw(options=lengths, format_func=lambda v: f"{v:,}")
        else:
            st.caption(one_length_caption(lengths, lang()))
        go = st.form_submit_button(t("kernels.w.sweep"), type="primary")
    return lengths_up_to(lengths, st.session_state["sweep_max"]) if go else None


def sweep_stat() -> str:
    words = {s: stat_word(s, lang()) for s in STATS}
    return STAT.draw(horizontal=True, format_func=words.get, help=t("kernels.w.stat_help"))


# --- the online softmax stepper --------------------------------------------------------------------

def stepper() -> FL.SoftmaxDemo:
    """The stepper's widgets (each bounded by the others) and its demo; ValueError when it is not one."""
    ss = st.session_state
    keys_now = ss["sm_keys"]
    ss.update(sm_tile=min(ss["sm_tile"], keys_now), sm_rows=min(ss["sm_rows"], keys_now))
    c = st.columns(5)
    SM_KEYS.draw(c[0])
    SM_TILE.draw(c[1], hi=keys_now, help=t("kernels.w.tile_help"))
    SM_ROWS.draw(c[2], hi=min(FL.MAX_DEMO_QUERIES, keys_now))
    SM_CAUSAL.draw(c[3], help=t("kernels.w.sm_causal_help"))
    SM_DTYPE.draw(c[4])
    rows_now = ss["sm_rows"]
    max_pad = FL.max_masked_prefix(keys_now, rows_now, ss["sm_causal"])
    ss.update(sm_pad=min(ss["sm_pad"], max_pad), sm_row=min(ss["sm_row"], rows_now - 1))
    c = st.columns(4)
    SM_PAD.draw(c[0], hi=max_pad, help=t("kernels.w.pad_help"))
    SM_SCALE.draw(c[1], format="%.2f", help=t("kernels.w.scale_help"))
    SM_SEED.draw(c[2])
    SM_ROW.draw(c[3], hi=rows_now - 1)
    return FL.SoftmaxDemo(num_keys=keys_now, tile=ss["sm_tile"], num_queries=rows_now, causal=ss["sm_causal"],
                          masked_prefix=ss["sm_pad"], score_scale=float(ss["sm_scale"]), seed=ss["sm_seed"],
                          dtype=ss["sm_dtype"])


def step_and_row(num_steps: int) -> tuple[int, int]:
    """The step slider (a caption when one tile holds every key): (tiles processed, query row shown)."""
    st.session_state["sm_step"] = max(1, min(st.session_state["sm_step"], num_steps))
    if num_steps > 1:
        SM_STEP.draw(hi=num_steps)
    else:
        st.caption(t("kernels.w.one_step"))
    return st.session_state["sm_step"], st.session_state["sm_row"]


def traffic_tile_now() -> int:
    """The traffic model's tile as set now: the chart is drawn above its slider."""
    return st.session_state["tile"]


def traffic_tile() -> int:
    return TILE.draw()
