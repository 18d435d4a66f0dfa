"""The FlashAttention forward, stepped (numpy): one key tile at a time, keeping the running max m,
the running sum l and a rescaled accumulator, with a trace of every step; and an HBM-traffic
model of standard vs tiled attention (bytes moved)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.refusal import Misuse

# ---------------------------------------------------------------------------------------------

MAX_DEMO_KEYS = 64
MAX_DEMO_QUERIES = 8


def max_masked_prefix(num_keys: int, num_queries: int, causal: bool) -> int:
    """The most leading keys that may be masked while every query row still sees one key (causal: the
    first row, at position num_keys - num_queries, sees keys up to its own)."""
    return num_keys - num_queries if causal else num_keys - 1


@dataclass(frozen=True)
class SoftmaxDemo:
    """A small attention problem for the stepper: a few query rows against a few dozen keys."""

    num_keys: int = 10
    tile: int = 4
    num_queries: int = 1
    head_dim: int = 8
    value_dim: int = 3
    causal: bool = False
    masked_prefix: int = 0  # keys no query may see (left padding): makes fully masked tiles
    score_scale: float = 1.0  # multiplies every score: 100 gives scores in the hundreds
    seed: int = 0
    dtype: str = "float32"

    def __post_init__(self) -> None:
        # the stepper's controls bound each value by the others before building one (app/controls/attention_kernels.py)
        if not 1 <= self.num_keys <= MAX_DEMO_KEYS:
            raise Misuse(f"keys {self.num_keys} is outside 1..{MAX_DEMO_KEYS}")
        if not 1 <= self.tile <= self.num_keys:
            raise Misuse(f"tile {self.tile} is outside 1..{self.num_keys} (the number of keys)")
        if not 1 <= self.num_queries <= min(MAX_DEMO_QUERIES, self.num_keys):
            raise Misuse(f"query rows {self.num_queries} is outside 1..{min(MAX_DEMO_QUERIES, self.num_keys)}")
        if not 1 <= self.head_dim <= 64 or not 1 <= self.value_dim <= 16:
            raise Misuse(f"head dim {self.head_dim} must be in 1..64 and value dim {self.value_dim} in 1..16")
        first_visible = max_masked_prefix(self.num_keys, self.num_queries, self.causal)
        if not 0 <= self.masked_prefix <= first_visible:
            raise Misuse(f"{self.masked_prefix} masked keys would leave a query row with no key to attend to "
                         f"(at most {first_visible} with {self.num_keys} keys, {self.num_queries} rows"
                         f"{', causal' if self.causal else ''})")
        if not (math.isfinite(self.score_scale) and 0 < self.score_scale <= 1000):
            raise Misuse(f"score scale {self.score_scale} is outside (0, 1000]")
        if self.dtype not in ("float32", "float64"):
            raise Misuse(f"dtype {self.dtype!r} is not float32 or float64")

    @property
    def num_tiles(self) -> int:
        return -(-self.num_keys // self.tile)

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scores (Nq, Nk) with -inf where masked, and V (Nk, dv), in self.dtype."""
        rng = np.random.default_rng(self.seed)
        q = rng.standard_normal((self.num_queries, self.head_dim))
        k = rng.standard_normal((self.num_keys, self.head_dim))
        v = rng.standard_normal((self.num_keys, self.value_dim))
        dt = np.dtype(self.dtype)
        scores = (q.astype(dt) @ k.astype(dt).T) * dt.type(self.score_scale / math.sqrt(self.head_dim))
        return scores.astype(dt) + self.mask().astype(dt), v.astype(dt), self.mask()

    def mask(self) -> np.ndarray:
        """Additive (Nq, Nk) mask: 0 where the row may attend, -inf where it may not."""
        nq, nk = self.num_queries, self.num_keys
        allowed = np.ones((nq, nk), dtype=bool)
        allowed[:, : self.masked_prefix] = False
        if self.causal:
            q_pos = np.arange(nk - nq, nk)[:, None]
            allowed &= np.arange(nk)[None, :] <= q_pos
        return np.where(allowed, 0.0, -np.inf)


