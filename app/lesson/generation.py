"""Steps 1–4: generation repeats work, who reads Q vs K/V, why the causal mask keeps the cache valid,
and the real model's cache filling one token at a time."""

from __future__ import annotations

import streamlit as st

from app.figures import lesson as figs
from app.lesson.nav import LENGTHS, open_full_page
from app.present import show_chart
from app.text import for_plotly, plain
from app.work import queued
from sim.cost.opcount import generation_totals
from sim.cost.presets import load_presets
from sim.lesson import sentences as say

TINY = "mha"  # the bundled model the real-model steps run
PROMPT_LEN = 16  # the cost steps' prompt, in tokens
FILL_NEW = 24  # tokens the filling animation decodes


def claim(text: str) -> None:
    st.markdown(f"#### {text}")


def _tiny_shape():
    return load_presets()[f"tiny-{TINY}"]


def repeat() -> None:
    ss = st.session_state
    st.select_slider("Try it: tokens to generate", LENGTHS, key="n", format_func=lambda v: f"{v:,}")
    shape, n = _tiny_shape(), ss["n"]
    totals = {mode: [sum(generation_totals(shape, PROMPT_LEN, m, mode).values()) for m in LENGTHS] for mode in
              ("naive", "cached")}
    i = LENGTHS.index(n)
    half = max(i - 1, 0)
    text = say.repeat_claim(n, totals["naive"][i], totals["cached"][i], totals["naive"][half],
                            totals["cached"][half])
    claim(text)
    show_chart(figs.totals_vs_length(LENGTHS, totals["naive"], totals["cached"],
                                     say.repeat_title(LENGTHS, totals["naive"], totals["cached"])),
               key="lesson_repeat")
    st.caption("Naive decoding feeds the whole sequence again at every step, so step t does t tokens' work and the "
               "attention inside it t² — summed over n steps that is about n² for the matrix multiplies and n³ for "
               "attention. A cache keeps each token's K and V, so every step feeds one token.")
    open_full_page("decode_cost", {"n": n}, f"{n:,} new tokens on the real model")


@st.cache_resource(max_entries=8, show_spinner=False)
def _attention(text: str):
    from app.resources import model
    from sim.attention.maps import capture_attention
    from sim.model.generate import encode

    return capture_attention(model(TINY), encode(text))


def _prompt_box() -> list[int] | None:
    from app.lesson.nav import MAX_LESSON_PROMPT

    st.text_input("Try it: the prompt", key="text", max_chars=MAX_LESSON_PROMPT)
    ids = list(st.session_state["text"].encode("utf-8"))
    if len(ids) < 2:
        st.warning(f"Type at least 2 characters (the prompt has {len(ids)} byte{'s' if len(ids) != 1 else ''}).")
        return None
    return ids


def qkv() -> None:
    ids = _prompt_box()
    if ids is None:
        return
    layer = st.session_state["layer"]
    st.select_slider("Layer", [0, 1, 2, 3], key="layer")
    cap = queued(lambda: _attention(st.session_state["text"]), "Reading the model's attention")
    claim(say.qkv_claim(len(ids)))
    weights = cap.probs[layer, 0].numpy()
    tokens = [bytes([b]).decode("latin-1") for b in ids]
    show_chart(figs.who_reads_what(weights, tokens, say.qkv_title(layer, len(ids))),
               key="lesson_qkv")
    open_full_page("attention_masks", {"prompt": st.session_state["text"], "layer": layer},
                   "every mask, layer and head")


@st.cache_resource(max_entries=8, show_spinner=False)
def _validity(text: str):
    from app.resources import model
    from sim.attention.maps import cache_validity
    from sim.model.generate import encode

    m = model(TINY)
    ids = encode(text)
    return cache_validity(m, ids, True), cache_validity(m, ids, False)


def mask() -> None:
    ids = _prompt_box()
    if ids is None:
        return
    from sim.attention.maps import append_takeaway

    with_mask, without = queued(lambda: _validity(st.session_state["text"]), "Appending a token on the real model")
    title = append_takeaway(with_mask, without)
    claim(title + ".")
    show_chart(figs.append_change(with_mask.row_diffs, without.row_diffs,
                                  say.mask_title(with_mask.row_diffs, without.row_diffs)),
               key="lesson_mask")
    st.caption(f"With the causal mask, K and V at the earlier positions moved by at most "
               f"{with_mask.max_diff_k:.2g} and {with_mask.max_diff_v:.2g}; so a cache may keep them and only append. "
               "Without the mask every position would see the new token and each step would invalidate the cache.")
    open_full_page("attention_masks", {"prompt": st.session_state["text"]}, "the append check and the masks")


@st.cache_resource(max_entries=8, show_spinner=False)
def _filling(text: str, new: int):
    from app.resources import model
    from sim.model.cache_filling import fill_cache
    from sim.model.generate import encode

    return fill_cache(model(TINY), encode(text), new)


def filling() -> None:
    ids = _prompt_box()
    if ids is None:
        return
    ss = st.session_state
    c = st.columns([4, 1], vertical_alignment="bottom")
    c[0].select_slider("Layer", [0, 1, 2, 3], key="layer")
    run = queued(lambda: _filling(ss["text"], FILL_NEW), "Decoding on the real model")
    last = len(run.frames) - 1
    if ss["t"] > last:
        ss["t"] = last
    c[1].toggle("Play", key="lesson_play", help="Advance one decode step a second; the slider below shows where.")
    # only a playing animation reruns itself (its part of the page alone, once a second)
    st.fragment(_filling_view, run_every=1.0 if ss["lesson_play"] else None)(run)


def _filling_view(run) -> None:
    ss = st.session_state
    last = len(run.frames) - 1
    if ss.get("lesson_play"):
        ss["t"] = ss["t"] + 1 if ss["t"] < last else 0
    t = st.slider("Decode step (0 = the prefill)", 0, last, key="t")
    f, layer = run.frames[t], ss["layer"]
    claim(say.filling_sentence(t, len(f.fed), f.end, run.num_layers, f.used_bytes, run.bytes_per_token()))
    text = for_plotly(run.text[: f.end + 1] if t < last else run.text)
    fed = "".join(chr(b) if 32 <= b < 127 else "·" for b in f.fed)
    show_chart(figs.cache_frame(run.keys(t, layer).numpy(), run.values(t, layer).numpy(), f.q[layer, 0].numpy(),
                                f.weights[layer, 0].numpy(), range(f.start, f.end), run.frames[-1].end,
                                f"Layer {layer}, head 0 after step {t}: fed {for_plotly(fed)!s}, picked "
                                f"{for_plotly(repr(chr(f.picked)))}; the cache holds {f.end} rows"), key="lesson_fill")
    show_chart(figs.bytes_growing(list(range(last + 1)), [fr.used_bytes for fr in run.frames], t,
                                  f"The cache grows by {run.bytes_per_token():,} B per token: "
                                  f"{f.used_bytes:,} B after step {t}"), key="lesson_fill_bytes")
    st.caption(f"Text so far: {plain(text)}")
    open_full_page("decode_cost", {"prompt": ss["text"], "n": FILL_NEW}, "time and count these steps")
