"""KV caches the model writes to and attends from: the one contract every cache keeps, and the contiguous cache.

One forward pass of the model is one step of its cache, in three calls (sim.model.transformer.Llama.forward):

    cache.begin_step(start_pos, num_new_tokens, batch_size=B)  # before layer 0: checks, makes room
    k_all, v_all = cache.write(layer, k, v)      # every layer, in order: the step's new K/V (B, Hkv, T, D) in;
                                                 # every K/V the layer attends to this step (B, Hkv, S, D) out
    cache.end_step()                             # after the last layer: the new tokens now count as held

`num_tokens` is the positions held (where the next token goes). A cache that keeps or drops tokens by the
attention they get (H2O, SnapKV) names an `attention_observer`; eager attention hands it every layer's weights
(B, H, T, S) right after `write` returned the S keys they cover. Contiguous (here), paged
(sim.model.paged_cache), quantized (sim.model.quant_cache), evicting (sim.model.evict_cache) and the
static-shape step's (sim.model.graph_step) caches implement it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

import torch

from sim.refusal import Misuse


class AttentionObserver(Protocol):
    def observe(self, layer: int, probs: torch.Tensor) -> None:
        """probs (B, H, T, S): this step's attention weights in `layer`, over the S keys its write returned."""


class KVCache(ABC):
    """The contract between the model and a cache (see the module docstring)."""

    attention_observer: AttentionObserver | None = None  # None: attention may run any way (sdpa included)

    @abstractmethod
    def begin_step(self, start_pos: int, num_new_tokens: int, *, batch_size: int) -> None:
        """A forward pass feeds positions start_pos..start_pos + num_new_tokens - 1 of batch_size rows: refuse it
        (ValueError, before anything changes) or make room for them."""

    @abstractmethod
    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store layer `layer`'s new k, v (B, Hkv, T, D); return every k, v it attends to, (B, Hkv, S, D)."""

    @abstractmethod
    def end_step(self) -> None:
        """Every layer has written: the step's tokens are held."""

    @property
    @abstractmethod
    def num_tokens(self) -> int:
        """Positions held: where the next step starts."""

    @abstractmethod
    def used_bytes(self) -> int:
        """Bytes of what the cache holds."""

    def static_buffers(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Each layer's K and V buffers of fixed shape (B, Hkv, S_max, D), written by position: what a static-shape
        step (sim.model.graph_step) writes into and attends over. Only a cache that preallocates has them."""
        raise Misuse(f"a static-shape step writes into preallocated buffers by position: it needs a "
                     f"ContiguousKVCache, got {type(self).__name__}")


class ContiguousKVCache(KVCache):
    """Preallocated per-layer buffers of max_seq_len positions, written by position.

    Memory is reserved up front for the whole context (what a simple server does per request); `used_bytes` counts
    only the positions written so far, `reserved_bytes` the whole buffer. A step may start at any position up to
    `num_tokens` (writing again from an earlier one forgets what came after it, as `truncate` does).
    """

    def __init__(self, cfg, *, batch_size: int = 1, max_seq_len: int | None = None, device=None, dtype=torch.float32):
        self.max_seq_len = max_seq_len or cfg.max_seq_len
        if self.max_seq_len > cfg.max_seq_len:
            raise Misuse(f"cache length {self.max_seq_len} exceeds the model's context {cfg.max_seq_len}")
        shape = (batch_size, cfg.n_kv_heads, self.max_seq_len, cfg.head_dim)  # (B, Hkv, S_max, D)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self._num_tokens = 0
        self._step = (0, 0)  # (start, end) of the step being written

    def check_positions(self, start_pos: int, num_new_tokens: int) -> None:
        end = start_pos + num_new_tokens
        if end > self.max_seq_len:
            raise Misuse(f"cache holds {self.max_seq_len} positions; asked to write {start_pos}..{end - 1}")
        if start_pos > self._num_tokens:
            raise Misuse(f"write at position {start_pos} leaves a gap: only {self._num_tokens} positions are "
                         "filled")

    def begin_step(self, start_pos: int, num_new_tokens: int, *, batch_size: int) -> None:
        if batch_size > self.k[0].shape[0]:
            raise Misuse(f"the batch has {batch_size} rows but the cache was made for {self.k[0].shape[0]}")
        self.check_positions(start_pos, num_new_tokens)
        self._step = (start_pos, start_pos + num_new_tokens)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        start, end = self._step
        k_buf, v_buf = self.k[layer], self.v[layer]
        k_buf.narrow(2, start, end - start).copy_(k)  # one view and one copy each (indexing makes a view per axis)
        v_buf.narrow(2, start, end - start).copy_(v)
        return k_buf.narrow(2, 0, end), v_buf.narrow(2, 0, end)

    def end_step(self) -> None:
        self._num_tokens = self._step[1]

    @property
    def num_tokens(self) -> int:
        return self._num_tokens

    def static_buffers(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        return self.k, self.v

    def filled(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = self._num_tokens
        return self.k[layer][:, :, :n], self.v[layer][:, :, :n]

    def used_bytes(self) -> int:
        """Bytes of the K and V actually written, summed over the real tensors."""
        total = 0
        for layer in range(len(self.k)):
            k, v = self.filled(layer)
            total += k.numel() * k.element_size() + v.numel() * v.element_size()
        return total

    def reserved_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    def truncate(self, num_tokens: int) -> None:
        """Forget everything from position num_tokens on (the buffers are simply overwritten later)."""
        if not 0 <= num_tokens <= self._num_tokens:
            raise Misuse(f"can truncate to 0..{self._num_tokens}, got {num_tokens}")
        self._num_tokens = num_tokens
