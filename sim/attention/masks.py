"""Attention masks as boolean matrices (True = the query may attend to the key), and what the
way a mask is applied does to softmax.

Rows are queries, columns keys, both in token positions. Masks combine with `combine` (logical
AND). `additive` turns one into the matrix that is added to the scores before softmax.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sim.refusal import Misuse

MASK_KINDS = ("causal", "sliding_window", "prefix_lm", "document", "bidirectional")


def _check_n(n: int) -> None:
    # the masks page cuts a prompt to 48 bytes (+ 8 pad), clamps the prefix and builds the segment ids itself
    if not 1 <= n <= 4096:
        raise Misuse(f"mask size must be 1..4096, got {n}")


def causal(n: int) -> torch.Tensor:
    _check_n(n)
    return torch.ones(n, n, dtype=torch.bool).tril()


def bidirectional(n: int) -> torch.Tensor:
    _check_n(n)
    return torch.ones(n, n, dtype=torch.bool)


def sliding_window(n: int, window: int) -> torch.Tensor:
    """Causal, and each query sees only the `window` most recent keys (itself included)."""
    if window < 1:
        raise Misuse(f"window must be >= 1, got {window}")
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    return causal(n) & (i - j < window)


def prefix_lm(n: int, prefix_len: int) -> torch.Tensor:
    """The first prefix_len tokens see each other both ways; later tokens are causal."""
    if not 0 <= prefix_len <= n:
        raise Misuse(f"prefix length must be 0..{n}, got {prefix_len}")
    m = causal(n)
    m[:prefix_len, :prefix_len] = True
    return m


def document(segment_ids: list[int]) -> torch.Tensor:
    """Packed sequences: a token sees only earlier tokens of its own document."""
    seg = torch.tensor(segment_ids)
    _check_n(len(seg))
    return causal(len(seg)) & (seg[:, None] == seg[None, :])


def padding(lengths: list[int], n: int) -> torch.Tensor:
    """(B, n, n) masks for a batch whose sequences are left-padded to n, and nothing else: combined with any
    mask it removes the pad keys, and pad query rows end up with no key at all (the fully masked row)."""
    if any(not 0 <= L <= n for L in lengths):
        raise Misuse(f"every length must be 0..{n}, got {lengths}")
    out = []
    for L in lengths:
        real = torch.arange(n) >= n - L  # (n,) True on real tokens
        out.append(real[None, :] & real[:, None])
    return torch.stack(out)


def left_padding(lengths: list[int], n: int) -> torch.Tensor:
    """(B, n, n) causal masks for a batch whose sequences are left-padded to n. Pad keys are
    never attended; pad query rows end up with no key at all (the fully masked row)."""
    return causal(n) & padding(lengths, n)


def combine(*masks: torch.Tensor) -> torch.Tensor:
    if not masks:
        raise Misuse("combine needs at least one mask")
    out = masks[0]
    for m in masks[1:]:
        if m.shape != out.shape:
            raise Misuse(f"mask shapes differ: {tuple(out.shape)} vs {tuple(m.shape)}")
        out = out & m
    return out


def additive(mask: torch.Tensor, fill: float = float("-inf"), dtype=torch.float32) -> torch.Tensor:
    """0 where allowed, `fill` where masked."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, fill)


def build(kind: str, n: int, window: int = 4, prefix_len: int = 4, segment_ids: list[int] | None = None) -> torch.Tensor:
    if kind == "causal":
        return causal(n)
    if kind == "sliding_window":
        return sliding_window(n, window)
    if kind == "prefix_lm":
        return prefix_lm(n, prefix_len)
    if kind == "document":
        if segment_ids is None or len(segment_ids) != n:
            raise Misuse(f"document masks need {n} segment ids, got {0 if segment_ids is None else len(segment_ids)}")
        return document(segment_ids)
    if kind == "bidirectional":
        return bidirectional(n)
    raise Misuse(f"unknown mask kind {kind!r}; choose one of {MASK_KINDS}")


