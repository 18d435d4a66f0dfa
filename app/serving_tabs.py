"""The Serving page's engine tabs (chunked prefill, preemption, step-through, offload tiers, prefill/decode
split, cache-aware routing, your own trace): each renders its controls' setup, its run and what the run says.
The page (pages/serving.py) keeps its header, the batching tab and which tab is open."""

import re

import streamlit as st

from app.controls import serving_engine as eng
from app.figures import serving_engine as efigs
from app.present import show_chart, show_table
from app.runs import serving_engine as eruns
from app.text import plain
from sim.i18n import catalog, text

PERCENTILE_COLUMN = re.compile(r"([a-z0-9]+)_p(\d+)_(s|ms)")
TEXT_COLUMNS = ("policy", "preemption", "router", "tiers", "pool", "did")  # cells worded by the simulators


def column_name(name: str, lang: str = "en") -> str:
    """A table column as the screen shows it: 'ttft_p50_s' -> 'TTFT p50 (s)', 'hit_rate_pct' -> 'hit rate (%)'
    (the CSV keeps the raw name)."""
    if f"serving.col.{name}" in catalog(lang):
        return text(lang, f"serving.col.{name}")
    m = PERCENTILE_COLUMN.fullmatch(name)
    if m and f"serving.col.m.{m[1]}" in catalog(lang):
        return text(lang, "serving.col.percentile", metric=text(lang, f"serving.col.m.{m[1]}"), q=m[2], unit=m[3])
    return name


def cell_words(value, lang: str = "en"):
    """A text cell the simulators word in English ('static', 'recompute', 'GPU + host'), in `lang`."""
    key = f"serving.cell.{str(value).replace(' ', '_').replace('+', 'plus').replace('-', '_').lower()}"
    return text(lang, key) if isinstance(value, str) and key in catalog(lang) else value


def readable(frame, lang: str = "en"):
    """The frame with readable, translated headers with units and its worded cells in `lang` (for the screen)."""
    shown = frame.copy()
    for col in TEXT_COLUMNS:
        if col in shown.columns and shown[col].dtype == object:
            shown[col] = [cell_words(v, lang) for v in shown[col]]
    return shown.rename(columns={c: column_name(c, lang) for c in shown.columns})


def show_study(make_setup, run, figure, sentences):
    """An engine tab's common body: the setup from the URL values, its run (None while it waits for its button),
    the chart titled by the run's takeaway, the run's sentences, its table. Returns (setup, run) or None."""
    try:
        setup = make_setup()
        result = run(setup)
    except ValueError as exc:
        st.error(f"These settings cannot be simulated: {plain(exc)}")
        return None
    if result is None:
        return None
    frame = result.to_frame()
    show_chart(figure(frame, result.takeaway()), width="stretch")
    for line in sentences(result):
        st.markdown(line)
    show_table(frame.round(3), hide_index=True, width="stretch")
    return setup, result


def render_chunked() -> None:
    st.markdown(
        "A long prompt prefilled in one pass stalls every request that is decoding: their next token waits for the "
        "whole prefill. **Chunked prefill** (Sarathi-Serve; vLLM's default since v1) gives each pass a **token "
        "budget**: every running request's decode token goes in first, then prompt tokens fill what is left, so a "
        "prompt is cut into chunks that ride along with the decodes. A small budget keeps the gap between tokens "
        "short but spreads each prompt over more passes (each reads every weight once), so time to first token "
        "grows; a large one is whole-prompt prefill again. Below, the same Poisson arrivals at six budgets, and "
        "whole prompts (continuous batching) last.")
    shown = show_study(eng.chunk_setup, eruns.chunk_sweep, efigs.chunk_budget, lambda r: [r.summary()])
    if shown is None:
        return
    _, sweep = shown
    st.caption(f"KV budget: {sweep.capacity_tokens:,} token slots. Each pass is timed by the roofline: prompt chunks "
               "and decodes of one pass share one read of the weights. The unchunked row admits whole prompts, at "
               f"most {sweep.unchunked_budget:,} prompt tokens a pass.")


