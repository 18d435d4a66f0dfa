"""What KV quantization costs and saves, measured on the real tiny model.

Teacher-forced: windows of held-out text (the last 10% of the corpus, never trained on) are run
through the model once with a full-precision cache and once per scheme; at every position we
compare the next-token distributions: loss change, top-1 agreement and KL(full ‖ quantized).

The quantized runs use `teacher_forced_logits`, which computes in one pass per layer exactly
what a token-by-token decode through `QuantizedKVCache` computes (each query reads every earlier
key as the cache holds it at that step: full precision while in the residual window, dequantized
after). Tests check the two agree; one pass per layer instead of one per token is what makes
a sweep of every scheme at every bit width affordable on a CPU.

Free-running: greedy text from a prompt through the real cache, side by side with the
full-precision text, and the first position where they part.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from sim.model.quant import QuantSpec, quantize
from sim.model.quant_cache import (
    FULL,
    FULL_BYTES,
    CacheScheme,
    QuantizedKVCache,
    final_values,
    full_precision_mask,
    iter_open_chunk,
    open_chunk,
    scheme_bytes,
)
from sim.model.transformer import TinyLlama, apply_rope

MAX_WINDOWS = 16


# --- held-out text -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalConfig:
    num_windows: int = 4
    window_len: int = 512  # tokens fed; each predicts the next one

    def check(self, max_seq_len: int) -> None:
        if not 1 <= self.num_windows <= MAX_WINDOWS:
            raise ValueError(f"num_windows must be in 1..{MAX_WINDOWS}, got {self.num_windows}")
        if not 16 <= self.window_len <= max_seq_len:
            raise ValueError(f"window_len must be in 16..{max_seq_len} (the trained context), got {self.window_len}")


def heldout_windows(cfg: EvalConfig) -> torch.Tensor:
    """(W, T + 1) byte ids from the validation split, evenly spaced, the same every time."""
    from sim.model.train import load_corpus

    _, val = load_corpus()
    span = cfg.window_len + 1
    last = len(val) - span
    if last < 0:
        raise ValueError(f"the validation split has {len(val)} bytes, fewer than one window of {span}")
    starts = [round(i * last / max(1, cfg.num_windows - 1)) if cfg.num_windows > 1 else 0
              for i in range(cfg.num_windows)]
    return torch.stack([val[s : s + span] for s in starts])


# --- the one-pass teacher-forced forward -------------------------------------------------------


def _fill_diagonal_blocks(mat: torch.Tensor, G: int) -> torch.Tensor:
    """(..., T, T) -> a view (..., G[a], G[i], T/G) of its diagonal G×G blocks."""
    *lead, T, _ = mat.shape
    n = T // G
    return torch.diagonal(mat.view(*lead, n, G, n, G), dim1=-4, dim2=-2)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scheme: CacheScheme, prefill_len: int) -> torch.Tensor:
    """q (B, H, T, D), k/v (B, Hkv, T, D), all T positions; what a token-by-token decode through
    QuantizedKVCache(scheme) would attend to. Returns (B, H, T, D)."""
    B, H, T, D = q.shape
    Hkv = k.shape[1]
    Gq = H // Hkv
    R = scheme.residual
    open_k, open_v = open_chunk(scheme.k, R), open_chunk(scheme.v, R)
    G = math.lcm(scheme.k.group_size if open_k else 1, scheme.v.group_size if open_v else 1)
    Tp = -(-T // G) * G
    if Tp != T:  # pad to whole chunks; padded keys are in every real query's future
        pad = (0, 0, 0, Tp - T)
        q, k, v = F.pad(q, pad), F.pad(k, pad), F.pad(v, pad)
    qg = q.float().reshape(B, Hkv, Gq, Tp, D)
    kf, vf = k.float(), v.float()
    causal = torch.ones(Tp, Tp, dtype=torch.bool, device=q.device).tril()
    scores = qg @ kf.unsqueeze(2).transpose(-1, -2)  # (B, Hkv, Gq, Tp, Tp)
    if scheme.k is not None:
        if open_k:  # each query reads its own chunk as stored at its step: one G×G block per chunk
            Gk = scheme.k.group_size
            q_blocks = qg.view(B, Hkv, Gq, Tp // Gk, Gk, D)
            blocks = torch.zeros(B, Hkv, Gq, Gk, Gk, Tp // Gk, device=q.device)  # (…, a, i, chunk)
            for a, cur in enumerate(iter_open_chunk(kf, scheme.k)):  # cur (B, Hkv, chunks, a+1, D)
                blocks[:, :, :, a, : a + 1] = torch.einsum("bhgcd,bhcid->bhgic", q_blocks[:, :, :, :, a], cur)
            k_final = cur.reshape(kf.shape)
            s_q = qg @ k_final.unsqueeze(2).transpose(-1, -2)
            _fill_diagonal_blocks(s_q, Gk).copy_(blocks)
        else:
            s_q = qg @ final_values(kf, scheme.k, R).unsqueeze(2).transpose(-1, -2)
        fp = full_precision_mask(scheme.k, R, Tp, prefill_len, q.device, scheme.keep)
        scores = torch.where(fp, scores, s_q)
    scores = (scores / math.sqrt(D)).masked_fill(~causal, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if scheme.v is None:
        out = probs @ vf.unsqueeze(2)
    else:
        fp = full_precision_mask(scheme.v, R, Tp, prefill_len, q.device, scheme.keep)
        p_fp, p_q = probs.masked_fill(~fp, 0.0), probs.masked_fill(fp, 0.0)
        out = p_fp @ vf.unsqueeze(2)
        if open_v:
            Gv = scheme.v.group_size
            diag = _fill_diagonal_blocks(p_q, Gv)
            p_blocks = diag.clone()
            diag.zero_()  # these weights read the chunk as it was at each step, below
            extra = torch.zeros(B, Hkv, Gq, Tp // Gv, Gv, D, device=q.device)
            for a, cur in enumerate(iter_open_chunk(vf, scheme.v)):
                extra[:, :, :, :, a] = torch.einsum("bhgic,bhcid->bhgcd", p_blocks[:, :, :, a, : a + 1], cur)
            out = out + p_q @ cur.reshape(vf.shape).unsqueeze(2) + extra.view(out.shape)
        else:
            out = out + p_q @ final_values(vf, scheme.v, R).unsqueeze(2)
    return out.reshape(B, H, Tp, D)[:, :, :T].to(q.dtype)


@torch.inference_mode()
def teacher_forced_logits(model: TinyLlama, ids: torch.Tensor, scheme: CacheScheme = FULL,
                          prefill_len: int = 0, capture: list | None = None) -> torch.Tensor:
    """(B, T) ids -> (B, T, V) fp32 logits, as if fed token by token through
    QuantizedKVCache(scheme) (the first `prefill_len` tokens in one prefill call).
    capture: gets one dict per layer with the full-precision q, k, v."""
    cfg = model.cfg
    B, T = ids.shape
    if T > cfg.max_seq_len:
        raise ValueError(f"{T} tokens exceed the trained context of {cfg.max_seq_len}")
    if not 0 <= prefill_len <= T:
        raise ValueError(f"prefill_len must be in 0..{T}, got {prefill_len}")
    H, Hkv, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    x = model.model.embed_tokens(ids)  # (B, T, d)
    cos, sin = model.rope_cos[:T].to(x.dtype), model.rope_sin[:T].to(x.dtype)
    for layer in model.model.layers:
        att = layer.self_attn
        h = layer.input_layernorm(x)
        if att.wqkv is not None:
            q, k, v = F.linear(h, att.wqkv).split([H * D, Hkv * D, Hkv * D], dim=-1)
        else:
            q, k, v = att.q_proj(h), att.k_proj(h), att.v_proj(h)
        q = apply_rope(q.view(B, T, H, D).transpose(1, 2), cos, sin)  # (B, H, T, D)
        k = apply_rope(k.view(B, T, Hkv, D).transpose(1, 2), cos, sin)  # (B, Hkv, T, D)
        v = v.view(B, T, Hkv, D).transpose(1, 2)
        if capture is not None:
            capture.append({"q": q, "k": k, "v": v})
        y = _attend(q, k, v, scheme, prefill_len).transpose(1, 2).reshape(B, T, H * D)
        x = x + att.o_proj(y)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return model.lm_head(model.model.norm(x)).float()


@torch.inference_mode()
def cache_logits(model: TinyLlama, ids: torch.Tensor, scheme: CacheScheme, prefill_len: int = 0) -> torch.Tensor:
    """The slow, literal path: prefill then one token at a time through QuantizedKVCache."""
    B, T = ids.shape
    device, dtype = model.lm_head.weight.device, model.lm_head.weight.dtype
    cache = QuantizedKVCache(model.cfg, scheme, B, T, device, dtype)
    out = []
    pos = 0
    if prefill_len:
        out.append(model(ids[:, :prefill_len], 0, cache).float())
        pos = prefill_len
    for t in range(pos, T):
        out.append(model(ids[:, t : t + 1], t, cache).float())
    return torch.cat(out, dim=1)


# --- teacher-forced comparison -----------------------------------------------------------------


@dataclass(frozen=True)
class PositionErrors:
    """One scheme against full precision, per position (mean over windows) and overall."""

    key: str
    label: str
    short: str
    bits: int
    delta_loss: np.ndarray  # (T,) nats per byte, quantized − full
    agreement: np.ndarray  # (T,) fraction of windows whose top-1 next byte matches
    kl: np.ndarray  # (T,) KL(full ‖ quantized), nats
    loss_ref: float  # mean over every position and window
    loss_q: float
    bytes_per_token: float  # this model, every layer, K and V, at the window length
    window_delta_loss: np.ndarray  # (W,) each window's mean Δ loss

    @property
    def num_positions(self) -> int:
        return len(self.kl)

    @property
    def ppl_ref(self) -> float:
        return math.exp(self.loss_ref)

    @property
    def ppl_q(self) -> float:
        return math.exp(self.loss_q)

    @property
    def mean_delta_loss(self) -> float:
        return self.loss_q - self.loss_ref

    @property
    def delta_loss_se(self) -> float:
        """Standard error of the mean Δ loss over the windows (NaN with one window)."""
        w = self.window_delta_loss
        return float(w.std(ddof=1) / math.sqrt(len(w))) if len(w) > 1 else float("nan")

    @property
    def mean_agreement(self) -> float:
        return float(self.agreement.mean())

    @property
    def mean_kl(self) -> float:
        return float(self.kl.mean())

    def kl_by_quarter(self) -> list[float]:
        return [float(part.mean()) for part in np.array_split(self.kl, 4)]

    def binned(self, width: int):
        """Rows (position bin start, mean Δloss, agreement, KL) for a chart."""
        import pandas as pd

        n = self.num_positions
        starts = list(range(0, n, width))
        return pd.DataFrame({
            "position": [s + min(width, n - s) / 2 - 0.5 for s in starts],
            "delta_loss": [float(self.delta_loss[s : s + width].mean()) for s in starts],
            "agreement": [float(self.agreement[s : s + width].mean()) for s in starts],
            "kl": [float(self.kl[s : s + width].mean()) for s in starts],
            "scheme": self.short,
        })


def compare_logits(ref: torch.Tensor, quant: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """(W, T, V) logits against the (W, T) next bytes: per-window, per-position loss, agreement, KL."""
    lp_ref, lp_q = F.log_softmax(ref.float(), -1), F.log_softmax(quant.float(), -1)
    loss_ref = -lp_ref.gather(-1, targets[..., None]).squeeze(-1)
    loss_q = -lp_q.gather(-1, targets[..., None]).squeeze(-1)
    kl = (lp_ref.exp() * (lp_ref - lp_q)).sum(-1).clamp(min=0)
    agree = (ref.argmax(-1) == quant.argmax(-1)).float()
    return {"loss_ref": loss_ref, "loss_q": loss_q, "kl": kl, "agree": agree}


def _window_batches(num_windows: int, T: int) -> list[slice]:
    """Windows per forward so that one (windows, heads, T, T) score tensor stays near 16 M values."""
    per = max(1, (1 << 22) // (T * T))
    return [slice(i, min(num_windows, i + per)) for i in range(0, num_windows, per)]


def evaluate_scheme(model: TinyLlama, windows: torch.Tensor, scheme: CacheScheme,
                    ref_logits: torch.Tensor | None = None) -> PositionErrors:
    """windows (W, T + 1) -> PositionErrors against the full-precision logits."""
    device = model.lm_head.weight.device
    ids, targets = windows[:, :-1].to(device), windows[:, 1:].to(device)
    if ref_logits is None:
        ref_logits = reference_logits(model, windows)
    rows = []
    for sl in _window_batches(ids.shape[0], ids.shape[1]):
        ref = ref_logits[sl]
        q = ref if scheme.is_full else teacher_forced_logits(model, ids[sl], scheme)
        rows.append(compare_logits(ref, q, targets[sl]))
    m = {k: torch.cat([r[k] for r in rows]).cpu().double() for k in rows[0]}
    cfg = model.cfg
    T = ids.shape[1]
    nbytes = scheme_bytes(scheme, T, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim)["total"]
    return PositionErrors(scheme.key, scheme.label, scheme.short, scheme.bits, (m["loss_q"] - m["loss_ref"]).mean(0).numpy(),
                          m["agree"].mean(0).numpy(), m["kl"].mean(0).numpy(), float(m["loss_ref"].mean()),
                          float(m["loss_q"].mean()), nbytes / T, (m["loss_q"] - m["loss_ref"]).mean(1).numpy())


def reference_logits(model: TinyLlama, windows: torch.Tensor) -> torch.Tensor:
    device = model.lm_head.weight.device
    ids = windows[:, :-1].to(device)
    return torch.cat([teacher_forced_logits(model, ids[sl]) for sl in _window_batches(ids.shape[0], ids.shape[1])])


def results_frame(results: Sequence[PositionErrors]):
    """The bits × scheme table: one row per result."""
    import pandas as pd

    return pd.DataFrame([{
        "scheme": r.key, "label": r.label, "bits": r.bits, "delta_loss": r.mean_delta_loss,
        "delta_loss_se": r.delta_loss_se,
        "ppl_ref": r.ppl_ref, "ppl_q": r.ppl_q, "top1_agreement": r.mean_agreement, "kl": r.mean_kl,
        "kl_first_quarter": r.kl_by_quarter()[0], "kl_last_quarter": r.kl_by_quarter()[-1],
        "bytes_per_token": r.bytes_per_token,
    } for r in results])


# --- free-running --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FreeRun:
    scheme: CacheScheme
    prompt_ids: list[int]
    ref_ids: list[int]  # greedy, full-precision cache
    quant_ids: list[int]  # greedy, the scheme's cache
    used_bytes: int  # the quantized cache after the run
    full_bytes: int  # the same tokens at 16 bits

    @property
    def first_difference(self) -> int | None:
        for i, (a, b) in enumerate(zip(self.ref_ids, self.quant_ids, strict=True)):
            if a != b:
                return i
        return None


@torch.inference_mode()
def greedy(model: TinyLlama, prompt_ids: list[int], n_new: int, scheme: CacheScheme) -> tuple[list[int], int]:
    """Greedy tokens through QuantizedKVCache(scheme): one prefill call, then one token a step.
    Returns the tokens and the cache's used bytes."""
    from sim.model.generate import check_lengths, decode_one_token, prefill

    check_lengths(model, len(prompt_ids), n_new)
    device, dtype = model.lm_head.weight.device, model.lm_head.weight.dtype
    cache = QuantizedKVCache(model.cfg, scheme, 1, len(prompt_ids) + n_new - 1, device, dtype)
    logits = prefill(model, torch.tensor([prompt_ids], device=device), cache)
    out = [int(logits[0].argmax())]
    for i in range(1, n_new):
        logits = decode_one_token(model, torch.tensor([[out[-1]]], device=device), len(prompt_ids) + i - 1, cache)
        out.append(int(logits[0].argmax()))
    return out, cache.used_bytes()


