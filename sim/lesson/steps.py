"""The lesson's steps, in the seeds' order: the cost of generating without a cache, what the cache
keeps and why it stays valid, what it costs in bytes and time, and the three ways out. Each step's title and
idea live in the catalogs (`lesson.step.<slug>.title` / `.idea`); `title` and `idea` are the English ones."""

from __future__ import annotations

from dataclasses import dataclass

from sim.i18n import text


@dataclass(frozen=True)
class Step:
    slug: str
    page: str  # the full page that goes deeper (its slug)

    def title_in(self, lang: str = "en") -> str:
        return text(lang, f"lesson.step.{self.slug}.title")

    def idea_in(self, lang: str = "en") -> str:
        """What the step is about, in a line (the claim itself is computed on the page)."""
        return text(lang, f"lesson.step.{self.slug}.idea")

    @property
    def title(self) -> str:
        return self.title_in()

    @property
    def idea(self) -> str:
        return self.idea_in()


STEPS: tuple[Step, ...] = (
    Step("repeat", "decode_cost"),
    Step("qkv", "attention_masks"),
    Step("mask", "attention_masks"),
    Step("filling", "decode_cost"),
    Step("step_cost", "decode_cost"),
    Step("bytes", "kv_memory"),
    Step("memory_bound", "roofline"),
    Step("batching", "roofline"),
    Step("shrink", "kv_memory"),
    Step("share", "paged_blocks"),
    Step("speculate", "serving"),
    Step("layout", "prefix_caching"),
)
SLUGS = tuple(s.slug for s in STEPS)


def step_label(k: int, lang: str = "en") -> str:
    """`Step k of N: title` for k = 1..N."""
    if not 1 <= k <= len(STEPS):
        raise ValueError(f"step must be 1..{len(STEPS)}, got {k}")
    return text(lang, "lesson.step_label", k=f"{k}", n=f"{len(STEPS)}", title=STEPS[k - 1].title_in(lang))
