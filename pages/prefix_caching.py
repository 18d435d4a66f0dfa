import streamlit as st

from app.claims import render_claims
from app.controls import prefix_caching as controls
from app.figures import prefix_cache as figs
from app.metrics import show_metrics
from app.present import show_chart, show_chart_in, show_table
from app.resources import live_result
from app.runs import prefix_caching as runs
from app.text import for_plotly, plain
from app.urlstate import UrlState
from sim.alloc import prefix_claims as claims
from sim.alloc import prefix_readouts as ro
from sim.alloc import prefix_sweeps as ps
from sim.alloc import workload as wk
from sim.alloc.byte_tokens import show_byte

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
controls.register(url)
url.show_problems()

# --- 1. Block hashes ------------------------------------------------------------------------------
st.header("1. A block is found by its hash, and its hash covers everything before it")
st.markdown(
    "Prompt **A** is served first and its full blocks are cached. Prompt **B** is A with **one byte changed**. "
    "Each token here is one byte, as in the lab's tiny model. Block *i*'s hash is "
    "`H(hash of block i−1, tokens of block i)`: the blocks before the change get the same hashes and are read "
    "from the cache; the block with the change and **every block after it** get new hashes, although their "
    "tokens are identical."
)
def shown_byte(b: int) -> str:
    """A byte of user text as a chart label: escaped for plotly."""
    return for_plotly(show_byte(b))


choice = controls.demo_prompt()
demo = None if choice is None else ps.change_one_byte(choice.ids, choice.pos, choice.block_size)
if demo is not None:
    show_metrics(demo.metrics())
    show_chart(figs.block_rows(demo.frame, demo.changed_pos, demo.block_size, demo.chart_title(shown_byte)),
               width="stretch")
    st.markdown(demo.summary())
    with st.expander("Every block, its hash and its parent's hash"):
        show_table(demo.block_table(), hide_index=True, width="stretch")
        st.caption("Hash: the first 64 bits of BLAKE2b over the parent's hash, the block's token ids and any extra "
                   "keys (vLLM adds LoRA adapter, multimodal inputs and a cache salt there). The root's parent is "
                   "all zeros.")


# --- 2. Workloads -------------------------------------------------------------------------------
def workload_section():
    """Section 2; (cfg, cache, the chosen run, the overview), or None when it cannot run."""
    st.header("2. Hit rate by workload and prompt layout")
    try:
        cfg, cache = controls.workload_and_cache()
        got = runs.workloads(cfg, cache)
    except ValueError as exc:
        st.error(f"These settings cannot be simulated: {plain(exc)}")
        return None
    if got is None:
        return None
    both, view = got
    res, table = both[cfg.layout].result, view.to_frame()
    show_metrics(ro.hit_metrics(res))

    st.subheader("The same content, two layouts")
    for col, layout in zip(st.columns(2), wk.LAYOUTS, strict=True):
        m = ro.layout_metric(layout, both[layout])
        col.metric(m.label, m.value, help=m.help)
        col.caption(both[layout].last_request_caption())
    st.markdown(ro.layout_sentence(cfg.workload, both))
    show_chart(figs.layout_bars(table, wk.PREFIX_WORKLOAD_LABELS, cfg.workload, view.layout_takeaway(cfg.workload)),
               width="stretch")
    st.caption(ro.workloads_caption(cfg, cache))

    frame = res.to_frame()
    show_chart(figs.per_request(frame, ro.per_request_takeaway(cfg.workload, cfg.layout, res)), width="stretch")
    c = st.columns(2)
    c[0].download_button("Download per-request results (CSV)", frame.to_csv(index=False).encode(),
                         file_name=f"prefix_cache_{cfg.workload}_{cfg.layout}.csv", mime="text/csv")
    c[1].download_button("Download the workload overview (CSV)", view.to_csv_frame().to_csv(index=False).encode(),
                         file_name="prefix_cache_workloads.csv", mime="text/csv")

    # --- what the hit rate buys (seed 002's 5×) ----------------------------------------------
    st.subheader("What the hit rate buys: prefill work, and throughput")
    w = controls.decode_weight()
    agent = view.get("agent", "fixed_first")
    show_metrics(ro.throughput_metrics(res, agent, w))
    st.markdown(claims.agent_paragraph(agent, w))
    return cfg, cache, res, view


