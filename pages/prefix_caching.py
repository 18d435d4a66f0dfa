from dataclasses import replace

import pandas as pd
import streamlit as st

from app.claims import render_claims
from app.figures import prefix_cache as figs
from app.text import plain
from app.urlstate import UrlState
from app.work import queued, run_job
from sim.alloc import prefix_claims as claims
from sim.alloc import prefix_sweeps as ps
from sim.alloc import workload as wk
from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
from sim.alloc.prefix_cache import MAX_RUNNING, CacheConfig
from sim.model import prefix_run as pr

DEMO_TEXT = ("System: You are the Globe Theatre's box office. Time: 2025-05-01 14:03:27.\n"
             "Answer in one sentence.\nUser: When does Hamlet start tonight?")
DEMO_MAX_BYTES = 400
DEMO_BLOCK_SIZES = ("4", "8", "16", "32")
BLOCK_SIZES = ("2", "4", "8", "16", "32", "64", "128", "256")
MAX_TREE = 24
LIVE_PREFIX = (
    "Queen.\nI shall obey you:--\nAnd for your part, Ophelia, I do wish\nThat your good beauties be the happy "
    "cause\nOf Hamlet's wildness: so shall I hope your virtues\nWill bring him to his wonted way again,\nTo both "
    "your honours.\n\nOph.\nMadam, I wish it may.\n\n[Exit Queen.]\n\nPol.\nOphelia, walk you here.--Gracious, so "
    "please you,\nWe will bestow ourselves.--[To Ophelia.] Read on this book;\nThat show of such an exercise may "
    "colour\nYour loneliness.--We are oft to blame in this,--\n'Tis too much prov'd,--that with devotion's visage\n"
    "And pious action we do sugar o'er\nThe Devil himself.\n\n"
)
LIVE_SUFFIXES = "King.\nOph.\nPol.\nHam."
MAX_PREFIX_BYTES = 700
MAX_SUFFIX_BYTES = 80
KV_DEMO_BYTES = 120
SIM_S_PER_TOKEN = 1e-6  # measured here, per token a trace stores: building the trace and simulating it once
RESIM_S_PER_TOKEN = 1.5e-7  # simulating an already built trace again


