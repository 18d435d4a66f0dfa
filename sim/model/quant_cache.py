"""A quantized KV cache for the tiny model: KIVI, and the naive schemes it is compared with.

The KVCache contract of sim/model/kvcache.py: `write(layer, k, v)` stores a step's new keys/values and
returns the (B, Hkv, S, D) keys/values the layer attends to.

What is stored, per layer, for K and for V separately (a "store"):

    per-token  (V in KIVI; FP8; both tensors in the naive per-token scheme)
        a token is quantized as soon as it leaves the full-precision window of the last R
        tokens (R = 0: on arrival).
    per-channel (K in KIVI)
        a channel's scale needs a group of G tokens, so tokens wait in the full-precision
        residual until it holds R tokens (R a multiple of G); then all R are quantized at once,
        as R/G groups of G tokens, and the residual starts empty again. So K keeps between 0 and
        R - 1 recent tokens in full precision, V always the last R.
    per-channel with R = 0 (the "no residual window" variants)
        there is no full-precision copy to wait in, so the chunk being filled is re-quantized
        from what it holds (its dequantized tokens plus the new one) every time a token
        arrives, with the scale of the tokens so far; once it holds G tokens it is final.

Every token is appended one at a time in that order, so a prefill of T tokens stores exactly
what T single-token steps store. The tokens passed to the current call are attended at full
precision (they are the fresh values, not yet read back); everything earlier is read back as
stored. This is KIVI's recipe (arXiv:2402.02750, Algorithm 1), written here from its
description. Hugging Face's QuantizedCache differs: it quantizes a whole prompt at once and,
whenever its residual fills, dequantizes everything and re-quantizes the whole cache.

Memory is counted exactly: bit-packed codes + fp16 scales + fp16 zero points + the
full-precision residual at `full_bytes` per value (2: fp16/bf16, what a GPU server keeps; the
CPU here computes in fp32, which changes no stored number's count).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from sim.model.kvcache import KVCache
from sim.model.quant import (
    INT_BITS,
    SCALE_BYTES,
    ZERO_BYTES,
    QuantizedTensor,
    QuantSpec,
    fake_quantize,
    quantize_with_values,
)
from sim.refusal import Misuse, Refusal

MAX_RESIDUAL = 1024
FULL_BYTES = 2

# The schemes by kind; each one's names (label, short label; sim/words/quant.py words them) are catalog entries: quant.scheme.<kind> and
# quant.short.<kind> in assets/i18n/<lang>/kv_quantization.json, with {R} for the residual window.
SCHEME_KINDS: tuple[str, ...] = ("kivi", "kivi_nores", "token", "channel", "token_res", "token_first")
FP8_KINDS: tuple[str, ...] = ("fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True, kw_only=True)
class CacheScheme:
    """How a cache stores K and V. A spec of None keeps that tensor in full precision."""

    key: str
    k: QuantSpec | None
    v: QuantSpec | None
    residual: int = 0  # R: tokens kept in full precision (see the module docstring)
    keep: str = "recent"  # which R tokens: the most recent (a residual window) or the first R
    # FP8 only: each layer's (k_scale, v_scale), calibrated (sim/model/quant_fp8.py); () keeps the specs' own scale
    layer_scales: tuple[tuple[float | tuple[float, ...], float | tuple[float, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.keep not in ("recent", "first"):
            raise Misuse(f"keep must be 'recent' or 'first', got {self.keep!r}")
        if self.keep == "first" and (_per_channel(self.k) or _per_channel(self.v)):
            raise Misuse("keeping the first R tokens is only defined for per-token quantization")
        if isinstance(self.residual, bool) or not isinstance(self.residual, int) \
                or not 0 <= self.residual <= MAX_RESIDUAL:
            raise Misuse(f"residual must be a whole number in 0..{MAX_RESIDUAL}, got {self.residual!r}")
        if self.layer_scales and not (self.k is not None and self.k.is_fp8 and self.v is not None and self.v.is_fp8):
            raise Misuse("per-layer scales are for FP8 K and V only")
        for name, spec in (("K", self.k), ("V", self.v)):
            if spec is not None and not spec.is_fp8 and spec.axis == "channel" and self.residual % spec.group_size:
                raise Refusal("model.err.residual_groups", R=self.residual, name=name, G=spec.group_size,
                              fix=max(spec.group_size, self.residual // spec.group_size * spec.group_size))
    @property
    def is_full(self) -> bool:
        return self.k is None and self.v is None

    def for_layer(self, layer: int) -> CacheScheme:
        """The scheme one layer uses: its own calibrated FP8 scales in the specs when there are any."""
        if not self.layer_scales:
            return self
        if not 0 <= layer < len(self.layer_scales):
            raise Misuse(f"the scheme has FP8 scales for {len(self.layer_scales)} layers, asked for layer {layer}")
        ks, vs = self.layer_scales[layer]
        return replace(self, k=replace(self.k, scale=ks), v=replace(self.v, scale=vs), layer_scales=())


    @property
    def bits(self) -> int:
        specs = [s for s in (self.k, self.v) if s is not None]
        return max(s.bits for s in specs) if specs else 16


FULL = CacheScheme(key="fp16", k=None, v=None, residual=0)


def make_scheme(kind: str, *, bits: int = 4, chunk: int = 32, channel_group: int = 32, residual: int = 128,
                symmetric: bool = False) -> CacheScheme:
    """A named scheme. chunk: G, tokens per per-channel group; channel_group: channels per per-token
    group; residual: R (only the kinds that have one use it)."""
    if kind in FP8_KINDS:
        spec = QuantSpec(kind=kind.split("_")[1], bits=8, axis="token", group_size=1)
        return CacheScheme(key=kind, k=spec, v=spec, residual=0)
    if kind not in SCHEME_KINDS:
        raise Misuse(f"scheme must be one of {', '.join([*SCHEME_KINDS, *FP8_KINDS])}, got {kind!r}")
    if bits not in INT_BITS:
        raise Misuse(f"bits must be one of {INT_BITS}, got {bits}")
    per_channel = QuantSpec(kind="int", bits=bits, axis="channel", group_size=chunk, symmetric=symmetric)
    per_token = QuantSpec(kind="int", bits=bits, axis="token", group_size=channel_group, symmetric=symmetric)
    if kind == "kivi":
        return CacheScheme(key=kind, k=per_channel, v=per_token, residual=residual)
    if kind == "kivi_nores":
        return CacheScheme(key=kind, k=per_channel, v=per_token, residual=0)
    if kind == "token":
        return CacheScheme(key=kind, k=per_token, v=per_token, residual=0)
    if kind == "channel":
        return CacheScheme(key=kind, k=per_channel, v=per_channel, residual=0)
    if kind == "token_first":
        return CacheScheme(key=kind, k=per_token, v=per_token, residual=residual, keep="first")
    return CacheScheme(key=kind, k=per_token, v=per_token, residual=residual)


def _per_channel(spec: QuantSpec | None) -> bool:
    return spec is not None and not spec.is_fp8 and spec.axis == "channel"


# --- one layer's K or V ----------------------------------------------------------------------


class _Store:
    """Quantized blocks + a full-precision residual (+ an open chunk when per-channel with R = 0).

    append() returns the writes (start position, values) that bring a dequantized view of the
    store up to date, in order (a later write wins)."""

    def __init__(self, spec: QuantSpec | None, residual: int, keep: str = "recent") -> None:
        self.spec, self.residual, self.keep = spec, residual, keep
        self.blocks: list[QuantizedTensor] = []
        self.res: torch.Tensor | None = None  # (B, H, r, D) full precision
        self.res_start = 0
        self.open: QuantizedTensor | None = None  # per-channel, R = 0: the chunk being filled
        self.open_start = 0
        self.length = 0

    def append(self, x: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
        x = x.detach()
        start, T = self.length, x.shape[2]
        self.length += T
        spec, R = self.spec, self.residual
        if spec is None:
            self._push_residual(x, start)
            return [(start, x)]
        if _per_channel(spec) and R == 0:
            return [self._append_open(x[:, :, i : i + 1], start + i) for i in range(T)]
        if self.keep == "first":  # positions < R stay full precision for good; the rest on arrival
            n_fp = max(0, min(T, R - start))
            if n_fp:
                self._push_residual(x[:, :, :n_fp], start)
            if n_fp == T:
                return [(start, x)]
            q, deq = quantize_with_values(x[:, :, n_fp:], spec)
            self.blocks.append(q)
            return [(start, x), (start + n_fp, deq)]
        if R == 0 and not _per_channel(spec):  # per-token with no window: quantized on arrival
            q, deq = quantize_with_values(x, spec)
            self.blocks.append(q)
            return [(start, deq)]
        writes: list[tuple[int, torch.Tensor]] = [(start, x)]
        self._push_residual(x, start)
        r = self.res.shape[2]
        if _per_channel(spec):
            while r >= R:  # the residual is full: quantize its R tokens as R/G groups per channel
                writes.append(self._flush(R))
                r -= R
        elif r > R:  # per-token: whatever left the window of the last R tokens
            writes.append(self._flush(r - R))
        return writes

    def _push_residual(self, x: torch.Tensor, start: int) -> None:
        if self.res is None or self.res.shape[2] == 0:
            self.res, self.res_start = x.clone(), start
        else:
            self.res = torch.cat([self.res, x], dim=2)

    def _flush(self, n: int) -> tuple[int, torch.Tensor]:
        q, deq = quantize_with_values(self.res[:, :, :n], self.spec)
        self.blocks.append(q)
        pos = self.res_start
        self.res, self.res_start = self.res[:, :, n:], self.res_start + n
        return pos, deq

    def _append_open(self, x: torch.Tensor, pos: int) -> tuple[int, torch.Tensor]:
        if self.open is None:
            self.open_start, vals = pos, x.float()
        else:
            vals = torch.cat([self._open_values, x.float()], dim=2)  # what it holds, plus the new token
        n = vals.shape[2]
        q, deq = quantize_with_values(vals, replace(self.spec, group_size=n))
        if n == self.spec.group_size:
            self.blocks.append(q)
            self.open = None
        else:
            self.open, self._open_values = q, deq
        return self.open_start, deq.to(x.dtype)

    def breakdown(self, full_bytes: int) -> dict[str, int]:
        parts = [*self.blocks, *([self.open] if self.open is not None else [])]
        out = {"codes": sum(q.code_bytes for q in parts), "scales": sum(q.scale_bytes for q in parts),
               "zero_points": sum(q.zero_bytes for q in parts),
               "full_precision": 0 if self.res is None else self.res.numel() * full_bytes}
        return out

    @property
    def full_precision_tokens(self) -> int:
        return 0 if self.res is None else self.res.shape[2]


class QuantizedKVCache(KVCache):
    """A KV cache that stores K and V as `scheme` says; see the module docstring."""

    def __init__(self, cfg, *, scheme: CacheScheme, batch_size: int = 1, max_seq_len: int | None = None, device=None,
                 dtype=torch.float32, full_bytes: int = FULL_BYTES) -> None:
        self.cfg, self.scheme, self.full_bytes = cfg, scheme, full_bytes
        self.max_seq_len = max_seq_len or cfg.max_seq_len
        if self.max_seq_len > cfg.max_seq_len:
            raise Misuse(f"cache length {self.max_seq_len} exceeds the model's context {cfg.max_seq_len}")
        for name, spec in (("K", scheme.k), ("V", scheme.v)):
            if spec is not None and not spec.is_fp8 and spec.axis == "token" and cfg.head_dim % spec.group_size:
                raise Misuse(f"{name}: per-token groups of {spec.group_size} channels do not divide "
                             f"head_dim={cfg.head_dim}")
        shape = (batch_size, cfg.n_kv_heads, self.max_seq_len, cfg.head_dim)  # (B, Hkv, S_max, D)
        self.view_k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.view_v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        if scheme.layer_scales and len(scheme.layer_scales) != cfg.n_layers:
            raise Misuse(f"the scheme has FP8 scales for {len(scheme.layer_scales)} layers; the model has "
                         f"{cfg.n_layers}")
        layers = [scheme.for_layer(i) for i in range(cfg.n_layers)]
        self.stores = [(_Store(s.k, s.residual, s.keep), _Store(s.v, s.residual, s.keep)) for s in layers]
        self._pending: list[tuple[int, int, torch.Tensor, torch.Tensor] | None] = [None] * cfg.n_layers
        self._len = 0
        self._step = (0, 0)  # (start, end) of the step being written

    def begin_step(self, start_pos: int, num_new_tokens: int, *, batch_size: int) -> None:
        end = start_pos + num_new_tokens
        if start_pos != self._len:
            raise Misuse(f"a quantized cache appends only: it holds {self._len} tokens, asked to write at "
                         f"{start_pos}")
        if end > self.max_seq_len:
            raise Misuse(f"cache holds {self.max_seq_len} positions; asked to write {start_pos}..{end - 1}")
        self._step = (start_pos, end)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        sk, sv = self.stores[layer]
        start_pos, end = self._step
        vk, vv = self.view_k[layer], self.view_v[layer]
        pending = self._pending[layer]
        if pending is not None:  # last call's tokens: from fresh values to what is stored
            s, e, pk, pv = pending
            vk[:, :, s:e], vv[:, :, s:e] = pk, pv
        for store, view, x in ((sk, vk, k), (sv, vv, v)):
            for pos, vals in store.append(x):
                view[:, :, pos : pos + vals.shape[2]] = vals
        self._pending[layer] = (start_pos, end, vk[:, :, start_pos:end].clone(), vv[:, :, start_pos:end].clone())
        vk[:, :, start_pos:end], vv[:, :, start_pos:end] = k, v  # the current tokens attend fresh
        return vk[:, :, :end], vv[:, :, :end]

    def end_step(self) -> None:
        self._len = self._step[1]

    @property
    def num_tokens(self) -> int:
        return self._len

    def stored(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V as a later token would read them back (dequantized), (B, Hkv, S, D)."""
        n = self.stores[layer][0].length
        k, v = self.view_k[layer][:, :, :n].clone(), self.view_v[layer][:, :, :n].clone()
        if self._pending[layer] is not None:
            s, e, pk, pv = self._pending[layer]
            k[:, :, s:e], v[:, :, s:e] = pk, pv
        return k, v

    def full_precision_tokens(self, layer: int = 0) -> tuple[int, int]:
        """Tokens K and V of `layer` hold in full precision right now."""
        sk, sv = self.stores[layer]
        return sk.full_precision_tokens, sv.full_precision_tokens

    def bytes_breakdown(self) -> dict[str, int]:
        out = {"codes": 0, "scales": 0, "zero_points": 0, "full_precision": 0}
        for pair in self.stores:
            for store in pair:
                for key, val in store.breakdown(self.full_bytes).items():
                    out[key] += val
        return out

    def used_bytes(self) -> int:
        return sum(self.bytes_breakdown().values())


