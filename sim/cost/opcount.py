"""Closed-form FLOP and byte counts for one forward step of the tiny Llama-style model.

A "step" processes `num_new` tokens at positions [kv_len - num_new, kv_len) against `kv_len`
keys, and projects `num_logits` positions through the LM head. Naive decoding runs a step with
num_new == kv_len (the whole sequence, again); cached decoding runs num_new == 1.

FLOPs are matmul FLOPs, 2 per multiply-add. Norms, RoPE, softmax and SiLU are O(T·d) element-
wise work and are left out on purpose: they are < 1% here and no kernel counts them the same way.
The model counts the same quantities from the tensor shapes it actually executes; a test proves
both agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.refusal import Misuse

# The parts a step's FLOPs split into, in the order the pages stack them.
PARTS = ("qkv_proj", "attn_scores", "attn_v", "out_proj", "mlp", "lm_head")


class FlopTally:
    """Accumulates matmul FLOPs by part; the model calls `matmul` with real shapes."""

    def __init__(self) -> None:
        self.part_to_flops: dict[str, int] = dict.fromkeys(PARTS, 0)

    def matmul(self, part: str, m: int, k: int, n: int, batch: int = 1) -> None:
        # (batch × m×k) @ (k×n): m·n outputs, each k multiply-adds.
        self.part_to_flops[part] += 2 * batch * m * k * n

    @property
    def total(self) -> int:
        return sum(self.part_to_flops.values())


@dataclass(frozen=True)
class ShapeSpec:
    """The shape numbers the formulas need (any config with these attributes will do)."""

    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab_size: int
    mlp_matrices: int = 3  # 3 for a gated MLP (SwiGLU/GeGLU: gate, up, down), 2 for a plain one (GPT-2)


def _spec(cfg) -> ShapeSpec:
    return ShapeSpec(
        cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff, cfg.vocab_size,
        getattr(cfg, "mlp_matrices", 3),
    )


def step_flops(cfg, num_new: int, kv_len: int, num_logits: int = 1, batch: int = 1) -> dict[str, int]:
    """FLOPs of one forward step, by part (see module docstring)."""
    if not (1 <= num_new <= kv_len):
        raise Misuse(f"need 1 <= num_new <= kv_len, got num_new={num_new}, kv_len={kv_len}")
    s = _spec(cfg)
    t, n, L = num_new * batch, kv_len, s.n_layers
    q_dim, kv_dim = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    return {
        "qkv_proj": L * 2 * t * s.d_model * (q_dim + 2 * kv_dim),
        # every query head scores against all kv_len keys: the full T×N rectangle is computed
        # (masked entries included), which is what eager attention executes.
        "attn_scores": L * 2 * t * s.n_heads * n * s.head_dim,
        "attn_v": L * 2 * t * s.n_heads * n * s.head_dim,
        "out_proj": L * 2 * t * q_dim * s.d_model,
        "mlp": L * 2 * t * s.mlp_matrices * s.d_model * s.d_ff,
        "lm_head": 2 * num_logits * batch * s.d_model * s.vocab_size,
    }


def generation_flops(cfg, prompt_len: int, num_new_tokens: int, mode: str) -> list[dict[str, int]]:
    """Per-step FLOPs for a whole generation; step 0 is the prefill of the prompt.

    Step i (i >= 1) feeds token prompt_len + i - 1 and produces the token after it.
    """
    if prompt_len < 1 or num_new_tokens < 1:
        raise Misuse(f"need prompt_len >= 1 and num_new_tokens >= 1, got {prompt_len}, {num_new_tokens}")
    steps = [step_flops(cfg, prompt_len, prompt_len)]
    for i in range(1, num_new_tokens):
        kv_len = prompt_len + i
        num_new = kv_len if mode == "naive" else 1
        if mode not in ("naive", "cached"):
            raise Misuse(f"mode must be 'naive' or 'cached', got {mode!r}")
        steps.append(step_flops(cfg, num_new, kv_len))
    return steps


def param_counts(cfg) -> dict[str, int]:
    s = _spec(cfg)
    q_dim, kv_dim = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    per_layer = s.d_model * (q_dim + 2 * kv_dim) + q_dim * s.d_model + 3 * s.d_model * s.d_ff + 2 * s.d_model
    return {
        "embedding": s.vocab_size * s.d_model,
        "layers": s.n_layers * per_layer,
        "final_norm": s.d_model,
        "lm_head": s.vocab_size * s.d_model,
    }


def step_bytes(cfg, num_new: int, kv_len: int, bytes_per_elem: int, cached: bool, batch: int = 1) -> dict[str, int]:
    """Bytes a step must read at least: every weight once (the embedding only for the rows it
    gathers) and, when decoding from a cache, the K and V of the kv_len - num_new earlier tokens
    plus the new ones it just wrote."""
    s = _spec(cfg)
    pc = param_counts(cfg)
    weights = (pc["layers"] + pc["final_norm"] + pc["lm_head"] + num_new * batch * s.d_model) * bytes_per_elem
    kv = 2 * s.n_layers * s.n_kv_heads * s.head_dim * kv_len * batch * bytes_per_elem if cached else 0
    return {"weights": weights, "kv": kv}


def kv_cache_bytes(cfg, num_tokens: int, bytes_per_elem: int, batch: int = 1) -> int:
    """2 (K and V) · layers · kv_heads · head_dim · bytes_per_elem · tokens · batch."""
    s = _spec(cfg)
    return 2 * s.n_layers * s.n_kv_heads * s.head_dim * bytes_per_elem * num_tokens * batch


def generation_totals(cfg, prompt_len: int, num_new_tokens: int, mode: str) -> dict[str, int]:
    """Total FLOPs by part of a whole generation, in closed form (no loop over steps), so the
    analytic view can go to 128K tokens. Equal to summing generation_flops (a test checks).

    With P = prompt_len and n = P + num_new_tokens - 1 (the last sequence length fed):
      cached: prefill P tokens against P keys, then one token at each length k = P+1..n
      naive : every step feeds the whole sequence, k = P..n tokens against k keys
    """
    if mode not in ("naive", "cached"):
        raise Misuse(f"mode must be 'naive' or 'cached', got {mode!r}")
    if prompt_len < 1 or num_new_tokens < 1:
        raise Misuse(f"need prompt_len >= 1 and num_new_tokens >= 1, got {prompt_len}, {num_new_tokens}")
    s = _spec(cfg)
    P, n, L = prompt_len, prompt_len + num_new_tokens - 1, s.n_layers

    def sum_k(a, b):  # sum of k for k = a..b
        return (b * (b + 1) - (a - 1) * a) // 2 if b >= a else 0

    def sum_k2(a, b):  # sum of k^2 for k = a..b
        f = lambda m: m * (m + 1) * (2 * m + 1) // 6  # noqa: E731
        return f(b) - f(a - 1) if b >= a else 0

    if mode == "naive":
        tokens_fed, score_entries = sum_k(P, n), sum_k2(P, n)
    else:
        tokens_fed = P + (n - P)
        score_entries = P * P + sum_k(P + 1, n)
    q_dim, kv_dim = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    return {
        "qkv_proj": L * 2 * tokens_fed * s.d_model * (q_dim + 2 * kv_dim),
        "attn_scores": L * 2 * s.n_heads * s.head_dim * score_entries,
        "attn_v": L * 2 * s.n_heads * s.head_dim * score_entries,
        "out_proj": L * 2 * tokens_fed * q_dim * s.d_model,
        "mlp": L * 2 * tokens_fed * s.mlp_matrices * s.d_model * s.d_ff,
        "lm_head": 2 * num_new_tokens * s.d_model * s.vocab_size,
    }
