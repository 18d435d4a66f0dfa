"""A Llama-style decoder: the bundled tiny models and a real pretrained one, run live in a page.

RMSNorm, rotary position embeddings (the rotate-half layout that Hugging Face's Llama uses; θ from the
config), SwiGLU MLP and grouped-query attention: n_kv_heads == n_heads is MHA, 1 is MQA; any vocabulary,
the output projection optionally tied to the embedding (sim.model.config.ModelConfig says which). Parameter names follow Llama's, so a checkpoint loads one-to-one into
`transformers.LlamaForCausalLM` (`hf_twin` below: the oracle tests and the benchmark use it).

forward() takes the tokens of one step and the absolute position of the first one. With a cache
it writes the new K/V there and attends to everything cached so far; without one it attends only
to the tokens it was given (which is what naive decoding re-feeds every step).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from sim.cost.opcount import FlopTally
from sim.model.config import PRESETS, ModelConfig
from sim.model.errors import CheckpointError

ATTN_IMPLS = ("eager", "sdpa")
ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets" / "models"


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        # fp32 scalars as tensors: a Python number is converted to a tensor on every call (3 more operator calls)
        self._dim = torch.tensor(float(dim), device="cpu")
        self._eps = torch.tensor(eps, device="cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
                # training: the fused op and its own backward, so a checkpoint trains as it always has
                return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
            # Llama's arithmetic, bit for bit (mean = sum / dim), in 8 operator calls; F.rms_norm makes 24 here.
            return x * torch.mul(x, x).sum(-1, keepdim=True).div_(self._dim).add_(self._eps).rsqrt_() * self.weight
        xf = x.float()  # half precision: normalise in fp32, as Llama does
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class Linear(nn.Linear):
    """nn.Linear (no bias) that, once prepared for inference, multiplies a 2-D input by a stored transposed view
    of its weight: one `mm` call where F.linear makes linear → t → matmul → mm. The same BLAS call, so the
    same bits; the view follows in-place weight updates, not a replaced weight (prepare again then)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__(in_features, out_features, bias=False)
        # (in, out) view of weight. Plain attributes, here and for the fused copies below: a buffer is looked up
        # through nn.Module.__getattr__ at every use; Llama derives them again after .to().
        self.weight_t: torch.Tensor | None = None

    def prepare(self, *, contiguous: bool = False) -> None:
        """contiguous: an (in, out) copy instead of the view. One row against a 576-wide or wider weight (a real
        model's decode step) runs about 1.5× faster on this CPU's BLAS from that layout; it costs a copy of the
        weight and is not the same bits as the view (another summation order), so the bundled tiny models, whose
        tests pin exact bits, keep the view."""
        self.weight_t = self.weight.detach().t().contiguous() if contiguous else self.weight.detach().t()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight_t is not None and x.dim() == 2:
            return torch.mm(x, self.weight_t)  # (N, in) @ (in, out)
        return F.linear(x, self.weight)


