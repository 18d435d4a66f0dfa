"""Lower tiers for the prefix cache: host memory and disk below the GPU's block pool, as LMCache and vLLM's
offloading connector keep them.

A cached prefix block the GPU evicts (its block handed out again from the free queue's head) is not lost: its
hash goes down to the first lower tier with room (host memory, then disk). Each tier holds at most its capacity
in blocks and forgets its least recently used hash first; a hash the host forgets moves down to the disk, one the
disk forgets is gone. A request whose prompt blocks the GPU does not hold asks the tiers next (after the GPU's own
run of hits, as vLLM asks its connector): the run of consecutive block hashes found below is *loaded* (copied
back into fresh GPU blocks over that tier's link) instead of prefilled again; those hashes stay in their tier,
touched (a copy, not a move).

Costs: a load is on the critical path, added to the pass that admits the request (bytes = blocks × block size ×
KV bytes per token, over the tier's link: PCIe or NVLink-C2C for the host, the drive's read rate for a disk). A copy
down is counted in bytes but costs the pass nothing: vLLM's connector and LMCache write asynchronously while the GPU
computes. Loading wins when it is faster than recomputing those tokens' prefill (`recompute_seconds`), and that
grows with the position of the block (attention reads every earlier key), so `breakeven_position` says from which
token on a link beats recomputing on a GPU.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sim.refusal import Misuse
from sim.serving.links import link as find_link
from sim.serving.step_cost import PassWork, extend_work

TIER_NAMES = ("GPU", "host", "disk")
MAX_TIER_TOKENS = 1 << 28  # 268M token slots: terabytes of KV for an 8B model


@dataclass(frozen=True)
class OffloadConfig:
    """Token slots of each lower tier (0: no such tier) and the link a load from it crosses."""

    cpu_tokens: int = 0
    cpu_link: str = "pcie5"
    disk_tokens: int = 0
    disk_link: str = "nvme"

    def __post_init__(self) -> None:
        # the offload tab bounds both tiers (below MAX_TIER_TOKENS) and picks the links from HOST_LINKS
        for name, v in (("host", self.cpu_tokens), ("disk", self.disk_tokens)):
            if not 0 <= v <= MAX_TIER_TOKENS:
                raise Misuse(f"{name} tier must hold 0..{MAX_TIER_TOKENS:,} token slots, got {v:,}")
        find_link(self.cpu_link)
        find_link(self.disk_link)

    @property
    def links(self) -> tuple[str, str]:
        return self.cpu_link, self.disk_link

    def capacities(self, block_size: int) -> tuple[int, int]:
        """Blocks each lower tier holds."""
        return self.cpu_tokens // block_size, self.disk_tokens // block_size


class TierCache:
    """The host and disk tiers: an LRU of block hashes each (oldest first), with the traffic counted in blocks."""

    def __init__(self, cfg: OffloadConfig, block_size: int) -> None:
        self.cfg = cfg
        self.block_size = block_size
        self.capacity = cfg.capacities(block_size)
        self.lru: tuple[OrderedDict[int, None], OrderedDict[int, None]] = (OrderedDict(), OrderedDict())
        self.blocks_written = [0, 0]  # blocks copied down into each tier
        self.blocks_dropped = 0  # forgotten by the last tier with room

    def _put(self, tier: int, h: int) -> None:
        """h into `tier` or, when that tier holds nothing, the next one; the tier's LRU hash goes down."""
        while tier < 2 and self.capacity[tier] == 0:
            tier += 1
        if tier == 2:
            self.blocks_dropped += 1
            return
        lru = self.lru[tier]
        if h in lru:
            lru.move_to_end(h)
            return
        lru[h] = None
        self.blocks_written[tier] += 1
        if len(lru) > self.capacity[tier]:
            old, _ = lru.popitem(last=False)
            self._put(tier + 1, old)

    def evicted_from_gpu(self, h: int) -> None:
        self._put(0, h)

    def find(self, hashes) -> list[int]:
        """The tier (1 host, 2 disk) of each of the leading hashes found below the GPU; stops at the first miss."""
        out = []
        for h in hashes:
            if h in self.lru[0]:
                out.append(1)
            elif h in self.lru[1]:
                out.append(2)
            else:
                break
        return out

    def touch(self, hashes, tiers) -> None:
        """Loaded blocks: most recently used in the tier they were read from."""
        for h, t in zip(hashes, tiers, strict=True):
            self.lru[t - 1].move_to_end(h)

    def contents(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(host hashes, disk hashes), least recently used first."""
        return tuple(self.lru[0]), tuple(self.lru[1])

    def check_invariants(self) -> None:
        for lru, cap in zip(self.lru, self.capacity, strict=True):
            assert len(lru) <= cap, f"a tier holds {len(lru)} blocks, over its {cap}"


def recompute_seconds(cost, num_tokens: int, context: int) -> float:
    """What prefilling num_tokens prompt tokens after `context` cached ones costs the GPU, on top of the pass that
    carries them: their FLOPs at the GPU's peak (a prefill is compute-bound) for a roofline cost; the cost's
    increase over an empty pass otherwise (a hand-checkable LinearCost). No logits are needed for them."""
    if num_tokens <= 0:
        return 0.0
    w = extend_work(num_tokens, context, int(getattr(cost, "window", 1 << 40)), logits_rows=0)
    if hasattr(cost, "flops") and hasattr(cost, "hw"):
        return float(cost.flops(w)) / cost.hw.peak_flops
    return float(cost.seconds(w)) - float(cost.seconds(PassWork(0)))


def load_seconds(num_tokens: int, kv_bytes_per_token: int, link_key: str) -> float:
    return num_tokens * kv_bytes_per_token / find_link(link_key).bytes_per_s


def breakeven_position(cost, kv_bytes_per_token: int, link_key: str, block_size: int, max_context: int) -> int | None:
    """The first token position (a block start) from which loading one block over the link is faster than
    recomputing it; 0 when loading always wins, None when recomputing wins up to max_context. Recomputing a block
    costs more the later it sits, loading the same everywhere, so one binary search finds it."""
    load = load_seconds(block_size, kv_bytes_per_token, link_key)
    last = max(0, (max_context - block_size) // block_size)

    def wins(j: int) -> bool:
        return recompute_seconds(cost, block_size, j * block_size) > load

    if not wins(last):
        return None
    lo, hi = 0, last  # wins(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if wins(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo * block_size

