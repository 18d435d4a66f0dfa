import pandas as pd
import streamlit as st

from app.controls import attention_masks as controls
from app.controls.attention_masks import MAX_PROMPT
from app.figures import masks as figs
from app.i18n import lang, page_title, t
from app.model_picker import picker, real_unavailable, run_real_probe, token_labels
from app.present import show_chart, show_table
from app.resources import model_or_stop as load_model
from app.resources import real_model
from app.text import plain
from app.work import queued
from sim.attention.maps import cache_validity, capture_attention
from sim.attention.mask_view import leaks, mask_view, same_next_tokens, sink_figures
from sim.attention.masks import (
    MASK_KINDS,
    VARIANTS,
    fully_masked_row_behaviour,
    sliding_window,
)
from sim.model.real_source import MODEL_KEY
from sim.words.maps import append_caption, append_takeaway
from sim.words.masks import (
    behaviour_rows,
    leak_caption,
    mask_name,
    mask_takeaway,
    masked_row_caption,
    row_takeaway,
    variant_label,
    window_caption,
    window_takeaway,
)

SINK_TOKENS = 256  # held-out tokens the real model's attention sink is measured over

def masked_row_behaviour() -> dict[str, str]:
    """Measured once per server, alone in the queue: it forces each SDPA backend, a process-wide switch (the wait
    shows its place and can be left)."""
    from app.work import once

    return once("masks.masked_rows", (), fully_masked_row_behaviour, what=t("masks.job.masked_rows"))


st.title(page_title("attention_masks"))
st.markdown(t("masks.intro"))
L = lang()  # the sentences and figures below are worded in the page language

url = controls.register()
controls.draw_prompt()
ids = list(st.session_state["prompt"].encode("utf-8"))
if not ids:
    st.error(t("masks.empty"))
    url.sync()
    st.stop()
if len(ids) > MAX_PROMPT:
    st.warning(t("masks.too_long", n=f"{len(ids):,}", max=f"{MAX_PROMPT:,}"))
    ids = ids[:MAX_PROMPT]
n = len(ids)
labels = figs.token_labels(ids)

st.header(t("masks.h.builder"))
controls.draw_builder({k: t(f"masks.kind.{k}") for k in MASK_KINDS})  # worded now: format_func runs later too
kind, pad, window = st.session_state["kind"], st.session_state["pad"], st.session_state["w"]
try:
    view = mask_view(kind, ids, window=window, prefix=st.session_state["p"], pad=pad)
except ValueError as exc:
    st.error(plain(exc))
    url.sync()
    st.stop()
mask, mask_shown = view.mask, view.shown
name = mask_name(kind, window, view.prefix_len, pad, lang=L)
show_chart(figs.mask_heatmap(mask_shown.numpy(), figs.padded_labels(labels, pad),
                             mask_takeaway(mask_shown.numpy(), name, lang=L), lang=L), width="stretch")
empty_rows = view.num_empty_rows
st.caption(t("masks.legend") + (t("masks.legend_pad", n=f"{empty_rows:,}") if empty_rows else ""))

st.header(t("masks.h.scores"))
model = load_model(st.session_state["variant"])
layer, head, row = controls.draw_scores(n)
cap = queued(lambda: capture_attention(model, ids), t("masks.job.attention"))
scores = cap.scores[layer, head]  # (T, T) raw q·k/√d
weights, leak = leaks(scores, mask)
leak_rows = [{"how": variant_label(r.key, L), "mean": r.mean, "worst": r.worst, "nan": r.nan_rows, "error": r.error}
             for r in leak]
columns = {c: t(f"masks.col.{c}") for c in ("how", "mean", "worst", "nan", "error")}
show_table(pd.DataFrame(leak_rows).rename(columns=columns), hide_index=True, width="stretch",
           column_config={columns["mean"]: st.column_config.NumberColumn(format="%.4f"),
                          columns["worst"]: st.column_config.NumberColumn(format="%.4f")})
