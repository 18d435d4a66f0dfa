"""The real model's Shrink-the-cache grid as a recorded result: its setup, the file it is kept in, its scores and
the verdict computed from them. No torch here: the page shows the recorded table at once, without the model.

The grid is made by one command (its provenance is stored with it):

    python -m sim.model.record_shrink            # writes assets/models/smollm2_shrink.json

and any one cell reruns live through sim.model.real_checks.run_cell, the same code. Its FP8 cells are FP8 e4m3 at
a per-tensor scale of 1.0 (vLLM's default), which sim.model.quant still computes bit for bit
(tests/test_quant_fp8.py); a change to the lab's FP8 cache means re-recording the grid with the command above.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from sim.cost.shrink import EVICT_METHODS, QUANT_METHODS, Score, check_methods_and_budgets
from sim.refusal import Misuse

RECORDED = Path(__file__).resolve().parents[2] / "assets" / "models" / "smollm2_shrink.json"
CHECKS = ("long", "quote", "chat")  # score fields: long_agreement, quote, turns (sim.cost.shrink.Score)
MAX_RECORDED_BYTES = 4 << 20


@dataclass(frozen=True, kw_only=True)
class RealShrinkSetup:
    methods: tuple[str, ...] = EVICT_METHODS + QUANT_METHODS
    budgets: tuple[float, ...] = (0.25, 0.5)
    num_new: int = 64  # the long generation
    num_trials: int = 3  # quote and chat prompts each
    filler_tokens: int = 300  # held-out text between the passage and its cue
    seed: int = 0

    def __post_init__(self) -> None:
        check_methods_and_budgets(self.methods, self.budgets)
        if not 16 <= self.num_new <= 1024 or not 1 <= self.num_trials <= 8 or not 64 <= self.filler_tokens <= 2048:
            raise Misuse("num_new must be 16..1024, num_trials 1..8 and filler_tokens 64..2048, got "
                         f"{self.num_new}, {self.num_trials}, {self.filler_tokens}")

    def cells(self) -> list[tuple[str, float | None]]:
        """The full cache first, then every eviction method at every budget, then every quantization once."""
        return [("full", None), *((m, b) for m in self.methods if m in EVICT_METHODS for b in self.budgets),
                *((m, None) for m in self.methods if m in QUANT_METHODS)]

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> RealShrinkSetup:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def cell_key(method: str, budget: float | None) -> str:
    return method if budget is None else f"{method}@{budget}"


def kind(method: str) -> str:
    return "discard" if method in EVICT_METHODS else "blur" if method in QUANT_METHODS else "full"


def load_recorded(path: Path = RECORDED) -> dict | None:
    """The recorded grid ({"provenance", "setup", "rows"}), or None when there is none or it cannot be read."""
    try:
        if path.stat().st_size > MAX_RECORDED_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        RealShrinkSetup.from_dict(data["setup"])
        if not data["rows"] or data["rows"][0]["method"] != "full":
            return None
        return data
    except (OSError, ValueError, KeyError, TypeError):
        return None


def tally(scores: list[Score], field: str) -> tuple[int, int, int]:
    """(discarding scored lower, higher, the same) over the pairings: each quantized cache against the best, by
    `field`, of the discarding caches at the budget whose bytes come nearest its own (the larger on a tie). Every
    policy at that budget counts: H2O's and SnapKV's own bookkeeping makes their bytes a little larger than the
    window's at the same budget, and leaving them out would favour the lecture's side."""
    blur = [s for s in scores if s.kind == "blur"]
    discard = [s for s in scores if s.kind == "discard"]
    worse = better = same = 0
    for b in blur:
        nearest = min(discard, key=lambda d: (abs(d.byte_fraction - b.byte_fraction), -d.byte_fraction))
        budget = nearest.method.split("@")[1]
        best = max((d for d in discard if d.method.split("@")[1] == budget), key=lambda d: getattr(d, field))
        lo, hi = getattr(best, field), getattr(b, field)
        worse, better, same = worse + (lo < hi), better + (lo > hi), same + (lo == hi)
    return worse, better, same


FIELDS = {"long": "long_agreement", "quote": "quote", "chat": "turns"}
