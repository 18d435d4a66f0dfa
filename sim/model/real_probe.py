"""What a real model's attention and cache look like, measured in one forward pass over held-out text.

attention_sink: per layer, the share of each query's attention that lands on token 0 (averaged over heads and
    over queries past the first `skip` positions), against the share an even spread would give (1/(i+1) for the
    query at position i). StreamingLLM keeps the first tokens because this share is large.
kv_channels: per layer, mean |K| (after RoPE) and mean |V| of every channel over the tokens; the largest channel
    over the layer's median one; and K quantized at INT4 and INT2 with KIVI's per-channel scales (groups of 32
    tokens) against per-token scales (groups of 32 channels): mean squared error of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sim.model.quant import QuantSpec, fake_quantize
from sim.model.transformer import Llama
from sim.refusal import Misuse

GROUP = 32  # KIVI's group: tokens per channel group, channels per token group
MAX_PROBE_TOKENS = 1024


def probe_ids(real, num_tokens: int) -> list[int]:
    """num_tokens tokens of the corpus's held-out text (the same text for every probe)."""
    from sim.model.train import load_corpus

    if not GROUP <= num_tokens <= MAX_PROBE_TOKENS or num_tokens % GROUP:
        raise Misuse(f"the probe takes a multiple of {GROUP} tokens in {GROUP}..{MAX_PROBE_TOKENS}, got {num_tokens}")
    text = bytes(load_corpus()[1][: 8 * num_tokens].tolist()).decode("utf-8", errors="replace")
    ids = real.encode(text)[:num_tokens]
    assert len(ids) == num_tokens
    return ids


@dataclass(frozen=True, kw_only=True)
class SinkResult:
    num_tokens: int
    skip: int  # queries at positions < skip are left out (they have few keys to spread over)
    share: np.ndarray  # (L,) mean attention on token 0
    uniform: float  # the mean of 1/(i+1) over the same queries
    ids: tuple[int, ...] = ()  # the tokens measured
    maps: np.ndarray | None = None  # (L, M, M) attention weights among the first M tokens, averaged over heads

    @property
    def median(self) -> float:
        return float(np.median(self.share))

    def layers_above(self, factor: float) -> int:
        return int((self.share > factor * self.uniform).sum())


@torch.inference_mode()
def attention_sink(model: Llama, ids: list[int], *, skip: int = 16, map_tokens: int = 32) -> SinkResult:
    if not skip < len(ids) <= MAX_PROBE_TOKENS:
        raise Misuse(f"need more than {skip} and at most {MAX_PROBE_TOKENS} tokens, got {len(ids)}")
    shares, maps = [], []
    m = min(map_tokens, len(ids))

    class Observer:  # sees every layer's attention weights as they are made, keeps one number per layer
        @staticmethod
        def observe(layer: int, probs: torch.Tensor) -> None:  # (B, H, T, S)
            shares.append(float(probs[0, :, skip:, 0].float().mean()))
            maps.append(probs[0, :, :m, :m].float().mean(0).cpu().numpy())  # (M, M)

    model(torch.tensor([ids], device=model.device), observer=Observer(), attn_impl="eager")
    positions = np.arange(skip, len(ids))
    return SinkResult(num_tokens=len(ids), skip=skip, share=np.array(shares), uniform=float(np.mean(1.0 / (positions + 1))), ids=tuple(ids),
                      maps=np.stack(maps))


LARGE_CHANNEL = 4  # a layer's largest channel this many times its median channel is a large one (seed 001)


@dataclass(frozen=True, kw_only=True)
class KVChannels:
    num_tokens: int
    k_mean: np.ndarray  # (L, Hkv·D) mean |K| per channel
    v_mean: np.ndarray  # (L, Hkv·D)
    bits_to_mse: dict[int, tuple[float, float]]  # bits -> (per-channel K error, per-token K error)

    @staticmethod
    def _ratio(m: np.ndarray) -> np.ndarray:
        return m.max(-1) / np.median(m, axis=-1)

    @property
    def k_ratio(self) -> np.ndarray:
        """(L,) the largest K channel's mean |value| over the layer's median channel."""
        return self._ratio(self.k_mean)

    @property
    def v_ratio(self) -> np.ndarray:
        return self._ratio(self.v_mean)

    def num_large_layers(self, which: str) -> int:
        """Layers whose largest K (or V) channel is over LARGE_CHANNEL × the median one."""
        return int(((self.k_ratio if which == "k" else self.v_ratio) > LARGE_CHANNEL).sum())

    def claim_holds(self) -> bool:
        """The seed's claim: K has a few large channels and V does not. Held when K's largest channel stands out
        more than V's in most layers, and K has a channel above 4× its median in at least half the layers."""
        return bool((self.k_ratio > self.v_ratio).mean() > 0.5 and (self.k_ratio > LARGE_CHANNEL).mean() >= 0.5)


@torch.inference_mode()
def kv_channels(model: Llama, ids: list[int], bits: tuple[int, ...] = (4, 2)) -> KVChannels:
    if len(ids) % GROUP or not GROUP <= len(ids) <= MAX_PROBE_TOKENS:
        raise Misuse(f"the probe takes a multiple of {GROUP} tokens in {GROUP}..{MAX_PROBE_TOKENS}, got {len(ids)}")
    cap: list[dict] = []
    model(torch.tensor([ids], device=model.device), capture=cap, attn_impl="sdpa")
    k = torch.stack([c["k"][0] for c in cap]).float().cpu()  # (L, Hkv, T, D)
    v = torch.stack([c["v"][0] for c in cap]).float().cpu()
    L, Hkv, T, D = k.shape

    def per_channel_mean(x: torch.Tensor) -> np.ndarray:
        return x.abs().mean(2).reshape(L, Hkv * D).numpy()  # (L, Hkv·D)

    errors = {}
    for b in bits:
        by_channel = fake_quantize(k, QuantSpec(bits=b, axis="channel", group_size=GROUP))
        by_token = fake_quantize(k, QuantSpec(bits=b, axis="token", group_size=GROUP))
        errors[b] = (float(((by_channel - k) ** 2).mean()), float(((by_token - k) ** 2).mean()))
    return KVChannels(num_tokens=T, k_mean=per_channel_mean(k), v_mean=per_channel_mean(v), bits_to_mse=errors)
