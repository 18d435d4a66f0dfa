"""Speculative decoding (Leviathan et al. 2023): the closed form, a Monte Carlo check, rounds timed by the roofline,
and speculation inside a batch.

A draft proposes k tokens; the target scores all of them in one pass and keeps the longest prefix it agrees with,
plus one token of its own (the correction at the first disagreement, or a bonus token when all k were kept). When
each draft token is accepted independently with probability α, the tokens per target pass are
    E = 1 + α + α² + … + α^k = (1 − α^(k+1)) / (1 − α),
and with a draft step costing c target steps, one round costs k·c + 1 target steps: speedup E / (k·c + 1).
`simulate_speculative` draws the accept/reject of every draft token with a seeded RNG and is checked against E.
sim.model.speculative runs it on the real tiny model (greedy: the output must be exactly the target's own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.refusal import Refusal
from sim.serving.step_cost import RooflineCost

MAX_SPEC_K = 16
MAX_MC_PASSES = 1_000_000
SPEC_KS = tuple(range(1, 13))  # the draft lengths the page draws
SPEC_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)  # the acceptance rates it draws, with the chosen one


def check_spec(alpha: float, k: int) -> None:
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise Refusal("serving.err.alpha", got=repr(alpha))
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= MAX_SPEC_K:
        raise Refusal("serving.err.k", max=f"{MAX_SPEC_K}", got=repr(k))


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) / (1 − α): accepted drafts plus the target's own token, on average."""
    check_spec(alpha, k)
    if alpha == 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speculative_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al.'s improvement in wall time: E / (k·c + 1), c = draft step / target step."""
    if not (math.isfinite(c) and 0.0 <= c <= 10.0):
        raise Refusal("serving.err.c", got=repr(c))
    return expected_tokens_per_pass(alpha, k) / (k * c + 1)


def optimal_k(alpha: float, c: float, k_max: int = MAX_SPEC_K) -> int:
    """The draft length 1..k_max with the largest speedup (the smallest on a tie)."""
    return max(range(1, k_max + 1), key=lambda k: (speculative_speedup(alpha, k, c), -k))


@dataclass(frozen=True)
class SpecMonteCarlo:
    alpha: float
    k: int
    accepted: np.ndarray  # (passes,) drafts kept in each target pass

    @property
    def num_passes(self) -> int:
        return len(self.accepted)

    @property
    def tokens_per_pass(self) -> np.ndarray:
        return self.accepted + 1

    @property
    def mean(self) -> float:
        return float(self.tokens_per_pass.mean())

    @property
    def stderr(self) -> float:
        return float(self.tokens_per_pass.std(ddof=1) / math.sqrt(self.num_passes)) if self.num_passes > 1 else math.inf

    @property
    def expected(self) -> float:
        return expected_tokens_per_pass(self.alpha, self.k)

    @property
    def two_stderr(self) -> float:
        """The ± the page shows: two standard errors (about 95% of such runs' means fall within it)."""
        return 2 * self.stderr

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts ÷ drafts the target judged (those after a rejection are never judged)."""
        judged = self.accepted.sum() + np.count_nonzero(self.accepted < self.k)
        return float(self.accepted.sum() / judged) if judged else math.nan


def simulate_speculative(alpha: float, k: int, num_passes: int = 20_000, seed: int = 0) -> SpecMonteCarlo:
    """Draw, for every draft token of every pass, whether the target accepts it (probability α, each
    independent); a pass keeps drafts up to the first rejection."""
    check_spec(alpha, k)
    if not 1 <= num_passes <= MAX_MC_PASSES:
        raise Refusal("serving.err.mc_passes", max=f"{MAX_MC_PASSES:,}", got=f"{num_passes:,}")
    rng = np.random.default_rng(seed)
    ok = rng.random((num_passes, k)) < alpha  # (passes, k) per draft token
    accepted = np.where(ok.all(axis=1), k, np.argmin(ok, axis=1))  # index of the first rejection
    return SpecMonteCarlo(alpha, k, accepted.astype(np.int64))


@dataclass(frozen=True)
class SpecTiming:
    """Speculative rounds timed with the roofline: a target and a draft model on one GPU, batch 1."""

    target: str
    draft: str
    gpu: str
    context: int
    target_step_s: float  # one target decode step
    draft_step_s: float
    verify_s: dict[int, float]  # k -> one target pass over k + 1 tokens

    @property
    def c(self) -> float:
        return self.draft_step_s / self.target_step_s

    def speedup(self, alpha: float, k: int) -> float:
        """E · t_target / (k · t_draft + t_verify(k+1)): Leviathan's formula with the verify pass timed too."""
        return expected_tokens_per_pass(alpha, k) * self.target_step_s / (k * self.draft_step_s + self.verify_s[k])


