"""Token-eviction KV caches (window, StreamingLLM sinks, H2O, SnapKV) and what every way of shrinking
the cache weighs, counted exactly.

Each cache is a KVCache (sim/model/kvcache.py): `write(layer, k, v)` appends a step's new keys/values and
returns every key/value the layer attends to this step, (B, Hkv, S, D). It plugs into `decode_loop`
unchanged.

The budget is the number of tokens a layer holds BETWEEN steps (per K/V head for the per-head
policies). A step attends to those plus the tokens it feeds (one when decoding): the new token's K/V
exists during the step whatever the policy, and only after the layer's attention has used the whole
set is the cache cut back to the budget, as in H2O's Algorithm 1. So a prefill attends to the whole
prompt (as the papers do) and a decode step to at most budget + 1 keys. A token evicted is never
attended again; at a budget of at least every position written nothing is evicted and the logits are
exactly the full cache's.

    window  the last `budget` tokens.
    sinks   StreamingLLM: the first `sinks` tokens (attention sinks, default 4) + the last budget - sinks.
    h2o     Heavy-Hitter Oracle: the last `recent` tokens (default budget // 2) + the budget - recent
            earlier tokens with the largest attention accumulated over every query so far; per K/V
            head, summing the probabilities of the G query heads that share it. Cut after every step.
    snapkv  SnapKV: when the prompt is written, its last w queries (the observation window, default
            16; w = min(16, prompt, budget)) vote: their attention over the earlier prompt positions
            is summed per K/V head (over the window's queries and the head's G query heads),
            max-pooled in 1-D (kernel 7, same padding), and the budget - w positions with the most
            votes are kept with the window itself. Tokens generated after the prefill are then kept
            with a recent window: the voted prompt positions stay, and the most recent
            budget - (voted positions kept) tokens slide, so the total stays within budget. (A prompt
            that fits the budget keeps everything; its positions before the observation window are
            the ones that stay.)

Ties in a ranking go to the earlier token. H2O and SnapKV need the attention weights: such a cache is its own
`attention_observer`, whose `observe(layer, probs)` eager attention calls (attn_impl="eager"); the model
refuses any other attention with it, and the cache refuses a write while a layer's weights are still owed
rather than evict blindly.

Rows are kept in position order per head, so a chunk written on top of a cut cache is still masked
causally by row index. Evicting copies the kept rows into a fresh buffer (never in place), so the
(B, Hkv, S, D) views an `update` returned stay valid while the layer finishes its attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from sim.model.kvcache import ContiguousKVCache, KVCache
from sim.model.quant_cache import QuantizedKVCache, make_scheme, scheme_bytes
from sim.refusal import Misuse

EVICT_POLICIES = ("window", "sinks", "h2o", "snapkv")
PER_HEAD_POLICIES = ("h2o", "snapkv")  # each K/V head keeps its own positions
QUANT_METHODS: dict[str, tuple[str, int]] = {"fp8": ("fp8_e4m3", 8), "int8": ("token", 8), "kivi4": ("kivi", 4),
                                             "kivi2": ("kivi", 2)}
SHRINK_METHODS = ("full", *EVICT_POLICIES, *QUANT_METHODS)


DEFAULT_SINKS = 4
DEFAULT_OBS_WINDOW = 16
POOL_KERNEL = 7
SCORE_BYTES = 4  # H2O's accumulated attention, fp32
INDEX_BYTES = 4  # a kept position, int32
FULL_VALUE_BYTES = 2  # what "the full cache" is measured against: FP16


# --- which rows to keep ------------------------------------------------------------------------


def _rank_top(scores: torch.Tensor, k: int) -> torch.Tensor:
    """scores (B, Hkv, N) -> (B, Hkv, k) indices of the k largest per head, ascending; ties go to the earlier."""
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]
    return torch.sort(order, dim=-1).values


def window_rows(n: int, budget: int) -> list[int]:
    """Rows (= positions, in order) a sliding window keeps out of n."""
    return list(range(max(0, n - budget), n))


def sinks_rows(n: int, budget: int, sinks: int = DEFAULT_SINKS) -> list[int]:
    """Rows StreamingLLM keeps out of n: the first `sinks` and the last budget - sinks."""
    if n <= budget:
        return list(range(n))
    return list(range(sinks)) + list(range(n - (budget - sinks), n))


def h2o_rows(scores: torch.Tensor, budget: int, recent: int) -> torch.Tensor:
    """scores (B, Hkv, N) accumulated attention per row -> (B, Hkv, min(N, budget)) rows kept: the last
    `recent` rows and the budget - recent earlier rows with the most attention."""
    B, H, N = scores.shape
    if N <= budget:
        return torch.arange(N, device=scores.device).expand(B, H, N)
    tail = torch.arange(N - recent, N, device=scores.device).expand(B, H, recent)
    heavy = _rank_top(scores[..., : N - recent], budget - recent)
    return torch.cat([heavy, tail], dim=-1)


def snapkv_votes(probs: torch.Tensor, *, n_kv_heads: int, window: int, kernel: int = POOL_KERNEL) -> torch.Tensor:
    """probs (B, H, T, T) of a prompt -> (B, Hkv, T - window) votes for the positions before the
    observation window: the window's attention summed over its queries and each K/V head's G query
    heads, then max-pooled (kernel, stride 1, same padding)."""
    B, H, T, S = probs.shape
    L = S - window
    votes = probs[:, :, T - window :, :L].float().sum(dim=2)  # (B, H, L)
    votes = votes.view(B, n_kv_heads, H // n_kv_heads, L).sum(dim=2)  # (B, Hkv, L)
    if L == 0:
        return votes
    pooled = F.max_pool1d(votes.reshape(B * n_kv_heads, 1, L), kernel, stride=1, padding=kernel // 2)
    return pooled.view(B, n_kv_heads, L)


def snapkv_rows(probs: torch.Tensor, *, n_kv_heads: int, budget: int, window: int = DEFAULT_OBS_WINDOW,
                kernel: int = POOL_KERNEL) -> tuple[torch.Tensor, int]:
    """probs (B, H, T, T) of the prompt -> ((B, Hkv, min(T, budget)) rows kept, how many of them are
    voted prompt positions that stay for good)."""
    B, _, T, _ = probs.shape
    w = min(window, T, budget)
    if T <= budget:
        return torch.arange(T, device=probs.device).expand(B, n_kv_heads, T), T - w
    votes = snapkv_votes(probs, n_kv_heads=n_kv_heads, window=w, kernel=kernel)
    voted = _rank_top(votes, budget - w)
    tail = torch.arange(T - w, T, device=probs.device).expand(B, n_kv_heads, w)
    return torch.cat([voted, tail], dim=-1), budget - w


# --- the cache ---------------------------------------------------------------------------------


class EvictingKVCache(KVCache):
    """A KV cache that keeps at most `budget` tokens per layer (per K/V head for h2o and snapkv) between
    steps; see the module docstring for each policy.

    `num_tokens` is the positions written (where the next token goes, as for every cache);
    `kept_tokens` what each layer holds; `kept_positions(layer)` which, (B, Hkv, n)."""

    def __init__(self, cfg, *, policy: str, budget: int, batch_size: int = 1, max_seq_len: int | None = None,
                 device=None, dtype=torch.float32, sinks: int = DEFAULT_SINKS, recent: int | None = None,
                 obs_window: int = DEFAULT_OBS_WINDOW, kernel: int = POOL_KERNEL) -> None:
        if policy not in EVICT_POLICIES:
            raise Misuse(f"policy must be one of {', '.join(EVICT_POLICIES)}, got {policy!r}")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise Misuse(f"the budget must be a whole number of tokens >= 1, got {budget!r}")
        self.max_seq_len = max_seq_len or cfg.max_seq_len
        if self.max_seq_len > cfg.max_seq_len:
            raise Misuse(f"cache length {self.max_seq_len} exceeds the model's context {cfg.max_seq_len}")
        if policy == "sinks" and not 0 <= sinks < budget:
            raise Misuse(f"StreamingLLM keeps {sinks} sink tokens + budget - {sinks} recent ones: the budget "
                         f"must be more than {sinks} tokens, got {budget}")
        recent = budget // 2 if recent is None else recent
        if policy == "h2o" and not 0 <= recent <= budget:
            raise Misuse(f"H2O's recent window must be 0..{budget} tokens (the budget), got {recent}")
        if policy == "snapkv" and (obs_window < 1 or kernel < 1 or kernel % 2 == 0):
            raise Misuse(f"SnapKV needs an observation window >= 1 and an odd pooling kernel, got "
                         f"window {obs_window}, kernel {kernel}")
        self.cfg, self.policy, self.budget = cfg, policy, budget
        self.sinks, self.recent, self.obs_window, self.kernel = sinks, recent, obs_window, kernel
        self.per_head = policy in PER_HEAD_POLICIES
        B, Hkv, D, L = batch_size, cfg.n_kv_heads, cfg.head_dim, cfg.n_layers
        self._dev = device
        shape = (B, Hkv, self.max_seq_len, D)  # (B, Hkv, capacity, D): the first write fits like a full cache's
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(L)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(L)]
        self.pos = [torch.zeros(shape[:3], device=device, dtype=torch.long) for _ in range(L)]  # (B, Hkv, cap)
        self.scores = [torch.zeros(shape[:3], device=device, dtype=torch.float32) for _ in range(L)] \
            if policy == "h2o" else None
        self.rows = [0] * L  # rows held per layer (the same for every head)
        self.written = [0] * L  # positions written per layer
        self.pinned: list[int | None] = [None] * L  # SnapKV: voted prompt rows that stay (None: no prompt yet)
        self._awaiting = [False] * L  # a write whose attention the cache still needs to see
        self._step = (0, 0)  # (start, end) of the step being written
        self.attention_observer = self if self.per_head else None  # h2o and snapkv rank by attention

    # the KVCache protocol

    def begin_step(self, start_pos: int, num_new_tokens: int, *, batch_size: int) -> None:
        end = start_pos + num_new_tokens
        written = self.num_tokens
        assert start_pos == written, (start_pos, written)  # an evicting cache only appends: the model's loop is the caller
        if end > self.max_seq_len:
            raise Misuse(f"cache holds {self.max_seq_len} positions; asked to write {start_pos}..{end - 1}")
        self._step = (start_pos, end)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if self._awaiting[layer]:
            raise Misuse(f"{self.policy} ranks tokens by the attention they get, but layer {layer} never showed "
                         f"its attention weights: run the model with attn_impl='eager'")
        start_pos, end = self._step
        T = end - start_pos
        n = self.rows[layer]
        if n + T > self.k[layer].shape[2]:
            self._reallocate(layer, torch.arange(n, device=k.device).expand(*k.shape[:2], n), n + T)
        self.k[layer][:, :, n : n + T] = k
        self.v[layer][:, :, n : n + T] = v
        self.pos[layer][:, :, n : n + T] = torch.arange(start_pos, end, device=k.device)
        self.rows[layer], self.written[layer] = n + T, end
        k_all, v_all = self.k[layer][:, :, : n + T], self.v[layer][:, :, : n + T]  # (B, Hkv, n + T, D)
        if self.policy == "h2o" or (self.policy == "snapkv" and self.pinned[layer] is None):
            self._awaiting[layer] = True  # cut once observe() has the weights
        else:
            self._cut(layer)  # the views above alias the old buffer: they stay as they are
        return k_all, v_all

    def end_step(self) -> None:
        pass  # each layer counted its positions as it wrote them

    def observe(self, layer: int, probs: torch.Tensor) -> None:
        """The layer's attention weights this step, (B, H, T, S) over the rows `update` returned."""
        if not self._awaiting[layer]:
            return  # window and sinks need no weights; nor does SnapKV after the prompt
        B, H, T, S = probs.shape
        assert S == self.rows[layer], (S, self.rows[layer])
        Hkv = self.cfg.n_kv_heads
        if self.policy == "h2o":
            got = probs.float().view(B, Hkv, H // Hkv, T, S).sum(dim=(2, 3))  # (B, Hkv, S)
            self.scores[layer][:, :, :S] += got
            self._awaiting[layer] = False
            self._cut(layer)
            return
        keep, pinned = snapkv_rows(probs, n_kv_heads=Hkv, budget=self.budget, window=self.obs_window, kernel=self.kernel)
        self.pinned[layer] = pinned
        self._awaiting[layer] = False
        if keep.shape[-1] < S:
            self._reallocate(layer, keep, self.budget + 1)

    @property
    def num_tokens(self) -> int:
        """Positions written in every layer (the next token's position)."""
        return min(self.written)

    @property
    def kept_tokens(self) -> int:
        """The most rows any layer holds right now."""
        return max(self.rows)

    def kept_positions(self, layer: int) -> torch.Tensor:
        """(B, Hkv, n) the original positions layer `layer` holds, ascending per head."""
        return self.pos[layer][:, :, : self.rows[layer]].clone()

    def bytes_breakdown(self) -> dict[str, int]:
        """What the cache holds: K/V rows at their element size, plus H2O's fp32 scores and the per-head
        policies' int32 kept positions (a slot overwritten in place must remember what it holds)."""
        out = {"kv": 0, "scores": 0, "positions": 0}
        for layer in range(len(self.k)):
            B, Hkv, _, D = self.k[layer].shape
            n = self.rows[layer]
            out["kv"] += 2 * B * Hkv * n * D * self.k[layer].element_size()
            if self.policy == "h2o":
                out["scores"] += B * Hkv * n * SCORE_BYTES
            if self.per_head:
                out["positions"] += B * Hkv * n * INDEX_BYTES
        return out

    def used_bytes(self) -> int:
        return sum(self.bytes_breakdown().values())

    # eviction

    def _cut(self, layer: int) -> None:
        """Back to the budget, once the layer's attention has used every row."""
        n = self.rows[layer]
        if n <= self.budget:
            return
        B, Hkv = self.k[layer].shape[:2]
        dev = self.k[layer].device
        if self.policy == "h2o":
            keep = h2o_rows(self.scores[layer][:, :, :n], self.budget, self.recent)
        else:
            if self.policy == "window":
                rows = window_rows(n, self.budget)
            elif self.policy == "sinks":
                rows = sinks_rows(n, self.budget, self.sinks)
            else:  # snapkv after its prompt: the voted rows stay, the rest slides
                p = self.pinned[layer]
                rows = list(range(p)) + list(range(n - (self.budget - p), n))
            keep = torch.tensor(rows, device=dev).expand(B, Hkv, len(rows))
        self._reallocate(layer, keep, self.budget + 1)

    def _reallocate(self, layer: int, keep: torch.Tensor, capacity: int) -> None:
        """Fresh buffers of `capacity` rows holding rows `keep` (B, Hkv, n) of the old ones, per head."""
        old_k, old_v, old_pos = self.k[layer], self.v[layer], self.pos[layer]
        B, Hkv, _, D = old_k.shape
        n = keep.shape[-1]
        idx = keep[..., None].expand(B, Hkv, n, D)
        self.k[layer] = torch.empty(B, Hkv, capacity, D, device=old_k.device, dtype=old_k.dtype)
        self.v[layer] = torch.empty_like(self.k[layer])
        self.k[layer][:, :, :n] = old_k.gather(2, idx)
        self.v[layer][:, :, :n] = old_v.gather(2, idx)
        self.pos[layer] = torch.zeros(B, Hkv, capacity, device=old_pos.device, dtype=old_pos.dtype)
        self.pos[layer][:, :, :n] = old_pos.gather(2, keep)
        if self.scores is not None:
            old_s = self.scores[layer]
            self.scores[layer] = torch.zeros(B, Hkv, capacity, device=old_s.device, dtype=old_s.dtype)
            self.scores[layer][:, :, :n] = old_s.gather(2, keep)
        self.rows[layer] = n


# --- one constructor for every way of shrinking --------------------------------------------------


def budget_for(budget_frac: float, num_tokens: int) -> int:
    """Tokens kept at a fraction of the sequence length the run reaches (half rounds up), at least 1."""
    if not 0 < budget_frac <= 1:
        raise Misuse(f"the budget is a fraction of the sequence in (0, 1], got {budget_frac}")
    if num_tokens < 1:
        raise Misuse(f"the run must reach at least 1 token, got {num_tokens}")
    return max(1, math.floor(budget_frac * num_tokens + 0.5))


def _check_method(method: str) -> None:
    if method not in SHRINK_METHODS:
        raise Misuse(f"method must be one of {', '.join(SHRINK_METHODS)}, got {method!r}")


def quant_scheme(method: str):
    """The quant_cache scheme behind fp8 / int8 / kivi4 / kivi2 (KIVI with its default residual)."""
    kind, bits = QUANT_METHODS[method]
    return make_scheme(kind, bits=bits)


def make_shrunk_cache(model_cfg, *, method: str, budget_tokens: int | None, max_seq_len: int, device=None,
                      dtype=torch.float32, batch_size: int = 1, **policy_options):
    """A cache for `method` (one of SHRINK_METHODS) sized for max_seq_len positions.

    budget_tokens: tokens an eviction method keeps per layer (see `budget_for` to get it from a fraction
    of the run's length); "full" and the quantization methods ignore it (their bytes are fixed by the
    format). policy_options go to EvictingKVCache (sinks, recent, obs_window, kernel)."""
    _check_method(method)
    if method == "full":
        return ContiguousKVCache(model_cfg, batch_size=batch_size, max_seq_len=max_seq_len, device=device, dtype=dtype)
    if method in QUANT_METHODS:
        return QuantizedKVCache(model_cfg, scheme=quant_scheme(method), batch_size=batch_size, max_seq_len=max_seq_len, device=device, dtype=dtype)
    return EvictingKVCache(model_cfg, policy=method, budget=budget_tokens, batch_size=batch_size, max_seq_len=max_seq_len, device=device, dtype=dtype, **policy_options)


# --- bytes -------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ByteAccount:
    """What one method's cache weighs after num_tokens tokens, against the full FP16 cache of them."""

    method: str
    num_tokens: int
    kept_tokens: int
    kv_bytes: int  # K/V values (quantized codes + any full-precision residual for the quantization methods)
    extra_bytes: int  # everything else the method stores (see extra_parts)
    extra_parts: tuple[tuple[str, int], ...]  # (part, bytes) of extra_bytes that are not zero; part: shrink.part.<part>
    full_bytes: int  # the full FP16 cache of num_tokens: 2 · layers · kv_heads · head_dim · 2 B · num_tokens

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.extra_bytes

    @property
    def fraction_of_full(self) -> float:
        return self.total_bytes / self.full_bytes


def full_fp16_bytes(model_cfg, num_tokens: int) -> int:
    """2 (K and V) · layers · kv_heads · head_dim · 2 B · num_tokens."""
    return 2 * model_cfg.n_layers * model_cfg.n_kv_heads * model_cfg.head_dim * FULL_VALUE_BYTES * num_tokens


def shrunk_bytes(model_cfg, *, method: str, budget_tokens: int | None, num_tokens: int,
                 value_bytes: int = FULL_VALUE_BYTES) -> ByteAccount:
    """The bytes `method` holds after num_tokens tokens (batch 1), values at value_bytes each.

    eviction: kept = min(budget, num_tokens); K/V = 2 · L · Hkv · D · value_bytes · kept; plus, per kept
              token per K/V head per layer, H2O's accumulated score (fp32) and, for the per-head
              policies (H2O, SnapKV), its int32 position. Window and sinks keep the same positions in
              every head, known from the count alone: nothing extra. SnapKV's votes are gone after the
              prefill.
    full:     the FP16 cache (at value_bytes).
    quantized: quant_cache.scheme_bytes: codes + full-precision residual are K/V, scales and zero
              points extra; every token is kept."""
    _check_method(method)
    if num_tokens < 1:
        raise Misuse(f"count the bytes of at least 1 token, got {num_tokens}")
    L, Hkv, D = model_cfg.n_layers, model_cfg.n_kv_heads, model_cfg.head_dim
    full = full_fp16_bytes(model_cfg, num_tokens)
    if method in QUANT_METHODS:
        b = scheme_bytes(quant_scheme(method), num_tokens=num_tokens, n_layers=L, n_kv_heads=Hkv, head_dim=D, full_bytes=value_bytes)
        parts = tuple((key, b[key]) for key in ("scales", "zero_points") if b[key])
        return ByteAccount(method=method, num_tokens=num_tokens, kept_tokens=num_tokens, kv_bytes=b["codes"] + b["full_precision"],
                           extra_bytes=b["scales"] + b["zero_points"], extra_parts=parts, full_bytes=full)
    if method == "full":
        kept = num_tokens
    else:
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
            raise Misuse(f"{method} needs a budget of at least 1 token, got {budget_tokens!r}")
        kept = min(budget_tokens, num_tokens)
    kv = 2 * L * Hkv * D * value_bytes * kept
    parts = []
    if method == "h2o":
        parts.append(("scores", L * Hkv * kept * SCORE_BYTES))
    if method in PER_HEAD_POLICIES:
        parts.append(("positions", L * Hkv * kept * INDEX_BYTES))
    return ByteAccount(method=method, num_tokens=num_tokens, kept_tokens=kept, kv_bytes=kv, extra_bytes=sum(b for _, b in parts), extra_parts=tuple(parts), full_bytes=full)
