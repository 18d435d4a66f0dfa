"""The Shrink the cache grid: every method at every budget through the three checks, against the full
cache, on the real model. One progress callback; every number the page shows comes from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from sim.cost.shrink import LONG_PROMPT, ShrinkSetup
from sim.model.evict_cache import (
    EVICT_POLICIES,
    QUANT_METHODS,
    ByteAccount,
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
from sim.model.transformer import Llama
from sim.msg import Msg


@dataclass(frozen=True, kw_only=True)
class ShrinkRow:
    method: str
    budget: float | None
    long: LongGenerationResult
    quote: RecallResult
    turns: RecallResult
    byte_fraction: float  # at the long generation's last position
    account: ByteAccount  # its bytes, part by part

    @property
    def key(self) -> str:
        return self.method if self.budget is None else f"{self.method}@{self.budget}"

    @property
    def kind(self) -> str:
        return "discard" if self.method in EVICT_POLICIES else "blur" if self.method in QUANT_METHODS else "full"



@dataclass(frozen=True)
class ShrinkTable:
    setup: ShrinkSetup
    full: ShrinkRow
    rows: tuple[ShrinkRow, ...]

def _row(model: Llama, method: str, budget: float | None, setup: ShrinkSetup, prompt: list[int],
         reference: list[int]) -> ShrinkRow:
    cfg = model.cfg

    def make(n: int):
        tokens = budget_for(budget, n) if budget is not None else None
        return make_shrunk_cache(cfg, method=method, budget_tokens=tokens, max_seq_len=n, device=model.device, dtype=model.dtype)

    long = long_generation(model, make, prompt_ids=prompt, num_new=setup.num_new, reference=reference)
    quote = exact_quote(model, make, num_trials=setup.num_trials, seed=setup.seed)
    turns = multi_turn(model, make, num_trials=setup.num_trials, seed=setup.seed)
    n = len(prompt) + setup.num_new - 1
    acct = shrunk_bytes(cfg, method=method, budget_tokens=budget_for(budget, n) if budget is not None else None, num_tokens=n)
    return ShrinkRow(method=method, budget=budget, long=long, quote=quote, turns=turns, byte_fraction=acct.fraction_of_full, account=acct)


@torch.inference_mode()
def run_shrink(model: Llama, setup: ShrinkSetup, progress: Callable[[float, Msg], None] = lambda f, m: None
               ) -> ShrinkTable:
    """The full cache first (the reference), then every (method, budget) of the setup (progress: message values)."""
    prompt = encode(LONG_PROMPT)
    todo = setup.runs()
    progress(0.0, Msg("shrink.job.full"))
    reference = greedy_run(model, lambda n: make_shrunk_cache(model.cfg, method="full", budget_tokens=None, max_seq_len=n, device=model.device, dtype=model.dtype),
                           ids=prompt, num_new=setup.num_new)
    full = _row(model, "full", None, setup, prompt, reference)
    rows = []
    for i, (method, budget) in enumerate(todo, start=1):
        name = Msg(f"shrink.method.{method}")
        progress(i / (len(todo) + 1), Msg("shrink.job.at", name=name, budget=budget) if budget else name)
        rows.append(_row(model, method, budget, setup, prompt, reference))
    progress(1.0, Msg("shrink.job.done"))
    return ShrinkTable(setup, full, tuple(rows))