def free_run(model: TinyLlama, prompt_ids: list[int], n_new: int, scheme: CacheScheme) -> FreeRun:
    """Greedy text through the plain full-precision cache (sim.model.generate) and through the scheme's."""
    from sim.model.generate import generate

    ref = generate(model, list(prompt_ids), n_new, "cached", count=False).new_ids
    quant, used = greedy(model, prompt_ids, n_new, scheme)
    cfg = model.cfg
    full = scheme_bytes(FULL, len(prompt_ids) + n_new - 1, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim)["total"]
    return FreeRun(scheme, list(prompt_ids), ref, quant, used, full)


def divergence_positions(model: TinyLlama, prompt_ids: list[int], ref_ids: list[int],
                         schemes: Sequence[CacheScheme]) -> dict[str, int | None]:
    """The first generated token where greedy decoding through each scheme's cache would leave
    the full-precision text: up to there both runs read the same tokens, so one teacher-forced
    pass over prompt + full-precision text finds it."""
    device = model.lm_head.weight.device
    P = len(prompt_ids)
    ids = torch.tensor([list(prompt_ids) + list(ref_ids[:-1])], device=device)
    ref = torch.tensor(ref_ids, device=device)
    out = {}
    for s in schemes:
        pred = teacher_forced_logits(model, ids, s, prefill_len=P)[0, P - 1 :].argmax(-1)
        diff = (pred != ref).nonzero()
        out[s.key] = int(diff[0]) if len(diff) else None
    return out


