"""Looking inside the model's attention on a prompt: scores and weights per layer and head, and
the check that makes a KV cache valid (appending a token changes nothing before it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sim.attention.masks import additive
from sim.model.transformer import Llama
from sim.refusal import Misuse


@dataclass(frozen=True)
class AttentionCapture:
    scores: torch.Tensor  # (L, H, T, T) raw q·k/√d, before any mask
    probs: torch.Tensor  # (L, H, T, T) softmax weights under the mask used
    logits: torch.Tensor  # (T, V)


@torch.inference_mode()
def capture_attention(model: Llama, ids: list[int], mask: torch.Tensor | None = None) -> AttentionCapture:
    """Prefill `ids` with eager attention; `mask` (T, T) bool replaces the causal mask."""
    # the masks page and the lesson refuse an empty or short prompt and cut it to 48 characters first
    if not 1 <= len(ids) <= model.cfg.max_seq_len:
        raise Misuse(f"prompt must be 1..{model.cfg.max_seq_len} tokens, got {len(ids)}")
    dev = model.device
    cap: list[dict] = []
    add = additive(mask).to(dev) if mask is not None else None
    logits = model(torch.tensor([ids], device=dev), attn_impl="eager", attn_mask=add, capture=cap)
    return AttentionCapture(
        scores=torch.stack([c["scores"][0] for c in cap]).float().cpu(),
        probs=torch.stack([c["probs"][0] for c in cap]).float().cpu(),
        logits=logits[0].float().cpu(),
    )


@dataclass(frozen=True)
class CacheValidity:
    num_tokens: int  # N: rows compared
    max_diff_logits: float  # over rows 0..N-1 of the outputs
    max_diff_k: float  # over all layers, positions 0..N-1
    max_diff_v: float
    row_diffs: list[float]  # per position, max |Δ logits|

    @property
    def max_diff(self) -> float:
        return max(self.max_diff_logits, self.max_diff_k, self.max_diff_v)


@torch.inference_mode()
def cache_validity(model: Llama, ids: list[int], causal_mask: bool = True) -> CacheValidity:
    """Prefill ids[:-1] (N tokens) and ids (N+1 tokens); compare everything at positions 0..N-1.

    With the causal mask nothing earlier can see the appended token, so outputs, K and V agree
    to floating-point precision; that is why cached K/V stay valid. Without it (every token sees
    every other) they change.
    """
    if len(ids) < 2:
        raise Misuse(f"need at least 2 tokens to append one, got {len(ids)}")
    dev = model.device
    runs = []
    for seq in (ids[:-1], ids):
        cap: list[dict] = []
        mask = None if causal_mask else torch.zeros(len(seq), len(seq), device=dev)  # 0 added everywhere
        logits = model(torch.tensor([seq], device=dev), attn_impl="eager", attn_mask=mask, capture=cap)
        runs.append((logits[0].float().cpu(), [(c["k"][0].float().cpu(), c["v"][0].float().cpu()) for c in cap]))
    n = len(ids) - 1
    (la, kva), (lb, kvb) = runs
    rows = (la - lb[:n]).abs().amax(-1)
    dk = max((ka - kb[:, :n]).abs().max().item() for (ka, _), (kb, _) in zip(kva, kvb, strict=True))
    dv = max((va - vb[:, :n]).abs().max().item() for (_, va), (_, vb) in zip(kva, kvb, strict=True))
    return CacheValidity(n, rows.max().item(), dk, dv, rows.tolist())
