import streamlit as st

from app.claims import render_claims
from app.controls.decode_cost import STEP_LABELS, fall_back_from_graph, graph_unavailable_here, step_radio
from app.figures import decode as figs
from app.present import show_chart, show_chart_in
from app.resources import model_or_stop as load_model
from app.resources import model_rates
from app.runs.decode_profile import profile_step
from app.text import plain
from app.urlstate import UrlState
from app.work import run_job
from sim.cost.decode import computed_grid, flop_shape, human_flops, scale_curve, seed_claims
from sim.cost.decode_readouts import (
    formula_agreement,
    grid_takeaway,
    parts_takeaway,
    per_step_takeaway,
    scale_takeaway,
    speedup_caption,
    wall_time_caption,
)
from sim.cost.opcount import generation_flops
from sim.cost.presets import load_presets
from sim.model.generate import MODES, SamplingConfig, encode, run_comparison
from sim.model.graph_step import step_caption
from sim.model.step_profile import MAX_PROFILE_CONTEXT
from sim.model.transformer import PRESETS
from sim.work.run_cost import cached_work, naive_work

DEFAULT_PROMPT = "HAMLET.\nTo be, or not to be"
MAX_PROMPT_BYTES = 256
CONTEXT = PRESETS["mha"].max_seq_len
GRID_STEPS = 24  # rows of the "what gets computed" grid that stay legible on a projector
SCALE_LENGTHS = [2**k for k in range(7, 18)]  # 128 … 131,072

st.title("Decode cost")
st.markdown(
    "To produce token *n*, a model needs the query of token *n* once — and the **keys and values of "
    "every earlier token**, at every later step. **Naive** decoding recomputes all of them each step; "
    "**cached** decoding keeps K and V and computes one new row. Below both run on the real tiny model, "
    "with every matmul's FLOPs counted from the shapes it executed."
)

url = UrlState("decode_cost")
url.text("prompt", DEFAULT_PROMPT, max_len=MAX_PROMPT_BYTES, label="prompt")
url.choice("variant", "mha", list(PRESETS), label="model variant")
url.int("n", 64, 1, CONTEXT, label="new tokens")
url.float("temp", 0.0, 0.0, 2.0, label="temperature")
url.int("top_k", 0, 0, 256, label="top-k")
url.int("seed", 0, 0, 2**31 - 1, label="seed")
url.choice("attn", "sdpa", ["sdpa", "eager"], label="attention")
url.int("budget", 30, 1, 600, label="naive time budget (s)")
url.choice("step", "eager", list(STEP_LABELS), label="cached step")
url.bool("log", True, label="log scale")
presets = {k: p for k, p in load_presets().items() if p.attention != "MLA"}
url.choice("scale_model", "llama-3.1-8b" if "llama-3.1-8b" in presets else next(iter(presets)), list(presets),
           label="model at scale")
url.int("scale_n", 8192, SCALE_LENGTHS[0], SCALE_LENGTHS[-1], label="length at scale")
url.show_problems()
graph_reason = graph_unavailable_here()
fall_back_from_graph(graph_reason)
if st.session_state["scale_n"] not in SCALE_LENGTHS:  # a URL may carry any in-range integer
    st.session_state["scale_n"] = min(SCALE_LENGTHS, key=lambda v: abs(v - st.session_state["scale_n"]))

with st.form("run"):
    left, right = st.columns([3, 2])
    left.text_area("Prompt", key="prompt", height=90, max_chars=MAX_PROMPT_BYTES,
                   help=f"At most {MAX_PROMPT_BYTES} bytes of UTF-8 (one token per byte; a Hangul letter is 3).")
    right.radio("Model variant", list(PRESETS), key="variant", horizontal=True,
                format_func=lambda v: f"{v.upper()} ({PRESETS[v].n_kv_heads} KV heads)")
    right.slider("New tokens", 1, CONTEXT, key="n", help=f"The model was trained on {CONTEXT}-token windows; "
                 "prompt + new tokens must fit in them (RoPE positions past that were never trained).")
    step_radio(right, graph_reason)
    c = st.columns(5)
    c[0].slider("Temperature (0 = greedy)", 0.0, 2.0, step=0.05, key="temp")
    c[1].number_input("Top-k (0 = off)", 0, 256, key="top_k")
    c[2].number_input("Seed", 0, 2**31 - 1, key="seed")
    c[3].radio("Attention", ["sdpa", "eager"], key="attn", horizontal=True)
    c[4].number_input("Naive time budget (s)", 1, 600, key="budget",
                      help="Naive decoding costs O(N²): it stops when this much time is spent.")
    go = st.form_submit_button("Run naive and cached", type="primary")