def sweep_and_tree_sections(cfg: wk.PrefixWorkloadConfig, cache, res) -> None:
    # --- 3. sweeps ------------------------------------------------------------------------------
    st.header("3. Cache capacity and block size")
    swept = runs.capacity_and_block_size(cfg, cache)
    if swept is None:
        return
    cap, bsz = swept
    c = st.columns(2)
    show_chart_in(c[0], figs.sweep(cap, "capacity_tokens", cache.capacity_tokens,
                                   ro.capacity_takeaway(cap, cache.capacity_tokens),
                                   "cache capacity (token slots)"), width="stretch")
    show_chart_in(c[1], figs.sweep(bsz, "block_size", cache.block_size,
                                   ro.block_size_takeaway(bsz, cache.block_size), "block size (tokens)"),
                  width="stretch")
    st.caption(ro.sweep_caption(cache))

    # --- 4. tree ------------------------------------------------------------------------------
    st.header("4. The cached blocks as a tree")
    n = ro.num_tree_requests(cfg, controls.tree_requests())
    grown = runs.radix_tree(cfg, cache.block_size, n)
    if grown is None:
        return
    show_chart(figs.radix_tree(grown.segments, cache.block_size, list(grown.labels),
                               ro.tree_takeaway(cfg, n, grown.segments)), width="stretch")
    st.markdown(
        "SGLang keeps the cache as a **radix tree**: every request is a path from the root, shared prefixes are "
        "shared edges, and a lookup walks down until a block differs. A request whose content changes at position "
        "*k* branches off at the block holding *k*; everything after it is a separate path, even where its tokens "
        "equal another request's. " + ro.tree_branching_sentence(grown.segments, n)
    )
    agreement = grown.agreement(cache.capacity_tokens, res.num_hit_tokens)
    if agreement:
        st.caption(agreement)


section2 = workload_section()
if section2 is not None:
    sweep_and_tree_sections(*section2[:3])

# --- 5. Real model ------------------------------------------------------------------------------
st.header("5. On the real model: prefill a prefix once, branch many continuations")
st.markdown(
    "Seed 002's exercise: *prefill a prompt P once, then branch several completions from its cache, and measure "
    "the speed-up over re-encoding P for each.* Below the tiny model does both: **from scratch** prefills "
    "P + continuation for every branch; **branched** prefills P once into a `ContiguousKVCache`, and for each "
    "branch truncates the cache back to P, prefills only the continuation and decodes greedily."
)
inputs = controls.branch_inputs()
real_finding = kv_finding = run = None
if inputs is None:
    st.info("Turn on *Run on the real model* to prefill and branch on the tiny model.")
elif inputs.problem:
    st.error(inputs.problem)
else:
    run = live_result(lambda: runs.branch(inputs), "Cannot run")
if run is not None:
    show_metrics(run.metrics())
    if run.mismatch_warning():
        st.warning(run.mismatch_warning())
    show_chart(figs.prefill_times(run, run.chart_title()), width="stretch")
    st.markdown(run.report())
    show_table(run.to_frame(inputs.continuations), hide_index=True, width="stretch")
    real_finding = claims.branch_finding(run)

    st.subheader("Why one early byte invalidates every later block")
    if inputs.kv_problem:
        st.info(inputs.kv_problem)
    else:
        kc = runs.kv_change(inputs.kv_ids, controls.kv_position(len(inputs.kv_ids)))
        show_chart(figs.kv_difference(kc, kc.position_labels(), kc.chart_title(shown_byte)), width="stretch")
        st.markdown(kc.summary())
        kv_finding = kc.finding()

# --- 6. Seeds ---------------------------------------------------------------------------------------
st.header("6. The seeds' claims, checked")
render_claims(claims.prefix_claims(demo, None if section2 is None else section2[3], controls.decode_weight_value(),
                                   real_finding, kv_finding), "prefix_caching")
url.sync()
