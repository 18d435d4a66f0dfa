"""The lesson's steps, in the seeds' order: the cost of generating without a cache, what the cache
keeps and why it stays valid, what it costs in bytes and time, and the three ways out. Each step's title and
idea live in the catalogs (`lesson.step.<slug>.title` / `.idea`); `title` and `idea` are those messages, worded by
sim/words (`say(lang, step.title)`)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.msg import Msg
from sim.refusal import Misuse


@dataclass(frozen=True)
class Step:
    slug: str
    page: str  # the full page that goes deeper (its slug)
    terms: tuple[str, ...] = ()  # the glossary's words the step uses, linked under its title (GLOSSARY keys)

    @property
    def title(self) -> Msg:
        return Msg(f"lesson.step.{self.slug}.title")

    @property
    def idea(self) -> Msg:
        """What the step is about, in a line (the claim itself is computed on the page)."""
        return Msg(f"lesson.step.{self.slug}.idea")


STEPS: tuple[Step, ...] = (
    Step("repeat", "decode_cost", ("token", "kv_cache", "flop", "decode")),
    Step("qkv", "attention_masks", ("qkv", "token")),
    Step("mask", "attention_masks", ("causal_mask", "kv_cache")),
    Step("filling", "decode_cost", ("prefill", "decode", "kv_cache")),
    Step("step_cost", "decode_cost", ("decode", "flop")),
    Step("bytes", "kv_memory", ("bf16", "int2", "kv_cache")),
    Step("memory_bound", "roofline", ("arithmetic_intensity", "ridge", "memory_bound", "compute_bound", "prefill",
                                      "bf16", "batch")),
    Step("batching", "roofline", ("batch", "arithmetic_intensity", "ridge", "compute_bound", "memory_bound")),
    Step("shrink", "kv_memory", ("mha", "gqa", "mqa", "mla", "bf16", "int2")),
    Step("share", "paged_blocks", ("block", "kv_cache", "prefix_cache")),
    Step("speculate", "serving", ("speculative", "decode")),
    Step("layout", "prefix_caching", ("prefix_cache", "block")),
)
# The glossary's words, in the order a class meets them; each is `lesson.g.<key>.term` / `.def` in the catalogs.
GLOSSARY: tuple[str, ...] = tuple(dict.fromkeys(term for step in STEPS for term in step.terms))
RECAP = len(STEPS) + 1  # the view after the last step: the twelve findings again, with the class's numbers
SLUGS = tuple(s.slug for s in STEPS)


def step_at(k: int) -> Step:
    """Step k, counted from 1 as the page and its URL count them."""
    # the link's step is declared 1..RECAP (app/controls/lesson.py) and the page sends RECAP to the recap
    if not 1 <= k <= len(STEPS):
        raise Misuse(f"step must be 1..{len(STEPS)}, got {k}")
    return STEPS[k - 1]


def step_label(k: int) -> Msg:
    """`Step k of N: title` for k = 1..N; the recap's label for k = RECAP."""
    if k == RECAP:
        return Msg("lesson.recap.label")
    if not 1 <= k <= len(STEPS):
        raise Misuse(f"step must be 1..{RECAP}, got {k}")
    return Msg("lesson.step_label", k=k, n=len(STEPS), title=step_at(k).title)
