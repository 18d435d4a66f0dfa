"""The Serving page's engine tabs (chunked prefill, preemption, step-through, offload tiers, prefill/decode
split, cache-aware routing, your own trace): each renders its controls' setup, its run and what the run says.
The page (pages/serving.py) keeps its header, the batching tab and which tab is open."""

import streamlit as st

from app.controls import serving_engine as eng
from app.figures import serving_engine as efigs
from app.i18n import lang, t
from app.present import number_formats, show_chart, show_table
from app.runs import serving_engine as eruns
from app.text import plain
from sim.words import engine_readouts as er
from sim.words import say, text, why
from sim.words import serving as serving_words
from sim.words.engine_readouts import step_takeaway

TEXT_COLUMNS = ("policy", "budget", "preemption", "router", "tiers", "pool")  # cells worded by the simulators


def column_name(name: str, lang: str = "en") -> str:
    """A table column as the screen shows it: 'ttft_p50_s' -> 'TTFT p50 (s)', 'hit_rate_pct' -> 'hit rate (%)'
    (the CSV keeps the raw name)."""
    return serving_words.column_name(lang, name)


def readable(frame, lang: str = "en", cell_msgs: dict | None = None):
    """The frame with its worded cells in `lang` ('static' -> '정적 배치'); a column the result gives as messages
    (`cell_msgs`, column -> one message per row) is worded from those; numbers and column names as they are."""
    shown = frame.copy()
    for col in TEXT_COLUMNS:
        if col in shown.columns:
            values = (cell_msgs or {}).get(col, shown[col])
            shown[col] = [serving_words.cell(lang, v) for v in values]
    return shown


def show_readable(frame, lang: str = "en", cell_msgs: dict | None = None) -> None:
    """A results table on screen with readable headers with units in `lang` ('ttft_p50_s' -> 'TTFT p50 (s)') and
    its worded cells translated; the data (and a CSV of it) keeps the raw column names."""
    shown = readable(frame, lang, cell_msgs)
    formats = number_formats(shown)
    labels = {c: {**formats.get(c, st.column_config.Column()), "label": column_name(c, lang)} for c in shown.columns}
    show_table(shown, hide_index=True, width="stretch", column_config=labels)


def show_study(make_setup, run, figure, sentences, lang: str = "en"):
    """An engine tab's common body: the setup from the URL values, its run (None while it waits for its button),
    the chart titled by the run's takeaway, the run's sentences, its table. Returns (setup, run) or None."""
    try:
        setup = make_setup()
        result = run(setup)
    except ValueError as exc:
        st.error(t("serving.cannot_simulate", why=plain(why(exc, lang))))
        return None
    if result is None:
        return None
    frame, cells = result.to_frame(), getattr(result, "cell_msgs", None)
    show_chart(figure(frame, er.study_takeaway(result, lang), lang, cells=cells), width="stretch")
    for line in sentences(result):
        st.markdown(line)
    show_readable(frame.round(3), lang, cells)
    return setup, result


def _study_tab(intro: str, setup, run, figure, sentences, caption) -> None:
    """A tab that is one study: its intro, the study's chart, sentences and table, then a caption built from
    the setup and result (`caption(setup, result)`, `sentences(result, lang)`)."""
    L = lang()
    st.markdown(t(intro))
    shown = show_study(setup, run, figure, lambda r: sentences(r, L), L)
    if shown is not None:
        st.caption(caption(*shown))


def render_chunked() -> None:
    _study_tab("serving.t.chunked_intro", eng.chunk_setup, eruns.chunk_sweep, efigs.chunk_budget,
               lambda r, L: [er.chunk_sweep_summary(r, L)],
               lambda _, sweep: t("serving.t.chunked_caption", slots=f"{sweep.capacity_tokens:,}",
                               budget=f"{sweep.unchunked_budget:,}"))


def render_preemption() -> None:
    _study_tab("serving.t.preemption_intro", eng.preemption_setup, eruns.preemption, efigs.preemption,
               lambda r, L: [], lambda _, cmp: t("serving.t.preemption_caption", kib=f"{cmp.kv_bytes_per_token / 1024:,.0f}"))


def render_steps() -> None:
    L = lang()
    st.markdown(t("serving.t.steps_intro"))
    try:
        choice = eng.step_choice()
        run = eruns.scenario(choice.scenario, choice.config)
    except ValueError as exc:
        st.error(t("serving.t.steps_cannot", why=plain(why(exc, L))))
        return
    st.caption(choice.about)
    k = eng.step_slider(len(run.steps))
    view = run.steps[k]
    cfg = choice.config
    none = "—"
    m = st.columns(4)
    m[0].metric(t("serving.t.waiting"), ", ".join(f"r{r}" for r in view.waiting) or none)
    m[1].metric(t("serving.t.running"), ", ".join(f"r{r}" for r in view.running) or none)
    m[2].metric(t("serving.t.swapped"), ", ".join(f"r{r}" for r in view.swapped) or none)
    m[3].metric(t("serving.t.free"), t("serving.t.free_of", n=f"{len(view.free_queue)}", total=f"{cfg.num_gpu_blocks}"))
    show_chart(efigs.block_grid(cfg.num_gpu_blocks, cfg.block_size, view.block_tables, view.ref_cnt, view.free_queue,
                                view_takeaway(view, cfg.num_gpu_blocks, L), cached=view.cached_blocks, lang=L), width="stretch")
    if cfg.num_cpu_blocks:
        tables = "; ".join(f"r{r}: {list(tb)}" for r, tb in view.cpu_block_tables.items()) or t("serving.t.none_in_use")
        st.caption(t("serving.t.host_blocks", tables=tables, free=f"{view.num_cpu_free}", total=f"{cfg.num_cpu_blocks}"))
    c = st.columns(2)
    with c[0]:
        st.markdown(t("serving.t.step_rows", step=f"{view.step}", start=f"{view.start_s:g}", end=f"{view.end_s:g}"))
        show_table(rows_frame(view, L), hide_index=True, width="stretch")
        st.markdown(t("serving.t.block_tables"))
        show_table(tables_frame(view, cfg.block_size, L), hide_index=True, width="stretch")
    with c[1]:
        st.markdown(t("serving.t.events"))
        st.text("\n".join(serving_words.event_line(L, e) for e in view.events) or t("serving.t.no_events"))
        st.markdown(t("serving.t.free_queue"))
        st.text(" ".join(map(str, view.free_queue)) or t("serving.t.empty"))


