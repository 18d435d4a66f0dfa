"""Cached decoding on the real model, recorded one step at a time for the lesson's animation.

Step 0 is the prefill: the prompt's K and V rows are written to the cache in one pass. Every later step
feeds the one token just picked: its query is used once (for this step's attention) and dropped, its key
and value are appended to every layer's cache, and its attention weights spread over every row the cache
holds. Each `FillFrame` keeps copies of exactly those tensors, so the animation shows the real cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from sim.model.generate import decode, greedy
from sim.model.kvcache import ContiguousKVCache
from sim.model.transformer import Llama
from sim.refusal import Refusal

MAX_FILL_PROMPT = 64  # bytes of prompt
MAX_FILL_NEW = 64  # decode steps


@dataclass(frozen=True, kw_only=True)
class FillFrame:
    step: int  # 0 = prefill
    start: int  # first position written at this step
    end: int  # positions the cache holds after it
    fed: list[int]  # the token ids fed at this step (the prompt at step 0, then one id)
    picked: int  # the token this step's logits chose
    q: torch.Tensor  # (L, H, D) the query of the last fed position, in every layer (used once, then dropped)
    k_new: torch.Tensor  # (L, Hkv, T, D) the rows this step appended, T = end - start
    v_new: torch.Tensor  # (L, Hkv, T, D)
    weights: torch.Tensor  # (L, H, end) the last fed position's attention weights over the cache
    used_bytes: int  # the cache's K and V bytes after this step, counted on the real tensors


@dataclass(frozen=True, kw_only=True)
class FillingRun:
    prompt: list[int]
    frames: list[FillFrame]
    cache: ContiguousKVCache  # the cache the frames were copied from (the tests compare them)
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    bytes_per_value: int
    decode_ids: Callable[[list[int]], str] = decode  # the model's detokenizer: bytes for the tiny model, BPE for a real one

    @property
    def generated(self) -> list[int]:
        return [f.picked for f in self.frames]

    @property
    def text(self) -> str:
        return self.decode_ids(self.prompt + self.generated)

    def piece(self, token: int) -> str:
        """One token's own text, as the model's tokenizer spells it (a byte, or a BPE piece such as ' be')."""
        return self.decode_ids([token])

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def keys(self, frame: int, layer: int, kv_head: int = 0) -> torch.Tensor:
        """(end, D): every key row of one head the cache holds after `frame`, rebuilt from the frames."""
        return torch.cat([f.k_new[layer, kv_head] for f in self.frames[: frame + 1]])

    def values(self, frame: int, layer: int, kv_head: int = 0) -> torch.Tensor:
        return torch.cat([f.v_new[layer, kv_head] for f in self.frames[: frame + 1]])

    def bytes_per_token(self) -> int:
        """2 (K and V) · layers · K/V heads · head_dim · bytes per value."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.bytes_per_value


@torch.inference_mode()
def fill_cache(model: Llama, prompt: list[int], num_new: int, *,
               decode_ids: Callable[[list[int]], str] = decode) -> FillingRun:
    """Prefill `prompt`, then `num_new - 1` cached decode steps (greedy): one frame per step. A prompt or a
    number of new tokens out of range is a Refusal (the Lesson never sends one).
    `decode_ids` turns the model's token ids into text (the real model's tokenizer; bytes by default)."""
    cfg = model.cfg
    if not 1 <= len(prompt) <= MAX_FILL_PROMPT:
        raise Refusal("lesson.fill.bad_prompt", max=MAX_FILL_PROMPT, n=len(prompt))
    if not 1 <= num_new <= MAX_FILL_NEW:
        raise Refusal("lesson.fill.bad_new", max=MAX_FILL_NEW, n=num_new)
    dev = model.device
    cache = ContiguousKVCache(cfg, batch_size=1, max_seq_len=len(prompt) + num_new - 1, device=dev, dtype=model.dtype)
    frames: list[FillFrame] = []
    feed, start = list(prompt), 0
    for step in range(num_new):
        cap: list[dict] = []
        logits = model(torch.tensor([feed], device=dev), start_pos=start, cache=cache, attn_impl="eager",
                       capture=cap)  # (1, T, V)
        picked = greedy(logits[0, -1])
        end = start + len(feed)
        frames.append(FillFrame(
            step=step, start=start, end=end, fed=list(feed), picked=picked,
            q=torch.stack([c["q"][0, :, -1] for c in cap]).float().cpu(),  # (L, H, D)
            k_new=torch.stack([c["k"][0, :, start:end] for c in cap]).float().cpu().clone(),
            v_new=torch.stack([c["v"][0, :, start:end] for c in cap]).float().cpu().clone(),
            weights=torch.stack([c["probs"][0, :, -1] for c in cap]).float().cpu(),  # (L, H, end)
            used_bytes=cache.used_bytes(),
        ))
        feed, start = [picked], end
    elem = torch.finfo(model.dtype).bits // 8
    return FillingRun(prompt=list(prompt), frames=frames, cache=cache, num_layers=cfg.n_layers, num_heads=cfg.n_heads, num_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, bytes_per_value=elem,
                      decode_ids=decode_ids)


def fit_num_new(max_new: int, *, seconds: Callable[[int], float], budget_s: float, min_new: int = 1) -> int:
    """The most new tokens, min_new..max_new, whose estimated run (`seconds(n)`) fits `budget_s`; `min_new`
    when none does (the page then waits for its button rather than show fewer)."""
    fits = [n for n in range(min_new, max_new + 1) if seconds(n) <= budget_s]
    return max(fits, default=min_new)
