"""The Paged KV blocks page's results in words (moved here from sim/alloc/paging_readouts.py, sim/alloc/pool_views.py
and sim.alloc.policies.Comparison's methods): the chart titles over the runs, the time frames of the block grid, one
request's blocks, the free queue, the first-fit heap, parallel sampling's shared blocks and copy-on-write copies, and
the results table, each worded from its numbers in `lang` ("en" or "ko")."""

from __future__ import annotations

from collections.abc import Mapping

from sim.alloc.block_pool import ForkResult, PoolSnapshot, block_usage
from sim.alloc.policies import PAPER_CONTIGUOUS_TOKEN_PCT, PAPER_PAGED_WASTE_PCT, BlockSizeTradeoff, Comparison
from sim.alloc.pool_views import (
    COPIES_SHOWN,
    FREE_QUEUE_SHOWN,
    GRID_MAX_BLOCKS,
    GRID_MAX_STEP,
    HeapView,
    PoolFrames,
    marked_block_table,
)
from sim.alloc.schedule import PolicyResult
from sim.words import text


def _pct(x: float, places: int = 1) -> str:
    return f"{100 * x:.{places}f}%"


def _span(values: list[float], places: int = 1) -> str:
    lo, hi = _pct(min(values), places), _pct(max(values), places)
    return lo if lo == hi else f"{lo[:-1]}–{hi}"


def capacity_takeaway(results: Mapping[str, PolicyResult], lang: str = "en") -> str:
    """The memory-over-time chart's title: real tokens as a share of the whole capacity over each run, paged
    against the contiguous policies' range (idle memory counts against a policy)."""
    paged = results["paged"]
    others = [r.capacity_share_tokens for p, r in results.items() if p != "paged"]
    cap = text(lang, "paged.s.cap.capacity", n=f"{paged.capacity_tokens:,}")
    p, span = _pct(paged.capacity_share_tokens), _span(others)
    policies = text(lang, "paged.s.cap.policies" if len(others) > 1 else "paged.s.cap.policy")
    fields = dict(p=p, cap=cap, span=span, policies=policies)
    if not others:
        return text(lang, "paged.s.cap.alone", **fields)
    lo, hi = min(others), max(others)
    if p == span:
        return text(lang, "paged.s.cap.same", **fields)
    if paged.capacity_share_tokens > hi:
        return text(lang, "paged.s.cap.more", **fields)
    if paged.capacity_share_tokens < lo:
        return text(lang, "paged.s.cap.less", **fields)
    return text(lang, "paged.s.cap.within", **fields)


def _trend(first: float, last: float, same: bool, up: str, down: str, flat: str) -> str:
    return flat if same else up if last > first else down


def block_size_takeaway(trade: BlockSizeTradeoff, chosen: int, lang: str = "en") -> str:
    """The block-size chart's title: the chosen size's last-block waste and table length, and which way each
    goes from the smallest swept size to the largest."""
    waste, table = trade.at(chosen)
    sizes = trade.block_size.tolist()
    head = text(lang, "paged.s.bs.head", bs=f"{chosen}", waste=_pct(waste, 2), table=f"{table:,.1f}")
    if len(sizes) < 2:
        return head
    w0, w1 = _pct(float(trade.last_block_waste[0]), 2), _pct(float(trade.last_block_waste[-1]), 2)
    t0, t1 = f"{float(trade.mean_table_len[0]):,.1f}", f"{float(trade.mean_table_len[-1]):,.1f}"
    w = _trend(float(trade.last_block_waste[0]), float(trade.last_block_waste[-1]), w0 == w1,
               *(text(lang, f"paged.s.bs.waste_{k}") for k in ("up", "down", "flat")))
    t = _trend(float(trade.mean_table_len[0]), float(trade.mean_table_len[-1]), t0 == t1,
               *(text(lang, f"paged.s.bs.tables_{k}") for k in ("up", "down", "flat")))
    return text(lang, "paged.s.bs.full", head=head, lo=f"{sizes[0]:,}", hi=f"{sizes[-1]:,}", w=w, w0=w0, w1=w1,
                t=t, t0=t0, t1=t1)


