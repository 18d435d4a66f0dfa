import numpy as np
import pandas as pd
import streamlit as st

from app.figures import paging as figs
from app.text import plain
from app.urlstate import UrlState
from app.work import run_job
from app.workload import register_workload
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS, ForkResult, block_usage, simulate_parallel_sampling
from sim.alloc.paged_schedule import simulate_paged_stepwise
from sim.alloc.policies import Comparison, block_size_tradeoff, compare_policies
from sim.alloc.schedule import POLICIES, ServingConfig
from sim.alloc.workload import (
    ARRIVALS,
    LENGTH_DISTS,
    MAX_LENGTH_WORKLOAD_REQUESTS,
    MAX_MODEL_LEN,
    LengthWorkloadConfig,
    make_workload,
)

NUM_FRAMES = 41  # snapshots of the block pool the time slider steps through
GRID_MAX_STEP = 20_000  # the block grid replays the pool step by step: only this far into a run
GRID_MAX_BLOCKS = 4096  # a bigger pool is not drawn block by block
LIVE_MAX_PROMPT = 200
LIVE_BLOCK_SIZES = (4, 8, 16, 32)
DEFAULT_LIVE_PROMPT = "To be, or not to be, that is the question:"

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
register_workload(url, MAX_LENGTH_WORKLOAD_REQUESTS)
url.int("capacity", 16_384, 1024, MAX_CAPACITY_TOKENS, label="KV capacity")
url.int("block_size", 16, 1, 256, label="block size")
url.choice("arrival", "burst", ARRIVALS, label="arrivals")
url.float("rate", 0.5, 0.001, 1000.0, label="arrival rate")
url.int("seed", 0, 0, 2**31 - 1, label="seed")
url.int("frame", NUM_FRAMES // 2, 0, NUM_FRAMES - 1, label="time frame")
url.int("req", 0, 0, MAX_LENGTH_WORKLOAD_REQUESTS - 1, label="request to inspect")
url.int("tokens", 17, 1, MAX_MODEL_LEN, label="tokens in the block example")
url.int("fork_prompt", 40, 1, 2048, label="shared prompt length")
url.int("fork_n", 4, 1, 16, label="branches")
url.int("fork_gen", 24, 0, 512, label="tokens per branch")
url.bool("live", True, label="decode on the real model")
url.text("live_prompt", DEFAULT_LIVE_PROMPT, max_len=LIVE_MAX_PROMPT, label="live prompt")
url.int("live_new", 48, 1, 256, label="live new tokens")
url.int("live_branches", 2, 1, 4, label="live branches")
url.float("live_temp", 0.8, 0.0, 2.0, label="live temperature")
url.choice("live_bs", "8", [str(b) for b in LIVE_BLOCK_SIZES], label="live block size")
url.int("live_seed", 0, 0, 2**31 - 1, label="live seed")
url.show_problems()


@st.cache_data(max_entries=8, show_spinner="Simulating the four allocators…")
def compare(wcfg: LengthWorkloadConfig, scfg: ServingConfig) -> Comparison:
    return compare_policies(make_workload(wcfg), scfg)


@st.cache_data(max_entries=8, show_spinner="Replaying the block pool…")
def pool_frames(wcfg: LengthWorkloadConfig, scfg: ServingConfig, steps: tuple[int, ...]) -> dict:
    wl = make_workload(wcfg)
    return simulate_paged_stepwise(wl, scfg, steps, lazy=True, until=max(steps)).snapshots


@st.cache_data(max_entries=16, show_spinner=False)
def fork_run(prompt_len: int, n: int, gen: int, bs: int) -> ForkResult:
    return simulate_parallel_sampling(prompt_len, n, gen, bs)


# Measured here: a paged decode step (gathering K/V through the block table) costs about twice a
# contiguous one; a run decodes every branch paged, then each again alone with a contiguous cache.
PAGED_STEP_FACTOR = 2.0


def live_run(prompt: str, n_new: int, branches: int, temp: float, bs: int, seed: int):
    from app.resources import model, model_rates
    from sim.model.generate import SamplingConfig, encode
    from sim.model.paged_cache import paged_generate
    from sim.work.run_cost import cached_work

    ids = encode(prompt)
    if len(ids) > LIVE_MAX_PROMPT:
        raise ValueError(f"the prompt is {len(ids):,} bytes of UTF-8; the limit is {LIVE_MAX_PROMPT}")
    estimate = (PAGED_STEP_FACTOR + 1) * branches * model_rates("mha", "eager").seconds(cached_work(len(ids), n_new))
    return run_job("paged_blocks.live", (tuple(ids), n_new, branches, temp, bs, seed), estimate,
                   lambda progress: paged_generate(model("mha"), ids, n_new, branches, bs, SamplingConfig(temp, 0, seed)),
                   what=f"Decoding {branches} branch(es) of {n_new} tokens through block tables, then alone")


with st.container(border=True):
    st.markdown("**Workload and memory** — the same requests go through every allocator.")
    c = st.columns(5)
    c[0].number_input("Requests", 1, MAX_LENGTH_WORKLOAD_REQUESTS, step=100, key="requests",
                      help=f"1 to {MAX_LENGTH_WORKLOAD_REQUESTS:,} chat completions.")
    c[1].selectbox("Lengths", LENGTH_DISTS, key="lengths",
                   format_func={"chat": "chat (long-tailed)", "uniform": "uniform", "fixed": "fixed"}.get,
                   help="chat: log-normal, most requests short and a few very long (like ShareGPT); "
                        "uniform: 1 … 2×mean−1; fixed: every request the mean.")
    c[2].number_input("Mean prompt tokens", 1, MAX_MODEL_LEN - 1, key="prompt_mean",
                      help="ShareGPT's mean is 161 (vLLM paper).")
    c[3].number_input("Mean output tokens", 1, MAX_MODEL_LEN - 1, key="output_mean",
                      help="ShareGPT's mean is 338 (vLLM paper). Outputs stop at max_tokens.")
    c[4].slider("Spread σ (chat only)", 0.05, 3.0, step=0.05, key="spread",
                help="Sigma of the log-normal: larger means a longer tail.")
    c = st.columns(5)
    c[0].number_input("Max model length", 64, MAX_MODEL_LEN, step=256, key="max_len",
                      help="What a server reserving 'the maximum length' sets aside per request.")
    c[1].number_input("max_tokens (client's output cap)", 1, MAX_MODEL_LEN - 1, step=128, key="max_tokens",
                      help="A server reserving 'prompt + max_tokens' sets this much aside for the output.")
    c[2].number_input("KV capacity (token slots)", 1024, MAX_CAPACITY_TOKENS, step=1024, key="capacity",
                      help="Slots for one token's K and V in every layer. For Llama-2-7B in fp16 a slot is "
                           "512 KiB, so 16,384 slots are 8 GiB.")
    c[3].slider("Block size (tokens)", 1, 256, key="block_size", help="vLLM's default is 16.")
    c[4].number_input("Seed", 0, 2**31 - 1, key="seed")
    c = st.columns([2, 2, 6])
    c[0].radio("Arrivals", ARRIVALS, key="arrival", horizontal=True,
               format_func={"burst": "all queued at once", "poisson": "Poisson"}.get)
    c[1].number_input("Arrival rate (requests / step)", 0.001, 1000.0, step=0.1, format="%.3f", key="rate",
                      disabled=st.session_state["arrival"] != "poisson")

ss = st.session_state
try:
    wcfg = LengthWorkloadConfig(
        num_requests=ss["requests"], length_dist=ss["lengths"], prompt_mean=ss["prompt_mean"],
        output_mean=ss["output_mean"], spread=ss["spread"], max_model_len=ss["max_len"],
        max_tokens=ss["max_tokens"], arrival=ss["arrival"], arrival_rate=ss["rate"], seed=ss["seed"])
    scfg = ServingConfig(capacity_tokens=ss["capacity"], block_size=ss["block_size"])
    cmp = compare(wcfg, scfg)
except ValueError as exc:
    st.error(f"These settings cannot be simulated: {plain(exc)}")
    url.sync()
    st.stop()

table = cmp.to_frame()
res = cmp.results
paged, max_len, max_tok, heap = (res[p] for p in POLICIES)
wl = cmp.workload
st.caption(f"Drawn: {wl.num_requests:,} requests, prompts {wl.prompt_len.mean():.0f} tokens on average "
           f"(longest {wl.prompt_len.max():,}), outputs {wl.output_len.mean():.0f} (longest {wl.output_len.max():,}); "
           f"{scfg.num_blocks:,} blocks of {scfg.block_size} slots.")

# --- Where the memory goes --------------------------------------------------------------------
st.header("How much of the KV memory holds real tokens")
st.caption("Real tokens ÷ KV slots claimed by requests (and stranded between them), summed over every step.")
cols = st.columns(4)
for col, policy in zip(cols, POLICIES, strict=True):
    r = res[policy]
    col.metric(figs.POLICY_SHORT[policy], f"{100 * r.token_share:.1f}%",
               help=f"{r.label}: token slots ÷ slots claimed (summed over every step).")
st.plotly_chart(figs.breakdown_bars(table), width="stretch")
worst, best = min(max_len.token_share, max_tok.token_share, heap.token_share), \
    max(max_len.token_share, max_tok.token_share, heap.token_share)
st.markdown(
    f"Contiguous allocation keeps **{100 * worst:.1f}–{100 * best:.1f}%** of the memory it claims filled with real "
    f"tokens; the vLLM paper measured **20.4–38.2%** for earlier systems. The rest is *reservation*: slots set "
    f"aside for tokens that come later or never, and — in the first-fit heap — free holes too small for the next "
    f"request. Paged blocks keep **{100 * paged.token_share:.1f}%** "
    f"(waste {100 * (1 - paged.token_share):.1f}%, only the unused tail of each request's last block; the paper: "
    f"under 4%)."
)

# --- How many fit -----------------------------------------------------------------------------
st.header("How many requests fit at once")
st.caption("Requests running at once, averaged over the time each allocator needs for the whole workload.")
cols = st.columns(4)
for col, policy in zip(cols, POLICIES, strict=True):
    r = res[policy]
    col.metric(figs.POLICY_SHORT[policy], f"{r.mean_running:.1f}",
               help=f"Peak {r.peak_running}; the workload took {r.makespan:,} decode steps.")
speedup = max_len.makespan / paged.makespan
st.markdown(
    f"With the same {scfg.capacity_tokens:,} slots, paged allocation runs **{paged.mean_running:.1f}** requests at "
    f"once against **{max_len.mean_running:.1f}** when every request reserves the maximum length, so it finishes the "
    f"workload **{speedup:.2f}×** sooner (seed 002: up to about 4× the throughput of contiguous allocation). "
    f"Paged admission only needs the prompt's blocks, so when memory runs out mid-generation the newest request "
    f"is preempted and recomputed later — **{paged.num_preemptions:,}** times here, as vLLM does "
    "(this step count does not charge the recomputation)."
)
series = cmp.series()
st.plotly_chart(figs.concurrency_over_time(series), width="stretch")
st.plotly_chart(figs.memory_over_time(series, scfg.capacity_tokens), width="stretch")
st.caption("Time is counted in decode steps: every running request produces one token per step, whatever the batch "
           "size. On a GPU a decode step grows slowly with the batch, so real speed-ups are somewhat smaller.")

st.subheader("Results table")
shown = table.drop(columns=["allocation"]).round(2)
st.dataframe(shown, hide_index=True, width="stretch")
st.download_button("Download the results (CSV)", shown.to_csv(index=False).encode(), file_name="paged_blocks.csv",
                   mime="text/csv")

# --- Inside the pool --------------------------------------------------------------------------
st.header("Inside the block pool")
if scfg.num_blocks > GRID_MAX_BLOCKS:
    st.info(f"The pool has {scfg.num_blocks:,} blocks; the grid draws at most {GRID_MAX_BLOCKS:,}. "
            "Lower the capacity or raise the block size to see it block by block.")
else:
    last = min(paged.makespan - 1, GRID_MAX_STEP)
    frame_steps = [int(round(k * last / (NUM_FRAMES - 1))) for k in range(NUM_FRAMES)]
    steps = tuple(sorted(set(frame_steps)))
    st.slider("Time (frame)", 0, NUM_FRAMES - 1, key="frame",
              help=f"{NUM_FRAMES} evenly spaced decode steps of the paged run"
                   + (f" (its first {GRID_MAX_STEP:,} steps)" if last < paged.makespan - 1 else "") + ".")
    step = frame_steps[ss["frame"]]
    snap = pool_frames(wcfg, scfg, steps)[step]
    running = sorted(snap.req_to_block_table)
    left, right = st.columns([3, 2])
    with right:
        if running:
            if ss["req"] not in running:
                ss["req"] = running[0]
            st.selectbox("Request to inspect", running, key="req",
                         help="Requests holding blocks at this step; its blocks are outlined in the grid.")
            req = ss["req"]
            n_tok = snap.req_to_num_tokens[req]
            blocks, slots, share = block_usage(n_tok, scfg.block_size)
            st.markdown(f"Request **{req}** holds **{n_tok}** tokens in **{blocks}** blocks "
                        f"({share:.0%} of their {slots} slots).")
            st.dataframe(snap.table_frame(req), hide_index=True, width="stretch", height=300)
        else:
            req = None
            st.info("No request holds blocks at this step.")
        head = ", ".join(str(b) for b in snap.free_block_queue[:12])
        more = " …" if len(snap.free_block_queue) > 12 else ""
        st.markdown(f"**Free queue** ({len(snap.free_block_queue):,} blocks), next handed out: {head or '—'}{more}")
    with left:
        title = (f"Step {step:,}: {snap.num_used_blocks:,} of {snap.num_blocks:,} blocks in use by "
                 f"{len(running)} requests, {snap.num_stored_tokens:,} tokens stored")
        fig = figs.block_grid(snap.owner, snap.ref_cnt, snap.fill, snap.logical_index, scfg.block_size, title,
                              highlight_blocks=list(snap.req_to_block_table.get(req, ())))
        st.plotly_chart(fig, width="stretch")
        st.caption("Each square is one physical block (id = row label + column), coloured by the request that owns "
                   "it; grey is free. The inspected request's blocks are outlined: consecutive logical blocks sit "
                   "anywhere in the pool. Hover a block for its owner, logical index and filled slots.")
    live_heap = (heap.segments.start <= step) & (heap.segments.end > step)
    ids = np.flatnonzero(live_heap)
    if len(ids):
        stored = heap.segments.prompt[ids] + (step - heap.segments.start[ids])
        free = scfg.capacity_tokens - int(heap.reserve[ids].sum())
        st.plotly_chart(figs.heap_map(heap.offset[ids], heap.reserve[ids], stored, ids, scfg.capacity_tokens,
                                      f"The first-fit heap at step {step:,}: {len(ids)} requests in contiguous "
                                      f"extents, {free:,} slots free in holes"), width="stretch")

# --- Block size -------------------------------------------------------------------------------
st.header("Block size: last-block waste against table length")
trade = block_size_tradeoff(wl, sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, scfg.block_size}))
tf = trade.to_frame()
row = tf[tf["block_size"] == scfg.block_size].iloc[0]
left, right = st.columns([3, 1])
left.plotly_chart(figs.block_size_tradeoff(tf, scfg.block_size, row["last_block_waste"], row["mean_table_len"]),
                  width="stretch")