prompt_ids = encode(st.session_state["prompt"])
n_new = st.session_state["n"]
error = None
if not prompt_ids:
    error = "The prompt is empty: type at least one character."
elif len(prompt_ids) > MAX_PROMPT_BYTES:
    error = f"The prompt is {len(prompt_ids)} bytes; the limit is {MAX_PROMPT_BYTES}. Shorten it."
elif len(prompt_ids) + n_new - 1 > CONTEXT:
    cap = CONTEXT - len(prompt_ids) + 1
    st.warning(f"{len(prompt_ids)} prompt tokens + {n_new} new tokens exceed the {CONTEXT}-token context the "
               f"model was trained on; generating {cap} instead (past it, RoPE positions are untrained).")
    n_new = cap

if error:
    st.error(error)
else:
    sampling = SamplingConfig(st.session_state["temp"], st.session_state["top_k"], st.session_state["seed"])
    variant, attn, step = st.session_state["variant"], st.session_state["attn"], st.session_state["step"]
    budget = float(st.session_state["budget"])
    run_key = (tuple(prompt_ids), variant, n_new, sampling, attn, budget, step)
    model = load_model(variant)
    rates = model_rates(variant, attn)
    cached_s = rates.seconds(cached_work(len(prompt_ids), n_new))
    naive_s = rates.seconds(naive_work(len(prompt_ids), n_new))
    estimate = cached_s + min(naive_s, budget)

    def compare(progress):
        def on_step(mode, i):
            done = i / n_new * cached_s if mode == "cached" else cached_s + min(budget, i / n_new * naive_s)
            progress(done / estimate, f"{mode}: token {i} of {n_new}")

        return run_comparison(model, prompt_ids, n_new, sampling, attn, budget, on_step, step)

    try:
        res = run_job("decode_cost.compare", run_key, estimate, compare, go=go, button="Run naive and cached",
                      what=f"Naive and cached decoding of {n_new:,} tokens ({attn}, {STEP_LABELS[step]} cached "
                           f"steps, naive capped at {budget:g} s)")
    except ValueError as exc:
        st.error(plain(exc))
        res = None
