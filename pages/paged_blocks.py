"""Paged KV blocks: vLLM's block pool against contiguous allocation on the same chat workload, the pool
stepped through, block size, parallel sampling's shared blocks, and the real model decoding through tables."""

import streamlit as st

from app.controls import paged_blocks as controls
from app.figures import paging as figs
from app.i18n import lang, page_title, t
from app.present import show_chart, show_chart_in, show_table
from app.resources import live_result
from app.runs import paged_blocks as runs
from app.text import plain
from app.urlstate import UrlState
from sim.alloc import pool_views as views
from sim.alloc.block_pool import PoolSnapshot, block_usage
from sim.alloc.policies import block_size_tradeoff
from sim.alloc.schedule import POLICIES
from sim.words import paging as readouts
from sim.words import why as worded


def pool_chart(snap: PoolSnapshot, block_size: int, title: str):
    """The block grid of a pool where nothing was freed: its blocks in use are 0 .. n-1."""
    n = snap.num_used_blocks
    return figs.block_grid(snap.owner[:n], snap.ref_cnt[:n], snap.fill[:n], snap.logical_index[:n], block_size,
                           title, width_px=900, lang=L)


L = lang()  # the sentences and figures below are worded in the page language
st.title(page_title("paged_blocks"))
st.markdown(t("paged.intro"))

def render_memory() -> None:
    st.header(t("paged.h.memory"))
    st.caption(t("paged.memory_caption"))
    for col, policy in zip(st.columns(4), POLICIES, strict=True):
        col.metric(figs.policy_short(policy, L), f"{res[policy].token_share:.1%}",
                   help=t("paged.m.share_help", policy=readouts.policy_label(policy, L)))
    show_chart(figs.breakdown_bars(cmp.to_frame(), readouts.memory_takeaway(cmp, L), lang=L), width="stretch")
    st.markdown(readouts.memory_summary(cmp, L))

    st.header(t("paged.h.fit"))
    st.caption(t("paged.fit_caption"))
    for col, policy in zip(st.columns(4), POLICIES, strict=True):
        r = res[policy]
        col.metric(figs.policy_short(policy, L), f"{r.mean_running:.1f}",
                   help=t("paged.m.running_help", peak=f"{r.peak_running}", steps=f"{r.makespan:,}"))
    st.markdown(readouts.concurrency_summary(cmp, L))
    series = cmp.series()
    show_chart(figs.concurrency_over_time(series, readouts.concurrency_takeaway(cmp, L), lang=L), width="stretch")
    show_chart(figs.memory_over_time(series, scfg.capacity_tokens, readouts.capacity_takeaway(res, L), lang=L),
               width="stretch")
    st.caption(t("paged.steps_caption"))

    st.subheader(t("paged.h.results"))
    shown = cmp.results_frame()
    show_table(readouts.results_table(shown, L), hide_index=True, width="stretch")
    st.download_button(t("paged.download"), shown.to_csv(index=False).encode(), file_name="paged_blocks.csv",
                       mime="text/csv")


def render_pool() -> None:
    st.header(t("paged.h.pool"))
    if (too_big := readouts.grid_too_big(scfg.num_blocks, L)) is not None:
        st.info(too_big)
    else:
        frames = views.pool_frames(paged.makespan)
        step = frames.steps[controls.time_frame(readouts.frames_help(frames, L))]
        snap = runs.pool_frames(wcfg, scfg, frames.distinct_steps)[step]
        running = sorted(snap.req_to_block_table)
        left, right = st.columns([3, 2])
        with right:
            req = None
            if running:
                req = controls.request_to_inspect(running)
                st.markdown(readouts.request_line(snap, req, L))
                show_table(readouts.table_frame(snap, req, L), hide_index=True, width="stretch", height=300)
            else:
                st.info(t("paged.no_request"))
            st.markdown(readouts.free_queue_line(snap, lang=L))
        with left:
            fig = figs.block_grid(snap.owner, snap.ref_cnt, snap.fill, snap.logical_index, scfg.block_size,
                                  readouts.pool_title(snap, step, L), highlight_blocks=list(snap.req_to_block_table.get(req, ())),
                                  share=3 / 5, lang=L)  # the left of two columns (3 : 2)
            show_chart(fig, width="stretch")
            st.caption(t("paged.grid_caption"))
        if (hv := views.heap_at(heap, step)) is not None:
            show_chart(figs.heap_map(hv.offset, hv.reserve, hv.stored, hv.req, hv.capacity_tokens, readouts.heap_title(hv, L),
                                     lang=L), width="stretch")