def sharing_takeaway(num_branches: int, num_used_blocks: int, num_blocks_if_copied: int, num_shared_blocks: int,
                     block_size: int, bytes_per_block: int | None = None, lead: str = "", lang: str = "en") -> str:
    """A block grid's title after forking: the blocks the branches hold against every branch with its own copy,
    and how many blocks are still shared (bytes too when bytes_per_block is given). lead: words before
    "sharing" ("After 24 tokens per branch, "), already in `lang`."""
    def nbytes(blocks: int) -> str:
        return text(lang, "paged.s.share.bytes", n=f"{blocks * bytes_per_block:,}") if bytes_per_block else ""

    who = (text(lang, "paged.s.share.who_one") if num_branches == 1
           else text(lang, "paged.s.share.who", n=f"{num_branches:,}"))
    held = text(lang, "paged.s.share.held", n=f"{num_used_blocks:,}", bs=f"{block_size}",
                bytes=nbytes(num_used_blocks))
    copies = text(lang, "paged.s.share.copies", n=f"{num_blocks_if_copied:,}", bytes=nbytes(num_blocks_if_copied))
    shared = (text(lang, "paged.s.share.none") if num_shared_blocks == 0 else
              text(lang, f"paged.s.share.still.{'other' if num_shared_blocks != 1 else 'one'}",
                   n=f"{num_shared_blocks:,}"))
    sharing = text(lang, "paged.s.share.lead", lead=lead) if lead else text(lang, "paged.s.share.bare")
    fields = dict(sharing=sharing, who=who, held=held, copies=copies, shared=shared)
    if num_used_blocks < num_blocks_if_copied:
        saved = 1 - num_used_blocks / num_blocks_if_copied
        return text(lang, "paged.s.share.saves", saved=f"{saved:.0%}", **fields)
    if num_used_blocks == num_blocks_if_copied:
        return text(lang, "paged.s.share.nothing", **fields)
    return text(lang, "paged.s.share.costs", **fields)


# --- the block pool ---------------------------------------------------------------------------


def grid_too_big(num_blocks: int, lang: str = "en") -> str | None:
    """Why the pool is not drawn block by block, or None when it is."""
    if num_blocks <= GRID_MAX_BLOCKS:
        return None
    return text(lang, "paged.s.grid_too_big", n=f"{num_blocks:,}", max=f"{GRID_MAX_BLOCKS:,}")


def pool_title(snap: PoolSnapshot, step: int, lang: str = "en") -> str:
    running = len(snap.req_to_block_table)
    return text(lang, "paged.s.pool_title", step=f"{step:,}", used=f"{snap.num_used_blocks:,}",
                total=f"{snap.num_blocks:,}", running=f"{running}", tokens=f"{snap.num_stored_tokens:,}")


def request_line(snap: PoolSnapshot, req: int, lang: str = "en") -> str:
    """How many tokens a running request holds, in how many blocks (Markdown)."""
    n_tok = snap.req_to_num_tokens[req]
    blocks, slots, share = block_usage(n_tok, snap.block_size)
    return text(lang, "paged.s.request_line", req=f"{req}", tokens=f"{n_tok}", blocks=f"{blocks}",
                share=f"{share:.0%}", slots=f"{slots}")


def free_queue_line(snap: PoolSnapshot, shown: int = FREE_QUEUE_SHOWN, lang: str = "en") -> str:
    """The free queue's length and the blocks it hands out next (Markdown)."""
    queue = snap.free_block_queue
    head = ", ".join(str(b) for b in queue[:shown])
    more = " …" if len(queue) > shown else ""
    return text(lang, "paged.s.free_queue", n=f"{len(queue):,}", head=f"{head or '—'}{more}")


def block_example_caption(num_tokens: int, block_size: int, lang: str = "en") -> str:
    blocks, slots, _ = block_usage(num_tokens, block_size)
    return text(lang, "paged.s.block_example", tokens=f"{num_tokens:,}", blocks=f"{blocks:,}", slots=f"{slots:,}")


