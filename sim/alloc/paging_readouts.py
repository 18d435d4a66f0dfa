"""The Paged KV blocks page's chart titles as takeaways, worded from the result each chart shows: real tokens
against the capacity over time, the block-size trade-off, and what sharing blocks saved (parallel sampling,
simulated and on the real model). Each sentence flips its wording when its comparison flips."""

from __future__ import annotations

from collections.abc import Mapping

from sim.alloc.policies import BlockSizeTradeoff
from sim.alloc.schedule import PolicyResult


def _pct(x: float, places: int = 1) -> str:
    return f"{100 * x:.{places}f}%"


def _span(values: list[float], places: int = 1) -> str:
    lo, hi = _pct(min(values), places), _pct(max(values), places)
    return lo if lo == hi else f"{lo[:-1]}–{hi}"


def capacity_takeaway(results: Mapping[str, PolicyResult]) -> str:
    """The memory-over-time chart's title: real tokens as a share of the whole capacity over each run, paged
    against the contiguous policies' range (idle memory counts against a policy)."""
    paged = results["paged"]
    others = [r.capacity_share_tokens for p, r in results.items() if p != "paged"]
    cap = f"the {paged.capacity_tokens:,}-slot capacity"
    p, span = _pct(paged.capacity_share_tokens), _span(others)
    policies = "contiguous allocation" if len(others) > 1 else "the contiguous policy"
    if not others:
        return f"Real tokens fill {p} of {cap} over the paged run"
    lo, hi = min(others), max(others)
    if p == span:
        return f"Real tokens fill {p} of {cap} over the run, paged or contiguous alike"
    if paged.capacity_share_tokens > hi:
        return f"Real tokens fill {p} of {cap} over the run with paged blocks vs {span} with {policies}"
    if paged.capacity_share_tokens < lo:
        return f"Real tokens fill only {p} of {cap} over the run with paged blocks vs {span} with {policies}"
    return f"Real tokens fill {p} of {cap} over the run with paged blocks, within {span} with {policies}"


def _trend(first: float, last: float, same: bool, up: str, down: str, flat: str) -> str:
    return flat if same else up if last > first else down


def block_size_takeaway(trade: BlockSizeTradeoff, chosen: int) -> str:
    """The block-size chart's title: the chosen size's last-block waste and table length, and which way each
    goes from the smallest swept size to the largest."""
    waste, table = trade.at(chosen)
    sizes = trade.block_size.tolist()
    head = f"Blocks of {chosen} leave {_pct(waste, 2)} of slots empty and need {table:,.1f} table entries per request"
    if len(sizes) < 2:
        return head
    w0, w1 = _pct(float(trade.last_block_waste[0]), 2), _pct(float(trade.last_block_waste[-1]), 2)
    t0, t1 = f"{float(trade.mean_table_len[0]):,.1f}", f"{float(trade.mean_table_len[-1]):,.1f}"
    w = _trend(float(trade.last_block_waste[0]), float(trade.last_block_waste[-1]), w0 == w1,
               "waste grows", "waste shrinks", "waste stays")
    t = _trend(float(trade.mean_table_len[0]), float(trade.mean_table_len[-1]), t0 == t1,
               "tables grow", "tables shrink", "tables stay")
    return (f"{head}; from {sizes[0]:,} to {sizes[-1]:,} tokens a block, {w} ({w0} → {w1}) while {t} "
            f"({t0} → {t1} entries)")


def sharing_takeaway(num_branches: int, num_used_blocks: int, num_blocks_if_copied: int, num_shared_blocks: int,
                     block_size: int, bytes_per_block: int | None = None, lead: str = "") -> str:
    """A block grid's title after forking: the blocks the branches hold against every branch with its own copy,
    and how many blocks are still shared (bytes too when bytes_per_block is given). lead: words before
    "sharing" ("After 24 tokens per branch, ")."""
    def nbytes(blocks: int) -> str:
        return f" ({blocks * bytes_per_block:,} bytes)" if bytes_per_block else ""

    who = "1 branch holds" if num_branches == 1 else f"{num_branches:,} branches hold"
    held = f"{num_used_blocks:,} blocks of {block_size} tokens{nbytes(num_used_blocks)}"
    copies = f"{num_blocks_if_copied:,}{nbytes(num_blocks_if_copied)}"
    shared = ("no block is shared" if num_shared_blocks == 0 else
              f"{num_shared_blocks:,} block{'s' if num_shared_blocks != 1 else ''} still shared")
    sharing = f"{lead}sharing" if lead else "Sharing"
    if num_used_blocks < num_blocks_if_copied:
        saved = 1 - num_used_blocks / num_blocks_if_copied
        return f"{sharing} saves {saved:.0%}: {who} {held} instead of {copies} as unshared copies, {shared}"
    if num_used_blocks == num_blocks_if_copied:
        return f"{sharing} saves nothing: {who} {held}, as many as unshared copies, {shared}"
    return f"{sharing} costs blocks: {who} {held}, more than the {copies} of unshared copies, {shared}"
