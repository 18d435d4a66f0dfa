"""Paged KV blocks: vLLM's block pool against contiguous allocation on the same chat workload, the pool
stepped through, block size, parallel sampling's shared blocks, and the real model decoding through tables."""

import streamlit as st

from app.controls import paged_blocks as controls
from app.figures import paging as figs
from app.present import show_chart, show_chart_in, show_table
from app.resources import live_result
from app.runs import paged_blocks as runs
from app.text import plain
from app.urlstate import UrlState
from sim.alloc import paging_readouts as readouts
from sim.alloc import pool_views as views
from sim.alloc.block_pool import PoolSnapshot, block_usage
from sim.alloc.policies import block_size_tradeoff
from sim.alloc.schedule import POLICIES


def pool_chart(snap: PoolSnapshot, block_size: int, title: str):
    """The block grid of a pool where nothing was freed: its blocks in use are 0 .. n-1."""
    n = snap.num_used_blocks
    return figs.block_grid(snap.owner[:n], snap.ref_cnt[:n], snap.fill[:n], snap.logical_index[:n], block_size,
                           title, width_px=900)


st.title("Paged KV blocks")
st.markdown(
    "vLLM's **PagedAttention** stores the KV cache the way an operating system stores memory: in fixed-size "
    "**blocks** (16 tokens by default). Each request has a **block table** mapping its logical blocks to physical "
    "ones, takes a block from the **free list** only when its last one is full, and gives all of them back when it "
    "finishes. Branches of one prompt (parallel sampling, beam search) **share** blocks through reference counts. "
    "Below, the exercise from seed 002 — *simulate 1,000 chat completions of varied length and compare "
    "fragmentation with contiguous allocation* — run on the exact same requests for four allocators."
)

url = UrlState("paged_blocks")
controls.register(url)
try:
    wcfg, scfg = controls.workload_and_memory()
    cmp = runs.compare(wcfg, scfg)
except ValueError as exc:
    st.error(f"These settings cannot be simulated: {plain(exc)}")
    url.sync()
    st.stop()

res = cmp.results
paged, heap = res["paged"], res["first_fit"]
st.caption(cmp.drawn_caption())

# --- Where the memory goes --------------------------------------------------------------------
st.header("How much of the KV memory holds real tokens")
st.caption("Real tokens ÷ KV slots claimed by requests (and stranded between them), summed over every step.")
for col, policy in zip(st.columns(4), POLICIES, strict=True):
    col.metric(figs.POLICY_SHORT[policy], f"{100 * res[policy].token_share:.1f}%",
               help=f"{res[policy].label}: token slots ÷ slots claimed (summed over every step).")
show_chart(figs.breakdown_bars(cmp.to_frame(), cmp.memory_takeaway()), width="stretch")
st.markdown(cmp.memory_summary())

# --- How many fit -----------------------------------------------------------------------------
st.header("How many requests fit at once")
st.caption("Requests running at once, averaged over the time each allocator needs for the whole workload.")
for col, policy in zip(st.columns(4), POLICIES, strict=True):
    r = res[policy]
    col.metric(figs.POLICY_SHORT[policy], f"{r.mean_running:.1f}",
               help=f"Peak {r.peak_running}; the workload took {r.makespan:,} decode steps.")
st.markdown(cmp.concurrency_summary())
series = cmp.series()
show_chart(figs.concurrency_over_time(series, cmp.concurrency_takeaway()), width="stretch")
show_chart(figs.memory_over_time(series, scfg.capacity_tokens, readouts.capacity_takeaway(res)), width="stretch")
st.caption("Time is counted in decode steps: every running request produces one token per step, whatever the batch "
           "size. On a GPU a decode step grows slowly with the batch, so real speed-ups are somewhat smaller.")

st.subheader("Results table")
shown = cmp.results_frame()
show_table(shown, hide_index=True, width="stretch")
st.download_button("Download the results (CSV)", shown.to_csv(index=False).encode(), file_name="paged_blocks.csv",
                   mime="text/csv")

# --- Inside the pool --------------------------------------------------------------------------
st.header("Inside the block pool")
if (too_big := views.grid_too_big(scfg.num_blocks)) is not None:
    st.info(too_big)