def view_takeaway(view, num_blocks: int, lang: str = "en") -> str:
    """The block grid's title: the pool and the queues after one step."""
    return step_takeaway(view.step, view.num_used_blocks(num_blocks), num_blocks, len(view.running),
                         len(view.waiting), len(view.swapped), len(view.finished), lang)


def rows_frame(view, lang: str = "en"):
    """What each row of a step's pass computed (its headers and what it did in `lang`)."""
    import pandas as pd

    h = [text(lang, f"serving.step.col.{c}") for c in ("request", "did", "tokens")]
    return pd.DataFrame({h[0]: [f"r{r}" for r, _, _ in view.rows], h[1]: [say(lang, k) for _, k, _ in view.rows],
                         h[2]: [n for _, _, n in view.rows]})


def tables_frame(view, block_size: int, lang: str = "en"):
    """One row per running request: its block table, tokens held and the slots its last block leaves empty
    (headers in `lang`)."""
    import pandas as pd

    cols = [text(lang, f"serving.step.col.{c}") for c in ("request", "table", "tokens", "empty", "shared")]
    rows = []
    for req, table in sorted(view.block_tables.items()):
        n = view.num_tokens[req]
        rows.append(dict(zip(cols, (f"r{req}", " ".join(map(str, table)), n, len(table) * block_size - n,
                                    sum(1 for b in table if view.ref_cnt[b] > 1)), strict=True)))
    return pd.DataFrame(rows, columns=cols)


def render_offload() -> None:
    _study_tab("serving.t.offload_intro", eng.offload_setup, eruns.offload, efigs.offload, lambda r, L: er.offload_verdicts(r, L),
               lambda _, study: t("serving.t.offload_caption", slots=f"{study.capacity_tokens:,}",
                               kib=f"{study.kv_bytes_per_token / 1024:,.0f}"))


def render_disagg() -> None:
    _study_tab("serving.t.disagg_intro", eng.disagg_setup, eruns.disagg, efigs.disagg, lambda r, L: [er.disagg_study_verdict(r, L)],
               lambda _, study: t("serving.t.disagg_caption", gb=f"{study.transfer_gb:,.1f}",
                               ms=f"{study.transfer_p50_ms:,.2f}", slots=f"{study.capacity_tokens:,}"))


def render_routing() -> None:
    _study_tab("serving.t.routing_intro", eng.routing_setup, eruns.routing, efigs.routing, lambda r, L: [],
               lambda setup, study: t("serving.t.routing_caption", slots=f"{study.capacity_tokens:,}",
                                      prompt=f"{setup.workload.prompt_len:,}", prefix=f"{setup.workload.prefix_len:,}",
                                      groups=f"{setup.workload.num_groups:,}"))


def render_trace() -> None:
    L = lang()
    st.markdown(t("serving.t.trace_intro"))
    try:
        data, source = eng.trace_input()
    except ValueError as exc:
        st.error(t("serving.t.trace_cannot", why=plain(why(exc, L))))
        return
    if data is None:
        st.info(t("serving.t.trace_none"))
        return
    try:
        tf = eruns.read_trace(data)
    except ValueError as exc:
        st.error(t("serving.t.trace_cannot_use", source=source, why=plain(why(exc, L))))
        return
    try:
        dep, max_num_seqs, budget = eng.trace_settings()
        res = eruns.trace_run(data, dep, max_num_seqs, budget)
    except ValueError as exc:
        st.error(t("serving.t.trace_cannot_serve", why=plain(why(exc, L))))
        return
    if res is None:
        return
    st.markdown(er.trace_run_summary(res, L))
    frame = res.to_frame()
    show_readable(frame.round(4), L, res.cell_msgs)
    hits = res.prefix.to_frame()
    hits["request"] = [r.label for r in tf.requests]
    show_chart(efigs.trace_hits(hits, er.trace_run_hits_takeaway(res, L), L), width="stretch")
    st.caption(t("serving.t.trace_caption", model=dep.arch.name, slots=f"{res.capacity_tokens:,}"))
    st.download_button(t("serving.download"), frame.to_csv(index=False).encode(), file_name="trace_serving.csv",
                       mime="text/csv")