if not error and res is not None:
    st.session_state["decode_cost.result"] = res  # the run the page shows (tests read it)
    cfg = PRESETS[variant]
    frames = {m: res.to_frame(m) for m in MODES}
    cached_ids = [r.token for r in res.cached]
    diff, k = res.first_difference, res.compared

    if diff is not None:
        st.error(f"The runs differ first at generated token {diff} (position {len(prompt_ids) + diff}).")
    elif res.naive_complete:
        st.success(f"Identical tokens: all {k} tokens from naive and cached decoding match.",
                   icon=":material/check_circle:")
    else:
        st.success(f"Identical tokens: the {k} tokens naive decoding produced within its {budget:g} s budget match "
                   f"the first {k} of the {n_new} cached tokens.", icon=":material/check_circle:")
        st.info(f"Naive decoding stopped after {k} of {n_new} tokens: its cost grows with N² and it ran out of the "
                f"{budget:g} s budget. The FLOP charts below still show all {n_new} steps from the formula.")
    m = st.columns(4)
    m[0].metric("Naive tokens/s", f"{res.tokens_per_s('naive'):,.1f}")
    m[1].metric("Cached tokens/s", f"{res.tokens_per_s('cached'):,.1f}")
    m[2].metric("Measured speedup", f"{res.speedup:,.1f}×", help=f"naive time / cached time over the same {k} tokens")
    m[3].metric("FLOPs naive / cached", f"{res.flops('naive', k) / res.flops('cached', k):,.1f}×",
                help=f"{res.flops('naive', k):,} vs {res.flops('cached', k):,} FLOPs over {k} tokens")
    st.caption(speedup_caption(res.naive, res.cached))
    if res.step != "eager":
        st.caption(step_caption(res.step, res.cached[-1].kv_len))  # the cache holds every position fed
    st.code(st.session_state["prompt"] + bytes(cached_ids).decode("utf-8", errors="replace"), language=None,
            wrap_lines=True)

    formula = {mo: [sum(s.values()) for s in generation_flops(cfg, len(prompt_ids), n_new, mo)] for mo in MODES}
    tabs = st.tabs(["FLOPs per step", "Cumulative FLOPs", "Wall time per step", "FLOPs by part", "What gets computed",
                    "Where a step's time goes"])
    with tabs[0]:
        st.toggle("Log scale", key="log")
        show_chart(figs.flops_per_step(frames["naive"], frames["cached"], formula["naive"], formula["cached"],
                                       st.session_state["log"], per_step_takeaway(res.naive, res.cached)),
                   width="stretch")
        st.caption("Dots: FLOPs counted from the matmul shapes the model executed. Lines: the closed-form formula "
                   "in `sim/cost/opcount.py`. " + formula_agreement(
                       {mo: frames[mo]["flops"].tolist() for mo in MODES}, formula))
    with tabs[1]:
        show_chart(figs.cumulative_flops(frames["naive"], frames["cached"], res.flops_takeaway()), width="stretch")
    with tabs[2]:
        show_chart(figs.wall_time_per_step(frames["naive"], frames["cached"], res.wall_time_takeaway()),
                   width="stretch")
        st.caption(wall_time_caption(res.cached))
    with tabs[3]:
        show_chart(figs.flops_by_part(frames["naive"], frames["cached"], parts_takeaway(res.naive, res.cached)),
                   width="stretch")
        st.caption("Per step at length N, naive attention costs O(N²·D) and every other part O(N·D²); cached "
                   "attention (one query against N keys) costs O(N·D) and every other part O(D²).")
    with tabs[4]:
        rows = min(GRID_STEPS, n_new)
        labels = [repr(chr(t))[1:-1] if 32 <= t < 127 else "·" for t in (prompt_ids + cached_ids)[: len(prompt_ids) + rows - 1]]
        grids = {mo: computed_grid(len(prompt_ids), rows, mo) for mo in MODES}
        show_chart(figs.computed_grid(grids["naive"], grids["cached"], labels,
                                      grid_takeaway(grids["naive"], grids["cached"])), width="stretch")
        st.caption(f"Red: Q, K, V computed at that step; blue: K, V read from the cache; grey: not in the sequence "
                   f"yet. The first {rows:,} of {n_new:,} steps are shown, one row each.")
    with tabs[5]:
        profile_step(model, min(len(prompt_ids) + n_new - 1, MAX_PROFILE_CONTEXT))
    table = frames["cached"].merge(frames["naive"], on="step", how="left", suffixes=("_cached", "_naive"))
    st.download_button("Download the per-step table (CSV)", table.to_csv(index=False), "decode_cost_steps.csv",
                       "text/csv")

st.header("At real-model scale")
c = st.columns([2, 3])
c[0].selectbox("Model", list(presets), key="scale_model", format_func=lambda k: presets[k].name)
c[1].select_slider("Sequence length N", SCALE_LENGTHS, key="scale_n", format_func=lambda v: f"{v:,}")
preset = presets[st.session_state["scale_model"]]
points = scale_curve(flop_shape(preset), SCALE_LENGTHS)
at = next(p for p in points if p.length == st.session_state["scale_n"])
k = st.columns(4)
k[0].metric("Naive step at N", human_flops(at.naive_step))
k[1].metric("Cached step at N", human_flops(at.cached_step), f"{at.naive_step / at.cached_step:,.0f}× fewer",
            delta_color="off", delta_arrow="off")
k[2].metric("Naive, N tokens in all", human_flops(at.naive_total))
k[3].metric("Cached, N tokens in all", human_flops(at.cached_total), f"{at.naive_total / at.cached_total:,.0f}× fewer",
            delta_color="off", delta_arrow="off")
g = st.columns(2)
for col, total in ((g[0], False), (g[1], True)):
    show_chart_in(col, figs.scale_figure(points, total, scale_takeaway(points, at.length, total, preset.name)),
                  width="stretch")
st.caption("Per step: naive O(N·D² + N²·D) vs cached O(D² + N·D). Whole answer: naive O(N²·D² + N³·D) vs cached "
           "O(N·D² + N²·D). Matmul FLOPs only; a mixture-of-experts MLP counts the experts each token uses. MLA models "
           "are left out here: their latent K/V changes the attention formula.")

st.header("The seeds' numbers, recomputed")
render_claims(seed_claims(PRESETS["mha"]), "decode_cost")
url.sync()