with right:
    st.number_input("Tokens in one request", 1, MAX_MODEL_LEN, key="tokens")
    blocks, slots, share = block_usage(ss["tokens"], scfg.block_size)
    st.metric(f"Blocks of {scfg.block_size}", f"{blocks:,}")
    st.metric("Share of their slots used", f"{100 * share:.1f}%")
    st.caption(f"{ss['tokens']:,} tokens take {blocks:,} blocks = {slots:,} slots. Only the last block can be "
               "partly empty, so the waste per request is below one block — whatever the length.")

# --- Parallel sampling ------------------------------------------------------------------------
st.header("Parallel sampling: branches share the prompt's blocks")
c = st.columns(3)
c[0].number_input("Shared prompt (tokens)", 1, 2048, key="fork_prompt")
c[1].number_input("Branches", 1, 16, key="fork_n")
c[2].number_input("Tokens each branch writes", 0, 512, key="fork_gen")
fork = fork_run(ss["fork_prompt"], ss["fork_n"], ss["fork_gen"], scfg.block_size)
c = st.columns(4)
c[0].metric("Blocks in use (shared)", f"{fork.num_used_blocks:,}")
c[1].metric("Blocks if copied", f"{fork.num_blocks_if_copied:,}",
            help="Every branch with its own copy of the prompt and its tokens.")
