"""KV quantization: KIVI-style K per channel, V per token, a full-precision residual window — what it
saves in bytes and what it costs in quality, position by position, on the real tiny model. The page opens on that
error by position; the settings and the other sections (bits × scheme, bytes, free-running, channels, the real
model's K and V, the seed's claims) are folded under their headings."""

import streamlit as st

from app.claims import render_claims
from app.controls import kv_quantization as ctl
from app.figures import quant as figs
from app.i18n import lang, page_title, t
from app.metrics import show_metrics
from app.model_picker import picker, real_unavailable, run_real_probe
from app.present import show_chart, show_chart_in, show_table
from app.resources import model_or_stop, model_rates
from app.runs import kv_quantization as runs
from app.text import plain
from app.work import queued
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.model import quant_bytes as qb
from sim.model import quant_channels as qc
from sim.model import quant_generation as qg
from sim.model import quant_setup as qs
from sim.model.quant import INT_BITS
from sim.model.real_probe import kv_channels
from sim.model.real_source import MODEL_KEY
from sim.words import quant as qr
from sim.words import say, why
from sim.words.quant_claims import seed_claims

REAL_TOKENS = 256  # held-out tokens the real model's K and V are measured over



def real_kv_section() -> None:
    """K and V per channel, and KIVI's per-channel K against per-token K, on the real model when it is picked."""
    if picker(key="lm") != MODEL_KEY:
        st.caption(t("real.picker.caption"))
    elif why := real_unavailable():
        st.info(why, icon=":material/download:")
    elif (kv := run_real_probe("quant.real_kv", REAL_TOKENS, kv_channels, button=t("real.kv.run"),
                               what=t("real.kv.what", n=f"{REAL_TOKENS}"))) is not None:
        show_chart(figs.real_channel_heatmaps(kv.k_mean, kv.v_mean, L), key="quant_real_kv")
        st.markdown(qr.real_kv_sentence(kv, L))
        for line in qr.real_kivi_lines(kv, L):
            st.markdown("- " + line)


st.title(page_title("kv_quantization"))
st.markdown(t("density2.quant.lead"))
with st.expander(t("density2.quant.more")):
    st.markdown(t("quant.intro"))
L = lang()  # the sentences and figures below are worded in the page language

presets = qb.scale_presets(load_presets())
gpus = load_gpus()
url = ctl.register()
# The page opens on its finding (the error KIVI and naive per-token add, position by position, at the chosen bits),
# its chart first with the controls that move it under it; the settings and every other section one click away.
finding = st.container()
ss = st.session_state
with st.expander(t("density2.quant.settings", bits=int(ss["bits"]), G=int(ss["G"]), g=int(ss["g"]), R=int(ss["R"]),
                   win=int(ss["win"]), len=int(ss["len"])), icon=":material/tune:"):
    setup = ctl.setup_panel()
variant, bits, R, S = setup.variant, setup.bits, setup.residual, setup.eval.window_len
model = model_or_stop(variant)
if (problem := setup.setting_problem()) is not None:
    finding.error(plain(say(L, problem)))
    url.sync()
    st.stop()
try:
    schemes = setup.schemes()
    setup.eval.check(model.cfg.max_seq_len)
except ValueError as exc:
    finding.error(plain(why(exc, L)))
    url.sync()
    st.stop()
measured = runs.Measured(setup, setup.eval_seconds(model_rates(variant, "eager")))
with finding:
    if not measured.run(setup.chosen_jobs, t("quant.job.chosen", bits=f"{bits}"), "chosen"):
        st.caption(t("quant.wait_caption"))
        url.sync()
        st.stop()
chosen = setup.chosen(measured.results)
kivi, naive = chosen["kivi"], chosen["token"]

with finding:
    st.subheader(t("quant.h.saves", bits=f"{bits}"))
    chart_box = st.container()  # the chart above the controls that move it
    metric, width, log = ctl.position_controls()
    show_chart_in(chart_box, figs.error_by_position(qr.binned_frame(chosen, width, L), metric, log,
                                                    list(qs.POSITION_KINDS), qr.position_takeaway(kivi, naive, metric, L),
                                                    L), width="stretch")
    st.caption(qr.position_caption(kivi, naive, setup.eval.num_windows, R, L, metric=metric, log=log))
    show_metrics(qr.headline_metrics(kivi, naive, model.cfg, R, L), 4)
    st.markdown(qr.perplexity_sentence(kivi, naive, L))
    st.caption(qr.standard_error_caption(setup, kivi, L))

with st.expander(t("quant.h.grid")):
    if ctl.every_scheme():
        measured.run(setup.grid_jobs(True, INT_BITS), t("quant.job.all"), "all")
    else:
        measured.run(setup.grid_jobs(False, INT_BITS), t("quant.job.bits"), "bits")
    table = qr.results_frame(list(measured.results.values()), qb.fp16_bytes_per_token(model.cfg), L)
    grid = qr.metric_grid(measured.results, metric, qs.ALL_KINDS, INT_BITS, L)
    show_chart(figs.bits_heatmap(grid, metric, qr.heatmap_takeaway(grid, metric, L), L), width="stretch")
    st.caption(qr.grid_caption(S, L))
    shown = table[["format", *ctl.TABLE_COLUMNS]]
    show_table(shown, hide_index=True, width="stretch",
               column_config=ctl.columns({**ctl.FORMAT_COLUMN, **ctl.TABLE_COLUMNS}))
    st.download_button(t("quant.download"), shown.to_csv(index=False), setup.csv_name(), "text/csv")
    if not ctl.every_scheme():
        st.info(qr.blank_cells_note(setup, L))

    st.subheader(t("fp8.h.scale"))
    if (fp8 := runs.fp8_scales(setup, measured.run_s)) is not None:
        st.markdown(say(L, fp8.sentence()))
        show_table(ctl.fp8_scale_frame(fp8.frame_rows(), L), hide_index=True, width="stretch",
                   column_config=ctl.columns_in("fp8.col", ctl.FP8_SCALE_COLUMNS))
        st.caption(t("fp8.scale.caption"))

