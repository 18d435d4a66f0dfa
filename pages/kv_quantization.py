"""KV quantization: KIVI-style K per channel, V per token, a full-precision residual window — what it
saves in bytes and what it costs in quality, position by position, on the real tiny model."""

import streamlit as st

from app.claims import render_claims
from app.controls import kv_quantization as ctl
from app.figures import quant as figs
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.resources import model_or_stop, model_rates
from app.runs import kv_quantization as runs
from app.text import plain
from app.work import queued
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model import quant_bytes as qb
from sim.model import quant_channels as qc
from sim.model import quant_errors as qe
from sim.model import quant_generation as qg
from sim.model import quant_readouts as qr
from sim.model import quant_setup as qs
from sim.model.quant import INT_BITS
from sim.model.quant_claims import seed_claims

st.title("KV quantization")
st.markdown(
    "A quantized cache stores each key and value in a few bits plus a **scale** (and a **zero point**) per "
    "group of values. It is done **live, at every token, with no calibration** — and an error stored for token 3 "
    "is read again by every later token. Keys have **outlier channels** (a few channels large whatever the "
    "token), so KIVI groups **K per channel** and **V per token**; a channel's scale needs a group of tokens, so "
    "the newest tokens wait in **full precision** (the residual window) until a chunk fills. Below, every scheme "
    "runs inside the real tiny model's cache on held-out text and is compared with full precision."
)

presets = qb.scale_presets(load_presets())
gpus = load_gpus()
url = ctl.register(presets, gpus)
setup = ctl.setup_panel()
variant, bits, R, S = setup.variant, setup.bits, setup.residual, setup.eval.window_len
model = model_or_stop(variant)
try:
    schemes = setup.schemes()
    setup.eval.check(model.cfg.max_seq_len)
except ValueError as exc:
    st.error(plain(exc))
    url.sync()
    st.stop()
measured = runs.Measured(setup, setup.eval_seconds(model_rates(variant, "eager")))
if not measured.run(setup.chosen_jobs, f"Comparing every INT{bits} scheme and FP8 with full precision", "chosen"):
    st.caption("Everything below is measured by this run. Fewer or shorter held-out windows start at once.")
    url.sync()
    st.stop()
chosen = setup.chosen(measured.results)
kivi, naive = chosen["kivi"], chosen["token"]

st.header(f"INT{bits}: what it saves and what it costs")
show_metrics(qe.headline_metrics(kivi, naive, model.cfg, R), 4)
st.markdown(qe.perplexity_sentence(kivi, naive))
st.caption(setup.standard_error_caption(kivi))

st.subheader("Error by token position")
metric, width, log = ctl.position_controls()
show_chart(figs.error_by_position(qe.binned_frame(chosen, width), metric, log, list(qs.POSITION_KINDS),
                                  qr.position_takeaway(kivi, naive, metric)), width="stretch")
st.caption(qe.position_caption(kivi, naive, setup.eval.num_windows, R))

st.subheader("Bits × scheme")
if ctl.every_scheme():
    measured.run(setup.grid_jobs(True, INT_BITS), "Measuring every scheme at the other bit widths", "all")
else:
    measured.run(setup.grid_jobs(False, INT_BITS), "Measuring KIVI and naive at 8, 4, 3, 2 bits", "bits")
table = qe.results_frame(list(measured.results.values()), qb.fp16_bytes_per_token(model.cfg))
grid = qe.metric_grid(measured.results, metric, qs.ALL_KINDS, INT_BITS)
show_chart(figs.bits_heatmap(grid, metric, qr.heatmap_takeaway(grid, metric)), width="stretch")
st.caption(qe.grid_caption(S))
shown = table[["format", *ctl.TABLE_COLUMNS]]
show_table(shown, hide_index=True, width="stretch", column_config=ctl.columns(ctl.TABLE_COLUMNS))
st.download_button("Download the bits × scheme table (CSV)", shown.to_csv(index=False), setup.csv_name(), "text/csv")
if not ctl.every_scheme():
    st.info(setup.blank_cells_note())

st.header("Bytes: codes, scales, zero points and the residual window")
c = st.columns([3, 2])
bytes_rows = qb.tiny_bytes_rows(model.cfg, list(schemes.values()), S)
show_chart_in(c[0], figs.bytes_by_part(bytes_rows, S, qb.bytes_takeaway(bytes_rows, S, bits)), width="stretch")
curves = qb.bytes_curves(model.cfg, schemes)
show_chart_in(c[1], figs.bytes_vs_context(curves, R, qr.context_takeaway(curves)), width="stretch")
st.latex(qb.bytes_formula(model.cfg, bits, kivi.bytes_per_token, S))
st.caption(qb.tiny_bytes_caption(model.cfg, variant, bits, R))