def to_bytes(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def show_char(b: int) -> str:
    return {10: "⏎", 32: "␣"}.get(b, chr(b) if 32 < b < 127 else f"\\x{b:02x}")


st.title("Prefix caching")
st.markdown(
    "Many requests start the same way: a system prompt, few-shot examples, tool descriptions, a document, the "
    "conversation so far. **Automatic prefix caching** (vLLM's `--enable-prefix-caching`, SGLang's radix cache) "
    "keeps the K/V blocks of those prompts after a request ends and lets the next request with the same beginning "
    "skip their prefill. A block is found by a **hash that covers its parent block's hash and its own tokens**, so "
    "only a prefix that is identical from token 0 can be reused — seed 000: *put fixed content first and variable "
    "content last*."
)

url = UrlState("prefix_caching")
url.text("demo_text", DEMO_TEXT, max_len=DEMO_MAX_BYTES, label="prompt A")
url.int("demo_pos", DEMO_TEXT.index("27.") + 1, 0, DEMO_MAX_BYTES - 1, label="changed byte")
url.choice("demo_bs", "16", DEMO_BLOCK_SIZES, label="demo block size")
url.choice("workload", "system_prompt", wk.PREFIX_WORKLOADS, label="workload")
url.choice("layout", "fixed_first", wk.LAYOUTS, label="layout")
url.int("requests", 200, 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, label="requests")
url.int("shared", 500, 1, wk.MAX_SHARED_LEN, label="shared tokens")
url.int("variable", 64, 1, wk.MAX_VARIABLE_LEN, label="new tokens per request")
url.int("output", 64, 1, wk.MAX_OUTPUT_LEN, label="output tokens")
url.int("groups", 4, 1, wk.MAX_GROUPS, label="groups")
url.int("seed", 0, 0, 2**32 - 1, label="seed")
url.choice("block_size", "16", BLOCK_SIZES, label="block size")
url.int("capacity", 16_384, 256, MAX_CAPACITY_TOKENS, label="cache capacity")
url.int("running", 8, 1, MAX_RUNNING, label="requests running at once")
url.float("decode_weight", 10.0, 0.0, 100.0, label="decode step cost")
url.int("tree_n", 8, 2, MAX_TREE, label="requests in the tree")
url.bool("live", True, label="run on the real model")
url.text("prefix", LIVE_PREFIX, max_len=MAX_PREFIX_BYTES, label="shared prefix")
url.text("suffixes", LIVE_SUFFIXES, max_len=pr.MAX_BRANCHES * (MAX_SUFFIX_BYTES + 1), label="continuations")
url.int("live_new", 16, 1, 64, label="new tokens per branch")
url.int("repeats", 3, 1, pr.MAX_REPEATS, label="timing repeats")
url.int("kv_pos", 40, 0, KV_DEMO_BYTES - 1, label="changed byte (K/V)")
url.show_problems()
ss = st.session_state
run_both_layouts = st.cache_data(max_entries=16, show_spinner="Simulating the prefix cache…")(ps.run_both_layouts)
overview = st.cache_data(max_entries=8, show_spinner="Simulating every workload in both layouts…")(ps.compare_workloads)
sweeps = st.cache_data(max_entries=8, show_spinner="Sweeping capacity and block size…")(ps.sweep_both_layouts)
tree = st.cache_data(max_entries=8, show_spinner="Building the tree…")(ps.tree_view)


def live_branch(prefix: tuple[int, ...], suffixes: tuple[tuple[int, ...], ...], n_new: int, repeats: int):
    from app.resources import model, model_rates
    from sim.work.run_cost import cached_work

    # both ways, every branch, every repetition plus one warm-up
    per_branch = max(model_rates("mha", "sdpa").seconds(cached_work(len(prefix) + len(s), n_new)) for s in suffixes)
    estimate = 2 * len(suffixes) * (repeats + 1) * per_branch
    return run_job("prefix_caching.live", (prefix, suffixes, n_new, repeats), estimate,
                   lambda progress: pr.branch_from_prefix(model("mha"), list(prefix), [list(s) for s in suffixes],
                                                          n_new, repeats),
                   what=f"Prefilling once and branching {len(suffixes)} continuations, {repeats} timed repetitions")


@st.cache_data(max_entries=16, show_spinner="Running both prompts through the model…")
def live_kv(ids: tuple[int, ...], pos: int):
    from app.resources import model

    return pr.kv_change(model("mha"), list(ids), pos)


@st.cache_data(max_entries=16, show_spinner=False)
def trace_tokens(cfg: wk.PrefixWorkloadConfig) -> int:
    """Tokens the chosen workload's trace stores: what every simulation of it walks through."""
    return wk.make_trace(cfg).num_stored_tokens


# --- 1. Block hashes ------------------------------------------------------------------------------
st.header("1. A block is found by its hash, and its hash covers everything before it")
st.markdown(
    "Prompt **A** is served first and its full blocks are cached. Prompt **B** is A with **one byte changed**. "
    "Each token here is one byte, as in the lab's tiny model. Block *i*'s hash is "
    "`H(hash of block i−1, tokens of block i)`: the blocks before the change get the same hashes and are read "
    "from the cache; the block with the change and **every block after it** get new hashes, although their "
    "tokens are identical."
)
c = st.columns([5, 3, 3])
c[0].text_area("Prompt A", key="demo_text", height=110, max_chars=DEMO_MAX_BYTES)
demo = None
ids_a = to_bytes(ss["demo_text"])
if len(ids_a) < 2 or len(ids_a) > DEMO_MAX_BYTES:
    st.error(f"Prompt A is {len(ids_a)} bytes; it needs 2..{DEMO_MAX_BYTES} bytes (one token per byte).")
else:
    if ss["demo_pos"] > len(ids_a) - 1:
        ss["demo_pos"] = len(ids_a) - 1
    c[1].slider("Position of the changed byte", 0, len(ids_a) - 1, key="demo_pos",
                help="Prompt B is prompt A with this byte changed (a letter's case flipped, a digit stepped by one, "
                     "anything else replaced by X).")
    c[2].radio("Block size", DEMO_BLOCK_SIZES, key="demo_bs", horizontal=True)
    k, bs_demo = ss["demo_pos"], int(ss["demo_bs"])
    ids_b = list(ids_a)
    ids_b[k] = pr.other_byte(ids_a[k])
    demo = ps.compare_two_prompts(ids_a, ids_b, bs_demo, k)
    m = st.columns(3)
    m[0].metric("Blocks of B reused", f"{demo.num_hit_blocks_b} of {demo.num_blocks_b}")
    m[1].metric("Tokens of B read from the cache", f"{demo.num_hit_tokens_b:,}")
    m[2].metric("Tokens of B computed", f"{demo.num_computed_b:,}")
    st.plotly_chart(figs.block_rows(demo.frame, k, bs_demo, f"Byte {k} changed: {show_char(ids_a[k])} → "
                                    f"{show_char(ids_b[k])} (block {k // bs_demo})"), width="stretch")
    st.markdown(demo.summary())
    with st.expander("Every block, its hash and its parent's hash"):
        st.dataframe(demo.frame.assign(text=[figs.printable(x) for x in demo.frame["ids"]])
                     [["request", "block", "tokens", "text", "hash", "parent hash", "fate"]],
                     hide_index=True, width="stretch")
        st.caption("Hash: the first 64 bits of BLAKE2b over the parent's hash, the block's token ids and any extra "
                   "keys (vLLM adds LoRA adapter, multimodal inputs and a cache salt there). The root's parent is "
                   "all zeros.")


# --- 2. Workloads -------------------------------------------------------------------------------
def workload_section():
    """Section 2; (cfg, cache, tokens in the trace, the chosen run, the overview), or None when it cannot run."""
    st.header("2. Hit rate by workload and prompt layout")
    with st.container(border=True):
        st.markdown("**Workload and cache** — seeded synthetic requests; token ids are random, only what repeats "
                    "matters.")
        c = st.columns([4, 4, 2, 2])
        c[0].selectbox("Workload", wk.PREFIX_WORKLOADS, key="workload", format_func=wk.PREFIX_WORKLOAD_LABELS.get)
        c[1].radio("Layout", wk.LAYOUTS, key="layout", format_func=wk.LAYOUT_LABELS.get, horizontal=True,
                   help="Fixed first: the content that repeats comes first, what is new in each request last. "
                        "Variable first: the new content is moved to the top.")
        c[2].number_input("Requests", 1, wk.MAX_PREFIX_WORKLOAD_REQUESTS, step=50, key="requests")
        c[3].number_input("Seed", 0, 2**32 - 1, key="seed")
        c = st.columns(7)
        c[0].number_input("Shared tokens", 1, wk.MAX_SHARED_LEN, step=64, key="shared",
                          help="Length of the content that repeats: system prompt, examples, tool descriptions, "
                               "one document set.")
        c[1].number_input("New tokens", 1, wk.MAX_VARIABLE_LEN, step=16, key="variable",
                          help="Mean length of what is new in each request (question, message, observation); "
                               "drawn within ±50%.")
        c[2].number_input("Output tokens", 1, wk.MAX_OUTPUT_LEN, step=16, key="output",
                          help="Mean answer length, within ±50%. Outputs are cached too: a chat's next turn "
                               "reuses them.")
        c[3].number_input("Groups", 1, wk.MAX_GROUPS, key="groups",
                          help="; ".join(f"{wk.PREFIX_WORKLOAD_LABELS[w]}: {g}" for w, g in wk.GROUP_MEANING.items()))
        c[4].selectbox("Block size", BLOCK_SIZES, key="block_size", help="vLLM's default is 16 tokens.")
        c[5].number_input("Cache slots", 256, MAX_CAPACITY_TOKENS, step=4096, key="capacity",
                          help="KV slots in the pool; blocks of running requests and free cached blocks share it.")
        c[6].number_input("Running at once", 1, MAX_RUNNING, key="running",
                          help="The last N requests keep their blocks pinned; a request that does not fit "
                               "finishes the oldest running ones first.")
    try:
        cfg = wk.PrefixWorkloadConfig(ss["workload"], ss["layout"], ss["requests"], ss["shared"], ss["variable"],
                                ss["output"], ss["groups"], ss["seed"])
        cache = CacheConfig(int(ss["block_size"]), ss["capacity"], ss["running"])
        num_tokens = trace_tokens(cfg)
        sizes = replace(cfg, workload="system_prompt", layout="fixed_first")
        got = run_job("prefix_caching.workloads", (cfg, cache), SIM_S_PER_TOKEN * num_tokens * 2 * (1 + len(wk.PREFIX_WORKLOADS)),
                      lambda progress: (run_both_layouts(cfg, cache), overview(sizes, cache)), real_model=False,
                      what=f"Simulating {cfg.num_requests:,} requests in both layouts, and every workload")
    except ValueError as exc:
        st.error(f"These settings cannot be simulated: {plain(exc)}")
        return None
    if got is None:
        return None
    both, view = got
    res, table = both[cfg.layout].result, view.to_frame()
    wl_name = wk.PREFIX_WORKLOAD_LABELS[cfg.workload]
    m = st.columns(6)
    m[0].metric("Token hit rate", f"{100 * res.hit_rate:.1f}%",
                help=f"{res.num_hit_tokens:,} of {res.num_prompt_tokens:,} prompt tokens came from the cache.")
    m[1].metric("Prefill tokens computed", f"{res.num_computed_tokens:,}")
    m[2].metric("Prefill tokens saved", f"{res.num_hit_tokens:,}")
    m[3].metric("Prefill speed-up", f"{res.prefill_speedup:.2f}×",
                help="Prompt tokens / prompt tokens computed.")
    m[4].metric("Blocks reused", f"{res.num_hit_blocks:,}",
                help=f"Cache hits in blocks; {res.num_distinct_reused:,} distinct blocks were hit, and up to "
                     f"{res.max_ref_cnt} requests held one block at once.")
    m[5].metric("Evictions", f"{res.num_evictions:,}",
                help="Free cached blocks handed out again (least recently freed first); their hash is dropped.")

    st.subheader("The same content, two layouts")
    cols = st.columns(2)
    for col, layout in zip(cols, wk.LAYOUTS, strict=True):
        r = both[layout].result
        col.metric(f"Hit rate · {wk.LAYOUT_LABELS[layout]}", f"{100 * r.hit_rate:.1f}%",
                   help=f"{r.num_hit_tokens:,} of {r.num_prompt_tokens:,} prompt tokens.")
        col.caption(f"Last request ({both[layout].last_label}): {both[layout].last_layout_text}")
    fixed, var = both["fixed_first"].result, both["variable_first"].result
    st.markdown(
        f"**{wl_name}**: with the repeated content first, **{100 * fixed.hit_rate:.1f}%** of prompt tokens are "
        f"served from the cache; moving what changes to the top drops it to **{100 * var.hit_rate:.1f}%** — every "
        "block after the first difference has a new hash."
    )
    st.plotly_chart(figs.layout_bars(table, wk.PREFIX_WORKLOAD_LABELS, cfg.workload), width="stretch")
    st.caption(f"Every workload with the sizes above ({cfg.num_requests:,} requests, {cfg.shared_len:,} shared "
               f"tokens, ~{cfg.variable_len:,} new and ~{cfg.output_len:,} output tokens, {cfg.num_groups} groups) "
               f"and the same cache. RAG's 12-token instruction header is shared in both layouts but shorter "
               f"than a block of {cache.block_size}, so the question-first layout gets nothing from it.")

    frame = res.to_frame()
    st.plotly_chart(figs.per_request(frame, f"{wl_name}, {wk.LAYOUT_LABELS[cfg.layout]}: each request's prompt, "
                                     "hit vs computed"), width="stretch")
    c = st.columns(2)
    c[0].download_button("Download per-request results (CSV)", frame.to_csv(index=False).encode(),
                         file_name=f"prefix_cache_{cfg.workload}_{cfg.layout}.csv", mime="text/csv")
    shown = table.assign(hit_rate=(100 * table["hit_rate"]).round(2), prefill_speedup=table["prefill_speedup"].round(3))
    c[1].download_button("Download the workload overview (CSV)", shown.to_csv(index=False).encode(),
                         file_name="prefix_cache_workloads.csv", mime="text/csv")

    # --- what the hit rate buys (seed 002's 5×) ----------------------------------------------
    st.subheader("What the hit rate buys: prefill work, and throughput")
    c = st.columns([2, 3])
    c[0].number_input("One decode step costs … prefill tokens", 0.0, 100.0, step=1.0, key="decode_weight",
                      help="A prefix cache only removes prefill work; decode steps cost the same. On a GPU a prefill "
                           "token is compute-bound and a decode step memory-bound: at a batch of 8–64 one decode "
                           "token costs roughly 3–20 prefill tokens. 0 counts prefill alone (the upper bound).")
    w = float(ss["decode_weight"])
    agent = view.get("agent", "fixed_first")
    c = st.columns(4)
    c[0].metric("Throughput gain, this workload", f"{res.throughput_gain(w):.2f}×",
                help=f"(P + w·D) / (P − hits + w·D) with P = {res.num_prompt_tokens:,} prompt tokens, "
                     f"D = {res.num_decode_steps:,} decode steps, w = {w:g}.")
    c[1].metric("Agent loop: hit rate", f"{100 * agent.hit_rate:.1f}%")
    c[2].metric("Agent loop: prefill speed-up", f"{agent.prefill_speedup:.2f}×")
    c[3].metric("Agent loop: throughput gain", f"{agent.throughput_gain(w):.2f}×")
    st.markdown(claims.agent_paragraph(agent, w))
    return cfg, cache, num_tokens, res, view


def sweep_and_tree_sections(cfg: wk.PrefixWorkloadConfig, cache: CacheConfig, num_tokens: int, res) -> None:
    wl_name = wk.PREFIX_WORKLOAD_LABELS[cfg.workload]
    # --- 3. sweeps ------------------------------------------------------------------------------
    st.header("3. Cache capacity and block size")
    num_sims = ps.num_sweep_runs(cache)
    swept = run_job("prefix_caching.sweeps", (cfg, cache),
                    num_tokens * 2 * (SIM_S_PER_TOKEN + RESIM_S_PER_TOKEN * num_sims),
                    lambda progress: sweeps(cfg, cache), real_model=False,
                    what=f"Sweeping capacity and block size: {2 * num_sims} simulations")
    if swept is None:
        return
    cap, bsz = swept
    c = st.columns(2)
    c[0].plotly_chart(figs.sweep(cap, "capacity_tokens", cache.capacity_tokens,
                                 f"{wl_name}: hit rate vs cache capacity", "cache capacity (token slots)"),
                      width="stretch")
    c[1].plotly_chart(figs.sweep(bsz, "block_size", cache.block_size, f"{wl_name}: hit rate vs block size",
                                 "block size (tokens)"), width="stretch")
    st.caption(
        f"Left: block size {cache.block_size}, {cache.max_running} running. Too small a cache evicts shared blocks "
        "before they are needed again; capacities that cannot hold the longest request are left out. Right: the "
        f"same {cache.capacity_tokens:,} slots in blocks of each size. Only full blocks are cached, so every shared "
        "prefix loses its partial last block, and a prefix shorter than one block never hits; large blocks lose "
        "more (vLLM uses 16)."
    )

    # --- 4. tree ------------------------------------------------------------------------------
    st.header("4. The cached blocks as a tree")
    st.slider("Requests drawn", 2, MAX_TREE, key="tree_n")
    n = min(ss["tree_n"], cfg.num_requests)
    grown = run_job("prefix_caching.tree", (cfg, cache.block_size, n), SIM_S_PER_TOKEN * num_tokens * 3,
                    lambda progress: tree(cfg, cache.block_size, n), real_model=False,
                    what="Building the radix tree of every request")
    if grown is None:
        return
    st.plotly_chart(figs.radix_tree(grown.segments, cache.block_size, list(grown.labels),
                                    f"The first {n} requests of '{wl_name}' ({wk.LAYOUT_LABELS[cfg.layout]}) as "
                                    "paths of blocks"), width="stretch")
    st.markdown(
        "SGLang keeps the cache as a **radix tree**: every request is a path from the root, shared prefixes are "
        "shared edges, and a lookup walks down until a block differs. A request whose content changes at position "
        "*k* branches off at the block holding *k*; everything after it is a separate path, even where its tokens "
        "equal another request's. With variable content first, every request branches at the root."
    )
    agreement = grown.agreement(cache.capacity_tokens, res.num_hit_tokens)
    if agreement:
        st.caption(agreement)


section2 = workload_section()
if section2 is not None:
    sweep_and_tree_sections(*section2[:4])

# --- 5. Real model ------------------------------------------------------------------------------
st.header("5. On the real model: prefill a prefix once, branch many continuations")
st.markdown(
    "Seed 002's exercise: *prefill a prompt P once, then branch several completions from its cache, and measure "
    "the speed-up over re-encoding P for each.* Below the tiny model does both: **from scratch** prefills "
    "P + continuation for every branch; **branched** prefills P once into a `ContiguousKVCache`, and for each "
    "branch truncates the cache back to P, prefills only the continuation and decodes greedily."
)
st.toggle("Run on the real model", key="live")
real_finding = kv_finding = None
if ss["live"]:
    c = st.columns([3, 2])
    c[0].text_area("Shared prefix P", key="prefix", height=230, max_chars=MAX_PREFIX_BYTES)
    c[1].text_area("Continuations, one per line (a newline is added to each)", key="suffixes", height=120)
    c2 = c[1].columns(2)
    c2[0].number_input("New tokens per branch", 1, 64, key="live_new")
    c2[1].number_input("Timing repeats", 1, pr.MAX_REPEATS, key="repeats",
                       help="Each way runs this many times after a warm-up; the median is shown.")
    prefix_ids = to_bytes(ss["prefix"])
    lines = [s for s in ss["suffixes"].split("\n") if s.strip()]
    suffix_ids = [to_bytes(s + "\n") for s in lines]
    problem = None
    if not prefix_ids:
        problem = "The shared prefix is empty: type at least one character."
    elif len(prefix_ids) > MAX_PREFIX_BYTES:
        problem = f"The shared prefix is {len(prefix_ids):,} bytes; the limit is {MAX_PREFIX_BYTES}."
    elif not 1 <= len(suffix_ids) <= pr.MAX_BRANCHES:
        problem = f"Give 1..{pr.MAX_BRANCHES} continuations (one per line); there are {len(suffix_ids)}."
    elif max(len(s) for s in suffix_ids) > MAX_SUFFIX_BYTES:
        problem = f"A continuation is {max(len(s) for s in suffix_ids)} bytes; the limit is {MAX_SUFFIX_BYTES}."
    run = None
    if problem:
        st.error(problem)
    else:
        from sim.model.errors import CheckpointError

        try:
            run = live_branch(tuple(prefix_ids), tuple(tuple(s) for s in suffix_ids), ss["live_new"], ss["repeats"])
        except CheckpointError as exc:
            st.warning(f"The tiny model is not available: {plain(exc)}")
        except ValueError as exc:
            st.error(f"Cannot run: {plain(exc)}")
    if run is not None:
        m = st.columns(5)
        m[0].metric("Prefill from scratch", f"{1e3 * run.scratch_prefill_total_s:.1f} ms",
                    help=f"{run.scratch_prefill_tokens:,} tokens in {run.num_branches} passes.")
        m[1].metric("Prefill, prefix cached", f"{1e3 * run.branch_prefill_s:.1f} ms",
                    help=f"{run.branch_prefill_tokens:,} tokens in {run.num_branches + 1} passes.")
        m[2].metric("Prefill time saved", f"{100 * run.prefill_saved_share:.0f}%",
                    help=f"Prefill tokens saved: {100 * run.token_saved_share:.0f}%.")
        m[3].metric("Tokens identical", "yes" if run.tokens_identical else "NO",
                    help="Greedy decoding; every branch compared token by token with its from-scratch run.")
        m[4].metric("Largest logit diff", f"{run.max_abs_logit_diff:.1e}",
                    help="Over every branch and every step: the cached prefix's K/V enter attention in a different "
                         "summation order than one long prefill, so the last bits can differ.")
        if not run.tokens_identical:
            st.warning(f"Some branch produced different tokens from its from-scratch run. In {run.dtype} the two "
                       "ways round differently (the cached prefix's K/V meet the continuation's queries in another "
                       "summation order), and a near tie between two bytes can flip. In float32 on a CPU they agree "
                       "(the tests check it).")
        st.plotly_chart(figs.prefill_times(run, f"{run.num_branches} branches from a {len(run.prefix_ids)}-token "
                                           f"prefix on {run.device} ({run.dtype})"), width="stretch")
        per_decode = run.scratch_decode_s / max(1, run.num_branches * (run.num_new - 1))
        per_prefill = run.scratch_prefill_total_s / run.scratch_prefill_tokens
        ratio = f" One decode step here (batch 1) costs as much as **{per_decode / per_prefill:.0f}** prefill " \
                "tokens." if run.num_new > 1 else ""
        st.markdown(run.summary() + ratio)
        from sim.model.generate import decode

        rows = [{"branch": b + 1, "continuation": lines[b], "branched": decode(run.branch_tokens[b]),
                 "from scratch": decode(run.scratch_tokens[b]),
                 "same": run.branch_tokens[b] == run.scratch_tokens[b]} for b in range(run.num_branches)]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        real_finding = claims.branch_finding(run)

        st.subheader("Why one early byte invalidates every later block")
        kv_ids = prefix_ids[:KV_DEMO_BYTES]
        if len(kv_ids) < 2:
            st.info("The prefix needs at least 2 bytes for this view.")
        else:
            if ss["kv_pos"] > len(kv_ids) - 1:
                ss["kv_pos"] = len(kv_ids) - 1
            st.slider("Position of the changed byte (in the prefix's first bytes)", 0, len(kv_ids) - 1, key="kv_pos")
            kp = ss["kv_pos"]
            kc = queued(lambda: live_kv(tuple(kv_ids), kp), "Running both prompts through the model")
            st.plotly_chart(figs.kv_difference(
                kc, [show_char(b) for b in kv_ids],
                f"K and V after changing byte {kp} ({show_char(kv_ids[kp])} → {show_char(kc.changed_ids[kp])}), "
                f"measured in all {kc.num_layers} layers"), width="stretch")
            counts = [kc.num_changed_positions(layer) for layer in range(kc.num_layers)]
            kv_text, kv_finding = claims.kv_change_text(counts, kp, len(kv_ids))
            st.markdown(kv_text)
else:
    st.info("Turn on *Run on the real model* to prefill and branch on the tiny model.")

# --- 6. Seeds ---------------------------------------------------------------------------------------
st.header("6. The seeds' claims, checked")
render_claims(claims.prefix_claims(demo, None if section2 is None else section2[4], float(ss["decode_weight"]),
                                   real_finding, kv_finding), "prefix_caching")
url.sync()
