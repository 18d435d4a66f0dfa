"""What the Decode cost page computes besides the live run (sim.model.generate.run_comparison): the
"what gets computed" grid, the analytic view at real-model scale, and the counts the seeds' claims are checked
with (sim/words/decode_claims.py words them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cost.opcount import ShapeSpec, generation_totals, step_flops
from sim.refusal import Misuse

# grid cell values
NOTHING, READ, COMPUTED = 0, 1, 2


def computed_grid(prompt_len: int, num_steps: int, mode: str) -> np.ndarray:
    """(num_steps, prompt_len + num_steps - 1) grid: for each step (row), which positions'
    Q/K/V vectors are COMPUTED this step, which K/V are READ from the cache, which are untouched.

    Step 0 is the prefill: every prompt position is computed in both modes. After that, naive
    recomputes every position again; cached computes the one new position and reads the rest.
    """
    if mode not in ("naive", "cached"):
        raise Misuse(f"mode must be 'naive' or 'cached', got {mode!r}")
    if prompt_len < 1 or num_steps < 1:
        raise Misuse(f"need prompt_len >= 1 and num_steps >= 1, got {prompt_len}, {num_steps}")
    width = prompt_len + num_steps - 1
    grid = np.full((num_steps, width), NOTHING, dtype=np.int8)
    grid[0, :prompt_len] = COMPUTED
    for step in range(1, num_steps):
        n = prompt_len + step  # sequence length fed at this step
        if mode == "naive":
            grid[step, :n] = COMPUTED
        else:
            grid[step, : n - 1] = READ
            grid[step, n - 1] = COMPUTED
    return grid


@dataclass(frozen=True)
class ScalePoint:
    length: int
    naive_step: int  # FLOPs of the step that feeds a sequence of `length` tokens
    cached_step: int
    naive_total: int  # FLOPs to generate `length` tokens from a 1-token prompt
    cached_total: int

    @property
    def step_ratio(self) -> float:
        """How many times the naive step's FLOPs the cached step's are."""
        return self.naive_step / self.cached_step

    @property
    def total_ratio(self) -> float:
        return self.naive_total / self.cached_total


def scale_curve(shape: ShapeSpec, lengths: list[int]) -> list[ScalePoint]:
    """Per-step and total FLOPs, naive vs cached, at each sequence length (closed form)."""
    out = []
    for n in lengths:
        if n < 1:
            raise Misuse(f"lengths must be >= 1, got {n}")
        out.append(ScalePoint(
            n,
            sum(step_flops(shape, n, n).values()),
            sum(step_flops(shape, 1, n).values()),
            sum(generation_totals(shape, 1, n, "naive").values()),
            sum(generation_totals(shape, 1, n, "cached").values()),
        ))
    return out


def kv_rows_computed(num_tokens: int, mode: str) -> int:
    """K/V vectors computed (per layer, per head) to generate num_tokens from a 1-token prompt:
    naive 1 + 2 + … + N, cached N."""
    return num_tokens * (num_tokens + 1) // 2 if mode == "naive" else num_tokens


def score_entries(num_tokens: int, mode: str) -> int:
    """Query·key dot products (per layer, per head) over the whole generation: naive computes the
    full k×k score matrix at each length k, cached one row of k."""
    n = num_tokens
    return n * (n + 1) * (2 * n + 1) // 6 if mode == "naive" else n * (n + 1) // 2


def human_flops(x: float) -> str:
    """12_300_000 -> '12.3 MFLOP' (decimal prefixes, as FLOP counts are quoted)."""
    for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6),
                        ("kFLOP", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} FLOP"


def flop_shape(preset) -> ShapeSpec:
    """The shape numbers the FLOP formulas need, from an architecture preset. A mixture-of-
    experts MLP counts the experts each token is routed to, shared experts included (the router
    itself is negligible); a plain (non-gated) MLP has two matrices, not three."""
    # the Decode cost page's scale section lists no MLA preset (app/controls/decode_cost.py scale_presets)
    if getattr(preset, "attention", "") == "MLA":
        raise Misuse(f"{preset.name} uses MLA (latent K/V): its attention FLOPs are not the MHA/GQA formula")
    d_ff = preset.d_ff
    if getattr(preset, "num_experts", 1) > 1:
        expert_ff = getattr(preset, "moe_d_ff", 0) or preset.d_ff
        d_ff = expert_ff * (preset.num_experts_per_tok + getattr(preset, "num_shared_experts", 0))
    return ShapeSpec(preset.d_model, preset.n_layers, preset.n_heads, preset.n_kv_heads, preset.head_dim, d_ff,
                     preset.vocab_size, 3 if getattr(preset, "mlp_gated", True) else 2)