@dataclass(frozen=True)
class TileStep:
    index: int
    start: int  # first key of the tile
    stop: int  # one past its last key (the last tile may be shorter: ragged)
    scores: np.ndarray  # (Nq, tile) this tile's scores, -inf where masked
    tile_max: np.ndarray  # (Nq,) max over this tile alone
    m_old: np.ndarray  # (Nq,) running max before the tile
    m_new: np.ndarray  # (Nq,) running max after: max(m_old, tile_max)
    rescale: np.ndarray  # (Nq,) exp(m_old - m_new): how much the old sum and accumulator shrink
    p: np.ndarray  # (Nq, tile) exp(scores - m_new)
    l_old: np.ndarray  # (Nq,) running sum of exponentials before
    l_new: np.ndarray  # (Nq,) rescale · l_old + sum(p)
    acc: np.ndarray  # (Nq, dv) rescale · acc_old + p @ V_tile  (not yet divided by l)
    partial: np.ndarray  # (Nq, dv) acc / l_new: attention over keys [0, stop) exactly; nan while l = 0


@dataclass(frozen=True)
class OnlineSoftmaxTrace:
    steps: tuple[TileStep, ...]
    output: np.ndarray  # (Nq, dv) after the last tile: acc / l
    reference: np.ndarray  # (Nq, dv) softmax(scores) @ V, computed in one go, same dtype
    exact: np.ndarray  # (Nq, dv) the same in float64
    scores: np.ndarray  # (Nq, Nk)

    @property
    def max_abs_diff(self) -> float:
        """Tiled vs plain, same dtype: not 0 — the two add the same terms in different orders."""
        return float(np.max(np.abs(self.output.astype(np.float64) - self.reference.astype(np.float64))))

    @property
    def tiled_error(self) -> float:
        return float(np.max(np.abs(self.output.astype(np.float64) - self.exact)))

    @property
    def plain_error(self) -> float:
        return float(np.max(np.abs(self.reference.astype(np.float64) - self.exact)))