c[2].metric("Memory saved", f"{100 * fork.saved_share:.1f}%")
c[3].metric("Copy-on-write copies", f"{len(fork.cow_copies):,}")
copies = ", ".join(f"{s}→{d}" for s, d in fork.cow_copies[:8]) + (" …" if len(fork.cow_copies) > 8 else "")
st.markdown(
    f"The prompt is prefilled once into {len(fork.after_prefill.req_to_block_table[0])} blocks; forking gives every "
    f"branch the same table and raises each block's **ref_cnt** to {fork.num_branches}. "
    + (f"The prompt's last block is only partly full, so the first write of each branch into it copies it "
       f"(copy-on-write: {copies}); the last branch finds ref_cnt 1 and writes in place. "
       if fork.cow_copies else "No shared block is ever written into, so nothing is copied. ")
    + f"{fork.num_shared_blocks} blocks stay shared (labelled ×n)."
)
grid = fork.final
n_show = grid.num_used_blocks  # nothing is freed, so the blocks in use are 0 .. n_show-1
st.plotly_chart(figs.block_grid(grid.owner[:n_show], grid.ref_cnt[:n_show], grid.fill[:n_show],
                                grid.logical_index[:n_show], scfg.block_size,
                                f"The pool after {fork.num_generated} tokens per branch (colour and r# = branch, "
                                "×n = shared by n branches)", width_px=900), width="stretch")

