"""The one-pass teacher-forced forward through a quantized KV cache, and the literal path it replaces.

`teacher_forced_logits` computes in one pass per layer exactly what a token-by-token decode through
`QuantizedKVCache` computes: each query reads every earlier key as the cache holds it at that step
(full precision while in the residual window, dequantized after). tests/test_quant.py checks the two
agree; one pass per layer instead of one per token is what makes a sweep of every scheme at every
bit width affordable on a CPU.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from sim.model.generate import decode_one_token, prefill
from sim.model.quant_cache import (
    FULL,
    CacheScheme,
    QuantizedKVCache,
    final_values,
    full_precision_mask,
    iter_open_chunk,
    open_chunk,
)
from sim.model.transformer import Llama, apply_rope
from sim.refusal import Misuse


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
        fp = full_precision_mask(scheme.k, residual=R, T=Tp, prefill_len=prefill_len, device=q.device, keep=scheme.keep)
        scores = torch.where(fp, scores, s_q)
    scores = (scores / math.sqrt(D)).masked_fill(~causal, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if scheme.v is None:
        out = probs @ vf.unsqueeze(2)
    else:
        fp = full_precision_mask(scheme.v, residual=R, T=Tp, prefill_len=prefill_len, device=q.device, keep=scheme.keep)
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
def teacher_forced_logits(model: Llama, ids: torch.Tensor, scheme: CacheScheme = FULL,
                          *, prefill_len: int = 0, capture: list | None = None) -> torch.Tensor:
    """(B, T) ids -> (B, T, V) fp32 logits, as if fed token by token through
    QuantizedKVCache(scheme) (the first `prefill_len` tokens in one prefill call).
    capture: gets one dict per layer with the full-precision q, k, v."""
    cfg = model.cfg
    B, T = ids.shape
    if T > cfg.max_seq_len:
        raise Misuse(f"{T} tokens exceed the trained context of {cfg.max_seq_len}")
    if not 0 <= prefill_len <= T:
        raise Misuse(f"prefill_len must be in 0..{T}, got {prefill_len}")
    H, Hkv, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    x = model.model.embed_tokens(ids)  # (B, T, d)
    cos, sin = model.rope_cos[:T].to(x.dtype), model.rope_sin[:T].to(x.dtype)
    if scheme.layer_scales and len(scheme.layer_scales) != cfg.n_layers:
        raise Misuse(f"the scheme has FP8 scales for {len(scheme.layer_scales)} layers; the model has {cfg.n_layers}")
    for i, layer in enumerate(model.model.layers):
        att = layer.self_attn
        h = layer.input_layernorm(x)
        q, k, v = att.q_proj(h), att.k_proj(h), att.v_proj(h)
        q = apply_rope(q.view(B, T, H, D).transpose(1, 2), cos, sin)  # (B, H, T, D)
        k = apply_rope(k.view(B, T, Hkv, D).transpose(1, 2), cos, sin)  # (B, Hkv, T, D)
        v = v.view(B, T, Hkv, D).transpose(1, 2)
        if capture is not None:
            capture.append({"q": q, "k": k, "v": v})
        y = _attend(q, k, v, scheme.for_layer(i), prefill_len).transpose(1, 2).reshape(B, T, H * D)
        x = x + att.o_proj(y)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return model.lm_head(model.model.norm(x)).float()


@torch.inference_mode()
def cache_logits(model: Llama, ids: torch.Tensor, scheme: CacheScheme, *, prefill_len: int = 0) -> torch.Tensor:
    """The slow, literal path: prefill then one token at a time through QuantizedKVCache, every
    position's logits kept (B, T, V)."""
    B, T = ids.shape
    cache = QuantizedKVCache(model.cfg, scheme=scheme, batch_size=B, max_seq_len=T, device=model.device, dtype=model.dtype)
    out = []
    pos = 0
    if prefill_len:
        out.append(prefill(model, ids[:, :prefill_len], cache, last_only=False).float())
        pos = prefill_len
    for t in range(pos, T):
        out.append(decode_one_token(model, ids[:, t : t + 1], t, cache=cache).float()[:, None])  # (B, 1, V)
    return torch.cat(out, dim=1)
