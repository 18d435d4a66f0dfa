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
from sim.attention.maps import append_caption, append_takeaway, cache_validity, capture_attention
from sim.attention.mask_readouts import (
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
from sim.attention.masks import (
    MASK_KINDS,
    VARIANTS,
    build,
    combine,
    fully_masked_row_behaviour,
    leaked_mass,
    masked_softmax,
    padding,
    segments_from_text,
    sliding_window,
)
from sim.model.real_source import MODEL_KEY

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
kind, pad = st.session_state["kind"], st.session_state["pad"]
try:
    mask = build(kind, n, window=st.session_state["w"], prefix_len=min(st.session_state["p"], n),
                 segment_ids=segments_from_text(ids))
except ValueError as exc:
    st.error(plain(exc))
    url.sync()
    st.stop()
if pad:
    # the same mask for the padded sequence, then pad keys (and pad queries) removed
    padded = build(kind, n + pad, window=st.session_state["w"], prefix_len=min(st.session_state["p"] + pad, n + pad),
                                segment_ids=[0] * pad + segments_from_text(ids))
    mask_shown = combine(padded, padding([n], n + pad)[0])  # pad keys and queries out, the mask's own shape kept
    labels_shown = ["pad"] * pad + labels
    labels_shown = [f"pad<sub>{i}</sub>" if i < pad else lab for i, lab in enumerate(labels_shown)]
else:
    mask_shown, labels_shown = mask, labels
name = mask_name(kind, st.session_state["w"], min(st.session_state["p"], n), pad, lang=L)
show_chart(figs.mask_heatmap(mask_shown.numpy(), labels_shown, mask_takeaway(mask_shown.numpy(), name, lang=L),
                             lang=L), width="stretch")
empty_rows = int((~mask_shown.any(-1)).sum())
st.caption(t("masks.legend") + (t("masks.legend_pad", n=f"{empty_rows:,}") if empty_rows else ""))

st.header(t("masks.h.scores"))
model = load_model(st.session_state["variant"])
layer, head, row = controls.draw_scores(n)
cap = queued(lambda: capture_attention(model, ids), t("masks.job.attention"))
scores = cap.scores[layer, head]  # (T, T) raw q·k/√d
weights = {v.label: masked_softmax(scores, mask, v) for v in VARIANTS}
leak_rows = []
for v in VARIANTS:
    w = weights[v.label]
    leak = leaked_mass(w, mask)
    leak_rows.append({"how": variant_label(v.key, L), "mean": float(leak.nanmean()),
                      "worst": float(leak.nan_to_num(0).max()), "nan": int(w.isnan().any(-1).sum()),
                      "error": float((w - weights[VARIANTS[0].label]).abs().nan_to_num(0).max())})
columns = {c: t(f"masks.col.{c}") for c in ("how", "mean", "worst", "nan", "error")}
show_table(pd.DataFrame(leak_rows).rename(columns=columns), hide_index=True, width="stretch",
           column_config={columns["mean"]: st.column_config.NumberColumn(format="%.4f"),
                          columns["worst"]: st.column_config.NumberColumn(format="%.4f")})
shown = (VARIANTS[0], VARIANTS[1], VARIANTS[4])
show_chart(figs.row_weights({variant_label(v.key, L): weights[v.label][row].numpy() for v in shown}, mask[row].numpy(),
                            labels, row_takeaway(row, {v.key: weights[v.label][row].numpy() for v in shown},
                                                 mask[row].numpy(), lang=L), lang=L), width="stretch")
st.caption(leak_caption({v.key: r["mean"] for v, r in zip(VARIANTS, leak_rows, strict=True)}, int((~mask).sum()),
                        lang=L))
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
same = int((cap.logits.argmax(-1) == cap_win.logits.argmax(-1)).sum())
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
        pct = {k: f"{100 * v:.1f}%" for k, v in (("median", sink.median), ("uniform", sink.uniform),
                                                  ("min", sink.share.min()), ("max", sink.share.max()))}
        show_chart(figs.sink_bars(sink.share, sink.uniform, t("real.sink.title", median=pct["median"],
                                                                uniform=pct["uniform"]), L), key="masks_sink")
        st.caption(t("real.sink.sentence", n=f"{sink.num_tokens:,}", skip=f"{sink.skip}", lo=f"{sink.share.argmin()}",
                     hi=f"{sink.share.argmax()}", many=f"{sink.layers_above(10)}", **pct))
        lo, hi, m = int(sink.share.argmin()), int(sink.share.argmax()), sink.maps.shape[1]
        show_chart(figs.attention_pair(sink.maps[lo], sink.maps[hi], token_labels(list(sink.ids[:m]), real_model()),
                                       (t("real.map.layer", layer=f"{lo}"), t("real.map.layer", layer=f"{hi}")),
                                       t("real.map.title", n=f"{m}", lo=f"{lo}", hi=f"{hi}", min=pct["min"],
                                         max=pct["max"]), L), key="masks_real_map")
elif st.session_state["model"] == MODEL_KEY:
    st.info(why, icon=":material/download:")
else:
    st.caption(t("real.picker.caption"))
url.sync()
