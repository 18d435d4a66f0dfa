"""The Shrink the cache grid: every method at every budget through the three checks, against the full
cache, on the real model. One progress callback; every number the page shows comes from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from sim.cost.shrink import LONG_PROMPT, Score, ShrinkSetup
from sim.model.evict_cache import (
    EVICT_POLICIES,
    METHOD_LABELS,
    QUANT_METHODS,
    budget_for,
    make_shrunk_cache,
    shrunk_bytes,
)
from sim.model.generate import encode
from sim.model.shrink_checks import (
    LongGenerationResult,
    RecallResult,
    exact_quote,
    greedy_run,
    long_generation,
    multi_turn,
)
from sim.model.transformer import TinyLlama


@dataclass(frozen=True)
class ShrinkRow:
    method: str
    budget: float | None
    long: LongGenerationResult
    quote: RecallResult
    turns: RecallResult
    byte_fraction: float  # at the long generation's last position
    bytes_what: str

    @property
    def label(self) -> str:
        name = METHOD_LABELS[self.method]
        return name if self.budget is None else f"{name} @ {self.budget:.1%}"

    def score(self) -> Score:
        kind = "discard" if self.method in EVICT_POLICIES else "blur" if self.method in QUANT_METHODS else "full"
        key = self.method if self.budget is None else f"{self.method}@{self.budget}"
        return Score(key, self.label, kind, self.byte_fraction, self.long.agreement, self.quote.fraction,
                     self.turns.fraction)


@dataclass(frozen=True)
class ShrinkTable:
    setup: ShrinkSetup
    full: ShrinkRow
    rows: tuple[ShrinkRow, ...]

    def frame(self):
        import pandas as pd

        return pd.DataFrame([{
            "Method": r.label, "Bytes kept (% of FP16)": 100 * r.byte_fraction,
            "Long generation: tokens equal (%)": 100 * r.long.agreement,
            "First divergence (new token)": "none" if r.long.first_divergence is None else f"{r.long.first_divergence:,}",
            "Exact quote (% of bytes)": 100 * r.quote.fraction, "Multi-turn fact (% of bytes)": 100 * r.turns.fraction,
        } for r in (self.full, *self.rows)])


def _row(model: TinyLlama, method: str, budget: float | None, setup: ShrinkSetup, prompt: list[int],
         reference: list[int]) -> ShrinkRow:
    cfg = model.cfg

    def make(n: int):
        tokens = budget_for(budget, n) if budget is not None else None
        return make_shrunk_cache(cfg, method, tokens, n, model.device, model.dtype)

    long = long_generation(model, make, prompt, setup.num_new, reference)
    quote = exact_quote(model, make, setup.num_trials, setup.seed)
    turns = multi_turn(model, make, setup.num_trials, setup.seed)
    n = len(prompt) + setup.num_new - 1
    acct = shrunk_bytes(cfg, method, budget_for(budget, n) if budget is not None else None, n)
    return ShrinkRow(method, budget, long, quote, turns, acct.fraction_of_full, acct.what)


@torch.inference_mode()
def run_shrink(model: TinyLlama, setup: ShrinkSetup, progress: Callable[[float, str], None] = lambda f, t: None
               ) -> ShrinkTable:
    """The full cache first (the reference), then every (method, budget) of the setup."""
    prompt = encode(LONG_PROMPT)
    todo = setup.runs()
    progress(0.0, "the full cache (the reference)")
    reference = greedy_run(model, lambda n: make_shrunk_cache(model.cfg, "full", None, n, model.device, model.dtype),
                           prompt, setup.num_new)
    full = _row(model, "full", None, setup, prompt, reference)
    rows = []
    for i, (method, budget) in enumerate(todo, start=1):
        progress(i / (len(todo) + 1), METHOD_LABELS[method] + (f" at {budget:.1%}" if budget else ""))
        rows.append(_row(model, method, budget, setup, prompt, reference))
    progress(1.0, "done")
    return ShrinkTable(setup, full, tuple(rows))