# --- Real model -------------------------------------------------------------------------------
st.header("The real model decoding through block tables")
st.toggle("Decode on the real model", key="live",
          help="The tiny model writes its K/V into a pool of blocks and attends through the block table; "
               "every branch is then decoded again alone with a contiguous cache to compare.")
if ss["live"]:
    c = st.columns([4, 1, 1, 1, 1, 1])
    c[0].text_input("Prompt", key="live_prompt", max_chars=LIVE_MAX_PROMPT)
    c[1].number_input("New tokens", 1, 256, key="live_new")
    c[2].number_input("Branches", 1, 4, key="live_branches")
    c[3].slider("Temperature", 0.0, 2.0, step=0.05, key="live_temp")
    c[4].selectbox("Block size", [str(b) for b in LIVE_BLOCK_SIZES], key="live_bs")
    c[5].number_input("Seed", 0, 2**31 - 1, key="live_seed")
    from sim.model.errors import CheckpointError

    try:
        run = live_run(ss["live_prompt"], ss["live_new"], ss["live_branches"], ss["live_temp"], int(ss["live_bs"]),
                       ss["live_seed"])
    except CheckpointError as exc:
        st.warning(f"The tiny model is not available: {plain(exc)}")
        run = None
    except ValueError as exc:
        st.error(f"Cannot decode: {plain(exc)}")
        run = None
    if run is not None:
        from sim.model.generate import decode

        c = st.columns(4)
        c[0].metric("Same tokens as a contiguous cache", "yes" if run.tokens_identical else "NO",
                    help="Every branch decoded again alone with ContiguousKVCache and the same seed.")
        c[1].metric("Largest logit difference", f"{run.max_abs_logit_diff:.2g}")
        c[2].metric("KV bytes in blocks", f"{run.used_bytes:,}",
                    help=f"{run.final.num_used_blocks} blocks × {run.bytes_per_block:,} bytes (K and V, all layers).")
        c[3].metric("If each branch had its own copy", f"{run.num_blocks_if_copied * run.bytes_per_block:,}")
        shared = set(np.flatnonzero(run.final.ref_cnt > 1).tolist())
        rows = []
        for b, ids in enumerate(run.branch_ids):
            tbl = run.final.req_to_block_table[b]
            rows.append({"branch": b, "text it wrote": decode(ids),
                         "block table (* = shared)": " ".join(f"{x}*" if x in shared else str(x) for x in tbl)})
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        fin = run.final
        used = fin.num_used_blocks
        st.plotly_chart(figs.block_grid(fin.owner[:used], fin.ref_cnt[:used], fin.fill[:used],
                                        fin.logical_index[:used], run.block_size,
                                        f"The real model's block pool: {used} blocks of {run.block_size} tokens "
                                        "(colour and r# = branch, ×n = shared)", width_px=900), width="stretch")
        st.caption("The prompt was prefilled once and forked; each branch samples with its own seed. Decoding each "
                   "branch alone with a contiguous cache gives the tokens compared above.")
url.sync()