@dataclass(frozen=True)
class SpecBatchPoint:
    batch: int
    target_step_s: float
    round_s: float  # k draft steps + one verify pass, for the whole batch
    speedup: float
    verify_bound: str


def spec_batch_sweep(target: str, draft: str, gpu: str, alpha: float, k: int, context: int = 1024,
                     batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), weight_dtype: str = "bf16") -> list[SpecBatchPoint]:
    """Speculation inside a batch: every request drafts k tokens and the target verifies batch × (k + 1) tokens
    in one pass. At batch 1 the pass is memory-bound and the extra tokens are nearly free; as the batch grows
    the verify pass turns compute-bound and costs about (k + 1) decode steps, so the gain fades."""
    check_spec(alpha, k)
    presets = load_presets()
    tc = RooflineCost(presets[target], gpu, weight_dtype)
    dc = RooflineCost(presets[draft], gpu, weight_dtype)
    e = expected_tokens_per_pass(alpha, k)
    out = []
    for b in batches:
        if not 1 <= b <= 4096:
            raise Refusal("serving.err.batch", got=f"{b}")
        t_dec = tc.decode_seconds(b, context)
        vw = tc.verify_work(k + 1, context, b)
        round_s = k * dc.decode_seconds(b, context) + tc.seconds(vw)
        out.append(SpecBatchPoint(b, t_dec, round_s, e * t_dec / round_s, tc.bound(vw)))
    return out


FIT_UTILIZATION = 0.9  # the share of a GPU's memory a server may fill (as the Roofline page counts a fit)


@dataclass(frozen=True)
class SpecFit:
    """Where a target and its draft run: both models' weights and one request's cache each, against what GPUs of
    the kind hold."""

    need_bytes: int
    usable_per_gpu: int
    num_gpus: int | None  # the fewest GPUs that hold it (None: more than MAX_GPUS)