def render_preemption() -> None:
    st.markdown(
        "When the block pool runs dry, the scheduler **preempts** its newest running request. **Recompute** "
        "(vLLM's only mode since v1) frees its blocks and later prefills its prompt and every token it had "
        "produced again: FLOPs. **Swap** (vLLM v0) copies its blocks to host memory over the GPU's link and back "
        "before any new request is admitted: bytes over PCIe, and host memory. The same requests, all queued at "
        "once, on a deliberately small KV budget.")
    shown = show_study(eng.preemption_setup, eruns.preemption, efigs.preemption, lambda r: [])
    if shown is None:
        return
    _, cmp = shown
    st.caption(f"{cmp.kv_bytes_per_token / 1024:,.0f} KiB of KV per token. Recompute's cost is the step cost's FLOPs "
               "of prefilling the discarded tokens again; swap's is blocks × block size × bytes per token each way, "
               "added to the pass that moves them (not overlapped). A request still prefilling, or one the host has "
               "no room for, is recomputed even in swap mode.")


def render_steps() -> None:
    st.markdown(
        "One scheduler step at a time on a handful of requests (each pass counts one second): the queues, what each "
        "running request computed, every block table and the free queue, after the step. Blocks are handed out "
        "from the free queue's head and a finished request's go back to its tail, last block first (vLLM's "
        "order), so the ids below are the ones a real block pool would use.")
    try:
        choice = eng.step_choice()
        run = eruns.scenario(choice.scenario, choice.config)
    except ValueError as exc:
        st.error(f"This scenario cannot run with these settings: {plain(exc)}")
        return
    st.caption(choice.about)
    k = eng.step_slider(len(run.steps))
    view = run.steps[k]
    cfg = choice.config
    m = st.columns(4)
    m[0].metric("Waiting", ", ".join(f"r{r}" for r in view.waiting) or "—")
    m[1].metric("Running", ", ".join(f"r{r}" for r in view.running) or "—")
    m[2].metric("Swapped to host", ", ".join(f"r{r}" for r in view.swapped) or "—")
    m[3].metric("Free GPU blocks", f"{len(view.free_queue)} of {cfg.num_blocks}")
    show_chart(efigs.block_grid(cfg.num_blocks, cfg.block_size, view.block_tables, view.ref_cnt, view.free_queue,
                                view.takeaway(cfg.num_blocks), cached=view.cached_blocks), width="stretch")
    if cfg.num_cpu_blocks:
        st.caption("Host blocks: " + ("; ".join(f"r{r}: {list(t)}" for r, t in view.cpu_block_tables.items())
                                      or "none in use") + f" ({view.num_cpu_free} of {cfg.num_cpu_blocks} free).")
    c = st.columns(2)
    with c[0]:
        st.markdown(f"**Step {view.step}** ({view.start_s:g} s → {view.end_s:g} s): what each row computed")
        show_table(view.rows_frame(), hide_index=True, width="stretch")
        st.markdown("**Block tables** (logical block → physical block)")
        show_table(view.tables_frame(cfg.block_size), hide_index=True, width="stretch")
    with c[1]:
        st.markdown("**What happened to blocks**")
        st.text("\n".join(view.events) or "nothing: every row fitted its blocks")
        st.markdown("**Free queue** (head first)")
        st.text(" ".join(map(str, view.free_queue)) or "empty")


def render_offload() -> None:
    st.markdown(
        "A prefix block the GPU's cache evicts need not be lost: engines with **offload tiers** (LMCache, vLLM's "
        "offloading connector) keep it in host memory, then on disk, each tier an LRU of bounded size. A later "
        "prompt that starts with it **loads** it back into a fresh GPU block over that tier's link instead of "
        "prefilling it again. Loading costs bytes over PCIe, NVLink-C2C or an NVMe drive; recomputing costs "
        "FLOPs. Below, one shared-prefix workload (Zipf-popular prefixes, more of them than the GPU holds) with the "
        "GPU's cache alone, then with a host tier, then with host and disk.")
    shown = show_study(eng.offload_setup, eruns.offload, efigs.offload, lambda r: r.verdicts())
    if shown is None:
        return
    _, study = shown
    st.caption(f"GPU: {study.capacity_tokens:,} KV slots; {study.kv_bytes_per_token / 1024:,.0f} KiB of KV per token. "
               "A load is on the critical path: its seconds are added to the pass that admits the request. Copies "
               "down (written_down_gb) are asynchronous, as in LMCache and vLLM's connector, and cost the passes "
               "nothing. *_recompute_s: what prefilling the loaded tokens on this GPU would have cost instead (their "
               "FLOPs at the GPU's peak).")


