"""A seeded shared-prefix workload for the serving engine: each request is one group's prefix (a system prompt, a
document, an agent's tools) followed by a question of its own, arriving as a Poisson stream. Groups are picked
with Zipf popularity (group g with weight 1 / (g + 1)^skew; skew 0 is uniform), so a few prefixes are hot and
many are cold: the shape that decides which tier of a cache each prefix ends up in."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.alloc.prefix_cache import block_hashes
from sim.alloc.workload import Workload
from sim.refusal import Misuse

MAX_SHARED_REQUESTS = 2000
MAX_SHARED_GROUPS = 1000
MAX_SHARED_PREFIX = 32_768
MAX_SHARED_SUFFIX = 8192
MAX_SHARED_OUTPUT = 4096
FIRST_ID, VOCAB = 3, 128_000


@dataclass(frozen=True)
class SharedPrefixConfig:
    num_requests: int = 400
    num_groups: int = 40
    prefix_len: int = 2048  # tokens every request of a group shares
    suffix_len: int = 128  # tokens of its own, after the prefix
    output_len: int = 64
    rate_per_s: float = 60.0  # Poisson arrivals
    skew: float = 1.0  # Zipf exponent of the groups' popularity (0: uniform)
    seed: int = 0

    def __post_init__(self) -> None:
        # the Serving page's offload and routing tabs bound every field first (app/controls/serving_engine.py)
        for name, lo, hi in (("num_requests", 1, MAX_SHARED_REQUESTS), ("num_groups", 1, MAX_SHARED_GROUPS),
                             ("prefix_len", 0, MAX_SHARED_PREFIX), ("suffix_len", 1, MAX_SHARED_SUFFIX),
                             ("output_len", 1, MAX_SHARED_OUTPUT), ("seed", 0, 2**31 - 1)):
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise Misuse(f"{name} must be {lo:,}..{hi:,}, got {v:,}")
        if not 0.01 <= self.rate_per_s <= 10_000:
            raise Misuse(f"rate_per_s must be 0.01..10,000 requests per second, got {self.rate_per_s}")
        if not 0.0 <= self.skew <= 3.0:
            raise Misuse(f"skew must be 0..3, got {self.skew}")

    @property
    def prompt_len(self) -> int:
        return self.prefix_len + self.suffix_len

    @property
    def max_model_len(self) -> int:
        return self.prompt_len + self.output_len


@dataclass(frozen=True, eq=False)
class SharedPrefixWorkload:
    config: SharedPrefixConfig
    workload: Workload  # arrivals in seconds (run with tick_s = 1)
    group: np.ndarray  # (N,) each request's group
    token_ids: tuple[np.ndarray, ...]  # (N,) each (P,) prompt

    def hashes(self, block_size: int) -> list[list[int]]:
        return [block_hashes(ids, block_size) for ids in self.token_ids]


def make_shared_prefix(cfg: SharedPrefixConfig) -> SharedPrefixWorkload:
    rng = np.random.default_rng(cfg.seed)
    n = cfg.num_requests
    weights = 1.0 / np.arange(1, cfg.num_groups + 1) ** cfg.skew
    group = rng.choice(cfg.num_groups, size=n, p=weights / weights.sum())
    arrival = np.cumsum(rng.exponential(1.0 / cfg.rate_per_s, size=n))
    arrival -= arrival[0]
    prefixes = rng.integers(FIRST_ID, VOCAB, size=(cfg.num_groups, cfg.prefix_len)).astype(np.int32)
    suffixes = rng.integers(FIRST_ID, VOCAB, size=(n, cfg.suffix_len)).astype(np.int32)
    ids = tuple(np.concatenate([prefixes[g], suffixes[i]]) for i, g in enumerate(group))
    p = np.full(n, cfg.prompt_len, dtype=np.int64)
    o = np.full(n, cfg.output_len, dtype=np.int64)
    wl = Workload(arrival, p, o, o.copy(), cfg.max_model_len)
    return SharedPrefixWorkload(cfg, wl, group, ids)
