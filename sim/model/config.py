"""The model's shape, and the lab's named presets: no torch here, so torch-free code (sim/cost, the KV memory
page) reads the same values the model is built from.

One `ModelConfig` describes any Llama-style decoder: the bundled tiny models (byte-level, 256 tokens) and a
real pretrained one read from a GGUF file (sim.model.gguf_load) alike.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sim.refusal import Refusal


@dataclass(frozen=True, kw_only=True)
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
    tie_word_embeddings: bool = False  # lm_head is the embedding matrix itself (one parameter, two uses)

    def __post_init__(self) -> None:
        # a GGUF file (its metadata) or a converted model's config.json a user points the lab at can break these
        for f in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq_len"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 1:
                raise Refusal("model.err.not_positive", field=f, got=repr(getattr(self, f)))
        if self.d_model % self.n_heads:
            raise Refusal("model.err.heads_split", d_model=self.d_model, n_heads=self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise Refusal("model.err.kv_heads_split", n_heads=self.n_heads, n_kv_heads=self.n_kv_heads)
        if self.head_dim % 2:
            raise Refusal("model.err.odd_head_dim", head_dim=self.head_dim)
        if not (self.rope_theta > 1 and self.norm_eps > 0):
            raise Refusal("model.err.rope_eps", rope_theta=repr(self.rope_theta), norm_eps=repr(self.norm_eps))

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

    def kv_bytes_per_token(self, bytes_per_value: int) -> int:
        """K and V of every layer for one token: n_layers × 2 × n_kv_heads × head_dim × bytes."""
        return self.n_layers * 2 * self.n_kv_heads * self.head_dim * bytes_per_value

    def num_params(self) -> int:
        """Parameters of the model this config builds (a tied lm_head counted once)."""
        d, hd = self.d_model, self.head_dim
        attn = d * self.n_heads * hd * 2 + d * self.n_kv_heads * hd * 2  # q, o; k, v
        layer = attn + 3 * d * self.d_ff + 2 * d
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.n_layers * layer + d + head

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise Refusal("model.err.unknown_fields", fields=", ".join(map(repr, sorted(unknown))))
        return cls(**d)


PRESETS: dict[str, ModelConfig] = {
    "mha": ModelConfig(name="mha", n_kv_heads=4),
    "gqa": ModelConfig(name="gqa", n_kv_heads=2),
    "mqa": ModelConfig(name="mqa", n_kv_heads=1),
}