# --- K and V, channel by channel ---------------------------------------------------------------


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


@torch.inference_mode()
def channel_stats(model: TinyLlama, ids: torch.Tensor) -> ChannelStats:
    """Capture every layer's cached K and V for ids (1, T)."""
    cap: list = []
    model(ids.to(model.lm_head.weight.device), capture=cap, attn_impl="sdpa")
    k = torch.stack([c["k"][0] for c in cap]).float().abs().cpu().numpy()
    v = torch.stack([c["v"][0] for c in cap]).float().abs().cpu().numpy()
    return ChannelStats(k, v)


@dataclass(frozen=True)
class OutlierCase:
    case: str  # "real" or "injected"
    axis: str  # "token" or "channel"
    rel_error_other: float  # RMS error / RMS value over the channels that are not the outlier
    rel_error_outlier: float  # the same for the outlier channel
    rel_error_scores: float  # RMS error of q·k over RMS of q·k, for the given queries


def outlier_demo(k: torch.Tensor, q: torch.Tensor, bits: int, chunk: int, channel_group: int, channel: int,
                 factor: float) -> tuple[torch.Tensor, list[OutlierCase]]:
    """k (T, D) one head's cached keys, q (Tq, D) queries. Quantizes K per token (groups of
    `channel_group` channels) and per channel (groups of `chunk` tokens), as it is and with a
    synthetic outlier: `factor` × the head's mean |k| added to `channel` at every token.
    Returns the injected K and the errors."""
    T, D = k.shape
    if not 0 <= channel < D:
        raise ValueError(f"channel must be in 0..{D - 1}, got {channel}")
    if T % chunk:
        raise ValueError(f"{T} tokens are not a whole number of chunks of {chunk}")
    k = k.float()
    injected = k.clone()
    injected[:, channel] += factor * float(k.abs().mean())
    other = torch.ones(D, dtype=torch.bool)
    other[channel] = False
    cases = []
    for case, kk in (("real", k), ("injected", injected)):
        for axis, g in (("token", channel_group), ("channel", chunk)):
            deq = quantize(kk, QuantSpec("int", bits, axis, g)).dequantize()
            err = deq - kk

            def rel(e, x):
                return float(e.pow(2).mean().sqrt() / x.pow(2).mean().sqrt().clamp(min=1e-12))

            cases.append(OutlierCase(case, axis, rel(err[:, other], kk[:, other]), rel(err[:, channel], kk[:, channel]),
                                     rel(q.float() @ err.T, q.float() @ kk.T)))
    return injected, cases