def rope_tables(cfg: ModelConfig, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (max_seq_len, head_dim), in fp32."""
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32, device=device) / cfg.head_dim))
    t = torch.arange(cfg.max_seq_len, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)  # (S, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (S, D)
    return emb.cos(), emb.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x (B, H, T, D); cos/sin (T, D)
    return x * cos + _rotate_half(x) * sin


def rotation_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin (S, D) with its first half negated: rotate_half(x) * sin == x.roll(D/2) * rotation_sin(sin), exactly
    (negating is exact), in one roll instead of chunk, neg and cat."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def apply_rope_rolled(x: torch.Tensor, cos: torch.Tensor, sin_rot: torch.Tensor) -> torch.Tensor:
    # x (..., D); cos and sin_rot broadcast to it; the same bits as apply_rope
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin_rot  # roll(D/2) swaps the halves


def causal_additive_mask(num_new: int, kv_len: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """(T, S) mask with 0 where query (at position kv_len-T+i) may see key j, -inf elsewhere."""
    q_pos = torch.arange(kv_len - num_new, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    mask = torch.zeros(num_new, kv_len, device=device, dtype=dtype)
    return mask.masked_fill(k_pos > q_pos, float("-inf"))


@dataclass(frozen=True, eq=False, kw_only=True)
class AttnOptions:
    """How every layer of one forward pass attends; built once per forward."""

    impl: str = "eager"  # one of ATTN_IMPLS
    sdpa_backend: str | None = None  # force one SDPA backend (sim.model.device.SDPA_BACKEND_NAMES)
    mask: torch.Tensor | None = None  # (T, S) additive; replaces the causal mask
    capture: list | None = None  # gets one dict per layer: k, v (and q, scores, probs when eager)
    tally: FlopTally | None = None  # matmul FLOPs counted from the shapes executed

    def __post_init__(self) -> None:
        if self.impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {self.impl!r}")


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = Linear(cfg.d_model, cfg.n_heads * hd)
        self.k_proj = Linear(cfg.d_model, cfg.n_kv_heads * hd)
        self.v_proj = Linear(cfg.d_model, cfg.n_kv_heads * hd)
        self.o_proj = Linear(cfg.n_heads * hd, cfg.d_model)
        self.wqkv: torch.Tensor | None = None  # fused copy for inference, see fuse()
        self.wqkv_t: torch.Tensor | None = None  # its (d, (H + 2·Hkv)·D) view

    def fuse(self, *, contiguous: bool = False) -> None:
        """One (q+k+v) matmul instead of three: fewer kernel launches per decode step (contiguous: see
        Linear.prepare)."""
        wqkv = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]).detach()
        if contiguous:
            self.wqkv_t = wqkv.t().contiguous()
            self.wqkv = self.wqkv_t.t()  # a view of that one copy
        else:
            self.wqkv, self.wqkv_t = wqkv, wqkv.t()
        self.o_proj.prepare(contiguous=contiguous)

    def project(self, x, B: int, T: int, cos, sin_rot):
        """x (B·T, d) -> q (B, H, T, D), k and v (B, Hkv, T, D), RoPE applied to q and k."""
        cfg = self.cfg
        H, Hkv, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        if self.wqkv_t is not None:
            qkv = torch.mm(x, self.wqkv_t)
        else:
            qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)
        qkv = qkv.view(B, T, H + 2 * Hkv, D)  # (B, T, H + 2·Hkv, D)
        # RoPE on the query and key heads at once; cos/sin_rot arrive as (T, 1, D)
        qk = apply_rope_rolled(qkv.narrow(2, 0, H + Hkv), cos, sin_rot)
        return (qk.narrow(2, 0, H).transpose(1, 2), qk.narrow(2, H, Hkv).transpose(1, 2),
                qkv.narrow(2, H + Hkv, Hkv).transpose(1, 2))

    def forward(self, x, B: int, T: int, cos, sin_rot, start_pos: int, cache, layer_idx: int, opts: AttnOptions):
        """x (B·T, d) -> (B·T, d)."""
        cfg = self.cfg
        tally, attn_mask, capture = opts.tally, opts.mask, opts.capture
        H, Hkv, D, G = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.group_size
        q, k, v = self.project(x, B, T, cos, sin_rot)  # (B, H, T, D), (B, Hkv, T, D) ×2
        if cache is not None:
            k, v = cache.update(layer_idx, start_pos, k, v)  # (B, Hkv, S, D), S = start_pos + T
        S = k.shape[2]
        if tally is not None:
            tally.matmul("qkv_proj", B * T, cfg.d_model, (H + 2 * Hkv) * D)
            tally.matmul("attn_scores", T, D, S, batch=B * H)
            tally.matmul("attn_v", T, S, D, batch=B * H)
            tally.matmul("out_proj", B * T, H * D, cfg.d_model)

        if opts.impl == "eager":
            # Group the G query heads that share a K/V head so K and V are never copied.
            qg = q.reshape(B, Hkv, G * T, D)  # rows ordered (g, t)
            scores = qg @ k.transpose(-1, -2) / math.sqrt(D)  # (B, Hkv, G*T, S)
            raw_scores = scores
            if attn_mask is not None:
                scores = scores + attn_mask.to(scores.dtype).repeat(G, 1)  # caller's (T, S) additive mask
            elif T > 1:
                mask = causal_additive_mask(T, S, device=x.device, dtype=scores.dtype)  # (T, S)
                scores = scores + mask.repeat(G, 1)
            probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
            observe = getattr(cache, "observe", None)  # a cache that evicts by attention (H2O, SnapKV) sees it
            if observe is not None:
                observe(layer_idx, probs.view(B, H, T, S))
            y = (probs @ v).view(B, H, T, D)  # (B, H, T, D)
            if capture is not None:
                capture.append({"q": q, "k": k, "v": v, "scores": raw_scores.view(B, H, T, S),
                                "probs": probs.view(B, H, T, S)})
        else:  # "sdpa" (AttnOptions checked the name)
            if attn_mask is not None:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.to(q.dtype), enable_gqa=G > 1)
            elif T == 1 and opts.sdpa_backend is None:  # one query sees every key: no mask
                y = F.scaled_dot_product_attention(q, k, v, enable_gqa=G > 1)
            else:
                y = _sdpa(q, k, v, T, S, G, opts.sdpa_backend)
            if capture is not None:
                capture.append({"k": k, "v": v})
        y = y.reshape(B, H * D) if T == 1 else y.transpose(1, 2).reshape(B * T, H * D)  # (B·T, H·D)
        return self.o_proj(y)  # (B·T, d)

    def forward_static(self, x, B: int, cos, sin_rot, pos, k_buf, v_buf, keep, impl: str, tally: FlopTally | None):
        """One token per row at position `pos`, a (1,) tensor, against whole preallocated buffers: the shapes
        never change, so the step can be captured in a CUDA graph. k_buf, v_buf (B, Hkv, S_max, D) get the new
        row at `pos` (index_copy_, no host sync); keep (1, S_max) bool marks the slots <= pos."""
        cfg = self.cfg
        H, Hkv, D, G = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.group_size
        q, k, v = self.project(x, B, 1, cos, sin_rot)  # (B, H, 1, D), (B, Hkv, 1, D) ×2
        k_buf.index_copy_(2, pos, k)
        v_buf.index_copy_(2, pos, v)
        S = k_buf.shape[2]
        if tally is not None:  # what runs: one query against every slot, the unwritten ones masked
            tally.matmul("qkv_proj", B, cfg.d_model, (H + 2 * Hkv) * D)
            tally.matmul("attn_scores", 1, D, S, batch=B * H)
            tally.matmul("attn_v", 1, S, D, batch=B * H)
            tally.matmul("out_proj", B, H * D, cfg.d_model)
        if impl == "eager":
            scores = q.reshape(B, Hkv, G, D) @ k_buf.transpose(-1, -2) / math.sqrt(D)  # (B, Hkv, G, S_max)
            scores = scores.masked_fill(~keep, float("-inf"))
            probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
            y = probs @ v_buf  # (B, Hkv, G, D): rows are the query heads in order
        else:
            y = F.scaled_dot_product_attention(q, k_buf, v_buf, attn_mask=keep, enable_gqa=G > 1)  # (B, H, 1, D)
        return self.o_proj(y.reshape(B, H * D))


def _sdpa(q, k, v, T, S, G, backend):
    kwargs = {}
    if G > 1:
        kwargs["enable_gqa"] = True
    if T == S:
        kwargs["is_causal"] = T > 1
    elif T > 1:
        q_pos = torch.arange(S - T, S, device=q.device)[:, None]
        kwargs["attn_mask"] = torch.arange(S, device=q.device)[None, :] <= q_pos  # (T, S) True = attend
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    from torch.nn.attention import sdpa_kernel

    from sim.model.device import sdpa_backend_enum

    with sdpa_kernel(sdpa_backend_enum(backend)):
        try:
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
        except RuntimeError:
            if G == 1:
                raise
            # Some fused kernels take no GQA: give them K/V expanded to every query head.
            kwargs.pop("enable_gqa")
            k2, v2 = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)  # (B, H, S, D)
            return F.scaled_dot_product_attention(q, k2, v2, **kwargs)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = Linear(cfg.d_model, cfg.d_ff)
        self.up_proj = Linear(cfg.d_model, cfg.d_ff)
        self.down_proj = Linear(cfg.d_ff, cfg.d_model)
        self.w_gate_up: torch.Tensor | None = None  # fused copy for inference
        self.w_gate_up_t: torch.Tensor | None = None  # its (d, 2·d_ff) view

    def fuse(self, *, contiguous: bool = False) -> None:
        w = torch.cat([self.gate_proj.weight, self.up_proj.weight]).detach()
        if contiguous:  # see Linear.prepare
            self.w_gate_up_t = w.t().contiguous()
            self.w_gate_up = self.w_gate_up_t.t()
        else:
            self.w_gate_up, self.w_gate_up_t = w, w.t()
        self.down_proj.prepare(contiguous=contiguous)

    def forward(self, x):
        if self.w_gate_up_t is not None and x.dim() == 2:
            gate_up = torch.mm(x, self.w_gate_up_t)  # (N, 2·d_ff)
        elif self.w_gate_up is not None:
            gate_up = F.linear(x, self.w_gate_up)
        else:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        gate, up = gate_up.chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)


class Backbone(nn.Module):
    """Named like Hugging Face's LlamaModel (`model.*` in the checkpoint)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)


class Llama(nn.Module):
    """Any Llama-style decoder that a ModelConfig describes: the bundled tiny models and a real pretrained one."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = Linear(cfg.d_model, cfg.vocab_size)
        if cfg.tie_word_embeddings:  # one parameter read twice: the embedding rows are the output projection
            self.lm_head.weight = self.model.embed_tokens.weight
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)  # (max_seq_len, D), fp32
        self.register_buffer("rope_sin", sin, persistent=False)
        self._rope_views: tuple | None = None  # (cos, sin, cos (S, 1, D), rotation_sin (S, 1, D)), see _rope
        self._block_list: tuple | None = None  # (layers, [(norm, attention, norm, mlp) per layer]), see _blocks
        self.fused = self.fused_contiguous = False

    def _blocks(self) -> list[tuple[nn.Module, nn.Module, nn.Module, nn.Module]]:
        """Each layer's four modules, looked up once (nn.Module.__getattr__ costs about a microsecond a use) and
        again whenever model.layers is replaced (a truncated draft does)."""
        layers = self.model.layers
        cached = self._block_list
        if cached is None or cached[0] is not layers or len(cached[1]) != len(layers):
            cached = (layers, [(m.input_layernorm, m.self_attn, m.post_attention_layernorm, m.mlp) for m in layers])
            self._block_list = cached
        return cached[1]

    def _rope(self, start_pos: int, T: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and rotation_sin for positions start_pos.., (T, 1, D) to broadcast over heads. Derived once from
        rope_cos/rope_sin and again whenever those tensors are replaced (.to(), a draft that shares them)."""
        views = self._rope_views
        if views is None or views[0] is not self.rope_cos or views[1] is not self.rope_sin:
            views = (self.rope_cos, self.rope_sin, self.rope_cos[:, None], rotation_sin(self.rope_sin)[:, None])
            self._rope_views = views
        cos, sin = views[2][start_pos : start_pos + T], views[3][start_pos : start_pos + T]
        if cos.dtype != dtype:
            cos, sin = cos.to(dtype), sin.to(dtype)
        return cos, sin

    def forward(
        self,
        idx: torch.Tensor,  # (B, T) token ids
        start_pos: int = 0,
        cache=None,
        *,
        attn_impl: str = "eager",
        sdpa_backend: str | None = None,
        tally: FlopTally | None = None,
        last_only: bool = False,
        attn_mask: torch.Tensor | None = None,  # (T, S) additive; replaces the causal mask
        capture: list | None = None,  # gets one dict per layer: k, v (and scores, probs when eager)
    ) -> torch.Tensor:
        cfg = self.cfg
        B, T = idx.shape
        if start_pos + T > cfg.max_seq_len:
            raise ValueError(
                f"positions {start_pos}..{start_pos + T - 1} exceed the trained context of {cfg.max_seq_len} tokens"
            )
        opts = AttnOptions(impl=attn_impl, sdpa_backend=sdpa_backend, mask=attn_mask, capture=capture, tally=tally)
        # Rows are (batch, position) pairs: every matmul is one 2-D mm, with no reshapes around it.
        emb = self.model.embed_tokens
        if torch.is_grad_enabled() and emb.weight.requires_grad:  # training: the embedding's own backward
            x = emb(idx).view(B * T, -1)  # (B·T, d)
        else:
            x = emb.weight.index_select(0, idx.reshape(-1))  # (B·T, d), the same rows
        cos, sin_rot = self._rope(start_pos, T, x.dtype)  # (T, 1, D)
        for i, (norm1, attn, norm2, mlp) in enumerate(self._blocks()):
            x = x + attn(norm1(x), B, T, cos, sin_rot, start_pos, cache, i, opts)
            x = x + mlp(norm2(x))
            if tally is not None:
                tally.matmul("mlp", B * T, cfg.d_model, 3 * cfg.d_ff)
        if last_only and T > 1:
            x = x.view(B, T, -1)[:, -1]  # (B, d): only the last position's logits are needed to pick the next token
            T = 1
        x = self.model.norm(x)
        if tally is not None:
            tally.matmul("lm_head", B * T, cfg.d_model, cfg.vocab_size)
        return self.lm_head(x).view(B, T, -1)  # (B, T or 1, V)

    def forward_static(self, token: torch.Tensor, pos: torch.Tensor, cache, keep: torch.Tensor, *,
                       attn_impl: str = "sdpa", tally: FlopTally | None = None) -> torch.Tensor:
        """One decode step with fixed shapes and no host sync (what a CUDA graph captures): token (B, 1) at
        position pos, a (1,) tensor, written into the ContiguousKVCache's preallocated buffers by position;
        attention reads all S_max slots with keep (1, S_max) bool masking those after pos. Logits (B, V).
        The cache's Python-side length is the caller's to advance (sim.model.graph_step does)."""
        cfg = self.cfg
        if attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {attn_impl!r}")
        B = token.shape[0]
        x = self.model.embed_tokens.weight.index_select(0, token.reshape(-1))  # (B, d)
        self._rope(0, 1, x.dtype)  # make sure the derived tables exist
        cos = self._rope_views[2].index_select(0, pos)  # (1, 1, D)
        sin_rot = self._rope_views[3].index_select(0, pos)
        if cos.dtype != x.dtype:
            cos, sin_rot = cos.to(x.dtype), sin_rot.to(x.dtype)
        for i, (norm1, attn, norm2, mlp) in enumerate(self._blocks()):
            x = x + attn.forward_static(norm1(x), B, cos, sin_rot, pos, cache.k[i], cache.v[i], keep, attn_impl,
                                        tally)
            x = x + mlp(norm2(x))
            if tally is not None:
                tally.matmul("mlp", B, cfg.d_model, 3 * cfg.d_ff)
        if tally is not None:
            tally.matmul("lm_head", B, cfg.d_model, cfg.vocab_size)
        return self.lm_head(self.model.norm(x))  # (B, V)

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        if self.fused:  # .to() converted the fused copies and views separately: derive them again
            self.fuse_projections(contiguous=self.fused_contiguous)
        return out

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def fuse_projections(self, *, contiguous: bool = False) -> Llama:
        """For inference only (the fused copies do not follow later weight updates). contiguous: every projection
        from an (in, out) copy (Linear.prepare says why; the real model's loader asks for it)."""
        for layer in self.model.layers:
            layer.self_attn.fuse(contiguous=contiguous)
            layer.mlp.fuse(contiguous=contiguous)
        self.lm_head.prepare(contiguous=contiguous)
        self.fused, self.fused_contiguous = True, contiguous
        return self

    def unfuse_projections(self) -> Llama:
        """Back to one matmul per projection on the parameters themselves: the fused copies and the transposed
        views are detached, so a loss computed through them sends no gradient to q/k/v/o, the MLP or lm_head."""
        for layer in self.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            attn.wqkv = attn.wqkv_t = attn.o_proj.weight_t = None
            mlp.w_gate_up = mlp.w_gate_up_t = mlp.down_proj.weight_t = None
        self.lm_head.weight_t = None
        self.fused = self.fused_contiguous = False
        return self

    def train(self, mode: bool = True) -> Llama:
        """A model load_model fused for inference is unfused when it is put back into training: trained fused,
        only the embedding and the norms would learn (the fused weights stay as they were loaded)."""
        if mode and self.fused:
            self.unfuse_projections()
        return super().train(mode)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ---------------------------------------------------------------------------------------------
# Checkpoints: safetensors, with the config as JSON in the file's metadata.


def save_checkpoint(model: Llama, path: Path, extra_metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().to(torch.float32).contiguous().cpu() for k, v in model.state_dict().items()
             if not (model.cfg.tie_word_embeddings and k == "lm_head.weight")}  # tied: stored once, as the embedding
    meta = {"config": json.dumps(asdict(model.cfg))}
    meta.update(extra_metadata or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata=meta)


def checkpoint_path(name: str) -> Path:
    return ASSETS_DIR / f"{name}.safetensors"


def read_checkpoint_metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except Exception as exc:  # safetensors raises its own error types for a bad header
        raise CheckpointError(f"checkpoint {path} is not a readable safetensors file: {exc}") from exc


def load_model(
    name_or_path: str | Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> Llama:
    """Load a bundled preset ("mha", "gqa", "mqa") or a .safetensors path. Read-only use: eval mode."""
    from safetensors.torch import load_file

    path = checkpoint_path(str(name_or_path)) if str(name_or_path) in PRESETS else Path(name_or_path)
    meta = read_checkpoint_metadata(path)
    if "config" not in meta:
        raise CheckpointError(f"checkpoint {path} has no 'config' in its metadata")
    try:
        cfg = ModelConfig.from_dict(json.loads(meta["config"]))
        state = load_file(str(path))
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}") from exc
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path} could not be read: {exc}") from exc
    return build_model(cfg, state, f"checkpoint {path}").to(device=device, dtype=dtype).eval().requires_grad_(False) \
        .fuse_projections()


