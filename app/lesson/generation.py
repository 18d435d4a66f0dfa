"""Steps 1–4: generation repeats work, who reads Q vs K/V, why the causal mask keeps the cache valid,
and the real model's cache filling one token at a time."""

from __future__ import annotations

import streamlit as st

from app.figures import lesson as figs
from app.i18n import lang, t
from app.lesson.nav import LENGTHS, open_full_page
from app.lesson.style import ROW_KEY
from app.present import show_chart
from app.text import for_plotly, plain
from app.work import queued
from sim.cost.opcount import generation_totals
from sim.cost.presets import load_presets
from sim.lesson import sentences as say
from sim.lesson.walk import STAGES, attention_walk, walk_sentence, walk_title

TINY = "mha"  # the bundled model the real-model steps run
PROMPT_LEN = 16  # the cost steps' prompt, in tokens
FILL_NEW = 24  # tokens the filling animation decodes
MIN_PROMPT = 2  # bytes: a prompt the real-model steps can draw


def claim(text: str) -> None:
    st.markdown(f"#### {text}")


def _tiny_shape():
    return load_presets()[f"tiny-{TINY}"]


def repeat_totals() -> dict[str, list[int]]:
    shape = _tiny_shape()
    return {mode: [sum(generation_totals(shape, PROMPT_LEN, m, mode).values()) for m in LENGTHS] for mode in
            ("naive", "cached")}


def repeat_finding(n: int, L: str) -> str:
    """Step 1's claim at n tokens (also the recap's line)."""
    totals, i = repeat_totals(), LENGTHS.index(n)
    half = max(i - 1, 0)
    return say.repeat_claim(n, totals["naive"][i], totals["cached"][i], totals["naive"][half],
                            totals["cached"][half], lang=L)


def repeat() -> None:
    ss, L = st.session_state, lang()
    st.select_slider(t("lesson.c.n"), LENGTHS, key="n", format_func=lambda v: f"{v:,}")
    n, totals = ss["n"], repeat_totals()
    claim(repeat_finding(n, L))
    show_chart(figs.totals_vs_length(LENGTHS, totals["naive"], totals["cached"],
                                     say.repeat_title(LENGTHS, totals["naive"], totals["cached"], lang=L), lang=L,
                                     chosen=n),
               key="lesson_repeat")
    st.caption(t("lesson.cap.repeat"))
    open_full_page("decode_cost", {"n": n}, t("lesson.open.repeat", n=f"{n:,}"))


@st.cache_resource(max_entries=8, show_spinner=False)
def _attention(text: str):
    from app.resources import model
    from sim.attention.maps import capture_attention
    from sim.model.generate import encode

    return capture_attention(model(TINY), encode(text))


def controls_row(spec: list[int]) -> list:
    """Columns that stay side by side at any width (app/lesson/style.py): a step's controls take one row."""
    return st.container(key=f"{ROW_KEY}_{len(spec)}").columns(spec, vertical_alignment="bottom")


def _prompt_box(where=None) -> list[int] | None:
    from app.lesson.nav import MAX_LESSON_PROMPT

    (where or st).text_input(t("lesson.c.prompt"), key="text", max_chars=MAX_LESSON_PROMPT)
    ids = list(st.session_state["text"].encode("utf-8"))
    if len(ids) < MIN_PROMPT:
        st.warning(t(f"lesson.w.short.{'one' if len(ids) == 1 else 'other'}", min=f"{MIN_PROMPT}", n=f"{len(ids)}"))
        return None
    return ids


def qkv() -> None:
    c = controls_row([3, 2])
    ids = _prompt_box(c[0])
    c[1].select_slider(t("lesson.c.layer"), [0, 1, 2, 3], key="layer")
    if ids is None:
        return
    L = lang()
    layer = st.session_state["layer"]
    cap = queued(lambda: _attention(st.session_state["text"]), t("lesson.job.attention"))
    claim(qkv_finding(st.session_state["text"], L))
    weights = cap.probs[layer, 0].numpy()
    tokens = [bytes([b]).decode("latin-1") for b in ids]
    show_chart(figs.who_reads_what(weights, tokens, say.qkv_title(layer, len(ids), lang=L), lang=L),
               key="lesson_qkv")
    open_full_page("attention_masks", {"prompt": st.session_state["text"], "layer": layer}, t("lesson.open.qkv"))
    walk(ids, layer)