def queries_and_keys(model: TinyLlama, ids: torch.Tensor, layer: int, kv_head: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, D) RoPE'd queries of the first query head that reads `kv_head`, and that head's keys."""
    cfg = model.cfg
    if not 0 <= layer < cfg.n_layers or not 0 <= kv_head < cfg.n_kv_heads:
        raise ValueError(f"layer must be in 0..{cfg.n_layers - 1} and KV head in 0..{cfg.n_kv_heads - 1}, "
                         f"got {layer}, {kv_head}")
    cap: list = []
    teacher_forced_logits(model, ids.to(model.lm_head.weight.device), FULL, capture=cap)
    return cap[layer]["q"][0, kv_head * cfg.group_size].float().cpu(), cap[layer]["k"][0, kv_head].float().cpu()


# --- memory and speed at real-model scale --------------------------------------------------------


@dataclass(frozen=True)
class ScaleRow:
    key: str
    label: str
    bytes_per_token: float  # averaged over the context (the residual window included)
    per_request_bytes: int
    vs_fp16: float
    max_requests: int  # on the GPU, at the context, after the weights
    step_seconds: float  # bandwidth bound of one decode step at that batch: (weights + KV) / bandwidth
    tokens_per_s: float  # max_requests / step_seconds


def scale_rows(arch, schemes: Sequence[CacheScheme], context: int, gpu_bytes: int, bandwidth: float,
               utilization: float = 0.9, weight_bytes_per_param: int = 2) -> list[ScaleRow]:
    """Per-request cache bytes of each scheme for a standard-attention preset, and what that buys on
    a GPU: the most requests that fit next to the weights and the bandwidth-bound decode rate."""
    from sim.cost.presets import estimate_num_params

    if arch.attention == "MLA" or arch.sliding_window or arch.v_dim != arch.head_dim:
        raise ValueError(f"{arch.name}: only models whose every layer caches full K and V heads are shown here")
    if not 1 <= context <= arch.max_position_embeddings:
        raise ValueError(f"context must be in 1..{arch.max_position_embeddings:,}, got {context:,}")
    if not 0.05 <= utilization <= 1.0:
        raise ValueError(f"utilization must be in 0.05..1.0, got {utilization}")
    weights = estimate_num_params(arch) * weight_bytes_per_param
    budget = math.floor(gpu_bytes * utilization) - weights
    fp16 = scheme_bytes(FULL, context, arch.n_layers, arch.n_kv_heads, arch.head_dim)["total"]
    rows = []
    for s in [FULL, *schemes]:
        per = scheme_bytes(s, context, arch.n_layers, arch.n_kv_heads, arch.head_dim)["total"]
        n = max(0, budget // per) if budget > 0 else 0
        step = (weights + n * per) / bandwidth
        rows.append(ScaleRow(s.key, s.label, per / context, per, per / fp16, int(n), step, n / step if n else 0.0))
    return rows


def tiny_bytes_rows(cfg, schemes: Sequence[CacheScheme], num_tokens: int) -> list[dict]:
    """The tiny model's cache after num_tokens tokens, by part, per scheme (16-bit residual)."""
    rows = []
    for s in [FULL, *schemes]:
        b = scheme_bytes(s, num_tokens, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, full_bytes=FULL_BYTES)
        rows.append({"scheme": s.key, "label": s.label, "short": s.short, **b,
                     "bytes_per_token": b["total"] / num_tokens})
    return rows