st.subheader("At real-model scale")
arch, gpu, ctx, util = ctl.scale_controls(presets, gpus)
ctx, cut = qb.context_for(arch, ctx)
if cut is not None:
    st.info(cut)
try:
    view = qb.scale_view(arch, gpu, setup.scale_schemes(), ctx, util)
except ValueError as exc:
    st.error(plain(exc))
    view = None
if view is not None:
    show_metrics(view.metrics(bits), 3)
    show_table(view.frame(), hide_index=True, width="stretch", column_config=ctl.columns(ctl.SCALE_COLUMNS))
    st.caption(view.caption())

st.header("Free-running: where greedy text first parts from full precision")
prompt_ids, n_new, free_kind = ctl.free_controls(schemes)
got = None
if (problem := qs.prompt_problem(prompt_ids)) is not None:
    st.error(problem)
else:
    free_s = qs.free_seconds(len(prompt_ids), n_new, model_rates(variant, "sdpa"), model_rates(variant, "eager"))
    got = runs.free_and_divergence(setup, prompt_ids, n_new, free_kind, schemes, free_s)
if got is not None:
    run, div = got
    show_metrics(run.metrics(), 3)
    c = st.columns(2)
    c[0].markdown("**Full-precision cache**")
    c[0].code(run.marked_text(run.ref_ids), language=None, wrap_lines=True)
    c[1].markdown(qg.text_heading(schemes[free_kind]))
    c[1].code(run.marked_text(run.quant_ids), language=None, wrap_lines=True)
    st.caption(f"Greedy decoding, one prefill call for the prompt and then one token per step through the cache. "
               f"{qg.MARK} marks where the texts part. Every scheme at this setting (one teacher-forced pass over the "
               "full-precision text finds the same position):")
    show_table(qg.divergence_frame(list(schemes.values()), div), hide_index=True, width="stretch")

st.header("Keys vs values, channel by channel")
stats = queued(lambda: runs.stats_for(variant, S), "Reading K and V channel by channel")
layer, head = ctl.channel_controls(model.cfg.n_kv_heads)
k_abs, v_abs = stats.k_abs[layer, head], stats.v_abs[layer, head]
show_chart(figs.channel_heatmaps(k_abs, v_abs, layer, head, qr.heatmaps_takeaway(k_abs, v_abs, layer, head)),
           width="stretch")
c = st.columns([3, 2])
k_mean, v_mean = stats.channel_mean("k")[layer, head], stats.channel_mean("v")[layer, head]
show_chart_in(c[0], figs.channel_bars(k_mean, v_mean, qr.bars_takeaway(k_mean, v_mean)), width="stretch")
show_table(where=c[1], df=stats.ratios_frame(), hide_index=True, width="stretch", height=340,
               column_config=ctl.columns(ctl.RATIO_COLUMNS))
st.markdown(stats.outlier_sentence())
st.caption(qc.channels_caption(S))

st.subheader("A synthetic outlier channel, injected")
ch, factor = ctl.outlier_controls()
try:
    T_demo = setup.outlier_tokens()
except ValueError as exc:
    st.error(str(exc))
else:
    cases = queued(lambda: runs.demo_for(variant, S, T_demo, layer, head, bits, setup.chunk, setup.channel_group, ch,
                                         factor), "Injecting the outlier")
    show_chart(figs.outlier_errors(qc.outlier_frame(cases), qr.outlier_takeaway(cases, ch, factor, bits)),
               width="stretch")
    st.caption(qc.outlier_caption(cases, layer, head, ch, factor, bits, setup.chunk, setup.channel_group))

st.header("Seed 001's claims, checked")
check = seed_claims(table, bits, presets.get("llama-3.1-8b"), gpus.get("h100-sxm"), residual=R, num_tokens=S)
render_claims(check.claims, "kv_quantization")
if check.unmeasured:
    st.info(check.unmeasured_sentence())
if check.untestable:
    st.info(check.untestable_sentence())
st.caption("Quantization blurs every token a little; eviction and sliding windows drop tokens outright. The "
           "byte counts behind the seed's 128 KiB-per-token example are checked on the KV memory page.")
url.sync()
