import time

import streamlit as st

from app.claims import render_claims
from app.controls import decode_cost as controls
from app.controls.decode_cost import (
    CONTEXT,
    MAX_PROMPT_BYTES,
    SCALE_LENGTHS,
    fall_back_from_graph,
    graph_unavailable_here,
    step_label,
)
from app.figures import decode as figs
from app.i18n import lang, page_title, t
from app.model_picker import picker, token_labels
from app.present import show_chart, show_chart_in
from app.resources import model_or_stop as load_model
from app.resources import model_rates, real_model_or_none
from app.runs.decode_profile import profile_step
from app.text import plain
from app.work import run_job
from sim.cost.decode import computed_grid, flop_shape, human_flops, scale_curve
from sim.cost.opcount import generation_flops
from sim.model.generate import MODES, SamplingConfig, decode, encode, run_comparison
from sim.model.real_pages import fixed_shape, model_named
from sim.model.real_source import MODEL_KEY
from sim.model.step_profile import MAX_PROFILE_CONTEXT
from sim.model.transformer import PRESETS
from sim.words import say, text, why
from sim.words.decode import (
    flops_takeaway,
    formula_agreement,
    grid_takeaway,
    measured_caption,
    mode_label,
    parts_takeaway,
    per_step_takeaway,
    scale_takeaway,
    speedup_caption,
    step_caption,
    wall_time_caption,
    wall_time_takeaway,
)
from sim.words.decode_claims import seed_claims
from sim.work.decode_plan import CompareEstimate, ShownRun, capped_new_tokens, flop_ratio, formula_per_step
from sim.work.run_cost import smollm2_rates

GRID_STEPS = 24  # rows of the "what gets computed" grid that stay legible on a projector

st.title(page_title("decode_cost"))
L = lang()  # the sentences and figures below are worded in the page language
result_tabs = controls.result_tabs()
url = controls.register(result_tabs)  # a bad link's values named first, right under the title
st.markdown(t("density2.decode.lead"))
with st.expander(t("density2.decode.more")):
    intro = st.empty()  # worded once the picked model is known: its name and shape from its own config
graph_reason = graph_unavailable_here()
fall_back_from_graph(graph_reason)

# The page opens on its finding (the same tokens, cached and naive, and the FLOPs each step costs: the open tab's
# chart); the model, prompt and sampling that move it are folded right under it, the scale and the claims below.
finding = st.container()
ss = st.session_state
with st.expander(t("density2.decode.settings", n=int(ss["n"]), attn=ss["attn"], budget=float(ss["budget"])),
                 icon=":material/tune:"):
    real = real_model_or_none() if picker() == MODEL_KEY else None  # None: the tiny model (or the reason shown)
    shown_cfg = real.cfg if real else PRESETS[st.session_state["variant"]]
    intro.markdown(t("rp.decode.intro", model=plain(say(L, model_named(shown_cfg, real=real is not None)))))
    go = controls.draw_run_form(graph_reason, fixed=plain(say(L, fixed_shape(real.cfg))) if real else None)

prompt_ids = real.encode(st.session_state["prompt"]) if real else encode(st.session_state["prompt"])
n_new = st.session_state["n"]
error = None
if not prompt_ids:
    error = t("decode.empty")
elif len(prompt_ids) > MAX_PROMPT_BYTES:
    error = t("decode.too_long", n=f"{len(prompt_ids)}", max=f"{MAX_PROMPT_BYTES}")
elif (cap := capped_new_tokens(len(prompt_ids), n_new, CONTEXT)) is not None:
    finding.warning(t("decode.capped", prompt=f"{len(prompt_ids)}", n=f"{n_new}", context=f"{CONTEXT}", cap=f"{cap}"))
    n_new = cap

if error:
    finding.error(error)
else:
    sampling = SamplingConfig(st.session_state["temp"], st.session_state["top_k"], st.session_state["seed"])
    variant, attn, step = st.session_state["variant"], st.session_state["attn"], st.session_state["step"]
    budget = float(st.session_state["budget"])
    run_key = (tuple(prompt_ids), variant, n_new, sampling, attn, budget, step)
    model = real.model if real else load_model(variant)
    rates = smollm2_rates(attn) if real else model_rates(variant, attn)
    run_key = (*run_key, MODEL_KEY) if real else run_key
    plan = CompareEstimate(rates.cached_s(len(prompt_ids), n_new), rates.naive_s(len(prompt_ids), n_new), budget)
    estimate = plan.seconds

    def compare(progress):
        steps = {"cached": 0, "naive": 0}  # the two modes take turns, a step each

        def on_step(mode, i):
            steps[mode] = i
            progress(plan.done(steps["cached"], steps["naive"], n_new),
                     text(L, "decode.progress", mode=mode_label(mode, L), i=f"{i:,}", n=f"{n_new:,}"))

        return run_comparison(model, prompt_ids, n_new, sampling=sampling, attn_impl=attn, naive_budget_s=budget, on_step=on_step, step=step)

    with finding:
        try:
            res = run_job("decode_cost.compare", run_key, estimate, compare, go=go, button=t("decode.run"),
                          what=t("decode.job", n=f"{n_new:,}", attn=attn, step=step_label(step, L),
                                 budget=f"{budget:g}"))
        except ValueError as exc:
            st.error(plain(why(exc, L)))
            res = None