# --- seed 001, checked -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    claim: str
    seed_says: str
    we_find: str
    verdict: str


def seed_claims(table, bits: int, arch=None, gpu=None, batch: int = 16, context: int = 32768,
                utilization: float = 0.9) -> list[Claim]:
    """Seed 001's quantization claims against the measured bits × scheme table (results_frame rows)
    and, for the speed claim, the 8B model of its example on a GPU preset."""
    from sim.cost.presets import estimate_num_params
    from sim.model.quant_cache import make_scheme

    def row(kind: str, b: int):
        r = table[(table["scheme"] == kind) & (table["bits"] == b)]
        return None if r.empty else r.iloc[0]

    def dl(r) -> str:
        loss = f"{r['delta_loss']:+.5f}".replace("-0.00000", "+0.00000")
        return f"Δloss {loss}, KL {r['kl']:.1e}, agreement {r['top1_agreement']:.2%}"

    missing = "Not measured in this view: switch on every scheme at every bit width (top of the page)."
    out = []
    if arch is not None and gpu is not None:
        w = estimate_num_params(arch) * 2
        kv16 = scheme_bytes(FULL, context, arch.n_layers, arch.n_kv_heads, arch.head_dim, batch)["total"]
        kv8 = scheme_bytes(make_scheme("fp8_e4m3"), context, arch.n_layers, arch.n_kv_heads, arch.head_dim,
                           batch)["total"]
        bw = gpu.bandwidth_bytes_per_s
        # the example must be one that runs: the largest batch (up to `batch`) whose FP16 cache fits
        usable = int(gpu.memory_bytes * utilization) - w
        fit = min(batch, max(0, usable // max(1, kv16 // batch)))
        note = "" if fit == batch else (
            f" ({batch} requests would need {(w + kv16) / 2**30:,.1f} GiB in FP16, more than the "
            f"{gpu.memory_bytes * utilization / 2**30:,.1f} GiB usable at {utilization:.0%}: the largest batch that fits, "
            f"{fit}, is used)")
        if 0 < fit < batch:
            kv16, kv8 = kv16 * fit // batch, kv8 * fit // batch
        t16, t8 = (w + kv16) / bw, (w + kv8) / bw
        out.append(Claim(
            "Decoding is bandwidth-bound: a cache half the size is read in half the time",
            "캐시가 절반이 되면 읽는 시간도 절반",
            f"{arch.name}, {fit} requests × {context:,} tokens on {gpu.name}{note}: reading the cache takes "
            f"{kv16 / bw * 1e3:.1f} ms in FP16 and {kv8 / bw * 1e3:.1f} ms in FP8 — half. But each step also reads "
            f"{w / 2**30:.1f} GiB of weights: {t16 * 1e3:.1f} ms → {t8 * 1e3:.1f} ms, {t16 / t8:.2f}× faster.",
            "Right for the cache; the whole step gains less"))
        i8 = make_scheme("kivi", 8, 32, min(32, arch.head_dim), 128)
        b8 = scheme_bytes(i8, context, arch.n_layers, arch.n_kv_heads, arch.head_dim)["total"]
        b16 = kv16 // batch
        out.append(Claim(
            "FP8 or INT8 halves the memory", "메모리는 절반이 된다",
            f"FP8 (one per-tensor scale): exactly {kv8 / kv16:.3f} of FP16. INT8 KIVI (an fp16 scale and zero point "
            f"per group of 32 values, R = 128) at {context:,} tokens: {b8 / b16:.3f}.",
            f"Right for FP8; INT8's scales and zero points add {b8 / b16 / 0.5 - 1:.0%} to the half"))
    r8 = [row("kivi", 8), row("token", 8), row("fp8_e4m3", 8)]
    if all(r is not None for r in r8):
        int_ok = all(r["top1_agreement"] >= 0.99 for r in r8[:2])
        fp8_ok = r8[2]["top1_agreement"] >= 0.99
        verdict = {(True, True): "Holds on the tiny model",
                   (True, False): "INT8 holds; FP8 e4m3 costs more on the tiny model",
                   (False, True): "FP8 holds; INT8 costs more on the tiny model",
                   (False, False): "Not on the tiny model"}[(int_ok, fp8_ok)]
        out.append(Claim(
            "FP8 / INT8: nearly safe, the quality difference is hard to measure", "거의 안전한 구간",
            f"INT8 KIVI: {dl(r8[0])}; INT8 per-token: {dl(r8[1])}; FP8 e4m3: {dl(r8[2])}. FP8 keeps 3 mantissa bits "
            "per value (a step of 1/8 of its power of two) with no group scale; INT8 spreads 255 steps over each "
            "group's own range.", verdict))
    else:
        out.append(Claim("FP8 / INT8: nearly safe", "거의 안전한 구간", missing, "—"))
    k4, t4 = row("kivi", 4), row("token", 4)
    if k4 is not None and t4 is not None:
        ratio = t4["kl"] / max(k4["kl"], 1e-30)
        out.append(Claim(
            "INT4 works with K per channel, small groups and a residual window; per-token all the way collapses",
            "K를 채널 축으로 … 잔여 창을 두는 조합이면 쓸 만하고, 토큰 축으로 통째로 묶으면 무너진다",
            f"INT4 KIVI: {dl(k4)}; INT4 K and V per-token: {dl(t4)}.",
            f"Holds: per-token's KL is {ratio:,.0f}× KIVI's" if ratio > 3 else "The gap is small on the tiny model"))
    else:
        out.append(Claim("INT4 needs the KIVI recipe", "INT4", missing, "—"))
    k2, t2 = row("kivi", 2), row("token", 2)
    if k2 is not None and t2 is not None and k4 is not None:
        out.append(Claim(
            "2-bit is research territory", "2비트 — 연구 영역",
            f"INT2 KIVI: {dl(k2)} (KL {k2['kl'] / max(k4['kl'], 1e-30):,.0f}× INT4's); INT2 per-token: {dl(t2)}.",
            "Holds: a clear cost even with KIVI" if k2["top1_agreement"] < 0.98 else
            f"With KIVI, milder than that on the tiny model; per-token collapses "
            f"({t2['top1_agreement']:.0%} agreement)"))
    else:
        out.append(Claim("2-bit is research territory", "2비트 — 연구 영역", missing, "—"))
    tb = row("token", bits)
    if tb is not None:
        first, last = tb["kl_first_quarter"], tb["kl_last_quarter"]
        ratio = last / max(first, 1e-30)
        out.append(Claim(
            "Errors accumulate: an early token's error is read by every later token, so long outputs degrade late",
            "앞선 토큰의 오차가 뒤 토큰에 누적된다",
            f"INT{bits} per-token, teacher-forced: mean KL {first:.2e} in the first quarter of each window, "
            f"{last:.2e} in the last ({ratio:.2f}×).",
            "Grows with position here" if ratio > 1.5 else "Grows a little with position here" if ratio > 1.1 else
            "Flat per position here: with the right text fed in, a late prediction is no worse than an early "
            "one; in free-running, one changed token and the texts part for good (see above)"))
    tr, tf = row("token_res", bits), row("token_first", bits)
    if tr is not None and tf is not None:
        out.append(Claim(
            "Recent tokens stored coarsely hurt more than old tokens stored coarsely",
            "최근 토큰을 거칠게 저장하는 쪽이 훨씬 크게 다친다",
            f"INT{bits} per-token with the same bytes: the last R tokens in full precision {dl(tr)}; the first R "
            f"tokens instead {dl(tf)}.",
            f"Holds: KL {tf['kl'] / max(tr['kl'], 1e-30):,.0f}× higher with the recent tokens quantized"
            if tf["kl"] > tr["kl"] else "Not on the tiny model"))
    return out