def render_disagg() -> None:
    st.markdown(
        "**Disaggregated serving** (DistServe, Splitwise; vLLM's disaggregated prefilling, llm-d) runs prompts on "
        "prefill GPUs and decoding on other GPUs, moving each request's KV between them once. Decode passes then "
        "carry no prompt work, so the gap between tokens stays short; but the prefill pool is smaller than the "
        "whole, and every prompt's KV crosses a link. Below, the same Poisson arrivals on N prefill + M decode "
        "GPUs and on N + M colocated GPUs (chunked prefill), each GPU with the same KV budget.")
    shown = show_study(eng.disagg_setup, eruns.disagg, efigs.disagg, lambda r: [r.verdict()])
    if shown is None:
        return
    _, study = shown
    st.caption(f"Moved {study.transfer_gb:,.1f} GB of KV prefill → decode (the memory formula's bytes for each "
               f"prompt), a median {study.transfer_p50_ms:,.2f} ms per request, one transfer at a time per prefill "
               f"GPU. Each GPU holds {study.capacity_tokens:,} KV slots. TPOT: (last − first token) ÷ (output − 1); "
               "goodput: requests meeting both SLOs per second. Requests go to GPUs round-robin.")


def render_routing() -> None:
    st.markdown(
        "With N replicas, each keeps its own prefix cache: a request only hits what *its* replica computed. "
        "**Round-robin** spreads every prefix over every replica, so each one computes it; a **prefix-aware** "
        "router (SGLang's router, llm-d's scheduler) sends a request to the replica whose cache most likely holds "
        "the longest run of its prompt's blocks, unless that replica is overloaded. Below, one shared-prefix "
        "workload both ways; each replica is an exact prefix-caching engine.")
    shown = show_study(eng.routing_setup, eruns.routing, efigs.routing, lambda r: [])
    if shown is None:
        return
    setup, study = shown
    st.caption(f"{study.capacity_tokens:,} KV slots per replica; prompts of {setup.workload.prompt_len:,} tokens, "
               f"{setup.workload.prefix_len:,} of them one of {setup.workload.num_groups:,} prefixes (Zipf "
               "popularity). The router's view of each replica is its own LRU of the block hashes it sent there; load "
               "beats affinity once a replica got 8 more of the last 64 requests than the least loaded.")


def render_trace() -> None:
    st.markdown(
        "Bring your own requests: a JSON Lines file, one request per line, "
        "`{\"arrival\": 0.0, \"prompt\": [token ids], \"output_len\": 64}` or "
        "`{\"prompt_len\": 700, \"prefix_group\": \"sys\", \"prefix_len\": 512, \"output_len\": 40}` (requests "
        "of one group share their first `prefix_len` tokens; `arrival` in seconds, optional). The file is read as "
        "data only and checked line by line; the same format works on the command line "
        "(`python -m app.cli prefix --trace t.jsonl`, `… serve --trace t.jsonl`). A trace is not part of the "
        "page's link.")
    try:
        data, source = eng.trace_input()
    except ValueError as exc:
        st.error(f"Cannot use this trace: {plain(exc)}")
        return
    if data is None:
        st.info("Upload a trace or paste one (or press **Paste the example trace**).")
        return
    try:
        tf = eruns.read_trace(data)
    except ValueError as exc:
        st.error(f"Cannot use {source}: {plain(exc)}")
        return
    try:
        dep, max_batch, budget = eng.trace_settings()
        res = eruns.trace_run(data, dep, max_batch, budget)
    except ValueError as exc:
        st.error(f"This trace cannot be served with these settings: {plain(exc)}")
        return
    if res is None:
        return
    st.markdown(res.summary())
    frame = res.to_frame()
    show_table(frame.round(4), hide_index=True, width="stretch")
    hits = res.prefix.to_frame()
    hits["request"] = [r.label for r in tf.requests]
    show_chart(efigs.trace_hits(hits, res.hits_takeaway()), width="stretch")
    st.caption(f"The prefix cache replays the trace one request at a time (blocks of 16, last prompt token always "
               f"computed); serving runs {dep.arch.name} on one GPU with {res.capacity_tokens:,} KV slots. "
               "Request names are the file's `id` values, shown as text.")
    st.download_button("Download the metrics (CSV)", frame.to_csv(index=False).encode(), file_name="trace_serving.csv",
                       mime="text/csv")