if not error and res is not None:
    cfg = model.cfg
    frames = {m: res.to_frame(m) for m in MODES}
    cached_ids = [r.token for r in res.cached]
    diff, k = res.first_difference, res.compared
    shown = ShownRun(len(prompt_ids), n_new, GRID_STEPS)
    formula = {mo: formula_per_step(generation_flops(cfg, len(prompt_ids), n_new, mo)) for mo in MODES}

    with finding:
        if diff is not None:
            st.error(t("decode.differ", diff=f"{diff}", pos=f"{shown.position(diff)}"))
        elif res.naive_complete:
            st.success(t("decode.same_all", k=f"{k}"), icon=":material/check_circle:")
        else:
            st.success(t("decode.same_first", k=f"{k}", budget=f"{budget:g}", n=f"{n_new}"),
                       icon=":material/check_circle:")
            st.info(t("decode.stopped", k=f"{k}", n=f"{n_new}", budget=f"{budget:g}"))
        tab, box = result_tabs.open(url)  # only the open tab runs; the link keeps it (tab=)
    with box:
        if tab == "per_step":
            chart_box = st.container()  # the chart above the switch that moves it
            controls.draw_log()
            show_chart_in(chart_box, figs.flops_per_step(frames["naive"], frames["cached"], formula["naive"],
                                                         formula["cached"], st.session_state["log"],
                                                         per_step_takeaway(res.naive, res.cached, L), L),
                          width="stretch")
            st.caption(t("decode.dots_caption", agreement=formula_agreement(
                {mo: frames[mo]["flops"].tolist() for mo in MODES}, formula, L)))
        elif tab == "cumulative":
            show_chart(figs.cumulative_flops(frames["naive"], frames["cached"], flops_takeaway(res, L), L), width="stretch")
        elif tab == "wall":
            show_chart(figs.wall_time_per_step(frames["naive"], frames["cached"], wall_time_takeaway(res, L), L),
                       width="stretch")
            st.caption(wall_time_caption(res.cached, L))
        elif tab == "parts":
            show_chart(figs.flops_by_part(frames["naive"], frames["cached"], parts_takeaway(res.naive, res.cached, L), L),
                       width="stretch")
            st.caption(t("decode.parts_caption"))
        elif tab == "grid":
            rows = shown.grid_rows
            labels = token_labels(shown.grid_token_ids(prompt_ids, cached_ids), real)
            grids = {mo: computed_grid(len(prompt_ids), rows, mo) for mo in MODES}
            show_chart(figs.computed_grid(grids["naive"], grids["cached"], labels,
                                          grid_takeaway(grids["naive"], grids["cached"], L), L), width="stretch")
            st.caption(t("decode.grid_caption", rows=f"{rows:,}", n=f"{n_new:,}"))
        elif tab == "profile":
            profile_step(model, shown.profile_context(MAX_PROFILE_CONTEXT))

    m = st.columns(4)
    m[0].metric(t("decode.m.naive_tps"), f"{res.tokens_per_s('naive'):,.1f}")
    m[1].metric(t("decode.m.cached_tps"), f"{res.tokens_per_s('cached'):,.1f}")
    m[2].metric(t("decode.m.speedup"), f"{res.speedup:,.1f}×", help=t("decode.m.speedup_help", k=f"{k}"))
    m[3].metric(t("decode.m.flop_ratio"), f"{flop_ratio(res, k):,.1f}×",
                help=t("decode.m.flop_ratio_help", a=f"{res.flops('naive', k):,}", b=f"{res.flops('cached', k):,}",
                       k=f"{k}"))
    st.caption(speedup_caption(res.naive, res.cached, L))
    if res.conditions is not None:
        st.caption(measured_caption(res.conditions, time.time(), L))
    if res.step != "eager":
        st.caption(step_caption(res.step, res.cached[-1].kv_len, L))  # the cache holds every position fed
    st.code(st.session_state["prompt"] + (real.decode(cached_ids) if real else decode(cached_ids)), language=None,
            wrap_lines=True)
    table = frames["cached"].merge(frames["naive"], on="step", how="left", suffixes=("_cached", "_naive"))
    st.download_button(t("decode.download"), table.to_csv(index=False), "decode_cost_steps.csv", "text/csv")

with st.expander(t("decode.h.scale")):
    preset, scale_n = controls.draw_scale()
    points = scale_curve(flop_shape(preset), SCALE_LENGTHS)
    at = next(p for p in points if p.length == scale_n)
    k = st.columns(4)
    k[0].metric(t("decode.m.naive_step"), human_flops(at.naive_step))
    k[1].metric(t("decode.m.cached_step"), human_flops(at.cached_step),
                t("decode.m.fewer", x=f"{at.step_ratio:,.0f}"), delta_color="off", delta_arrow="off")
    k[2].metric(t("decode.m.naive_total"), human_flops(at.naive_total))
    k[3].metric(t("decode.m.cached_total"), human_flops(at.cached_total),
                t("decode.m.fewer", x=f"{at.total_ratio:,.0f}"), delta_color="off", delta_arrow="off")
    g = st.columns(2)
    for col, total in ((g[0], False), (g[1], True)):
        show_chart_in(col, figs.scale_figure(points, total, scale_takeaway(points, at.length, total, preset.name, L), L),
                      width="stretch")
    st.caption(t("decode.scale_caption"))

with st.expander(t("decode.h.claims")):
    render_claims(seed_claims(PRESETS["mha"], L), "decode_cost")
url.sync()
