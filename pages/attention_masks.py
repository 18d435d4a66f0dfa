import pandas as pd
import streamlit as st

from app.figures import masks as figs
from app.present import show_chart, show_table
from app.resources import model_or_stop as load_model
from app.text import plain
from app.urlstate import UrlState
from app.work import queued
from sim.attention.maps import append_caption, append_takeaway, cache_validity, capture_attention
from sim.attention.mask_readouts import (
    leak_caption,
    mask_name,
    mask_takeaway,
    masked_row_caption,
    row_takeaway,
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
from sim.model.transformer import PRESETS

MAX_PROMPT = 48  # bytes: one row and column per byte keeps the maps legible on a projector
KIND_LABELS = {"causal": "causal", "sliding_window": "sliding window", "prefix_lm": "prefix-LM",
               "document": "document / packing", "bidirectional": "none (bidirectional)"}

@st.cache_resource(show_spinner=False)
def masked_row_behaviour() -> dict[str, str]:
    """Measured once per server, alone in the queue: it forces each SDPA backend, a process-wide switch."""
    from app.work import server

    with server().queue.slot(exclusive=True):
        return fully_masked_row_behaviour()


st.title("Attention masks")
st.markdown(
    "A mask decides which keys each query may read. It is **added to the score matrix before softmax**: "
    "−∞ on a forbidden key makes its weight exactly e^−∞ = 0. Multiplying the score by 0 instead leaves "
    "e⁰ = 1 — a full vote for a token the query must not see."
)

url = UrlState("attention_masks")
url.text("prompt", "To be, or not to be|that is the question", max_len=4 * MAX_PROMPT, label="prompt")
url.choice("variant", "mha", list(PRESETS), label="model variant")
url.choice("kind", "causal", list(MASK_KINDS), label="mask kind")
url.int("w", 4, 1, MAX_PROMPT, label="window")
url.int("p", 6, 0, MAX_PROMPT, label="prefix length")
url.int("pad", 0, 0, 8, label="left padding")
url.int("layer", 0, 0, PRESETS["mha"].n_layers - 1, label="layer")
url.int("head", 0, 0, PRESETS["mha"].n_heads - 1, label="head")
url.int("row", 5, 0, MAX_PROMPT + 8, label="query row")
url.int("map_w", 8, 1, MAX_PROMPT, label="window for the map")
url.show_problems()

c = st.columns([3, 1])
c[0].text_input("Prompt (one token per byte; `|` separates documents for the packing mask)", key="prompt",
                max_chars=4 * MAX_PROMPT)
c[1].radio("Model", list(PRESETS), key="variant", horizontal=True, format_func=str.upper)
ids = list(st.session_state["prompt"].encode("utf-8"))
if not ids:
    st.error("The prompt is empty: type at least one character.")
    url.sync()
    st.stop()
if len(ids) > MAX_PROMPT:
    st.warning(f"The prompt is {len(ids)} bytes; the maps use the first {MAX_PROMPT}.")
    ids = ids[:MAX_PROMPT]
n = len(ids)
labels = figs.token_labels(ids)

st.header("1 · Mask builder")
c = st.columns(4)
c[0].selectbox("Mask", MASK_KINDS, key="kind", format_func=KIND_LABELS.get)
c[1].slider("Window w", 1, MAX_PROMPT, key="w", disabled=st.session_state["kind"] != "sliding_window")
c[2].slider("Prefix length p", 0, MAX_PROMPT, key="p", disabled=st.session_state["kind"] != "prefix_lm")
c[3].slider("Left padding (pad tokens before the prompt)", 0, 8, key="pad")
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
name = mask_name(kind, st.session_state["w"], min(st.session_state["p"], n), pad)
show_chart(figs.mask_heatmap(mask_shown.numpy(), labels_shown, mask_takeaway(mask_shown.numpy(), name)),
           width="stretch")
empty_rows = int((~mask_shown.any(-1)).sum())
st.caption("Blue: the query (row) may attend to the key (column); grey: masked, −∞ is added to its score."
           + (f" {empty_rows:,} pad row(s) have no key at all: see the fully masked row below." if empty_rows else ""))

st.header("2 · −∞ vs ×0 vs a large negative number, on the model's real scores")
model = load_model(st.session_state["variant"])
cfg = model.cfg
c = st.columns(3)
c[0].slider("Layer", 0, cfg.n_layers - 1, key="layer")
c[1].slider("Head", 0, cfg.n_heads - 1, key="head")
if st.session_state["row"] > n - 1:
    st.session_state["row"] = n - 1
if n > 1:
    c[2].slider("Query row", 0, n - 1, key="row")
else:
    c[2].markdown("**Query row 0** — the prompt has one token.")
layer, head, row = st.session_state["layer"], st.session_state["head"], st.session_state["row"]
cap = queued(lambda: capture_attention(model, ids), "Reading the model's attention")
scores = cap.scores[layer, head]  # (T, T) raw q·k/√d
weights = {v.label: masked_softmax(scores, mask, v) for v in VARIANTS}
leak_rows = []
for v in VARIANTS:
    w = weights[v.label]
    leak = leaked_mass(w, mask)
    leak_rows.append({"How the mask is applied": v.label, "Mean leaked mass per row": float(leak.nanmean()),
                      "Worst row": float(leak.nan_to_num(0).max()), "NaN rows": int(w.isnan().any(-1).sum()),
                      "Weight error vs −inf fp32 (max)": float((w - weights[VARIANTS[0].label]).abs().nan_to_num(0).max())})
show_table(pd.DataFrame(leak_rows), hide_index=True, width="stretch",
             column_config={"Mean leaked mass per row": st.column_config.NumberColumn(format="%.4f"),
                            "Worst row": st.column_config.NumberColumn(format="%.4f")})
shown = (VARIANTS[0], VARIANTS[1], VARIANTS[4])
show_chart(figs.row_weights({v.label: weights[v.label][row].numpy() for v in shown}, mask[row].numpy(), labels,
                            row_takeaway(row, {v.key: weights[v.label][row].numpy() for v in shown},
                                         mask[row].numpy())), width="stretch")
st.caption(leak_caption({v.key: r["Mean leaked mass per row"] for v, r in zip(VARIANTS, leak_rows, strict=True)},
                        int((~mask).sum())))
st.subheader("A fully masked row")
behaviour = masked_row_behaviour()
show_table(pd.DataFrame([{"Where": k, "Result": v} for k, v in behaviour.items()]), hide_index=True, width="stretch")
st.caption(masked_row_caption(behaviour))

st.header("3 · Real attention maps")
c = st.columns(2)
st.session_state["map_w"] = min(st.session_state["map_w"], n)
if n > 1:
    c[0].slider("Sliding window for the right-hand map", 1, n, key="map_w")
win = st.session_state["map_w"]
cap_win = queued(lambda: capture_attention(model, ids, sliding_window(n, win)), "Reading the windowed attention")
causal_probs = cap.probs[layer, head].numpy()
show_chart(figs.attention_pair(causal_probs, cap_win.probs[layer, head].numpy(), labels,
                               (f"causal — layer {layer}, head {head}", f"sliding window w={win}"),
                               window_takeaway(causal_probs, win, layer, head)), width="stretch")
same = int((cap.logits.argmax(-1) == cap_win.logits.argmax(-1)).sum())
st.caption(window_caption(same, n, win))

st.header("4 · Why the cache is valid")
if n < 2:
    st.warning("Type at least two characters to append one.")
else:
    with_mask, without = queued(lambda: (cache_validity(model, ids, True), cache_validity(model, ids, False)),
                                "Appending a token")
    k = st.columns(2)
    k[0].metric("Causal: max change at positions 0..N−1", f"{with_mask.max_diff:.2e}")
    k[1].metric("No mask: max change at positions 0..N−1", f"{without.max_diff:.2e}")
    show_chart(figs.row_diffs(with_mask.row_diffs, without.row_diffs, append_takeaway(with_mask, without)),
               width="stretch")
    st.caption(append_caption(with_mask, without))
url.sync()
