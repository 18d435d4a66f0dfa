"""The Paged KV blocks page's chart titles as takeaways, worded from the result each chart shows: real tokens
against the capacity over time, the block-size trade-off, and what sharing blocks saved (parallel sampling,
simulated and on the real model). Each sentence flips its wording when its comparison flips. Each takes `lang`
("en" or "ko") and words its sentence from the catalogs (sim/i18n.py); numbers are formatted here, the same in both."""

from __future__ import annotations

from collections.abc import Mapping

from sim.alloc.policies import BlockSizeTradeoff
from sim.alloc.schedule import PolicyResult
from sim.i18n import text


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
