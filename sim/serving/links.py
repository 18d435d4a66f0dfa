"""The links KV bytes cross when a server moves a cache: host offload and swap (GPU <-> CPU <-> disk) and
prefill -> decode transfer between GPUs. One direction each, decimal bytes per second as vendors state them.

The host links are sim.cost.shrink's (the Shrink the cache page prices offloading with the same numbers)."""

from __future__ import annotations

from sim.cost.shrink import LINKS as HOST_LINKS
from sim.cost.shrink import Link
from sim.refusal import Misuse

# GPU -> GPU links for prefill/decode disaggregation (KV of a whole prompt moves once per request)
GPU_LINKS: dict[str, Link] = {
    "nvlink4": Link("NVLink 4 (H100, same node)", 450e9, "NVIDIA: 900 GB/s total per H100, 450 GB/s each way",
                    "serving.link.nvlink4"),
    "ib_ndr": Link("InfiniBand NDR 400 Gb/s (across nodes)", 50e9, "400 Gb/s per port = 50 GB/s each way",
                   "serving.link.ib_ndr"),
    "eth100": Link("100 Gb Ethernet (across nodes)", 12.5e9, "100 Gb/s = 12.5 GB/s each way", "serving.link.eth100"),
}
LINKS: dict[str, Link] = {**HOST_LINKS, **GPU_LINKS}


def link(key: str) -> Link:
    # a link's key comes from a page's choice or the command line's --link choices, never typed free
    if key not in LINKS:
        raise Misuse(f"unknown link {key!r}; one of {', '.join(LINKS)}")
    return LINKS[key]