shown = (VARIANTS[0], VARIANTS[1], VARIANTS[4])
show_chart(figs.row_weights({variant_label(v.key, L): weights[v.label][row].numpy() for v in shown}, mask[row].numpy(),
                            labels, row_takeaway(row, {v.key: weights[v.label][row].numpy() for v in shown},
                                                 mask[row].numpy(), lang=L), lang=L), width="stretch")
st.caption(leak_caption({r.key: r.mean for r in leak}, view.num_masked, lang=L))
st.subheader(t("masks.h.masked_row"))
behaviour = masked_row_behaviour()
show_table(pd.DataFrame([{t("masks.col.where"): k, t("masks.col.result"): v} for k, v in behaviour_rows(behaviour, L)]),
           hide_index=True, width="stretch")
st.caption(masked_row_caption(behaviour, lang=L))

st.header(t("masks.h.maps"))
win = controls.draw_map_window(n)
cap_win = queued(lambda: capture_attention(model, ids, sliding_window(n, win)), t("masks.job.window"))
causal_probs = cap.probs[layer, head].numpy()
show_chart(figs.attention_pair(causal_probs, cap_win.probs[layer, head].numpy(), labels,
                               (t("masks.map.causal", layer=f"{layer}", head=f"{head}"), t("masks.map.window", w=f"{win}")),
                               window_takeaway(causal_probs, win, layer, head, lang=L), lang=L), width="stretch")
same = same_next_tokens(cap.logits, cap_win.logits)
st.caption(window_caption(same, n, win, lang=L))

st.header(t("masks.h.valid"))
if n < 2:
    st.warning(t("masks.need_two"))
else:
    with_mask, without = queued(lambda: (cache_validity(model, ids, True), cache_validity(model, ids, False)),
                                t("masks.job.append"))
    k = st.columns(2)
    k[0].metric(t("masks.m.causal"), f"{with_mask.max_diff:.2e}")
    k[1].metric(t("masks.m.none"), f"{without.max_diff:.2e}")
    show_chart(figs.row_diffs(with_mask.row_diffs, without.row_diffs, append_takeaway(with_mask, without, lang=L),
                              lang=L), width="stretch")
    st.caption(append_caption(with_mask, without, lang=L))
st.header(t("real.sink.h"))
if picker() == MODEL_KEY and not (why := real_unavailable()):
    from sim.model.real_probe import attention_sink

    sink = run_real_probe("masks.real_sink", SINK_TOKENS, attention_sink, what=t("real.sink.what", n=f"{SINK_TOKENS}"),
                          button=t("real.sink.run"))
    if sink is not None:
        fig = sink_figures(sink.share, sink.median, sink.uniform)
        pct = {k: f"{v:.1%}" for k, v in (("median", fig.median), ("uniform", fig.uniform), ("min", fig.lowest),
                                          ("max", fig.highest))}
        show_chart(figs.sink_bars(sink.share, sink.uniform, t("real.sink.title", median=pct["median"],
                                                                uniform=pct["uniform"]), L), key="masks_sink")
        lo, hi, m = fig.lowest_layer, fig.highest_layer, sink.maps.shape[1]
        st.caption(t("real.sink.sentence", n=f"{sink.num_tokens:,}", skip=f"{sink.skip}", lo=f"{lo}", hi=f"{hi}",
                     many=f"{sink.layers_above(10)}", **pct))
        show_chart(figs.attention_pair(sink.maps[lo], sink.maps[hi], token_labels(list(sink.ids[:m]), real_model()),
                                       (t("real.map.layer", layer=f"{lo}"), t("real.map.layer", layer=f"{hi}")),
                                       t("real.map.title", n=f"{m}", lo=f"{lo}", hi=f"{hi}", min=pct["min"],
                                         max=pct["max"]), L), key="masks_real_map")
elif st.session_state["model"] == MODEL_KEY:
    st.info(why, icon=":material/download:")
else:
    st.caption(t("real.picker.caption"))
url.sync()
