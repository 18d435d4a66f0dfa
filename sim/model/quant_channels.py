"""Keys against values, channel by channel, on the real tiny model, and a synthetic outlier channel:
why KIVI quantizes K per channel and V per token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sim.model.quant import QuantSpec, quantize
from sim.model.quant_cache import FULL
from sim.model.quant_forward import teacher_forced_logits
from sim.model.transformer import Llama
from sim.refusal import Misuse

OUTLIER_RATIO = 5.0  # a channel this many times the median one counts as a strong outlier


@dataclass(frozen=True)
class ChannelStats:
    k_abs: np.ndarray  # (L, Hkv, T, D) |K| as cached (after RoPE)
    v_abs: np.ndarray  # (L, Hkv, T, D)

    def channel_mean(self, which: str) -> np.ndarray:
        """(L, Hkv, D) mean |value| of each channel over the tokens."""
        return (self.k_abs if which == "k" else self.v_abs).mean(axis=2)

    def outlier_ratio(self, which: str) -> np.ndarray:
        """(L, Hkv): the largest channel's mean |value| over the median channel's."""
        m = self.channel_mean(which)
        return m.max(-1) / np.median(m, axis=-1)

    def top_channels(self, which: str, layer: int, head: int, n: int = 3) -> list[int]:
        return [int(c) for c in np.argsort(-self.channel_mean(which)[layer, head])[:n]]

    def ratios_frame(self):
        """One row per layer and KV head: K's and V's largest channel over the median one, K's top channels."""
        import pandas as pd

        k_ratio, v_ratio = self.outlier_ratio("k"), self.outlier_ratio("v")
        L, Hkv = k_ratio.shape
        return pd.DataFrame([{"layer": li, "head": h, "K max ÷ median": k_ratio[li, h], "V max ÷ median": v_ratio[li, h],
                              "K's top channels": ", ".join(map(str, self.top_channels("k", li, h)))}
                             for li in range(L) for h in range(Hkv)])

@torch.inference_mode()
def channel_stats(model: Llama, ids: torch.Tensor) -> ChannelStats:
    """Capture every layer's cached K and V for ids (1, T)."""
    cap: list = []
    model(ids.to(model.device), capture=cap, attn_impl="sdpa")
    k = torch.stack([c["k"][0] for c in cap]).float().abs().cpu().numpy()
    v = torch.stack([c["v"][0] for c in cap]).float().abs().cpu().numpy()
    return ChannelStats(k, v)


@dataclass(frozen=True, kw_only=True)
class OutlierCase:
    case: str  # "real" or "injected"
    axis: str  # "token" or "channel"
    rel_error_other: float  # RMS error / RMS value over the channels that are not the outlier
    rel_error_outlier: float  # the same for the outlier channel
    rel_error_scores: float  # RMS error of q·k over RMS of q·k, for the given queries


def outlier_demo(k: torch.Tensor, q: torch.Tensor, *, bits: int, chunk: int, channel_group: int, channel: int,
                 factor: float) -> tuple[torch.Tensor, list[OutlierCase]]:
    """k (T, D) one head's cached keys, q (Tq, D) queries. Quantizes K per token (groups of
    `channel_group` channels) and per channel (groups of `chunk` tokens), as it is and with a
    synthetic outlier: `factor` × the head's mean |k| added to `channel` at every token.
    Returns the injected K and the errors."""
    T, D = k.shape
    if not 0 <= channel < D:
        raise Misuse(f"channel must be in 0..{D - 1}, got {channel}")
    if T % chunk:
        raise Misuse(f"{T} tokens are not a whole number of chunks of {chunk}")
    k = k.float()
    injected = k.clone()
    injected[:, channel] += factor * float(k.abs().mean())
    other = torch.ones(D, dtype=torch.bool)
    other[channel] = False
    cases = []
    for case, kk in (("real", k), ("injected", injected)):
        for axis, g in (("token", channel_group), ("channel", chunk)):
            deq = quantize(kk, QuantSpec(kind="int", bits=bits, axis=axis, group_size=g)).dequantize()
            err = deq - kk

            def rel(e, x):
                return float(e.pow(2).mean().sqrt() / x.pow(2).mean().sqrt().clamp(min=1e-12))

            cases.append(OutlierCase(case=case, axis=axis, rel_error_other=rel(err[:, other], kk[:, other]), rel_error_outlier=rel(err[:, channel], kk[:, channel]),
                                     rel_error_scores=rel(q.float() @ err.T, q.float() @ kk.T)))
    return injected, cases


def queries_and_keys(model: Llama, ids: torch.Tensor, *, layer: int, kv_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, D) RoPE'd queries of the first query head that reads `kv_head`, and that head's keys."""
    cfg = model.cfg
    if not 0 <= layer < cfg.n_layers or not 0 <= kv_head < cfg.n_kv_heads:
        raise Misuse(f"layer must be in 0..{cfg.n_layers - 1} and KV head in 0..{cfg.n_kv_heads - 1}, "
                     f"got {layer}, {kv_head}")
    cap: list = []
    teacher_forced_logits(model, ids.to(model.device), FULL, capture=cap)
    return cap[layer]["q"][0, kv_head * cfg.group_size].float().cpu(), cap[layer]["k"][0, kv_head].float().cpu()


def outlier_frame(cases: list[OutlierCase]):
    """One row per case of outlier_demo, for its chart."""
    import pandas as pd

    return pd.DataFrame([vars(x) for x in cases])