def walk(ids: list[int], layer: int) -> None:
    """The prompt's last token attending, stage by stage, on the bundled model (its own q, K, V)."""
    ss, L = st.session_state, lang()
    st.subheader(t("lesson.walk.head"))
    stages = {i: t(f"lesson.walk.stage{i}") for i in range(STAGES)}  # worded now: format_func runs later too
    st.segmented_control(t("lesson.walk.c"), list(stages), key="walk", format_func=stages.get,
                         selection_mode="single", required=True)
    run = queued(lambda: _filling(ss["text"], FILL_NEW), t("lesson.job.decode"))
    w = attention_walk(run, 0, layer)  # frame 0: the prefill; its last position attends over the whole prompt
    stage = ss["walk"]
    st.markdown(walk_sentence(w, stage, L))
    tokens = [for_plotly(chr(b) if 32 <= b < 127 else "·") for b in ids]
    show_chart(figs.attention_walk(stage, w, tokens, walk_title(w, stage, L), lang=L), key="lesson_walk")


@st.cache_resource(max_entries=8, show_spinner=False)
def _validity(text: str):
    from app.resources import model
    from sim.attention.maps import cache_validity
    from sim.model.generate import encode

    m = model(TINY)
    ids = encode(text)
    return cache_validity(m, ids, True), cache_validity(m, ids, False)


def qkv_finding(text: str, L: str) -> str:
    return say.qkv_claim(len(text.encode("utf-8")), lang=L)


def mask_finding(text: str, L: str) -> str:
    from sim.attention.maps import append_takeaway

    with_mask, without = queued(lambda: _validity(text), t("lesson.job.append"))
    return append_takeaway(with_mask, without, lang=L) + "."


def filling_finding(text: str, step: int, L: str) -> str:
    run = queued(lambda: _filling(text, FILL_NEW), t("lesson.job.decode"))
    f = run.frames[min(step, len(run.frames) - 1)]
    return say.filling_sentence(min(step, len(run.frames) - 1), len(f.fed), f.end, run.num_layers, f.used_bytes,
                                run.bytes_per_token(), lang=L)


def mask() -> None:
    ids = _prompt_box()
    if ids is None:
        return

    L = lang()
    with_mask, without = queued(lambda: _validity(st.session_state["text"]), t("lesson.job.append"))
    claim(mask_finding(st.session_state["text"], L))
    show_chart(figs.append_change(with_mask.row_diffs, without.row_diffs,
                                  say.mask_title(with_mask.row_diffs, without.row_diffs, lang=L), lang=L),
               key="lesson_mask")
    st.caption(say.mask_caption(with_mask.max_diff_k, with_mask.max_diff_v, lang=L))
    open_full_page("attention_masks", {"prompt": st.session_state["text"]}, t("lesson.open.mask"))


@st.cache_resource(max_entries=8, show_spinner=False)
def _filling(text: str, new: int):
    from app.resources import model
    from sim.model.cache_filling import fill_cache
    from sim.model.generate import encode

    return fill_cache(model(TINY), encode(text), new)


def filling() -> None:
    ss = st.session_state
    c = controls_row([5, 3, 2])
    ids = _prompt_box(c[0])
    c[1].select_slider(t("lesson.c.layer"), [0, 1, 2, 3], key="layer")
    c[2].toggle(t("lesson.c.play"), key="lesson_play", help=t("lesson.c.play_help"))
    if ids is None:
        return
    run = queued(lambda: _filling(ss["text"], FILL_NEW), t("lesson.job.decode"))
    last = len(run.frames) - 1
    if ss["t"] > last:
        ss["t"] = last
    # only a playing animation reruns itself (its part of the page alone, once a second)
    st.fragment(_filling_view, run_every=1.0 if ss["lesson_play"] else None)(run)


def _filling_view(run) -> None:
    ss, L = st.session_state, lang()
    last = len(run.frames) - 1
    if ss.get("lesson_play"):
        ss["t"] = ss["t"] + 1 if ss["t"] < last else 0
    t_ = st.slider(t("lesson.c.t"), 0, last, key="t")
    f, layer = run.frames[t_], ss["layer"]
    claim(filling_finding(ss["text"], t_, L))
    text = for_plotly(run.text[: f.end + 1] if t_ < last else run.text)
    fed = "".join(chr(b) if 32 <= b < 127 else "·" for b in f.fed)
    title = say.filling_title(layer, t_, str(for_plotly(fed)), for_plotly(repr(chr(f.picked))), f.end, lang=L)
    show_chart(figs.cache_frame(run.keys(t_, layer).numpy(), run.values(t_, layer).numpy(), f.q[layer, 0].numpy(),
                                f.weights[layer, 0].numpy(), range(f.start, f.end), run.frames[-1].end, title,
                                lang=L), key="lesson_fill")
    show_chart(figs.bytes_growing(list(range(last + 1)), [fr.used_bytes for fr in run.frames], t_,
                                  say.growing_title(run.bytes_per_token(), f.used_bytes, t_, lang=L), lang=L),
               key="lesson_fill_bytes")
    st.caption(t("lesson.cap.text_so_far", text=plain(text)))
    open_full_page("decode_cost", {"prompt": ss["text"], "n": FILL_NEW}, t("lesson.open.fill"))
