"""The numbers the attention-masks page shows, computed here so the page only draws them: the mask built from the
builder's settings (and the same mask with padding in front), the leak of each masking variant, how many next
tokens a windowed run keeps, and the attention-sink figures of the real model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sim.attention.masks import VARIANTS, build, combine, leaked_mass, masked_softmax, padding, segments_from_text


@dataclass(frozen=True)
class MaskView:
    mask: torch.Tensor  # (T, T) bool: the prompt's mask, True where a query may read a key
    shown: torch.Tensor  # (P+T, P+T) the same mask for P pad tokens in front, pad keys and queries removed (= mask at P=0)
    prefix_len: int  # the prefix in force: the setting, at most the prompt's T tokens
    num_pad: int
    num_empty_rows: int  # rows of `shown` that read no key at all (the pad queries)
    num_masked: int  # entries of `mask` that are masked out


def mask_view(kind: str, ids: list[int], *, window: int, prefix: int, pad: int) -> MaskView:
    """The builder's mask for the prompt `ids`; raises ValueError (from `build`) for settings it cannot build."""
    n = len(ids)
    segments = segments_from_text(ids)
    mask = build(kind, n, window=window, prefix_len=min(prefix, n), segment_ids=segments)
    shown = mask
    if pad:
        # the same mask for the padded sequence, then pad keys (and pad queries) removed, its shape kept
        padded = build(kind, n + pad, window=window, prefix_len=min(prefix + pad, n + pad),
                       segment_ids=[0] * pad + segments)
        shown = combine(padded, padding([n], n + pad)[0])
    return MaskView(mask, shown, min(prefix, n), pad, int((~shown.any(-1)).sum()), int((~mask).sum()))


@dataclass(frozen=True)
class Leak:
    """One masking variant's weights compared with the mask and with the first variant (add −inf)."""

    key: str  # the variant's key (sim.attention.masks.VARIANTS)
    mean: float  # mean probability per row that went to forbidden keys (NaN rows left out)
    worst: float  # the largest such probability
    nan_rows: int  # rows that came out NaN
    error: float  # the largest difference from the first variant's weights


def leaks(scores: torch.Tensor, mask: torch.Tensor) -> tuple[dict[str, torch.Tensor], list[Leak]]:
    """Each variant's softmax weights of `scores` (T, T) under `mask` (by the variant's label), and its leak."""
    weights = {v.label: masked_softmax(scores, mask, v) for v in VARIANTS}
    first = weights[VARIANTS[0].label]
    rows = []
    for v in VARIANTS:
        w = weights[v.label]
        leak = leaked_mass(w, mask)
        rows.append(Leak(v.key, float(leak.nanmean()), float(leak.nan_to_num(0).max()), int(w.isnan().any(-1).sum()),
                         float((w - first).abs().nan_to_num(0).max())))
    return weights, rows


def same_next_tokens(logits: torch.Tensor, other: torch.Tensor) -> int:
    """Positions where two runs' logits (T, V) pick the same next token."""
    return int((logits.argmax(-1) == other.argmax(-1)).sum())


@dataclass(frozen=True)
class SinkFigures:
    """The real model's attention on token 0, by layer: the shares the sentence and the map titles quote."""

    median: float
    uniform: float
    lowest: float
    highest: float
    lowest_layer: int
    highest_layer: int


def sink_figures(share: np.ndarray, median: float, uniform: float) -> SinkFigures:
    """From the per-layer shares (L,) of a SinkResult, its median and the uniform baseline."""
    return SinkFigures(median, uniform, float(share.min()), float(share.max()), int(share.argmin()),
                       int(share.argmax()))
