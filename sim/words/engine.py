"""The prefix-hit staircase's words (moved here from sim/cost/prefix_hit.py): the advice sentence, the metric row and
the chart's title, for the KV memory page's engine tab and the `kv-prefix-hit` command."""

from __future__ import annotations

from sim.cost.prefix_hit import PrefixHit
from sim.cost.vllm_rules import version_label
from sim.readout import Metric
from sim.words import text


def hit_advice(hit: PrefixHit, lang: str = "en") -> str:
    """One sentence: what this prompt gets, and the prompt length that would change it."""
    f = dict(n=f"{hit.prompt_len:,}", bs=f"{hit.block_size:,}", min=f"{hit.min_cacheable_prompt:,}",
             hit=f"{hit.hit_tokens:,}", rate=f"{hit.hit_rate:.1%}", re=f"{hit.recomputed_tokens:,}",
             next=f"{hit.next_step:,}", more=f"{hit.next_step - hit.prompt_len:,}",
             asked=f"{hit.requested_block_size:,}", vllm=version_label())
    why = text(lang, "engine.hit.aligned", **f) if hit.state_aligned else ""
    key = "engine.hit.never" if hit.hit_tokens == 0 else "engine.hit.some"
    return text(lang, key, **f) + why


def hit_metrics(hit: PrefixHit, lang: str = "en") -> list:
    """The tab's metric row: the engine's block size, the shortest prompt that hits, this prompt's hits."""
    def tokens(n: int) -> str:
        return text(lang, "engine.m.tokens", n=f"{n:,}")

    return [Metric(text(lang, "engine.m.block"), tokens(hit.block_size),
                   help=text(lang, "engine.m.block_help", vllm=version_label(), asked=f"{hit.requested_block_size:,}")),
            Metric(text(lang, "engine.m.min"), tokens(hit.min_cacheable_prompt)),
            Metric(text(lang, "engine.m.hit"), tokens(hit.hit_tokens), f"{hit.hit_rate:.1%}")]


def staircase_title(hit: PrefixHit, name: str, lang: str = "en") -> str:
    """The staircase's headline. name: the model's name, already escaped for the chart."""
    return text(lang, "engine.fig.title", name=name, bs=f"{hit.block_size:,}", vllm=version_label(),
                min=f"{hit.min_cacheable_prompt:,}", n=f"{hit.prompt_len:,}", rate=f"{hit.hit_rate:.1%}")