def plain_softmax_attention(scores: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(scores, row-wise) @ V, all keys at once (with the max subtracted, as every real kernel does)."""
    m = scores.max(axis=-1, keepdims=True)  # (Nq, 1)
    p = np.exp(scores - m)  # (Nq, Nk)
    return (p / p.sum(axis=-1, keepdims=True)) @ v  # (Nq, dv)


def online_softmax_attention(scores: np.ndarray, v: np.ndarray, tile: int, guard_masked: bool = True
                             ) -> OnlineSoftmaxTrace:
    """The FlashAttention forward for one block of query rows, one key tile at a time.

    Keeps per row: m (running max), l (running sum of exp(s - m)) and acc (running Σ exp(s - m)·v).
    When a tile raises the max, the old l and acc are multiplied by exp(m_old - m_new) so every
    term is always relative to the current max; dividing acc by l at the end gives softmax·V.

    `guard_masked=False` drops the guard for rows whose every key so far is masked (m = -inf):
    exp(-inf - (-inf)) is nan, which is what a kernel without the check returns."""
    if tile < 1:
        raise Misuse(f"tile {tile} must be at least 1")
    scores = np.asarray(scores)
    v = np.asarray(v)
    dt = scores.dtype
    nq, nk = scores.shape
    if v.shape[0] != nk:
        raise Misuse(f"V has {v.shape[0]} rows but there are {nk} keys")
    m = np.full(nq, -np.inf, dtype=dt)
    l_sum = np.zeros(nq, dtype=dt)
    acc = np.zeros((nq, v.shape[1]), dtype=dt)
    steps = []
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for i, start in enumerate(range(0, nk, tile)):
            stop = min(start + tile, nk)
            s = scores[:, start:stop]  # (Nq, t)
            tile_max = s.max(axis=1)  # (Nq,)
            m_new = np.maximum(m, tile_max)
            # Rows that have seen only masked keys have m_new = -inf; shift by 0 instead so that
            # exp(-inf - 0) = 0 rather than exp(nan).
            shift = np.where(np.isneginf(m_new), dt.type(0), m_new) if guard_masked else m_new
            rescale = np.exp(m - shift)  # (Nq,)
            p = np.exp(s - shift[:, None])  # (Nq, t)
            l_new = rescale * l_sum + p.sum(axis=1)
            acc = rescale[:, None] * acc + p @ v[start:stop]  # (Nq, dv)
            partial = acc / l_new[:, None]
            steps.append(TileStep(i, start, stop, s.copy(), tile_max, m.copy(), m_new, rescale, p, l_sum.copy(),
                                  l_new, acc.copy(), partial))
            m, l_sum = m_new, l_new
        output = acc / l_sum[:, None]
        reference = plain_softmax_attention(scores, v)
        exact = plain_softmax_attention(scores.astype(np.float64), v.astype(np.float64))
    return OnlineSoftmaxTrace(tuple(steps), output, reference, exact, scores)


def run_softmax_demo(demo: SoftmaxDemo, guard_masked: bool = True) -> OnlineSoftmaxTrace:
    scores, v, _mask = demo.inputs()
    return online_softmax_attention(scores, v, demo.tile, guard_masked)


# ---------------------------------------------------------------------------------------------
# HBM traffic: standard attention vs tiled
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Traffic:
    # part -> bytes per step; a part is a catalog word's id ("read_q_k", "write_s": kernels.fig.part.*)
    standard_parts: dict[str, int] = field(default_factory=dict)  # standard attention
    tiled_parts: dict[str, int] = field(default_factory=dict)
    standard_held: int = 0  # bytes of N² intermediates standard attention keeps in memory (S or P)
    tiled_held: int = 0  # bytes the tiled kernel keeps beyond Q, K, V, O: per-row statistics

    @property
    def standard_bytes(self) -> int:
        return sum(self.standard_parts.values())

    @property
    def tiled_bytes(self) -> int:
        return sum(self.tiled_parts.values())


def hbm_traffic(batch: int, heads: int, num_queries: int, num_keys: int, head_dim: int, elem_bytes: int,
                tile_q: int, tile_k: int, causal: bool) -> Traffic:
    """Bytes moved between main memory (HBM) and the chip, forward pass, one model of each:

    standard (the seed's three round trips): read Q, K; write S; read S, write P; read P, V; write O.
    tiled (Q tiles outer, as in the seed's pseudo-code): Q read once, K and V read once per Q tile
    (causal: only the key tiles at or left of the diagonal), O written once, one fp32 statistic per row.
    Masked entries still cost standard attention a full N_q×N_k matrix."""
    for name, value in (("batch", batch), ("heads", heads), ("queries", num_queries), ("keys", num_keys),
                        ("head dim", head_dim), ("element bytes", elem_bytes), ("Q tile", tile_q), ("K tile", tile_k)):
        if value < 1:
            raise Misuse(f"{name} {value} must be at least 1")
    bh, e = batch * heads, elem_bytes
    nq, nk, d = num_queries, num_keys, head_dim
    s = bh * nq * nk * e
    standard = {"read_q_k": bh * (nq + nk) * d * e, "write_s": s, "read_s": s, "write_p": s, "read_p": s,
                "read_v": bh * nk * d * e, "write_o": bh * nq * d * e}
    offset = nk - nq
    kv_rows = 0  # keys (rows of K, and of V) read, summed over Q tiles
    for q0 in range(0, nq, tile_q):
        if causal:
            last_visible = min(nk, offset + min(q0 + tile_q, nq))  # keys [0, last_visible) for this tile
            kv_rows += min(nk, -(-last_visible // tile_k) * tile_k)
        else:
            kv_rows += nk
    tiled = {"read_q": bh * nq * d * e, "read_k": bh * kv_rows * d * e, "read_v": bh * kv_rows * d * e,
             "write_o": bh * nq * d * e, "write_row_stats": bh * nq * 4}
    return Traffic(standard, tiled, standard_held=s, tiled_held=bh * nq * 4)