def render_block_size() -> None:
    st.header(t("paged.h.block_size"))
    trade = block_size_tradeoff(cmp.workload, chosen=scfg.block_size)
    left, right = st.columns([3, 1])
    show_chart_in(left, figs.block_size_tradeoff(trade.to_frame(), scfg.block_size, *trade.at(scfg.block_size),
                                                readouts.block_size_takeaway(trade, scfg.block_size, L), lang=L),
                  width="stretch")
    with right:
        tokens = controls.tokens_in_one_request()
        blocks, _, share = block_usage(tokens, scfg.block_size)
        st.metric(t("paged.m.blocks_of", bs=f"{scfg.block_size}"), f"{blocks:,}")
        st.metric(t("paged.m.slots_used"), f"{share:.1%}")
        st.caption(readouts.block_example_caption(tokens, scfg.block_size, L))


def render_fork() -> None:
    st.header(t("paged.h.fork"))
    fc = controls.fork()
    fork = runs.fork_run(fc.prompt_len, fc.num_branches, fc.num_generated, scfg.block_size)
    c = st.columns(4)
    c[0].metric(t("paged.m.used"), f"{fork.num_used_blocks:,}")
    c[1].metric(t("paged.m.if_copied"), f"{fork.num_blocks_if_copied:,}", help=t("paged.m.if_copied_help"))
    c[2].metric(t("paged.m.saved"), f"{fork.saved_share:.1%}")
    c[3].metric(t("paged.m.cow"), f"{len(fork.cow_copies):,}")
    st.markdown(readouts.fork_summary(fork, lang=L))
    show_chart(pool_chart(fork.final, scfg.block_size, readouts.fork_grid_title(fork, L)), width="stretch")
    st.caption(readouts.grid_key(L))


def render_live() -> None:
    st.header(t("paged.h.live"))
    if (choice := controls.live()) is not None:
        run = live_result(lambda: runs.live_run(choice), t("paged.live.cannot"))
        if run is not None:
            c = st.columns(4)
            c[0].metric(t("paged.m.same_tokens"), t("paged.m.yes") if run.tokens_identical else t("paged.m.no"),
                        help=t("paged.m.same_tokens_help"))
            c[1].metric(t("paged.m.logit_diff"), f"{run.max_abs_logit_diff:.2g}")
            c[2].metric(t("paged.m.kv_bytes"), f"{run.used_bytes:,}",
                        help=t("paged.m.kv_bytes_help", n=f"{run.final.num_used_blocks}", b=f"{run.bytes_per_block:,}"))
            c[3].metric(t("paged.m.own_copy"), f"{run.bytes_if_copied:,}")
            show_table(readouts.live_branch_frame(run, L), hide_index=True, width="stretch")
            show_chart(pool_chart(run.final, run.block_size, readouts.live_grid_title(run, L)), width="stretch")
            st.caption(readouts.grid_key(L) + t("paged.live.caption"))


url = UrlState("paged_blocks")
controls.register(url)
finding = st.container()  # the page opens on its finding; the workload that moves it is one click below
with st.expander(controls.settings_label(), expanded=False, icon=":material/tune:"):
    try:
        wcfg, scfg = controls.workload_and_memory()
        cmp = runs.compare(wcfg, scfg)
    except ValueError as exc:
        cmp = None
        finding.error(t("paged.cannot", why=plain(worded(exc, L))))  # on the first screen, not in the fold
if cmp is None:
    url.sync()
    st.stop()

res = cmp.results
paged, heap = res["paged"], res["first_fit"]
with finding:
    st.caption(readouts.drawn_caption(cmp, L))
    tab, box = controls.page_tabs().open(url)  # only the open section runs

with box:
    if tab == "memory":
        render_memory()
    elif tab == "pool":
        render_pool()
    elif tab == "block_size":
        render_block_size()
    elif tab == "fork":
        render_fork()
    elif tab == "live":
        render_live()
url.sync()
