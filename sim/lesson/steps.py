"""The lesson's steps, in the seeds' order: the cost of generating without a cache, what the cache
keeps and why it stays valid, what it costs in bytes and time, and the three ways out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    slug: str
    title: str
    idea: str  # what the step is about, in a line (the claim itself is computed on the page)
    page: str  # the full page that goes deeper (its slug)


STEPS: tuple[Step, ...] = (
    Step("repeat", "Generation repeats work", "Without a cache every new token re-reads the whole sequence.",
         "decode_cost"),
    Step("qkv", "Q is used once; K and V are read again and again",
         "Each query row is used by one step; each key and value by every later one.", "attention_masks"),
    Step("mask", "The causal mask keeps the past valid",
         "Appending a token cannot change what came before it, so stored K and V stay correct.", "attention_masks"),
    Step("filling", "The cache, filling", "Cached decoding on the real model, one token at a time.", "decode_cost"),
    Step("step_cost", "What one step costs with a cache", "A cached step does one token's work, not the whole "
         "sequence's.", "decode_cost"),
    Step("bytes", "The cache's bytes", "2 · layers · K/V heads · head size · bytes per value · tokens.", "kv_memory"),
    Step("memory_bound", "Decode waits on memory", "A decode step does about one FLOP per byte it reads.", "roofline"),
    Step("batching", "Batching shares weights, not the cache", "More requests per step reuse the weights, but each "
         "brings its own cache.", "roofline"),
    Step("shrink", "Way out 1: shrink the cache", "Fewer K/V heads, a latent, or fewer bits per value.", "kv_memory"),
    Step("share", "Way out 2: share memory in blocks", "Paged blocks claim memory as tokens arrive, not the "
         "maximum up front.", "paged_blocks"),
    Step("speculate", "Way out 3: more tokens per byte read", "A draft proposes tokens; one pass of the big model "
         "checks them all.", "serving"),
    Step("layout", "The prompt layout rule", "Fixed content first, what varies last: only a shared prefix hits the "
         "cache.", "prefix_caching"),
)
SLUGS = tuple(s.slug for s in STEPS)


def step_label(k: int) -> str:
    """`Step k of N: title` for k = 1..N."""
    if not 1 <= k <= len(STEPS):
        raise ValueError(f"step must be 1..{len(STEPS)}, got {k}")
    return f"Step {k} of {len(STEPS)}: {STEPS[k - 1].title}"
