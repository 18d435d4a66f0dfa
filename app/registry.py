"""The lab's pages, in one list: navigation, the home page's map and the tests all read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES_DIR = ROOT / "pages"


@dataclass(frozen=True)
class PageInfo:
    slug: str  # file name in pages/ and URL path
    title: str
    icon: str
    section: str
    summary: str

    @property
    def path(self) -> Path:
        return PAGES_DIR / f"{self.slug}.py"


PAGES: tuple[PageInfo, ...] = (
    PageInfo("home", "Home", ":material/home:", "Start", "What the lab teaches, and what this machine can run."),
    PageInfo("lesson", "Lesson", ":material/school:", "Start",
             "A guided path in twelve steps, on the real model: why the cache exists, what it costs, the ways out."),
    PageInfo("decode_cost", "Decode cost", ":material/speed:", "Generation",
             "Naive vs KV-cached generation on the real model: FLOPs counted and timed per step."),
    PageInfo("attention_masks", "Attention masks", ":material/grid_on:", "Generation",
             "Causal, sliding-window, prefix-LM and padding masks; why -inf and not ×0; real attention maps."),
    PageInfo("kv_memory", "KV memory", ":material/memory:", "Memory",
             "Cache bytes by model, batch, context and dtype; GQA, MQA, MLA; what fits on a GPU."),
    PageInfo("paged_blocks", "Paged KV blocks", ":material/view_module:", "Memory",
             "A vLLM-style block pool vs contiguous allocation, and the fragmentation each leaves."),
    PageInfo("prefix_caching", "Prefix caching", ":material/account_tree:", "Memory",
             "Hashed blocks chained to their parent; hit rates by workload and prompt layout."),
    PageInfo("kv_quantization", "KV quantization", ":material/compress:", "Memory",
             "KIVI-style K per channel, V per token: bytes saved against error by position."),
    PageInfo("shrink_cache", "Shrink the cache", ":material/content_cut:", "Memory",
             "Eviction (window, sinks, H2O, SnapKV) vs quantization on the real model, judged by three checks."),
    PageInfo("attention_kernels", "Attention kernels", ":material/bolt:", "Speed",
             "Eager vs SDPA backends timed live on this device; the online softmax, step by step."),
    PageInfo("roofline", "Roofline", ":material/show_chart:", "Speed",
             "Why decoding waits on memory: arithmetic intensity of prefill vs decode."),
    PageInfo("serving", "Serving", ":material/dns:", "Speed",
             "Static vs continuous batching and speculative decoding, simulated."),
)

SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(p.section for p in PAGES))