with st.expander(t("quant.h.bytes")):
    c = st.columns([3, 2])
    bytes_rows = qr.named_bytes_rows(qb.tiny_bytes_rows(model.cfg, list(schemes.values()), S), list(schemes.values()), L)
    show_chart_in(c[0], figs.bytes_by_part(bytes_rows, S, qr.bytes_takeaway(bytes_rows, S, bits, lang=L), L),
                  width="stretch")
    curves = qr.bytes_curves(model.cfg, schemes, L)
    show_chart_in(c[1], figs.bytes_vs_context(curves, R, qr.context_takeaway(curves, lang=L), L), width="stretch")
    st.latex(qr.bytes_formula(model.cfg, bits, kivi.bytes_per_token, S, L))
    st.caption(qr.tiny_bytes_caption(model.cfg, variant, bits, R, L))

    st.subheader(t("quant.h.scale"))
    arch, gpu, ctx, util = ctl.scale_controls()
    ctx, cut = qb.context_for(arch, ctx)
    if cut is not None:
        st.info(say(L, cut))
    try:
        view = qb.scale_view(arch, gpu=gpu, schemes=setup.scale_schemes(), context=ctx, utilization=util)
    except ValueError as exc:
        st.error(plain(why(exc, L)))
        view = None
    if view is not None:
        show_metrics(qr.scale_metrics(view, bits, L), 3)
        show_table(qr.scale_frame(view, L), hide_index=True, width="stretch", column_config=ctl.columns(ctl.SCALE_COLUMNS))
        st.caption(qr.scale_caption(view, L))

with st.expander(t("quant.h.free")):
    prompt_ids, n_new, free_kind = ctl.free_controls(schemes, L)
    got = None
    if (problem := qs.prompt_problem(prompt_ids)) is not None:
        st.error(say(L, problem))
    else:
        free_s = qs.free_seconds(len(prompt_ids), num_new=n_new, sdpa=model_rates(variant, "sdpa"), eager=model_rates(variant, "eager"))
        got = runs.free_and_divergence(setup, prompt_ids, n_new, free_kind, schemes, free_s)
    if got is not None:
        run, div = got
        show_metrics(qr.free_run_metrics(run, L), 3)
        c = st.columns(2)
        c[0].markdown(t("quant.full_text"))
        c[0].code(run.marked_text(run.ref_ids), language=None, wrap_lines=True)
        c[1].markdown(qr.text_heading(schemes[free_kind], L))
        c[1].code(run.marked_text(run.quant_ids), language=None, wrap_lines=True)
        st.caption(t("quant.free_caption", mark=qg.MARK))
        show_table(qr.divergence_frame(list(schemes.values()), div, L), hide_index=True, width="stretch")

with st.expander(t("quant.h.channels")):
    stats = queued(lambda: runs.stats_for(variant, S), t("quant.job.channels"))
    layer, head = ctl.channel_controls(model.cfg.n_kv_heads)
    k_abs, v_abs = stats.k_abs[layer, head], stats.v_abs[layer, head]
    show_chart(figs.channel_heatmaps(k_abs, v_abs, layer, head, qr.heatmaps_takeaway(k_abs, v_abs, layer, head, L), L),
               width="stretch")
    c = st.columns([3, 2])
    k_mean, v_mean = stats.channel_mean("k")[layer, head], stats.channel_mean("v")[layer, head]
    show_chart_in(c[0], figs.channel_bars(k_mean, v_mean, qr.bars_takeaway(k_mean, v_mean, L), L), width="stretch")
    show_table(where=c[1], df=stats.ratios_frame(), hide_index=True, width="stretch", height=340,
               column_config=ctl.columns(ctl.RATIO_COLUMNS))
    st.markdown(qr.outlier_sentence(stats, L))
    st.caption(qr.channels_caption(S, L))

    st.subheader(t("quant.h.outlier"))
    ch, factor = ctl.outlier_controls()
    try:
        T_demo = setup.outlier_tokens()
    except ValueError as exc:
        st.error(why(exc, L))
    else:
        cases = queued(lambda: runs.demo_for(variant, S, T_demo, layer, head, bits, setup.chunk, setup.channel_group, ch,
                                             factor), t("quant.job.outlier"))
        show_chart(figs.outlier_errors(qc.outlier_frame(cases), qr.outlier_takeaway(cases, ch, factor, bits, L), L),
                   width="stretch")
        st.caption(qr.outlier_caption(cases, layer, head, ch, factor, bits, setup.chunk, setup.channel_group, L))

with st.expander(t("real.kv.h")):
    real_kv_section()

with st.expander(t("quant.h.claims")):
    check = seed_claims(table, bits, presets.get("llama-3.1-8b"), gpus.get("h100-sxm"), residual=R, num_tokens=S,
                        lang=L)
    render_claims(check.claims, "kv_quantization")
    if check.unmeasured:
        st.info(check.unmeasured_sentence())
    if check.untestable:
        st.info(check.untestable_sentence())
    st.caption(t("quant.claims_caption"))
url.sync()
