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
