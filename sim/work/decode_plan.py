"""The decode-cost comparison's plan, before it runs: how many new tokens fit the model's context, what the two
modes are expected to cost (the naive one stopped at its budget), and how far along a run is."""

from __future__ import annotations

from dataclasses import dataclass


def capped_new_tokens(num_prompt: int, num_new: int, context: int) -> int | None:
    """The most new tokens that fit `context` after a `num_prompt`-token prompt (the last new token is never fed
    back), or None when `num_new` already fits."""
    if num_prompt + num_new - 1 <= context:
        return None
    return context - num_prompt + 1


@dataclass(frozen=True)
class CompareEstimate:
    cached_s: float  # the cached run, all of it
    naive_s: float  # the naive run, all of it
    budget_s: float  # where the naive run is stopped

    @property
    def seconds(self) -> float:
        """What the comparison is expected to take: the cached run and the naive one up to its budget."""
        return self.cached_s + min(self.naive_s, self.budget_s)

    def done(self, cached_steps: int, naive_steps: int, num_new: int) -> float:
        """The share of `seconds` done once each mode has decoded that many of its `num_new` tokens."""
        spent = cached_steps / num_new * self.cached_s + min(self.budget_s, naive_steps / num_new * self.naive_s)
        return spent / self.seconds


@dataclass(frozen=True)
class ShownRun:
    """Where a finished comparison's views look, from its prompt and length: positions are 0-based token
    positions in the whole sequence (prompt first)."""

    num_prompt: int
    num_new: int
    grid_steps: int  # the most rows the "what gets computed" grid shows

    def position(self, step: int) -> int:
        """The sequence position of new token `step` (0-based)."""
        return self.num_prompt + step

    @property
    def grid_rows(self) -> int:
        return min(self.grid_steps, self.num_new)

    def grid_token_ids(self, prompt_ids: list[int], new_ids: list[int]) -> list[int]:
        """The tokens the grid's rows feed: the prompt, then the new tokens fed back (the last is never fed)."""
        return (prompt_ids + new_ids)[: self.num_prompt + self.grid_rows - 1]

    def profile_context(self, max_context: int) -> int:
        """The context of the last step the run fed (its last new token is never fed back), at most `max_context`."""
        return min(self.num_prompt + self.num_new - 1, max_context)


def formula_per_step(parts_per_step: list[dict[str, int]]) -> list[int]:
    """Each step's FLOPs, summed over its parts (sim.cost.opcount.generation_flops gives them by part)."""
    return [sum(parts.values()) for parts in parts_per_step]


def flop_ratio(res, steps: int) -> float:
    """Naive ÷ cached FLOPs over the first `steps` tokens of a comparison (sim.model.generate's result)."""
    return res.flops("naive", steps) / res.flops("cached", steps)
