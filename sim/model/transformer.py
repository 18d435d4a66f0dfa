"""A Llama-style decoder small enough to run live in a page.

Byte-level vocabulary (256), RMSNorm, rotary position embeddings (the rotate-half layout that
Hugging Face's Llama uses), SwiGLU MLP and grouped-query attention: n_kv_heads == n_heads is
MHA, 1 is MQA. Parameter names follow Llama's, so a checkpoint loads one-to-one into
`transformers.LlamaForCausalLM` (`hf_twin` below: the oracle tests and the benchmark use it).

forward() takes the tokens of one step and the absolute position of the first one. With a cache
it writes the new K/V there and attends to everything cached so far; without one it attends only
to the tokens it was given (which is what naive decoding re-feeds every step).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from sim.cost.opcount import FlopTally
from sim.model.errors import CheckpointError

ATTN_IMPLS = ("eager", "sdpa")
ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets" / "models"


@dataclass(frozen=True)
class ModelConfig:
    name: str = "mha"
    vocab_size: int = 256  # bytes
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 4
    d_ff: int = 384
    max_seq_len: int = 1024  # the context it was trained at; RoPE past this is untrained
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, got {self.head_dim}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def group_size(self) -> int:
        """Query heads that share one K/V head."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config fields: {sorted(unknown)}")
        return cls(**d)


PRESETS: dict[str, ModelConfig] = {
    "mha": ModelConfig(name="mha", n_kv_heads=4),
    "gqa": ModelConfig(name="gqa", n_kv_heads=2),
    "mqa": ModelConfig(name="mqa", n_kv_heads=1),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:  # the same arithmetic in fewer kernel calls
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        xf = x.float()  # half precision: normalise in fp32, as Llama does
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


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


def causal_additive_mask(num_new: int, kv_len: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """(T, S) mask with 0 where query (at position kv_len-T+i) may see key j, -inf elsewhere."""
    q_pos = torch.arange(kv_len - num_new, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    mask = torch.zeros(num_new, kv_len, device=device, dtype=dtype)
    return mask.masked_fill(k_pos > q_pos, float("-inf"))


@dataclass(frozen=True, eq=False)
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
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, cfg.d_model, bias=False)
        self.register_buffer("wqkv", None, persistent=False)  # fused copy for inference, see fuse()

    def fuse(self) -> None:
        """One (q+k+v) matmul instead of three: fewer kernel launches per decode step."""
        self.wqkv = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]).detach()

    def forward(self, x, cos, sin, start_pos: int, cache, layer_idx: int, opts: AttnOptions):
        cfg = self.cfg
        tally, attn_mask, capture = opts.tally, opts.mask, opts.capture
        B, T, _ = x.shape
        H, Hkv, D, G = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.group_size
        if self.wqkv is not None:
            qkv = F.linear(x, self.wqkv)
        else:
            qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)
        qkv = qkv.view(B, T, H + 2 * Hkv, D)  # (B, T, H + 2·Hkv, D)
        # RoPE on the query and key heads at once; cos/sin arrive as (T, 1, D)
        q, k = apply_rope(qkv[:, :, : H + Hkv], cos, sin).split([H, Hkv], dim=2)
        q = q.transpose(1, 2)  # (B, H, T, D)
        k = k.transpose(1, 2)  # (B, Hkv, T, D)
        v = qkv[:, :, H + Hkv :].transpose(1, 2)  # (B, Hkv, T, D)
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
            else:
                y = _sdpa(q, k, v, T, S, G, opts.sdpa_backend)
            if capture is not None:
                capture.append({"k": k, "v": v})
        y = y.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)
        return self.o_proj(y)


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
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)
        self.register_buffer("w_gate_up", None, persistent=False)  # fused copy for inference

    def fuse(self) -> None:
        self.w_gate_up = torch.cat([self.gate_proj.weight, self.up_proj.weight]).detach()

    def forward(self, x):
        if self.w_gate_up is not None:
            gate, up = F.linear(x, self.w_gate_up).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
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


class TinyLlama(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)  # (max_seq_len, D), fp32
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(
        self,
        idx: torch.Tensor,  # (B, T) token ids
        start_pos: int = 0,
        cache=None,
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
        opts = AttnOptions(attn_impl, sdpa_backend, attn_mask, capture, tally)
        x = self.model.embed_tokens(idx)  # (B, T, d)
        cos = self.rope_cos[start_pos : start_pos + T, None].to(x.dtype)  # (T, 1, D): broadcast over heads
        sin = self.rope_sin[start_pos : start_pos + T, None].to(x.dtype)
        for i, layer in enumerate(self.model.layers):
            x = x + layer.self_attn(layer.input_layernorm(x), cos, sin, start_pos, cache, i, opts)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            if tally is not None:
                tally.matmul("mlp", B * T, cfg.d_model, 3 * cfg.d_ff)
        if last_only:
            x = x[:, -1:]  # only the last position's logits are needed to pick the next token
        x = self.model.norm(x)
        if tally is not None:
            tally.matmul("lm_head", B * x.shape[1], cfg.d_model, cfg.vocab_size)
        return self.lm_head(x)  # (B, T or 1, V)

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def fuse_projections(self) -> TinyLlama:
        """For inference only (the fused copies do not follow later weight updates)."""
        for layer in self.model.layers:
            layer.self_attn.fuse()
            layer.mlp.fuse()
        return self

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ---------------------------------------------------------------------------------------------
# Checkpoints: safetensors, with the config as JSON in the file's metadata.


def save_checkpoint(model: TinyLlama, path: Path, extra_metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().to(torch.float32).contiguous().cpu() for k, v in model.state_dict().items()}
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
) -> TinyLlama:
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
    model = TinyLlama(cfg)  # under a million parameters: building it directly takes milliseconds
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"checkpoint {path} does not match its config: {exc}") from exc
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False).fuse_projections()


def hf_twin(model: TinyLlama, attn_impl: str = "sdpa"):
    """Hugging Face's LlamaForCausalLM with this model's config and weights (the parity oracle and the
    benchmark's reference). transformers is a dev dependency: imported here only."""
    import transformers

    c = model.cfg
    hc = transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
        num_hidden_layers=c.n_layers, num_attention_heads=c.n_heads, num_key_value_heads=c.n_kv_heads,
        max_position_embeddings=c.max_seq_len, rms_norm_eps=c.norm_eps, rope_theta=c.rope_theta,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, attn_implementation=attn_impl,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    hf = transformers.LlamaForCausalLM(hc).eval()
    hf.load_state_dict(model.state_dict(), strict=True)  # every name maps one-to-one
    return hf
