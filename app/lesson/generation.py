"""Steps 1–4: generation repeats work, who reads Q vs K/V, why the causal mask keeps the cache valid,
and the real model's cache filling one token at a time."""

from __future__ import annotations

import streamlit as st

from app.controls.lesson import LAYER, LENGTH, POSITION, TEXT, WALK
from app.figures import lesson as figs
from app.i18n import lang, t
from app.lesson.nav import FILL_MODEL, LENGTHS, REAL_LAYER, open_full_page
from app.lesson.style import ROW_KEY
from app.present import show_chart
from app.text import code, for_plotly, plain
from app.work import queued
from sim.cost.opcount import generation_totals
from sim.cost.presets import load_presets
from sim.lesson.walk import STAGES, attention_walk
from sim.words import lesson as say
from sim.words.lesson import walk_sentence, walk_title

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
    LENGTH.draw(format_func=lambda v: f"{v:,}")
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

    TEXT.draw(where or st)
    ids = list(st.session_state["text"].encode("utf-8"))
    if len(ids) < MIN_PROMPT:
        st.warning(t(f"lesson.w.short.{'one' if len(ids) == 1 else 'other'}", min=f"{MIN_PROMPT}", n=f"{len(ids)}"))
        return None
    return ids


def qkv() -> None:
    c = controls_row([3, 2])
    ids = _prompt_box(c[0])
    LAYER.draw(c[1])
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
    WALK.draw(options=list(stages), format_func=stages.get, selection_mode="single", required=True)
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
    from sim.words.maps import append_takeaway

    with_mask, without = queued(lambda: _validity(text), t("lesson.job.append"))
    return append_takeaway(with_mask, without, lang=L) + "."


def filling_finding(text: str, step: int, L: str) -> str:
    """Step 4's claim on the tiny model (the recap's line)."""
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


MIN_REAL_NEW = 8  # the fewest tokens SmolLM2 decodes in this step (more when the page's budget allows)


def _real_filling(text: str):
    """SmolLM2 filling its cache over the prompt's BPE tokens, through the server's queue: as many new tokens as
    the page's budget for work started unasked allows (at least MIN_REAL_NEW: then it waits for its button)."""
    from app.work import auto_limits, run_job
    from sim.model.cache_filling import MAX_FILL_NEW, fit_num_new
    from sim.model.real_pages import WARM_LOAD_S
    from sim.work.run_cost import smollm2_rates, smollm2_tokens

    def seconds(prompt_len: int, n: int) -> float:
        return smollm2_rates("eager").cached_s(prompt_len, n) + WARM_LOAD_S

    # before the tokenizer is loaded: the prompt's tokens estimated from its bytes (sim.work.run_cost.smollm2_tokens)
    num_tokens = smollm2_tokens(text)
    num_new = fit_num_new(min(FILL_NEW, MAX_FILL_NEW), seconds=lambda k: seconds(num_tokens, k), budget_s=auto_limits()[0],
                          min_new=MIN_REAL_NEW)

    def work(progress):
        from app.resources import real_model
        from sim.model.cache_filling import fill_cache

        real = real_model()
        progress(0.2)
        return fill_cache(real.model, real.encode(text), num_new, decode_ids=real.decode)

    return run_job("lesson.fill_real", (text, num_new), seconds(num_tokens, num_new), work,
                   what=t("rp.lesson.job", n=f"{num_new}"), button=t("rp.lesson.run"))


def filling() -> None:
    ss = st.session_state
    c = controls_row([4, 3, 2, 3])
    ids = _prompt_box(c[0])
    real = FILL_MODEL.value() == "smollm2"
    if real:
        REAL_LAYER.draw(c[1])
    else:
        LAYER.draw(c[1])
    c[2].toggle(t("lesson.c.play"), key="lesson_play", help=t("lesson.c.play_help"))
    names = {k: t(f"rp.lesson.model.{k}") for k in FILL_MODEL.choices()}  # worded now: format_func runs later too
    FILL_MODEL.draw(c[3], format_func=names.get, help=t("rp.lesson.model_help"))
    if ids is None:
        return
    if real:
        from app.model_picker import real_unavailable

        if (missing := real_unavailable()) is not None:
            st.info(missing, icon=":material/download:")
            return
        run = _real_filling(ss["text"])
        if run is None:
            return
    else:
        run = queued(lambda: _filling(ss["text"], FILL_NEW), t("lesson.job.decode"))
    POSITION.clamp(len(run.frames) - 1)
    # only a playing animation reruns itself (its part of the page alone, once a second)
    st.fragment(_filling_view, run_every=1.0 if ss["lesson_play"] else None)(run, real)


def _shown(piece: str) -> str:
    """A token's text in a chart title: its repr (quotes, escapes: never markup), escaped for plotly."""
    return for_plotly(repr(piece))


def _filling_view(run, real: bool = False) -> None:
    ss, L = st.session_state, lang()
    last = len(run.frames) - 1
    if ss.get("lesson_play"):
        ss["t"] = ss["t"] + 1 if ss["t"] < last else 0
    t_ = POSITION.draw(hi=last)
    f, layer = run.frames[t_], ss["rlayer" if real else "layer"]
    step = min(t_, last)
    claim(say.filling_sentence(step, len(f.fed), f.end, run.num_layers, f.used_bytes, run.bytes_per_token(), lang=L))
    if real:
        fed, picked = _shown(run.decode_ids(f.fed)), _shown(run.piece(f.picked))
        upto = run.decode_ids(run.prompt + run.generated[: t_ + 1])
    else:
        fed = str(for_plotly("".join(chr(b) if 32 <= b < 127 else "·" for b in f.fed)))
        picked = for_plotly(repr(chr(f.picked)))
        upto = run.text[: f.end + 1] if t_ < last else run.text
    title = say.filling_title(layer, t_, fed, picked, f.end, lang=L)
    show_chart(figs.cache_frame(run.keys(t_, layer).numpy(), run.values(t_, layer).numpy(), f.q[layer, 0].numpy(),
                                f.weights[layer, 0].numpy(), range(f.start, f.end), run.frames[-1].end, title,
                                lang=L), key="lesson_fill")
    show_chart(figs.bytes_growing(list(range(last + 1)), [fr.used_bytes for fr in run.frames], t_,
                                  say.growing_title(run.bytes_per_token(), f.used_bytes, t_, lang=L), lang=L),
               key="lesson_fill_bytes")
    st.caption(t("lesson.cap.text_so_far", text=plain(upto)))
    if real:  # the BPE pieces as the tokenizer split them: code spans show every character literally
        st.caption(t("rp.lesson.pieces", n=f"{len(run.prompt)}", bytes=f"{len(ss['text'].encode('utf-8'))}",
                     pieces=" ".join(code(repr(p)) for p in run.pieces(run.prompt))))
    open_full_page("decode_cost", {"prompt": ss["text"], "n": FILL_NEW, **({"model": "smollm2"} if real else {})},
                   t("lesson.open.fill"))