# --- the same numbers in closed form ---------------------------------------------------------


def tensor_bytes(spec: QuantSpec | None, *, residual: int, num_tokens: int, head_dim: int,
                 full_bytes: int = FULL_BYTES) -> dict[str, int]:
    """Bytes one layer's K (or V) of one head takes after num_tokens tokens."""
    S, D = num_tokens, head_dim
    if spec is None:
        return {"codes": 0, "scales": 0, "zero_points": 0, "full_precision": S * D * full_bytes}
    if _per_channel(spec):
        G, R = spec.group_size, residual
        quantized = S // R * R if R else S
        groups = D * (quantized // G if R else -(-S // G))  # R = 0: the open chunk has scales too
    else:
        quantized = max(0, S - residual)
        groups = 0 if spec.is_fp8 else quantized * (D // spec.group_size)
    return {
        "codes": -(-quantized * D * spec.bits // 8),
        "scales": 0 if spec.is_fp8 else groups * SCALE_BYTES,
        "zero_points": 0 if spec.is_fp8 or spec.symmetric else groups * ZERO_BYTES,
        "full_precision": (S - quantized) * D * full_bytes,
    }


def scheme_bytes(scheme: CacheScheme, *, num_tokens: int, n_layers: int, n_kv_heads: int, head_dim: int,
                 batch: int = 1, full_bytes: int = FULL_BYTES) -> dict[str, int]:
    """Bytes of a whole cache (every layer, K and V) after num_tokens tokens, by part, plus "total".
    (Keeping the first R tokens costs what a window of the last R costs.)"""
    out = {"codes": 0, "scales": 0, "zero_points": 0, "full_precision": 0}
    for spec in (scheme.k, scheme.v):
        for key, val in tensor_bytes(spec, residual=scheme.residual, num_tokens=num_tokens, head_dim=head_dim, full_bytes=full_bytes).items():
            out[key] += val * n_layers * n_kv_heads * batch
    out["total"] = sum(out.values())
    return out


# --- what each query reads: the rule the fast teacher-forced evaluation uses -----------------


def full_precision_mask(spec: QuantSpec | None, *, residual: int, T: int, prefill_len: int = 0,
                        device=None, keep: str = "recent") -> torch.Tensor:
    """(T, T) bool: True where query t reads key j at full precision (j <= t; the rest is masked
    by causality anyway). Keys it reads otherwise are quantized (see `open_chunk`)."""
    t = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    if spec is None:
        return torch.ones(T, T, dtype=torch.bool, device=device)
    if keep == "first":
        return (j < residual) | (j == t) | (t < prefill_len)
    if _per_channel(spec):
        first_fp = (t + 1) // residual * residual if residual else t + 1
    else:
        first_fp = (t + 1 - residual).clamp(min=0)
    return (j >= first_fp) | (j == t) | (t < prefill_len)


def open_chunk(spec: QuantSpec | None, residual: int) -> bool:
    """Whether a tensor is re-quantized as its chunk fills (per-channel with no residual)."""
    return _per_channel(spec) and residual == 0


def final_values(x: torch.Tensor, spec: QuantSpec | None, residual: int) -> torch.Tensor:
    """(B, H, T, D) -> what each token is read back as once it has left the full-precision window
    (tokens that never leave it within T keep their own values). Per-channel with no residual
    needs T to be a multiple of G."""
    if spec is None:
        return x
    if _per_channel(spec):
        if residual == 0:
            *_, last = iter_open_chunk(x, spec)
            return last.reshape(x.shape).to(x.dtype)
        n = x.shape[2] // residual * residual
        out = x.clone()
        if n:
            out[:, :, :n] = fake_quantize(x[:, :, :n], spec)
        return out
    return fake_quantize(x, spec)


def iter_open_chunk(x: torch.Tensor, spec: QuantSpec) -> Iterator[torch.Tensor]:
    """A per-channel store with no residual, for every chunk at once: yields, for a = 0..G-1, the
    (B, H, T/G, a+1, D) fp32 values of each chunk's first a+1 tokens as stored right after its
    token a arrived (re-quantized token by token). x is (B, H, T, D), T a multiple of G."""
    B, H, T, D = x.shape
    G = spec.group_size
    if T % G:
        raise Misuse(f"need T={T} to be a multiple of G={G}")
    chunks = x.float().reshape(B, H, T // G, G, D)
    cur = None
    for a in range(G):
        new = chunks[:, :, :, a : a + 1]
        vals = new if cur is None else torch.cat([cur, new], dim=3)
        cur = fake_quantize(vals, replace(spec, group_size=a + 1))
        yield cur
