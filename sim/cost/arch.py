"""A model's architecture as data: the shape numbers that decide KV-cache bytes, weight bytes and op counts.

    ArchPreset                 one model's shape (validated against LIMITS on construction)
    estimate_num_params(p)     total weights (all experts), for the memory breakdown
    estimate_active_params(p)  weights one token passes through (MoE: the experts it uses)
    attention_variants(p)      the same model as MHA, GQA, MQA and MLA
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sim.msg import Items, Msg
from sim.refusal import Misuse, Refusal

ATTENTION_KINDS = ("MHA", "GQA", "MQA", "MLA")
# Letters of ArchPreset.layer_pattern, one per layer:
LOCAL, GLOBAL = "L", "G"  # attention keeping a window (sliding or chunked) / every token
STATE = "R"  # a linear-attention or Mamba layer: a constant recurrent state per request, no K/V
FFN = "F"  # a layer with an MLP and no token mixer (Nemotron-H's "-"): caches nothing
LAYER_LETTERS = (GLOBAL, LOCAL, STATE, FFN)
LOCAL_KINDS = ("sliding", "chunked")  # what a local layer keeps: the last W tokens, or the current chunk of W
STATE_KINDS = ("gated_deltanet", "mamba", "mamba2")
STATE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
MAX_STATE_VALUES = 1 << 34  # per layer and request; real models hold ~10^5..10^6
MAX_STATE_DIM = 1 << 24  # each dimension of a state layer's conv and SSM shapes

# Bounds on every number a config may set: generous for any real model, small enough that the
# byte arithmetic stays meaningful and a hostile file cannot ask for absurd work.
LIMITS: dict[str, tuple[int, int]] = {
    "n_layers": (1, 1024),
    "d_model": (1, 1 << 20),
    "n_heads": (1, 16384),
    "n_kv_heads": (1, 16384),
    "head_dim": (1, 65536),
    "v_head_dim": (0, 65536),
    "d_ff": (1, 1 << 24),
    "vocab_size": (1, 1 << 24),
    "max_position_embeddings": (1, 1 << 27),
    "sliding_window": (0, 1 << 27),
    "num_experts": (1, 8192),
    "num_experts_per_tok": (1, 8192),
    "num_shared_experts": (0, 8192),
    "moe_d_ff": (0, 1 << 24),
    "shared_expert_d_ff": (0, 1 << 24),
    "first_dense_layers": (0, 1024),
    "kv_lora_rank": (0, 1 << 16),
    "qk_rope_head_dim": (0, 1 << 14),
    "q_lora_rank": (0, 1 << 20),
    "kv_shared_layers": (0, 1023),
    "index_head_dim": (0, 65536),
    "index_n_heads": (0, 16384),
    "moe_layer_period": (1, 1024),
    "moe_layer_offset": (0, 1023),
    "state_params": (0, 1 << 40),
}
MAX_PATTERN = 1024  # a layer pattern is at most one letter per layer


@dataclass(frozen=True)
class ArchPreset:
    """One model's architecture, as far as KV bytes, weight bytes and op counts need it.

    attention: "MHA" (n_kv_heads == n_heads), "GQA", "MQA" (n_kv_heads == 1) or "MLA" (a latent
    of kv_lora_rank plus a shared RoPE key of qk_rope_head_dim is cached instead of K and V);
    left "" it is derived. For MLA, head_dim is the query/key head size (nope + rope) and
    v_head_dim the value head size.
    layer_pattern: a cycle of letters applied from layer 0: "G" full (global) attention, "L" local attention
    (a sliding window of sliding_window tokens, or with local_attention "chunked" Llama 4's chunks of that
    size), "R" a linear-attention / Mamba layer holding a constant state per request (state_conv_shape +
    state_ssm_shape values), "F" an MLP-only layer; "" means every layer is local when sliding_window > 0,
    else global.
    kv_shared_layers: the last k layers read the K/V of an earlier layer of their kind and store none
    (Gemma 3n's num_kv_shared_layers). index_head_dim: DeepSeek sparse attention's indexer, which caches one
    more key of that size per token in every attention layer.
    """

    name: str
    family: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    max_position_embeddings: int
    source: str
    attention: str = ""
    num_experts_per_tok: int = 1  # 1 for dense models
    num_experts: int = 1  # routed experts per MoE layer; 1 = dense
    num_shared_experts: int = 0
    moe_d_ff: int = 0  # expert MLP width; 0 = d_ff
    shared_expert_d_ff: int = 0  # shared expert MLP width; 0 = the experts' width
    first_dense_layers: int = 0  # MoE models whose first layers keep a dense MLP
    kv_lora_rank: int = 0  # MLA only
    qk_rope_head_dim: int = 0  # MLA only
    q_lora_rank: int = 0  # MLA only (0 = full-rank query projection)
    v_head_dim: int = 0  # 0 = head_dim
    sliding_window: int = 0  # 0 = none
    layer_pattern: str = ""
    local_attention: str = "sliding"  # what an "L" layer is: "sliding" or "chunked"
    state_kind: str = ""  # what an "R" layer is: one of STATE_KINDS
    state_conv_shape: tuple[int, ...] = ()  # per R layer and request: the short convolution's last inputs
    state_ssm_shape: tuple[int, ...] = ()  # per R layer and request: the recurrent state
    state_conv_dtype: str = "bf16"
    state_ssm_dtype: str = "bf16"
    engine_ssm_dtype: str = ""  # the recurrent state's dtype vLLM picks when none is chosen, where it differs
    state_params: int = 0  # weights of one R layer's token mixer (for the parameter estimate)
    kv_shared_layers: int = 0
    index_head_dim: int = 0  # DeepSeek sparse attention's indexer key (0 = none)
    index_n_heads: int = 0
    mlp_in_own_layers: bool = False  # Nemotron-H: mixers carry no MLP, the "F" layers do
    moe_layer_period: int = 1  # MoE models: layer i (past first_dense_layers) is MoE iff (i − offset) % period == 0
    moe_layer_offset: int = 0
    model_dtype: str = "bf16"  # the config's torch_dtype (what vLLM's --kv-cache-dtype auto stores)
    tie_word_embeddings: bool = False
    mlp_gated: bool = True  # SwiGLU/GeGLU (3 matrices) vs a plain 2-matrix MLP
    key: str = ""
    hf_id: str = ""
    notes: str = ""
    notes_ko: str = ""  # the same note in Korean (assets/presets/models.json "notes_ko")
    params_card: float = 0.0  # total parameters the model card states, in billions (0 = unknown)

    def __post_init__(self) -> None:
        # Who can fail which check: a pasted or uploaded config.json (sim/cost/hf_config.py, the KV memory page's
        # custom model and the `kv` / `prefix-hit` commands) reaches the Refusals; hf_config refuses the rest itself
        # (types, K/V heads, MLA's fields, layer letters, windows, shared layers, state kinds and dtypes) before it
        # builds a preset, and the bundled presets and this module's variants are the lab's own: a Misuse is a bug.
        not_ints = [f"{name} must be a whole number, got {getattr(self, name)!r}" for name in LIMITS
                    if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), int)]
        if not_ints:
            raise Misuse("; ".join(not_ints))
        outside = [Msg("cost.err.outside", name=name, value=getattr(self, name), lo=lo, hi=hi)
                   for name, (lo, hi) in LIMITS.items() if not lo <= getattr(self, name) <= hi]
        if outside:
            raise Refusal("cost.err.arch_limits", problems=Items(outside, sep="; "))
        if self.n_kv_heads > self.n_heads:
            raise Misuse(f"n_kv_heads={self.n_kv_heads} is more than n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise Misuse(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}: "
                "each K/V head must serve the same number of query heads"
            )
        if self.num_experts_per_tok > max(self.num_experts, 1):
            raise Refusal("cost.err.experts_per_tok", k=self.num_experts_per_tok, n=self.num_experts)
        if self.first_dense_layers > self.n_layers:
            raise Refusal("cost.err.first_dense", k=self.first_dense_layers, n=self.n_layers)
        if (self.kv_lora_rank > 0) != (self.qk_rope_head_dim > 0):
            raise Misuse(
                f"MLA needs both kv_lora_rank and qk_rope_head_dim, got {self.kv_lora_rank} and {self.qk_rope_head_dim}"
            )
        if self.kv_lora_rank and self.qk_rope_head_dim >= self.head_dim:
            raise Misuse(f"qk_rope_head_dim={self.qk_rope_head_dim} must be less than head_dim={self.head_dim}")
        if len(self.layer_pattern) > MAX_PATTERN or set(self.layer_pattern) - set(LAYER_LETTERS):
            raise Misuse(f"layer_pattern must be up to {MAX_PATTERN} letters G/L/R/F, got {self.layer_pattern[:40]!r}")
        if LOCAL in self.layer_pattern and not self.sliding_window:
            raise Misuse(f"layer_pattern {self.layer_pattern[:40]!r} has local layers but sliding_window is 0")
        if self.local_attention not in LOCAL_KINDS:
            raise Misuse(f"local_attention must be one of {', '.join(LOCAL_KINDS)}, got {self.local_attention!r}")
        self._check_state()
        kinds = self.layer_kinds
        if not any(k in (GLOBAL, LOCAL, STATE) for k in kinds):
            # a config.json whose every layer is an MLP (hybrid_override_pattern "----")
            raise Refusal("cost.err.no_mixer", pattern=repr(self.layer_pattern[:40]))
        if self.kv_shared_layers >= self.n_layers:
            raise Misuse(f"kv_shared_layers={self.kv_shared_layers} must be less than n_layers={self.n_layers}")
        if self.index_head_dim and not (GLOBAL in kinds or LOCAL in kinds):
            # a config.json with an indexer and only state or MLP layers
            raise Refusal("cost.err.index_no_attention", n=self.index_head_dim)
        derived = self.derived_attention()
        if not self.attention:
            object.__setattr__(self, "attention", derived)
        elif self.attention != derived:
            raise Misuse(
                f"attention={self.attention!r} contradicts the shape (n_heads={self.n_heads}, "
                f"n_kv_heads={self.n_kv_heads}, kv_lora_rank={self.kv_lora_rank}): that is {derived}"
            )

    def _check_state(self) -> None:
        has_state = STATE in self.layer_pattern
        if not has_state and not self.state_kind:
            return
        if has_state and self.state_kind not in STATE_KINDS:
            raise Misuse(f"layer_pattern has state layers (R) but state_kind is {self.state_kind!r}, "
                         f"expected one of {', '.join(STATE_KINDS)}")
        if not has_state:
            raise Misuse(f"state_kind={self.state_kind!r} but layer_pattern has no state layer (R)")
        for name in ("state_conv_shape", "state_ssm_shape"):
            shape = getattr(self, name)
            if not isinstance(shape, tuple) or len(shape) > 4 or not all(
                    isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_STATE_DIM for n in shape):
                # a config.json's head counts and sizes multiply into a dimension past the bound
                raise Refusal("cost.err.state_shape", name=name, max=MAX_STATE_DIM, shape=repr(shape)[:80])
        if not self.state_ssm_shape:
            raise Misuse("state layers need state_ssm_shape (the recurrent state's shape)")
        if self.state_values_per_layer > MAX_STATE_VALUES:
            raise Refusal("cost.err.state_values", n=self.state_values_per_layer, max=MAX_STATE_VALUES)
        if self.engine_ssm_dtype and self.engine_ssm_dtype not in STATE_DTYPE_BYTES:
            raise Misuse(f"engine_ssm_dtype must be one of {', '.join(STATE_DTYPE_BYTES)}, "
                         f"got {self.engine_ssm_dtype!r}")
        for name in ("state_conv_dtype", "state_ssm_dtype"):
            if getattr(self, name) not in STATE_DTYPE_BYTES:
                raise Misuse(f"{name} must be one of {', '.join(STATE_DTYPE_BYTES)}, got {getattr(self, name)!r}")

    @property
    def state_values_per_layer(self) -> int:
        return math.prod(self.state_conv_shape) * bool(self.state_conv_shape) + math.prod(self.state_ssm_shape)

    def derived_attention(self) -> str:
        if self.kv_lora_rank > 0:
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """"L" or "G" for every layer, in order."""
        if self.layer_pattern:
            cycle = self.layer_pattern
        else:
            cycle = LOCAL if self.sliding_window else GLOBAL
        return tuple(cycle[i % len(cycle)] for i in range(self.n_layers))

    @property
    def num_local_layers(self) -> int:
        """Attention layers that keep a window (sliding, or chunked)."""
        return self.layer_kinds.count(LOCAL)

    @property
    def num_global_layers(self) -> int:
        """Attention layers that keep every token."""
        return self.layer_kinds.count(GLOBAL)

    @property
    def num_state_layers(self) -> int:
        return self.layer_kinds.count(STATE)

    @property
    def num_attention_layers(self) -> int:
        return self.num_global_layers + self.num_local_layers

    @property
    def window_word(self) -> str:
        """'window' or 'chunk': what a local layer's sliding_window is."""
        return "chunk" if self.local_attention == "chunked" else "window"

    def describe_layers(self) -> str:
        n_local, n_global, n_state = self.num_local_layers, self.num_global_layers, self.num_state_layers
        if not n_local and not n_state and n_global == self.n_layers:
            return f"{self.n_layers} full-attention layers"
        if n_local == self.n_layers:
            return f"{self.n_layers} layers, all with a {self.sliding_window:,}-token {self.window_word}"
        parts = []
        if n_local:
            what = "chunked" if self.local_attention == "chunked" else "sliding"
            parts.append(f"{n_local} {what} ({self.sliding_window:,}-token {self.window_word})")
        if n_global:
            parts.append(f"{n_global} full-attention")
        if n_state:
            parts.append(f"{n_state} {STATE_NAMES.get(self.state_kind, 'state')}")
        text = " + ".join(parts) + " layers"
        if n_local + n_global + n_state < self.n_layers:
            text += f" (+ {self.n_layers - n_local - n_global - n_state} MLP-only)"
        if self.kv_shared_layers:
            text += f"; the last {self.kv_shared_layers} reuse earlier layers' K/V"
        if len(self.layer_pattern) <= 12 and n_local and n_global and not n_state:
            text += f", pattern {self.layer_pattern}"
        return text

    def is_moe_layer(self, i: int) -> bool:
        return (self.is_moe and i >= self.first_dense_layers
                and (i - self.moe_layer_offset) % self.moe_layer_period == 0)


STATE_NAMES = {"gated_deltanet": "linear-attention (Gated DeltaNet)", "mamba": "Mamba", "mamba2": "Mamba-2"}


# --- parameter counts ------------------------------------------------------------------------


def _attention_params(p: ArchPreset) -> int:
    d, h = p.d_model, p.n_heads
    if p.attention == "MLA":
        q = d * p.q_lora_rank + p.q_lora_rank * h * p.head_dim if p.q_lora_rank else d * h * p.head_dim
        nope = p.head_dim - p.qk_rope_head_dim
        kv = d * (p.kv_lora_rank + p.qk_rope_head_dim) + p.kv_lora_rank * h * (nope + p.v_dim)
        return q + kv + h * p.v_dim * d
    return d * h * p.head_dim + d * p.n_kv_heads * (p.head_dim + p.v_dim) + h * p.v_dim * d


def _mlp_params(p: ArchPreset, experts: int) -> tuple[int, int]:
    """(dense layer MLP, MoE layer MLP with `experts` routed experts) parameters."""
    mats = 3 if p.mlp_gated else 2
    dense = mats * p.d_model * p.d_ff
    moe_ff = p.moe_d_ff or p.d_ff
    shared_ff = p.shared_expert_d_ff or moe_ff
    moe = (experts * moe_ff + p.num_shared_experts * shared_ff) * mats * p.d_model + p.d_model * p.num_experts
    return dense, moe


def _indexer_params(p: ArchPreset) -> int:
    """DeepSeek sparse attention's lightning indexer, per attention layer: its query heads (from the query
    latent), its one key and the per-head weights."""
    if not p.index_head_dim:
        return 0
    q_in = p.q_lora_rank or p.d_model
    return q_in * p.index_n_heads * p.index_head_dim + p.d_model * p.index_head_dim + p.d_model * p.index_n_heads


def _count(p: ArchPreset, experts: int) -> int:
    dense, moe = _mlp_params(p, experts)
    attention = _attention_params(p) + _indexer_params(p)
    layers = 0
    for i, kind in enumerate(p.layer_kinds):
        layers += attention if kind in (GLOBAL, LOCAL) else p.state_params if kind == STATE else 0
        if kind == FFN or not p.mlp_in_own_layers:
            layers += moe if p.is_moe_layer(i) else dense
    embeddings = p.vocab_size * p.d_model * (1 if p.tie_word_embeddings else 2)
    return layers + embeddings


def estimate_num_params(p: ArchPreset) -> int:
    """Every weight the GPU must hold (all experts): embeddings, attention and MLP matrices.
    Norms, biases and learned position embeddings are left out (well under 1% for these models)."""
    return _count(p, p.num_experts if p.is_moe else 0)


def estimate_active_params(p: ArchPreset) -> int:
    """Weights one token passes through: the routed experts it uses, not all of them."""
    return _count(p, p.num_experts_per_tok if p.is_moe else 0)


# --- the same model with another attention kind ------------------------------------------


def with_kv_heads(p: ArchPreset, n_kv_heads: int) -> ArchPreset:
    """The same model with another number of K/V heads (and no latent): MHA, GQA or MQA."""
    return replace(p, n_kv_heads=n_kv_heads, kv_lora_rank=0, qk_rope_head_dim=0, q_lora_rank=0, attention="",
                   name=f"{p.name} as {'MHA' if n_kv_heads == p.n_heads else 'MQA' if n_kv_heads == 1 else 'GQA'}")


def with_mla(p: ArchPreset, kv_lora_rank: int | None = None, rope_dim: int | None = None) -> ArchPreset:
    """The same model with DeepSeek-V2-style MLA: by default a latent of 4 × head_dim and a RoPE key of
    head_dim / 2 (the ratios DeepSeek-V2 uses: 512 and 64 for head_dim 128)."""
    if p.attention == "MLA" and kv_lora_rank is None:
        return p
    base = p.head_dim - p.qk_rope_head_dim if p.attention == "MLA" else p.head_dim
    rope = rope_dim if rope_dim is not None else max(1, base // 2)
    rank = kv_lora_rank if kv_lora_rank is not None else 4 * base
    return replace(p, kv_lora_rank=rank, qk_rope_head_dim=rope, head_dim=base + rope, v_head_dim=p.v_dim,
                   n_kv_heads=p.n_heads, attention="", name=f"{p.name} as MLA")


def gqa_kv_heads(p: ArchPreset) -> int:
    """The model's own K/V head count when it uses GQA, else 8 (the common choice), or the nearest
    divisor of n_heads below it."""
    if p.attention == "GQA":
        return p.n_kv_heads
    for k in range(min(8, max(1, p.n_heads // 2)), 0, -1):
        if p.n_heads % k == 0 and 1 < k < p.n_heads:
            return k
    return 1


def attention_variants(p: ArchPreset) -> dict[str, ArchPreset]:
    """The same model as MHA, GQA, MQA and MLA (GQA left out when n_heads has no divisor between,
    MLA when its latent would be out of bounds)."""
    if p.attention == "MLA":
        base = replace(p, kv_lora_rank=0, qk_rope_head_dim=0, q_lora_rank=0, n_kv_heads=p.n_heads, attention="")
    else:
        base = p
    out = {"MHA": with_kv_heads(base, base.n_heads)}
    g = gqa_kv_heads(base)
    if 1 < g < base.n_heads:
        out["GQA"] = with_kv_heads(base, g)
    out["MQA"] = with_kv_heads(base, 1)
    try:
        out["MLA"] = p if p.attention == "MLA" else with_mla(p)
    except ValueError:
        pass  # a latent of 4 × head_dim would break the bounds (only for absurd head sizes)
    return out
