"""KV caches the model writes to and attends from.

The interface is one method: `update(layer, start_pos, k, v)` stores the new keys/values at
their positions and returns every key/value the layer should attend to, (B, Hkv, S, D) with
S = start_pos + T. Paged and quantized caches plug in behind the same method. The model writes
every layer once per forward, in layer order; `num_tokens` is what the cache holds after that.
"""

from __future__ import annotations

from typing import Protocol

import torch


class KVCache(Protocol):
    def update(self, layer: int, start_pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    @property
    def num_tokens(self) -> int: ...

    def used_bytes(self) -> int: ...


class ContiguousKVCache:
    """Preallocated per-layer buffers of max_seq_len positions, written by position.

    Memory is reserved up front for the whole context (what a simple server does per request);
    `used_bytes` counts only the positions written so far, `reserved_bytes` the whole buffer.
    Each layer's length is the end of its last write (`start_pos + T`); `num_tokens` is derived,
    the positions every layer holds, so it does not depend on the order the layers are written in.
    """

    def __init__(self, cfg, batch_size: int = 1, max_seq_len: int | None = None, device=None, dtype=torch.float32):
        self.max_seq_len = max_seq_len or cfg.max_seq_len
        if self.max_seq_len > cfg.max_seq_len:
            raise ValueError(f"cache length {self.max_seq_len} exceeds the model's context {cfg.max_seq_len}")
        shape = (batch_size, cfg.n_kv_heads, self.max_seq_len, cfg.head_dim)  # (B, Hkv, S_max, D)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.layer_to_num_tokens = [0] * cfg.n_layers

    def update(self, layer: int, start_pos: int, k: torch.Tensor, v: torch.Tensor):
        T = k.shape[2]
        end = start_pos + T
        if end > self.max_seq_len:
            raise ValueError(f"cache holds {self.max_seq_len} positions; asked to write {start_pos}..{end - 1}")
        have = self.layer_to_num_tokens[layer]
        if start_pos > have:
            raise ValueError(f"write at position {start_pos} leaves a gap: only {have} positions are filled")
        k_buf, v_buf = self.k[layer], self.v[layer]
        k_buf.narrow(2, start_pos, T).copy_(k)  # one view and one copy each (indexing makes a view per axis)
        v_buf.narrow(2, start_pos, T).copy_(v)
        self.layer_to_num_tokens[layer] = end
        return k_buf.narrow(2, 0, end), v_buf.narrow(2, 0, end)

    @property
    def num_tokens(self) -> int:
        """Positions written in every layer."""
        return min(self.layer_to_num_tokens)

    def filled(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.layer_to_num_tokens[layer]
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
        if not 0 <= num_tokens <= self.num_tokens:
            raise ValueError(f"can truncate to 0..{self.num_tokens}, got {num_tokens}")
        self.layer_to_num_tokens = [num_tokens] * len(self.k)
