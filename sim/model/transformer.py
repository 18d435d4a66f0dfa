"""A Llama-style decoder: the bundled tiny models and a real pretrained one, run live in a page.

RMSNorm, rotary position embeddings (the rotate-half layout that Hugging Face's Llama uses; θ from the config),
SwiGLU MLP and grouped-query attention: n_kv_heads == n_heads is MHA, 1 is MQA; any vocabulary, the output
projection optionally tied to the embedding (sim.model.config.ModelConfig says which). Parameter names follow
Llama's, so a checkpoint loads one-to-one into `transformers.LlamaForCausalLM` (`hf_twin` below: the oracle tests
and the benchmark use it).

This file is the reference: one path per operation, written to be read. The CPU fast paths (fused projections,
fewer operator calls) live in sim.model.fast, which swaps them onto a built model and is proved bit-identical to
this code by the tests; load_model applies them.

forward() takes the tokens of one step and the absolute position of the first one. With a cache (any
sim.model.kvcache.KVCache) it writes the new K/V there and attends to everything the cache returns; without one it
attends only to the tokens it was given (which is what naive decoding re-feeds every step).
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
from sim.model.kvcache import AttentionObserver, KVCache
from sim.refusal import Misuse

ATTN_IMPLS = ("eager", "sdpa")
ALIGN_BYTES = 64  # what PyTorch's CPU allocator gives every tensor
ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets" / "models"


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()  # normalise in fp32 whatever the dtype, as Llama does
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_tables(cfg: ModelConfig, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (max_seq_len, head_dim), in fp32."""
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32, device=device) / cfg.head_dim))
    t = torch.arange(cfg.max_seq_len, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)  # (S, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (S, D)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x (..., T, D); cos/sin (T, D), or shaped to broadcast the same way
    return x * cos + rotate_half(x) * sin


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
    observer: AttentionObserver | None = None  # sees every layer's attention weights (eager only)

    def __post_init__(self) -> None:
        if self.impl not in ATTN_IMPLS:
            raise Misuse(f"attn_impl must be one of {ATTN_IMPLS}, got {self.impl!r}")
        if self.observer is not None and self.impl != "eager":
            raise Misuse("the attention weights are watched (an evicting cache ranks tokens by them), but only "
                         "eager attention makes them: run the model with attn_impl='eager'")


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, cfg.d_model, bias=False)

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x (B, T, d) -> q (B, H, T, D), k and v (B, Hkv, T, D), RoPE applied to q and k."""
        B, T, _ = x.shape
        H, Hkv, D = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, x: torch.Tensor, *, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None, layer: int,
                opts: AttnOptions) -> torch.Tensor:
        """x (B, T, d) -> (B, T, d)."""
        cfg = self.cfg
        B, T, _ = x.shape
        H, Hkv, D, G = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.group_size
        q, k, v = self.project(x, cos, sin)  # (B, H, T, D), (B, Hkv, T, D) ×2
        if cache is not None:
            k, v = cache.write(layer, k, v)  # (B, Hkv, S, D): everything this step attends to
        S = k.shape[2]
        if opts.tally is not None:
            opts.tally.matmul("qkv_proj", B * T, cfg.d_model, (H + 2 * Hkv) * D)
            opts.tally.matmul("attn_scores", T, D, S, batch=B * H)
            opts.tally.matmul("attn_v", T, S, D, batch=B * H)
            opts.tally.matmul("out_proj", B * T, H * D, cfg.d_model)
        if opts.impl == "eager":
            # Group the G query heads that share a K/V head so K and V are never copied.
            qg = q.reshape(B, Hkv, G * T, D)  # rows ordered (g, t)
            scores = qg @ k.transpose(-1, -2) / math.sqrt(D)  # (B, Hkv, G*T, S)
            raw_scores = scores
            if opts.mask is not None:
                scores = scores + opts.mask.to(scores.dtype).repeat(G, 1)  # the caller's (T, S) additive mask
            elif T > 1:
                scores = scores + causal_additive_mask(T, S, device=x.device, dtype=scores.dtype).repeat(G, 1)
            probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
            if opts.observer is not None:
                opts.observer.observe(layer, probs.view(B, H, T, S))
            y = (probs @ v).view(B, H, T, D)
            if opts.capture is not None:
                opts.capture.append({"q": q, "k": k, "v": v, "scores": raw_scores.view(B, H, T, S),
                                     "probs": probs.view(B, H, T, S)})
        else:  # "sdpa" (AttnOptions checked the name)
            y = _sdpa(q, k, v, opts)
            if opts.capture is not None:
                opts.capture.append({"k": k, "v": v})
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H * D))  # (B, T, d)


def _sdpa(q, k, v, opts: AttnOptions) -> torch.Tensor:
    """PyTorch's fused attention, causal over the last T of S keys (or the caller's mask); one backend if asked."""
    T, S, gqa = q.shape[2], k.shape[2], q.shape[1] != k.shape[1]
    kwargs = {"enable_gqa": True} if gqa else {}
    if opts.mask is not None:
        kwargs["attn_mask"] = opts.mask.to(q.dtype)
    elif T == S:
        kwargs["is_causal"] = T > 1
    elif T > 1:
        q_pos = torch.arange(S - T, S, device=q.device)[:, None]
        kwargs["attn_mask"] = torch.arange(S, device=q.device)[None, :] <= q_pos  # (T, S) True = attend
    if opts.sdpa_backend is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    from torch.nn.attention import sdpa_kernel

    from sim.model.device import sdpa_backend_enum

    with sdpa_kernel(sdpa_backend_enum(opts.sdpa_backend)):
        try:
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
        except RuntimeError:
            if not gqa:
                raise
            # Some fused kernels take no GQA: give them K/V expanded to every query head.
            G = q.shape[1] // k.shape[1]
            kwargs.pop("enable_gqa")
            return F.scaled_dot_product_attention(q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1),
                                                  **kwargs)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, *, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None, layer: int,
                opts: AttnOptions) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos=cos, sin=sin, cache=cache, layer=layer, opts=opts)
        if opts.tally is not None:
            B, T, d = x.shape
            opts.tally.matmul("mlp", B * T, d, 3 * self.mlp.down_proj.in_features)
        return x + self.mlp(self.post_attention_layernorm(x))


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
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:  # one parameter read twice: the embedding rows are the output projection
            self.lm_head.weight = self.model.embed_tokens.weight
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)  # (max_seq_len, D), fp32
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(
        self,
        idx: torch.Tensor,  # (B, T) token ids
        *,
        start_pos: int = 0,
        cache: KVCache | None = None,
        attn_impl: str = "eager",
        sdpa_backend: str | None = None,
        tally: FlopTally | None = None,
        last_only: bool = False,  # logits of the last position only: all that picking the next token needs
        attn_mask: torch.Tensor | None = None,  # (T, S) additive; replaces the causal mask
        capture: list | None = None,  # gets one dict per layer: k, v (and q, scores, probs when eager)
        observer: AttentionObserver | None = None,  # sees every layer's attention weights (eager only)
        positions: torch.Tensor | None = None,  # (T,) the positions as a tensor (a CUDA graph's step); else start_pos..
    ) -> torch.Tensor:
        """Logits (B, T, V), or (B, 1, V) when last_only."""
        B, T = idx.shape
        if start_pos + T > self.cfg.max_seq_len:
            raise Misuse(f"positions {start_pos}..{start_pos + T - 1} exceed the trained context of "
                         f"{self.cfg.max_seq_len} tokens")
        if observer is None and cache is not None:
            observer = cache.attention_observer
        opts = AttnOptions(impl=attn_impl, sdpa_backend=sdpa_backend, mask=attn_mask, capture=capture, tally=tally,
                           observer=observer)
        x = self.model.embed_tokens(idx)  # (B, T, d)
        if positions is None:
            cos, sin = self.rope_cos[start_pos : start_pos + T], self.rope_sin[start_pos : start_pos + T]  # (T, D)
        else:
            cos, sin = self.rope_cos.index_select(0, positions), self.rope_sin.index_select(0, positions)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        if cache is not None:
            cache.begin_step(start_pos, T, batch_size=B)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos=cos, sin=sin, cache=cache, layer=i, opts=opts)
        if cache is not None:
            cache.end_step()
        if last_only:
            x = x[:, -1:]  # (B, 1, d)
        if tally is not None:
            tally.matmul("lm_head", B * x.shape[1], self.cfg.d_model, self.cfg.vocab_size)
        return self.lm_head(self.model.norm(x))  # (B, T or 1, V)

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

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
    """Load a bundled preset ("mha", "gqa", "mqa") or a .safetensors path. Read-only use: eval mode, with the CPU
    fast paths of sim.model.fast applied (the same bits as this file's code)."""
    from safetensors.torch import load_file

    path = checkpoint_path(str(name_or_path)) if str(name_or_path) in PRESETS else Path(name_or_path)
    meta = read_checkpoint_metadata(path)
    if "config" not in meta:
        raise CheckpointError(f"checkpoint {path} has no 'config' in its metadata")
    try:
        cfg = ModelConfig.from_dict(json.loads(meta["config"]))
        state = load_file(str(path))
        # A file's tensors may start anywhere in it, and MKL picks its summation order by the data's alignment: each
        # is copied onto a 64-byte boundary, where a weight alone gives the same bits as inside sim.model.fast's
        # fused copy (so the fast paths equal this file's code bit for bit).
        state = {k: v if v.data_ptr() % ALIGN_BYTES == 0 else v.clone() for k, v in state.items()}
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}") from exc
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path} could not be read: {exc}") from exc
    from sim.model.fast import apply_fast_paths

    model = build_model(cfg, state, f"checkpoint {path}").to(device=device, dtype=dtype).eval().requires_grad_(False)
    return apply_fast_paths(model)


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