def segments_from_text(text_bytes: list[int], sep: int = ord("|")) -> list[int]:
    """Document ids for packed text: a new document starts after each separator byte."""
    ids, doc = [], 0
    for b in text_bytes:
        ids.append(doc)
        if b == sep:
            doc += 1
    return ids


# --- how the mask is applied ------------------------------------------------------------------

@dataclass(frozen=True)
class MaskVariant:
    key: str
    label: str
    how: str  # "add" or "mul"
    fill: float
    dtype: torch.dtype


VARIANTS = (
    MaskVariant("neg_inf", "add −inf (fp32)", "add", float("-inf"), torch.float32),
    MaskVariant("times_zero", "multiply masked scores by 0 (fp32)", "mul", 0.0, torch.float32),
    MaskVariant("neg_1e4", "add −1e4 (fp32)", "add", -1e4, torch.float32),
    MaskVariant("neg_1e9", "add −1e9 (fp32)", "add", -1e9, torch.float32),
    MaskVariant("neg_1e4_fp16", "add −1e4 (fp16)", "add", -1e4, torch.float16),
    MaskVariant("neg_1e9_fp16", "add −1e9 (fp16: overflows to −inf)", "add", -1e9, torch.float16),
)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, variant: MaskVariant) -> torch.Tensor:
    """Softmax over the last axis after applying `mask` the way `variant` says, in its dtype.
    Returns fp32 weights (NaN where a row had nothing left to attend to under -inf)."""
    s = scores.to(variant.dtype)
    if variant.how == "mul":
        s = s * mask.to(variant.dtype)
    else:
        fill = torch.tensor(variant.fill, dtype=variant.dtype)  # -1e9 in fp16 is -inf
        s = s.masked_fill(~mask, fill) if torch.isinf(fill) else s + (~mask).to(variant.dtype) * fill
    return torch.softmax(s.float() if variant.dtype == torch.float32 else s, dim=-1).float()


def leaked_mass(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per query row: the probability that went to keys the mask forbids."""
    return (weights * (~mask).float()).sum(-1)


@dataclass(frozen=True)
class MaskedRow:
    """What one way of applying a mask did to a query row with no allowed key (sim/words/masks.py words it)."""

    where: str  # "softmax_inf", "softmax_1e9", or the SDPA backend's name ("math", "flash", ...)
    kind: str  # "nan", "zeros", "uniform", "finite" or "unavailable"
    values: tuple[float, ...] = ()  # uniform: the one weight; finite: the row's first values

    @property
    def sdpa(self) -> bool:
        return self.where not in ("softmax_inf", "softmax_1e9")


def fully_masked_row_behaviour() -> tuple[MaskedRow, ...]:
    """What happens to a query row with no allowed key, in plain softmax and in torch's SDPA
    backends that run on this machine (measured live, not assumed)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    from sim.model.device import sdpa_backend_enum

    scores = torch.tensor([[0.5, 1.0, -0.3]])
    none = torch.zeros(1, 3, dtype=torch.bool)
    out = [_describe("softmax_inf", torch.softmax(scores.masked_fill(~none, float("-inf")), -1)),
           _describe("softmax_1e9", torch.softmax(scores - 1e9, -1))]
    q = torch.randn(1, 1, 2, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[False, False], [True, True]])  # row 0 fully masked
    for name in ("math", "flash", "efficient", "cudnn"):
        try:
            with sdpa_kernel(sdpa_backend_enum(name)):
                y = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
            out.append(_describe(name, y[0, 0, 0]))
        except RuntimeError:
            out.append(MaskedRow(name, "unavailable"))
    return tuple(out)


def _describe(where: str, t: torch.Tensor) -> MaskedRow:
    t = t.flatten()
    if torch.isnan(t).any():
        return MaskedRow(where, "nan")
    if torch.all(t == 0):
        return MaskedRow(where, "zeros")
    if t.numel() > 1 and torch.allclose(t, t.mean().expand_as(t)):
        return MaskedRow(where, "uniform", (t[0].item(),))
    return MaskedRow(where, "finite", tuple(t[:4].tolist()))