def fork_summary(fork: ForkResult, shown: int = COPIES_SHOWN, lang: str = "en") -> str:
    """What prefilling once and forking did to the pool: ref counts, copy-on-write copies, blocks still shared."""
    copies = ", ".join(f"{s}→{d}" for s, d in fork.cow_copies[:shown]) + (" …" if len(fork.cow_copies) > shown else "")
    cow = (text(lang, "paged.s.fork.cow", copies=copies) if fork.cow_copies else text(lang, "paged.s.fork.no_cow"))
    return text(lang, "paged.s.fork.summary", blocks=f"{len(fork.after_prefill.req_to_block_table[0])}",
                n=f"{fork.num_branches}", cow=cow, shared=f"{fork.num_shared_blocks}")


def fork_grid_title(fork: ForkResult, lang: str = "en") -> str:
    """The parallel-sampling grid's title: what sharing the prompt's blocks saved after the branches wrote."""
    return sharing_takeaway(fork.num_branches, fork.num_used_blocks, fork.num_blocks_if_copied,
                            fork.num_shared_blocks, fork.block_size,
                            lead=text(lang, "paged.s.fork.lead", n=f"{fork.num_generated:,}"), lang=lang)


def grid_key(lang: str = "en") -> str:
    """The legend of a forked pool's grid."""
    return text(lang, "paged.s.grid_key")


def table_frame(snap: PoolSnapshot, req: int, lang: str = "en"):
    """A request's block table (PoolSnapshot.table_frame) with its column headers in `lang`."""
    frame = snap.table_frame(req)
    return frame.rename(columns={c: text(lang, f"paged.table.{k}") for c, k in TABLE_COLUMNS.items()})


def policy_label(policy: str, lang: str = "en") -> str:
    """An allocator's long name ('Paged blocks (vLLM)') in `lang` (sim.alloc.schedule.POLICY_LABELS is the
    English)."""
    return text(lang, f"paged.policy.{policy}")


def results_table(frame, lang: str = "en"):
    """The results table as the page shows it: headers and allocator names in `lang` (the CSV keeps the English
    identifiers)."""
    if lang == "en":
        return frame
    shown = frame.assign(policy=[policy_label(p, lang) for p in frame["policy"]])
    return shown.rename(columns={c: text(lang, f"paged.col.{c}") for c in frame.columns})


def frames_help(frames: PoolFrames, lang: str = "en") -> str:
    """The time slider's help in `lang`."""
    return text(lang, "paged.s.frames", n=f"{len(frames.steps)}",
                first=text(lang, "paged.s.frames_first", max=f"{GRID_MAX_STEP:,}") if frames.truncated else "")


def heap_title(view: HeapView, lang: str = "en") -> str:
    """The heap chart's title in `lang`."""
    return text(lang, "paged.s.heap_title", step=f"{view.step:,}", n=f"{len(view.req)}", free=f"{view.num_free:,}")


TABLE_COLUMNS = {"logical block": "logical", "physical block": "physical", "tokens": "tokens",
                 "slots used": "slots_used", "ref_cnt": "ref_cnt"}


# --- the comparison of allocators ----------------------------------------------------------------


def drawn_caption(cmp: Comparison, lang: str = "en") -> str:
    """The requests drawn and the pool they go into, in one sentence."""
    wl, serving = cmp.workload, cmp.serving
    return text(lang, "paged.s.drawn", n=f"{wl.num_requests:,}", prompt=f"{wl.prompt_len.mean():.0f}",
                prompt_max=f"{wl.prompt_len.max():,}", output=f"{wl.output_len.mean():.0f}",
                output_max=f"{wl.output_len.max():,}", blocks=f"{serving.num_blocks:,}",
                bs=f"{serving.block_size}")