else:
    frames = views.pool_frames(paged.makespan)
    step = frames.steps[controls.time_frame(frames.slider_help)]
    snap = runs.pool_frames(wcfg, scfg, frames.distinct_steps)[step]
    running = sorted(snap.req_to_block_table)
    left, right = st.columns([3, 2])
    with right:
        req = None
        if running:
            req = controls.request_to_inspect(running)
            st.markdown(views.request_line(snap, req))
            show_table(snap.table_frame(req), hide_index=True, width="stretch", height=300)
        else:
            st.info("No request holds blocks at this step.")
        st.markdown(views.free_queue_line(snap))
    with left:
        fig = figs.block_grid(snap.owner, snap.ref_cnt, snap.fill, snap.logical_index, scfg.block_size,
                              views.pool_title(snap, step), highlight_blocks=list(snap.req_to_block_table.get(req, ())))
        show_chart(fig, width="stretch")
        st.caption("Each square is one physical block (id = row label + column), coloured by the request that owns "
                   "it; grey is free. The inspected request's blocks are outlined: consecutive logical blocks sit "
                   "anywhere in the pool. Hover a block for its owner, logical index and filled slots.")
    if (hv := views.heap_at(heap, step)) is not None:
        show_chart(figs.heap_map(hv.offset, hv.reserve, hv.stored, hv.req, hv.capacity_tokens, hv.title),
                        width="stretch")

# --- Block size -------------------------------------------------------------------------------
st.header("Block size: last-block waste against table length")
trade = block_size_tradeoff(cmp.workload, chosen=scfg.block_size)
left, right = st.columns([3, 1])
show_chart_in(left, figs.block_size_tradeoff(trade.to_frame(), scfg.block_size, *trade.at(scfg.block_size),
                                            readouts.block_size_takeaway(trade, scfg.block_size)), width="stretch")
with right:
    tokens = controls.tokens_in_one_request()
    blocks, _, share = block_usage(tokens, scfg.block_size)
    st.metric(f"Blocks of {scfg.block_size}", f"{blocks:,}")
    st.metric("Share of their slots used", f"{100 * share:.1f}%")
    st.caption(views.block_example_caption(tokens, scfg.block_size))

# --- Parallel sampling ------------------------------------------------------------------------
st.header("Parallel sampling: branches share the prompt's blocks")
fc = controls.fork()
fork = runs.fork_run(fc.prompt_len, fc.num_branches, fc.num_generated, scfg.block_size)
c = st.columns(4)
c[0].metric("Blocks in use (shared)", f"{fork.num_used_blocks:,}")
c[1].metric("Blocks if copied", f"{fork.num_blocks_if_copied:,}",
            help="Every branch with its own copy of the prompt and its tokens.")
c[2].metric("Memory saved", f"{100 * fork.saved_share:.1f}%")
c[3].metric("Copy-on-write copies", f"{len(fork.cow_copies):,}")
st.markdown(views.fork_summary(fork))
show_chart(pool_chart(fork.final, scfg.block_size, views.fork_grid_title(fork)), width="stretch")
st.caption(views.GRID_KEY)

# --- Real model -------------------------------------------------------------------------------
st.header("The real model decoding through block tables")
if (choice := controls.live()) is not None:
    run = live_result(lambda: runs.live_run(choice), "Cannot decode")
    if run is not None:
        c = st.columns(4)
        c[0].metric("Same tokens as a contiguous cache", "yes" if run.tokens_identical else "NO",
                    help="Every branch decoded again alone with ContiguousKVCache and the same seed.")
        c[1].metric("Largest logit difference", f"{run.max_abs_logit_diff:.2g}")
        c[2].metric("KV bytes in blocks", f"{run.used_bytes:,}",
                    help=f"{run.final.num_used_blocks} blocks × {run.bytes_per_block:,} bytes (K and V, all layers).")
        c[3].metric("If each branch had its own copy", f"{run.bytes_if_copied:,}")
        show_table(run.branch_frame(), hide_index=True, width="stretch")
        show_chart(pool_chart(run.final, run.block_size, run.grid_title), width="stretch")
        st.caption(views.GRID_KEY + " The prompt was prefilled once and forked; each branch samples with its own seed. Decoding each "
                   "branch alone with a contiguous cache gives the tokens compared above.")
url.sync()
