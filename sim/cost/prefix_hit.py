"""The prefix-hit staircase: how much of a prompt sent twice vLLM serves from its prefix cache, for any model.

vLLM hashes only full blocks and always computes the prompt's last token (sim/cost/vllm_rules.py), so a prompt of
N tokens sent a second time hits

    hit_tokens = ⌊(N − 1) / B⌋ · B        (B: the engine's block size)

which is 0 until N > B, then grows in steps of B. On a hybrid model (Mamba or linear-attention layers beside
attention) B is not the --block-size asked for: vLLM raises the attention block until its page holds one
recurrent state (sim/cost/kv_engine.py), to 528..1,040 tokens for Nemotron-H, 544 for Qwen3-Next, 80 for Jamba,
so a system prompt shorter than that never hits at all: the silent 0% hit rate users report.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.kv_engine import KVEngineConfig, engine_allocation
from sim.cost.memory import MAX_CONTEXT, MemoryConfig
from sim.refusal import Refusal

MAX_STAIRCASE_POINTS = 4000  # prompt lengths drawn (every jump is among them)


def hit_tokens(prompt_len: int, block_size: int) -> int:
    """Tokens of a prompt of prompt_len tokens, sent a second time, that vLLM takes from its prefix cache."""
    return (prompt_len - 1) // block_size * block_size if prompt_len > 0 else 0


@dataclass(frozen=True)
class PrefixHit:
    prompt_len: int
    block_size: int  # the engine's (raised for a hybrid model)
    requested_block_size: int  # --block-size
    hit_tokens: int
    state_aligned: bool  # True when the block size was raised to hold a Mamba / linear-attention state

    @property
    def min_cacheable_prompt(self) -> int:
        """The shortest prompt any of which is reused: one full block plus the token always recomputed."""
        return self.block_size + 1

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_len

    @property
    def recomputed_tokens(self) -> int:
        return self.prompt_len - self.hit_tokens

    @property
    def next_step(self) -> int:
        """The prompt length at which the next block starts to hit."""
        return (self.prompt_len - 1) // self.block_size * self.block_size + self.block_size + 1

    def staircase(self, top: int | None = None) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """(prompt lengths, hit fraction) from 1 to `top` (default: past the chosen prompt and 4 blocks), every
        step's last and first lengths included, so that the line draws the staircase exactly at its corners."""
        bs = self.block_size
        top = max(top or 0, self.prompt_len + bs, 4 * bs + 1)
        step = max(1, top // MAX_STAIRCASE_POINTS)
        sampled = set(range(1, top + 1, step)) | {self.prompt_len}
        lengths = sampled
        # Tiny blocks under a long prompt: more steps than points drawn, so keep the sampled points. The k·B corners
        # alone are top // B distinct lengths: past the limit they are not built at all (a 134-million-token prompt
        # in blocks of 16 would build 16.8 million lengths only to drop them).
        if top // bs <= 3 * MAX_STAIRCASE_POINTS:
            corners = sampled | {n for k in range(1, top // bs + 1) for n in (k * bs, k * bs + 1) if n <= top}
            if len(corners) <= 3 * MAX_STAIRCASE_POINTS:
                lengths = corners
        xs = tuple(sorted(lengths))
        return xs, tuple(hit_tokens(n, bs) / n for n in xs)


def prefix_hit(cfg: MemoryConfig, engine: KVEngineConfig, prompt_len: int) -> PrefixHit:
    """The staircase's point for a prompt of prompt_len tokens on this model, dtype and block size. A prompt length
    out of range is a Refusal (the CLI's exit 2, the page's error)."""
    if isinstance(prompt_len, bool) or not isinstance(prompt_len, int) or not 1 <= prompt_len <= MAX_CONTEXT:
        raise Refusal("engine.hit.bad_len", n=str(prompt_len)[:40], max=f"{MAX_CONTEXT:,}")
    alloc = engine_allocation(cfg, engine)
    bs = alloc.block_size
    return PrefixHit(prompt_len, bs, engine.block_size, hit_tokens(prompt_len, bs), bs != engine.block_size)
