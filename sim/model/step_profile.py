"""Where one cached decode step's time goes on the real model: torch.profiler's per-operator self time,
grouped (matmuls, attention, norms, elementwise, views and copies), the operator calls per step, and the time
the step's FLOPs alone would need at this machine's matmul rate. A tiny model's step is overhead-bound: its
~2 MFLOP need microseconds; launching hundreds of small operators takes a millisecond."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from sim.cost.opcount import FlopTally
from sim.model.device import Stopwatch
from sim.model.generate import decode_one_token, prefill
from sim.model.kvcache import ContiguousKVCache
from sim.model.transformer import Llama
from sim.refusal import Misuse

MAX_PROFILE_CONTEXT = 1000
CATEGORIES = ("matmuls", "attention", "norms", "elementwise", "views and copies", "other operators")
OUTSIDE = "outside operators (Python, dispatch)"  # the step's time in no operator (a key of StepProfile.shares)
_MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm"}
_ATTENTION = {"aten::softmax", "aten::_softmax", "aten::scaled_dot_product_attention",
              "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_safe_softmax"}
# RMSNorm (sim.model.fast) is sum, div_, add_ and rsqrt_ between its three muls, which count as elementwise
_NORMS = {"aten::rms_norm", "aten::_fused_rms_norm", "aten::rsqrt", "aten::rsqrt_", "aten::pow", "aten::mean",
          "aten::sum", "aten::div_", "aten::add_"}
_ELEMENTWISE = {"aten::add", "aten::mul", "aten::mul_", "aten::silu", "aten::neg", "aten::sub", "aten::roll",
                "aten::div", "aten::masked_fill", "aten::where", "aten::cat", "aten::argmax", "aten::max"}
_VIEWS = {"aten::view", "aten::reshape", "aten::transpose", "aten::slice", "aten::select", "aten::expand",
          "aten::as_strided", "aten::contiguous", "aten::unsqueeze", "aten::split", "aten::split_with_sizes",
          "aten::chunk", "aten::t", "aten::narrow", "aten::copy_", "aten::clone", "aten::empty", "aten::empty_like",
          "aten::embedding", "aten::index_select", "aten::_to_copy", "aten::to", "aten::_unsafe_view",
          "aten::index", "aten::alias", "aten::detach", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg",
          "aten::zeros", "aten::fill_", "aten::zero_", "aten::item", "aten::_local_scalar_dense", "aten::stack"}


def category(op: str) -> str:
    for name, ops in (("matmuls", _MATMUL), ("attention", _ATTENTION), ("norms", _NORMS),
                      ("elementwise", _ELEMENTWISE), ("views and copies", _VIEWS)):
        if op in ops:
            return name
    return "other operators"


@dataclass(frozen=True, kw_only=True)
class StepProfile:
    context: int  # tokens in the cache when the profiled step runs
    wall_s: float  # median wall time of one step, timed without the profiler
    profiled_s: float  # wall time of one step under the profiler (the profiler adds its own cost)
    category_s: dict[str, float]  # operators' self time per step, by category (under the profiler)
    num_calls: float  # aten operator calls per step
    flops: int  # the step's matmul FLOPs, tallied from the shapes executed
    matmul_flops_per_s: float  # measured here on a square matmul

    @property
    def ops_s(self) -> float:
        return sum(self.category_s.values())

    @property
    def outside_ops_s(self) -> float:
        """Under the profiler, the step's time not inside any operator: Python, module calls, dispatch."""
        return max(0.0, self.profiled_s - self.ops_s)

    @property
    def math_s(self) -> float:
        """What the FLOPs alone would take at the measured matmul rate."""
        return self.flops / self.matmul_flops_per_s

    def shares(self) -> dict[str, float]:
        """Each category's share of the profiled step, 'outside operators' included; they sum to 1."""
        total = max(self.profiled_s, self.ops_s)
        out = {k: v / total for k, v in self.category_s.items()}
        out[OUTSIDE] = self.outside_ops_s / total
        return out


def _matmul_rate(device, dtype, n: int = 512, repeats: int = 5) -> float:
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    times = []
    for _ in range(repeats + 1):
        with Stopwatch(device) as clock:
            a @ b
        times.append(clock.seconds)
    return 2 * n**3 / min(times[1:])


@torch.inference_mode()
def profile_decode_step(model: Llama, context: int = 256, repeats: int = 20) -> StepProfile:
    """Prefill `context` tokens, then time `repeats` cached steps plainly and `repeats` under the profiler."""
    if not 1 <= context <= MAX_PROFILE_CONTEXT or not 1 <= repeats <= 200:
        raise Misuse(f"context must be 1..{MAX_PROFILE_CONTEXT:,} and repeats 1..200, got {context}, {repeats}")
    dev = model.device
    ids = torch.arange(context, device=dev)[None] % 200 + 32  # printable bytes; the cost does not depend on them
    cache = ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=context + 1, device=dev, dtype=model.dtype)
    prefill(model, ids, cache)
    token = ids[:, -1:]

    def step(tally=None):
        decode_one_token(model, token, context, cache=cache, tally=tally)
        cache.truncate(context)  # the same step again: the cache holds `context` tokens each time

    step()  # warm-up
    walls = []
    for _ in range(repeats):
        with Stopwatch(dev) as clock:
            step()
        walls.append(clock.seconds)
    tally = FlopTally()
    step(tally)
    with profile(activities=[ProfilerActivity.CPU]) as prof, Stopwatch(dev) as clock:
        for _ in range(repeats):
            step()
    by_cat = dict.fromkeys(CATEGORIES, 0.0)
    calls = 0
    for ev in prof.key_averages():
        if not ev.key.startswith("aten::"):
            continue
        by_cat[category(ev.key)] += ev.self_cpu_time_total / 1e6 / repeats
        calls += ev.count
    return StepProfile(context=context, wall_s=statistics.median(walls), profiled_s=clock.seconds / repeats, category_s=by_cat, num_calls=calls / repeats,
                       flops=tally.total, matmul_flops_per_s=_matmul_rate(dev, model.dtype))