def spec_fit(target: str, draft: str, gpu: str, context: int = 1024, weight_dtype: str = "bf16") -> SpecFit:
    from sim.cost.memory import MAX_GPUS, MemoryConfig, kv_memory, weight_bytes

    presets = load_presets()
    need = sum(weight_bytes(presets[m], weight_dtype) + kv_memory(MemoryConfig(presets[m], 1, context)).total_bytes
               for m in (target, draft))
    usable = int(load_gpus()[gpu].memory_bytes * FIT_UTILIZATION)
    n = -(-need // usable)
    return SpecFit(need, usable, n if n <= MAX_GPUS else None)


def spec_timing(target: str, draft: str, gpu: str, context: int = 1024, weight_dtype: str = "bf16") -> SpecTiming:
    presets = load_presets()
    for name in (target, draft):
        if name not in presets:
            raise Refusal("serving.err.unknown_model", name=repr(name))
    if not 1 <= context <= 131_072:
        raise Refusal("serving.err.spec_context", got=f"{context:,}")
    tc = RooflineCost(presets[target], gpu, weight_dtype)
    dc = RooflineCost(presets[draft], gpu, weight_dtype)
    target_s, draft_s = tc.decode_seconds(1, context), dc.decode_seconds(1, context)
    if draft_s >= target_s:
        raise Refusal("serving.err.draft_slow", draft=presets[draft].name, d=f"{draft_s * 1e3:,.2f}",
                      target=presets[target].name, t=f"{target_s * 1e3:,.2f}", c=f"{draft_s / target_s:,.2f}")
    return SpecTiming(target, draft, gpu, context, target_s, draft_s,
                      {k: tc.verify_seconds(k + 1, context) for k in range(1, MAX_SPEC_K + 1)})


# ---------------------------------------------------------------------------------------------
# The page's one call


@dataclass(frozen=True)
class SpecSetup:
    alpha: float = 0.8
    k: int = 4
    c: float | None = None  # draft step ÷ target step; None: from the roofline of target and draft on gpu
    target: str = "llama-3.1-70b"
    draft: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    mc_passes: int = 20_000
    mc_seed: int = 0
    ks: tuple[int, ...] = SPEC_KS
    alphas: tuple[float, ...] = SPEC_ALPHAS


@dataclass(frozen=True)
class SpecCurves:
    """Tokens per pass and speedup against k for several α (the chosen one included), the Monte Carlo check at
    the chosen α, and, when c comes from the roofline, the chosen α with the verify pass timed."""

    setup: SpecSetup
    c: float
    timing: SpecTiming | None
    monte_carlo: tuple[SpecMonteCarlo, ...]  # at the chosen α, one per k of setup.ks

    @property
    def ks(self) -> tuple[int, ...]:
        return self.setup.ks

    @property
    def alphas(self) -> list[float]:
        return sorted(set(self.setup.alphas) | {self.setup.alpha})

    def tokens(self, alpha: float) -> list[float]:
        return [expected_tokens_per_pass(alpha, k) for k in self.ks]

    def speedups(self, alpha: float) -> list[float]:
        return [speculative_speedup(alpha, k, self.c) for k in self.ks]

    def best_k(self, alpha: float) -> int:
        return optimal_k(alpha, self.c, self.ks[-1])

    @property
    def chosen_speedup(self) -> float:
        """The speedup at the chosen α and k."""
        return speculative_speedup(self.setup.alpha, self.setup.k, self.c)

    @property
    def best_speedup(self) -> tuple[int, float]:
        """(the best k at the chosen α, its speedup)."""
        k = self.best_k(self.setup.alpha)
        return k, speculative_speedup(self.setup.alpha, k, self.c)

    @property
    def timed(self) -> list[float] | None:
        """The chosen α's speedups with the verify pass timed by the roofline (None with c set by hand)."""
        return None if self.timing is None else [self.timing.speedup(self.setup.alpha, k) for k in self.ks]

    @property
    def chosen_monte_carlo(self) -> SpecMonteCarlo:
        return self.monte_carlo[self.ks.index(self.setup.k)]

    @property
    def num_mc_within(self) -> int:
        """Monte Carlo means within 2 standard errors of the closed form."""
        return sum(abs(mc.mean - mc.expected) <= 2 * mc.stderr for mc in self.monte_carlo)

    def mc_frame(self):
        """One row per k: the closed form, the Monte Carlo mean, its standard error, the acceptance rate seen."""
        import pandas as pd

        return pd.DataFrame([{"k": mc.k, "closed_form": mc.expected, "mean": mc.mean, "stderr": mc.stderr,
                              "acceptance_rate": mc.acceptance_rate} for mc in self.monte_carlo])


def run_speculative(setup: SpecSetup) -> SpecCurves:
    timing = spec_timing(setup.target, setup.draft, setup.gpu) if setup.c is None else None
    check_spec(setup.alpha, setup.k)
    if setup.k not in setup.ks:
        raise Refusal("serving.err.k_range", lo=f"{setup.ks[0]}", hi=f"{setup.ks[-1]}", got=f"{setup.k}")
    mc = tuple(simulate_speculative(setup.alpha, k, setup.mc_passes, setup.mc_seed) for k in setup.ks)
    c = timing.c if timing is not None else setup.c
    speculative_speedup(setup.alpha, setup.k, c)  # checks c
    return SpecCurves(setup, c, timing, mc)