def memory_summary(cmp: Comparison, lang: str = "en") -> str:
    """Where the claimed memory went, contiguous against paged, next to the vLLM paper's figures (Markdown)."""
    paged = cmp.results["paged"]
    contiguous = [r.token_share for p, r in cmp.results.items() if p != "paged"]
    lo, hi = PAPER_CONTIGUOUS_TOKEN_PCT
    return text(lang, "paged.s.memory_summary", lo=f"{100 * min(contiguous):.1f}", hi=f"{100 * max(contiguous):.1f}",
                paper_lo=f"{lo}", paper_hi=f"{hi}", paged=f"{100 * paged.token_share:.1f}",
                waste=f"{100 * (1 - paged.token_share):.1f}", paper_waste=f"{PAPER_PAGED_WASTE_PCT}")


def memory_takeaway(cmp: Comparison, lang: str = "en") -> str:
    """The breakdown chart's title: paged's share of claimed memory holding real tokens against the
    contiguous policies' range, worded by where paged falls."""
    paged = 100 * cmp.results["paged"].token_share
    shares = sorted(100 * r.token_share for p, r in cmp.results.items() if p != "paged")
    lo, hi = shares[0], shares[-1]
    span = f"{lo:.1f}%" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}%"
    policies = text(lang, "paged.s.mem.policy" if len(shares) == 1 else "paged.s.mem.policies")
    fields = dict(span=span, paged=f"{paged:.1f}%", policies=policies)
    if span == f"{paged:.1f}%":
        return text(lang, "paged.s.mem.same", **fields)
    if paged > hi:
        return text(lang, "paged.s.mem.more", **fields)
    if paged < lo:
        return text(lang, "paged.s.mem.less", **fields)
    return text(lang, "paged.s.mem.within", **fields)


def concurrency_takeaway(cmp: Comparison, lang: str = "en") -> str:
    """The running-requests chart's title: paged against reserve-max-length, requests at once on average."""
    paged, max_len = cmp.results["paged"].mean_running, cmp.results["reserve_max_len"].mean_running
    p, m = f"{paged:.1f}", f"{max_len:.1f}"
    if p == m:
        return text(lang, "paged.s.conc.same", p=p)
    if paged > max_len:
        return text(lang, "paged.s.conc.more", p=p, m=m, x=f"{paged / max_len:,.1f}")
    return text(lang, "paged.s.conc.less", p=p, m=m)


def concurrency_summary(cmp: Comparison, lang: str = "en") -> str:
    """How many requests ran at once, paged against reserving the maximum length, and the preemptions (Markdown)."""
    paged, max_len = cmp.results["paged"], cmp.results["reserve_max_len"]
    if paged.makespan < max_len.makespan:
        finish = text(lang, "paged.s.finish.sooner", x=f"{max_len.makespan / paged.makespan:.2f}")
    elif paged.makespan > max_len.makespan:
        finish = text(lang, "paged.s.finish.later", x=f"{paged.makespan / max_len.makespan:.2f}")
    else:
        finish = text(lang, "paged.s.finish.same")
    return text(lang, "paged.s.concurrency_summary", cap=f"{cmp.serving.capacity_tokens:,}",
                paged=f"{paged.mean_running:.1f}", max_len=f"{max_len.mean_running:.1f}", finish=finish,
                preemptions=f"{paged.num_preemptions:,}")


def live_branch_frame(run, lang: str = "en"):
    """The real model's paged run (sim.model.paged_cache.PagedRun), one row per branch: the text it wrote and its
    block table, shared blocks starred."""
    import pandas as pd

    branch, wrote, table = (text(lang, f"paged.live.col.{c}") for c in ("branch", "wrote", "table"))
    return pd.DataFrame([{branch: b, wrote: bytes(ids).decode("utf-8", errors="replace"),
                          table: marked_block_table(run.final, b)} for b, ids in enumerate(run.branch_ids)])


def live_grid_title(run, lang: str = "en") -> str:
    """The real pool's title: the blocks (and bytes) the branches hold against unshared copies."""
    return sharing_takeaway(len(run.branch_ids), run.final.num_used_blocks, run.num_blocks_if_copied,
                            run.num_shared_blocks, run.block_size, run.bytes_per_block,
                            lead=text(lang, "paged.live.lead"), lang=lang)