def build_model(cfg: ModelConfig, state: dict[str, torch.Tensor], what: str) -> Llama:
    """The model of `cfg` holding `state`'s tensors (every parameter present, none extra; a tied lm_head is taken
    from the embedding). Parameters are built on the meta device and then assigned, so a large model's random
    initialisation (seconds for 135M parameters) is never computed only to be overwritten."""
    if cfg.tie_word_embeddings:
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}
        if "model.embed_tokens.weight" in state:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
    with torch.device("meta"):
        model = Llama(cfg)
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{what} does not match its config: {exc}") from exc
    if cfg.tie_word_embeddings:  # assign=True replaced both parameters with one tensor: share the Parameter again
        model.lm_head.weight = model.model.embed_tokens.weight
    cos, sin = rope_tables(cfg)  # the buffers were made on the meta device
    model.rope_cos, model.rope_sin = cos, sin
    return model


def hf_twin(model: Llama, attn_impl: str = "sdpa"):
    """Hugging Face's LlamaForCausalLM with this model's config and weights (the parity oracle and the
    benchmark's reference). transformers is a dev dependency: imported here only."""
    import transformers

    c = model.cfg
    hc = transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
        num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
        max_position_embeddings=c.max_seq_len, rms_norm_eps=c.norm_eps, rope_theta=c.rope_theta,
        tie_word_embeddings=c.tie_word_embeddings, attention_bias=False, mlp_bias=False, attn_implementation=attn_impl,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    hf = transformers.LlamaForCausalLM(hc).eval()
    hf.load_state_dict(model.state_dict(), strict=True)  # every name maps one-to-one (a tied lm_head included)
    return hf
