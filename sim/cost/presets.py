"""Architectures of real models, as data: the shape numbers that decide KV-cache and weight bytes.

The published presets live in assets/presets/models.json as the fields of each model's own
Hugging Face config.json (with its source). They go through `parse_hf_config`, the same parser
a user's pasted or uploaded config.json goes through, so the parser is exercised on real files.
The lab's tiny models come from `sim.model.transformer.PRESETS`.

    load_presets()            -> {key: ArchPreset}, published models then the tiny ones
    parse_hf_config(text)     -> ArchPreset (ValueError with a clear message for a bad file)
    estimate_num_params(p)    -> total weights (all experts), for the memory breakdown
"""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MODELS_JSON = ROOT / "assets" / "presets" / "models.json"
MODEL_PY = ROOT / "sim" / "model" / "transformer.py"

ATTENTION_KINDS = ("MHA", "GQA", "MQA", "MLA")
LOCAL, GLOBAL = "L", "G"  # letters of ArchPreset.layer_pattern

MAX_CONFIG_CHARS = 200_000  # a real config.json is a few kB
MAX_NAME_CHARS = 80

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
    "first_dense_layers": (0, 1024),
    "kv_lora_rank": (0, 1 << 16),
    "qk_rope_head_dim": (0, 1 << 14),
    "q_lora_rank": (0, 1 << 20),
}
MAX_PATTERN = 1024  # a layer pattern is at most one letter per layer


@dataclass(frozen=True)
class ArchPreset:
    """One model's architecture, as far as KV bytes, weight bytes and op counts need it.

    attention: "MHA" (n_kv_heads == n_heads), "GQA", "MQA" (n_kv_heads == 1) or "MLA" (a latent
    of kv_lora_rank plus a shared RoPE key of qk_rope_head_dim is cached instead of K and V);
    left "" it is derived. For MLA, head_dim is the query/key head size (nope + rope) and
    v_head_dim the value head size.
    layer_pattern: a cycle of letters applied from layer 0, "L" a sliding-window (local) layer,
    "G" a full (global) one; "" means every layer is local when sliding_window > 0, else global.
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
    first_dense_layers: int = 0  # MoE models whose first layers keep a dense MLP
    kv_lora_rank: int = 0  # MLA only
    qk_rope_head_dim: int = 0  # MLA only
    q_lora_rank: int = 0  # MLA only (0 = full-rank query projection)
    v_head_dim: int = 0  # 0 = head_dim
    sliding_window: int = 0  # 0 = none
    layer_pattern: str = ""
    tie_word_embeddings: bool = False
    mlp_gated: bool = True  # SwiGLU/GeGLU (3 matrices) vs a plain 2-matrix MLP
    key: str = ""
    hf_id: str = ""
    notes: str = ""
    params_card: float = 0.0  # total parameters the model card states, in billions (0 = unknown)

    def __post_init__(self) -> None:
        problems = []
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                problems.append(f"{name} must be a whole number, got {value!r}")
            elif not lo <= value <= hi:
                problems.append(f"{name}={value:,} is outside {lo:,}..{hi:,}")
        if problems:
            raise ValueError("; ".join(problems))
        if self.n_kv_heads > self.n_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} is more than n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}: "
                "each K/V head must serve the same number of query heads"
            )
        if self.num_experts_per_tok > max(self.num_experts, 1):
            raise ValueError(f"num_experts_per_tok={self.num_experts_per_tok} is more than num_experts={self.num_experts}")
        if self.first_dense_layers > self.n_layers:
            raise ValueError(f"first_dense_layers={self.first_dense_layers} is more than n_layers={self.n_layers}")
        if (self.kv_lora_rank > 0) != (self.qk_rope_head_dim > 0):
            raise ValueError(
                f"MLA needs both kv_lora_rank and qk_rope_head_dim, got {self.kv_lora_rank} and {self.qk_rope_head_dim}"
            )
        if self.kv_lora_rank and self.qk_rope_head_dim >= self.head_dim:
            raise ValueError(f"qk_rope_head_dim={self.qk_rope_head_dim} must be less than head_dim={self.head_dim}")
        if len(self.layer_pattern) > MAX_PATTERN or set(self.layer_pattern) - {LOCAL, GLOBAL}:
            raise ValueError(f"layer_pattern must be up to {MAX_PATTERN} letters L/G, got {self.layer_pattern[:40]!r}")
        if LOCAL in self.layer_pattern and not self.sliding_window:
            raise ValueError(f"layer_pattern {self.layer_pattern!r} has local layers but sliding_window is 0")
        derived = self.derived_attention()
        if not self.attention:
            object.__setattr__(self, "attention", derived)
        elif self.attention != derived:
            raise ValueError(
                f"attention={self.attention!r} contradicts the shape (n_heads={self.n_heads}, "
                f"n_kv_heads={self.n_kv_heads}, kv_lora_rank={self.kv_lora_rank}): that is {derived}"
            )

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
        return self.layer_kinds.count(LOCAL)

    @property
    def num_global_layers(self) -> int:
        return self.n_layers - self.num_local_layers

    def describe_layers(self) -> str:
        n_local = self.num_local_layers
        if not n_local:
            return f"{self.n_layers} full-attention layers"
        if n_local == self.n_layers:
            return f"{self.n_layers} layers, all with a {self.sliding_window:,}-token window"
        return (f"{n_local} local ({self.sliding_window:,}-token window) + {self.num_global_layers} global layers, "
                f"pattern {self.layer_pattern}")


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
    moe = (experts + p.num_shared_experts) * mats * p.d_model * moe_ff + p.d_model * p.num_experts
    return dense, moe


def _count(p: ArchPreset, experts: int) -> int:
    dense, moe = _mlp_params(p, experts)
    moe_layers = p.n_layers - p.first_dense_layers if p.is_moe else 0
    layers = p.n_layers * _attention_params(p) + (p.n_layers - moe_layers) * dense + moe_layers * moe
    embeddings = p.vocab_size * p.d_model * (1 if p.tie_word_embeddings else 2)
    return layers + embeddings


def estimate_num_params(p: ArchPreset) -> int:
    """Every weight the GPU must hold (all experts): embeddings, attention and MLP matrices.
    Norms, biases and learned position embeddings are left out (well under 1% for these models)."""
    return _count(p, p.num_experts if p.is_moe else 0)


def estimate_active_params(p: ArchPreset) -> int:
    """Weights one token passes through: the routed experts it uses, not all of them."""
    return _count(p, p.num_experts_per_tok if p.is_moe else 0)


# --- config.json parsing -------------------------------------------------------------------


def _loads(text: str) -> dict:
    if not isinstance(text, str):
        raise ValueError(f"config.json must be text, got {type(text).__name__}")
    if len(text) > MAX_CONFIG_CHARS:
        raise ValueError(f"config.json of {len(text):,} characters is longer than the {MAX_CONFIG_CHARS:,} allowed")
    if not text.strip():
        raise ValueError("config.json is empty")
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("config.json is nested too deeply to be a model config") from None
    except ValueError as exc:  # JSONDecodeError, and Python's limit on digits in an int
        raise ValueError(f"config.json is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config.json must be a JSON object {{...}}, got a {type(data).__name__}")
    return data


class _Reader:
    """Reads fields from a config dict, recording every problem instead of stopping at the first."""

    def __init__(self, data: dict, top: dict) -> None:
        self.data, self.top = data, top
        self.problems: list[str] = []
        self.notes: list[str] = []

    def raw(self, *keys: str) -> tuple[str | None, Any]:
        for src in (self.data, self.top):
            for k in keys:
                if k in src:
                    return k, src[k]
        return None, None

    def int(self, *keys: str, lo: int = 1, hi: int = 1 << 30, default: int | None = None,
            required: bool = True, null_ok: bool = False) -> int | None:
        key, value = self.raw(*keys)
        name = " / ".join(keys)
        if key is None or (value is None and null_ok):
            if default is None and required:
                self.problems.append(f"missing field {name}")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:40] + "…"
            self.problems.append(f"{key} must be a whole number, got {shown} ({type(value).__name__})")
            return default
        if not lo <= value <= hi:
            shown = f"{value:,}" if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
            self.problems.append(f"{key}={shown} is outside {lo:,}..{hi:,}")
            return default
        return value

    def bool(self, key: str, default: bool) -> bool:
        k, value = self.raw(key)
        if k is None or value is None:
            return default
        if not isinstance(value, bool):
            self.problems.append(f"{key} must be true or false, got {str(value)[:40]!r}")
            return default
        return value

    def text(self, *keys: str) -> str:
        k, value = self.raw(*keys)
        if isinstance(value, list) and value and isinstance(value[0], str):
            value = value[0]
        return value if isinstance(value, str) else ""


NON_GATED_MLP = ("gpt2", "falcon", "gpt_neox", "gptj", "opt", "bloom", "gpt_bigcode", "starcoder2", "phi")


def _layer_pattern(r: _Reader, model_type: str, n_layers: int, window: int) -> str:
    key, types = r.raw("layer_types")
    if key is not None and types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            r.problems.append(f"layer_types must be a list of {n_layers} entries (one per layer)")
            return ""
        letters = []
        for t in types:
            if t in ("sliding_attention", "chunked_attention", "local"):
                letters.append(LOCAL)
            elif t in ("full_attention", "global"):
                letters.append(GLOBAL)
            else:
                r.problems.append(f"layer_types has an entry {str(t)[:40]!r}: expected sliding_attention or full_attention")
                return ""
        pattern = "".join(letters)
        # keep the shortest cycle that reproduces the list
        for n in range(1, len(pattern) + 1):
            if all(pattern[i] == pattern[i % n] for i in range(len(pattern))):
                pattern = pattern[:n]
                break
        if LOCAL in pattern and not window:
            r.problems.append("layer_types has sliding_attention layers but sliding_window is missing or 0")
            return ""
        return "" if pattern == LOCAL else pattern
    if not window:
        return ""
    every = r.int("sliding_window_pattern", lo=1, hi=MAX_PATTERN, required=False, null_ok=True)
    if every is None and model_type.startswith("gemma3"):
        every = 6
        r.notes.append("sliding_window_pattern is absent; Gemma 3's default of 6 (five local layers, then one global) is used")
    if every is not None:
        return LOCAL * (every - 1) + GLOBAL if every > 1 else GLOBAL
    if model_type == "gemma2":
        return LOCAL + GLOBAL  # transformers' Gemma2: even layers local, odd layers global
    return ""


def _read_config(data: dict, name: str, source: str) -> tuple[ArchPreset, list[str]]:
    top = data
    inner = data.get("text_config")
    if isinstance(inner, dict):
        data = inner
    r = _Reader(data, top)
    model_type = r.text("model_type").lower()
    L = LIMITS
    n_layers = r.int("num_hidden_layers", "n_layer", "num_layers", lo=L["n_layers"][0], hi=L["n_layers"][1])
    d_model = r.int("hidden_size", "n_embd", "d_model", lo=L["d_model"][0], hi=L["d_model"][1])
    n_heads = r.int("num_attention_heads", "n_head", lo=L["n_heads"][0], hi=L["n_heads"][1])
    vocab = r.int("vocab_size", lo=L["vocab_size"][0], hi=L["vocab_size"][1])

    # K/V heads: an explicit count, else Falcon's multi_query flag, else one per query head (MHA)
    kv_key, _ = r.raw("num_key_value_heads", "num_kv_heads", "n_head_kv")
    multi_query = r.bool("multi_query", False)
    if model_type == "falcon" and not r.bool("new_decoder_architecture", False):
        n_kv = 1 if multi_query else n_heads  # the original Falcon: multi_query alone decides
    elif kv_key is not None:
        n_kv = r.int("num_key_value_heads", "num_kv_heads", "n_head_kv", lo=1, hi=L["n_kv_heads"][1],
                     default=n_heads, required=False, null_ok=True)
        if multi_query and n_kv != 1:
            r.problems.append(f"multi_query is true but {kv_key}={n_kv}: multi-query attention has exactly 1 K/V head")
    else:
        n_kv = 1 if multi_query else n_heads

    # MLA (DeepSeek V2/V3): a latent of kv_lora_rank plus a decoupled RoPE key
    kv_lora = r.int("kv_lora_rank", lo=0, hi=L["kv_lora_rank"][1], default=0, required=False, null_ok=True) or 0
    rope_dim = q_lora = v_head = 0
    head_dim = None
    if kv_lora:
        rope_dim = r.int("qk_rope_head_dim", lo=1, hi=L["qk_rope_head_dim"][1]) or 0
        nope = r.int("qk_nope_head_dim", lo=1, hi=L["head_dim"][1])
        v_head = r.int("v_head_dim", lo=1, hi=L["v_head_dim"][1]) or 0
        q_lora = r.int("q_lora_rank", lo=0, hi=L["q_lora_rank"][1], default=0, required=False, null_ok=True) or 0
        if nope is not None:
            head_dim = nope + rope_dim
    else:
        head_dim = r.int("head_dim", lo=1, hi=L["head_dim"][1], required=False, null_ok=True)
    if head_dim is None and not kv_lora and d_model and n_heads:
        if d_model % n_heads:
            r.problems.append(
                f"hidden_size={d_model} is not divisible by num_attention_heads={n_heads}, "
                "and there is no head_dim field to say the head size"
            )
        else:
            head_dim = d_model // n_heads
    elif head_dim is not None and not kv_lora and d_model and n_heads and head_dim * n_heads != d_model:
        shown = f"{d_model // n_heads}" if d_model % n_heads == 0 else f"{d_model / n_heads:.2f}"
        r.notes.append(
            f"head_dim={head_dim} is given and differs from hidden_size / num_attention_heads = "
            f"{d_model} / {n_heads} = {shown}; head_dim wins, as in transformers (it sets the K/V size)"
        )

    d_ff = r.int("intermediate_size", "n_inner", "ffn_hidden_size", lo=1, hi=L["d_ff"][1],
                 required=False, null_ok=True)
    if d_ff is None and d_model:
        d_ff = 4 * d_model
        if model_type not in ("gpt2", "falcon"):
            r.notes.append(f"no intermediate_size: assuming 4 × hidden_size = {d_ff:,}")
    max_pos = r.int("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                    lo=1, hi=L["max_position_embeddings"][1], required=False, null_ok=True)
    if max_pos is None:
        max_pos = 2048
        r.notes.append("no max_position_embeddings: assuming 2,048 tokens (the transformers default)")

    window = r.int("sliding_window", lo=0, hi=L["sliding_window"][1], default=0, required=False, null_ok=True) or 0
    if window and not r.bool("use_sliding_window", True):
        r.notes.append(f"sliding_window={window:,} is listed but use_sliding_window is false: every layer keeps the full context")
        window = 0
    pattern = _layer_pattern(r, model_type, n_layers or 0, window) if n_layers else ""
    if window and window >= max_pos and LOCAL in (pattern or LOCAL):
        r.notes.append(f"sliding_window={window:,} is not smaller than the context of {max_pos:,}: it never drops a token")

    experts = r.int("num_local_experts", "n_routed_experts", "num_experts", lo=1, hi=L["num_experts"][1],
                    default=1, required=False, null_ok=True) or 1
    per_tok = r.int("num_experts_per_tok", lo=1, hi=L["num_experts_per_tok"][1], default=1, required=False, null_ok=True) or 1
    if experts == 1:
        per_tok = 1
    shared = r.int("n_shared_experts", "num_shared_experts", lo=0, hi=L["num_shared_experts"][1],
                   default=0, required=False, null_ok=True) or 0
    moe_ff = r.int("moe_intermediate_size", lo=0, hi=L["moe_d_ff"][1], default=0, required=False, null_ok=True) or 0
    first_dense = r.int("first_k_dense_replace", lo=0, hi=L["first_dense_layers"][1], default=0,
                        required=False, null_ok=True) or 0
    tie = r.bool("tie_word_embeddings", True)

    if n_heads and n_kv:
        if n_kv > n_heads:
            r.problems.append(f"num_key_value_heads={n_kv} is more than num_attention_heads={n_heads}")
        elif n_heads % n_kv:
            r.problems.append(
                f"num_attention_heads={n_heads} is not divisible by num_key_value_heads={n_kv}: "
                "each K/V head must serve the same number of query heads"
            )
    if r.problems:
        raise ValueError("config.json: " + "; ".join(r.problems))
    name = name or r.text("_name_or_path") or r.text("architectures") or model_type or "pasted config"
    name = "".join(ch for ch in name if ch.isprintable())[:MAX_NAME_CHARS] or "pasted config"
    try:
        preset = ArchPreset(
            name=name, family=model_type or "custom", n_layers=n_layers, d_model=d_model, n_heads=n_heads,
            n_kv_heads=n_kv, head_dim=head_dim, d_ff=d_ff, vocab_size=vocab, max_position_embeddings=max_pos,
            source=source, num_experts_per_tok=per_tok, num_experts=experts, num_shared_experts=shared,
            moe_d_ff=moe_ff, first_dense_layers=first_dense if experts > 1 else 0, kv_lora_rank=kv_lora,
            qk_rope_head_dim=rope_dim, q_lora_rank=q_lora, v_head_dim=v_head if v_head != head_dim else 0,
            sliding_window=window, layer_pattern=pattern, tie_word_embeddings=tie,
            mlp_gated=model_type not in NON_GATED_MLP,
        )
    except ValueError as exc:
        raise ValueError(f"config.json: {exc}") from None
    return preset, r.notes


def parse_hf_config_with_notes(text: str, name: str = "", source: str = "pasted config.json") -> tuple[ArchPreset, list[str]]:
    """Parse a Hugging Face config.json (as text, data only). Returns the preset and notes on
    assumptions made (defaults filled in, head_dim vs hidden/heads, ...). Raises ValueError
    naming every missing, mistyped, out-of-range or contradictory field."""
    return _read_config(_loads(text), name, source)


def parse_hf_config(text: str) -> ArchPreset:
    return parse_hf_config_with_notes(text)[0]


# --- the tiny models -------------------------------------------------------------------------


def _tiny_configs_from_source() -> dict[str, dict[str, Any]]:
    """ModelConfig defaults and PRESETS overrides read from sim/model/transformer.py as literals, so that the
    KV memory page can list the tiny models without importing torch (~1.5 s)."""
    tree = ast.parse(MODEL_PY.read_text())
    defaults: dict[str, Any] = {}
    presets_node = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    defaults[item.target.id] = ast.literal_eval(item.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "PRESETS":
            presets_node = node.value
    if not defaults or not isinstance(presets_node, ast.Dict):
        raise ValueError("sim/model/transformer.py no longer has literal ModelConfig defaults and PRESETS")
    out = {}
    for k, v in zip(presets_node.keys, presets_node.values, strict=True):
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "ModelConfig" and not v.args):
            raise ValueError("a PRESETS entry in sim/model/transformer.py is not a literal ModelConfig(...) call")
        out[ast.literal_eval(k)] = {**defaults, **{kw.arg: ast.literal_eval(kw.value) for kw in v.keywords}}
    return out


def tiny_model_configs() -> dict[str, dict[str, Any]]:
    """The fields of sim.model.transformer.PRESETS, as dicts: from the module when it is already imported,
    else from its source (same values; a test checks that)."""
    if "sim.model.transformer" not in sys.modules:
        try:
            return _tiny_configs_from_source()
        except (ValueError, SyntaxError, OSError):
            pass
    from dataclasses import asdict

    from sim.model.transformer import PRESETS

    return {k: asdict(v) for k, v in PRESETS.items()}


def tiny_preset(name: str, cfg: dict[str, Any]) -> ArchPreset:
    n_heads, d_model = cfg["n_heads"], cfg["d_model"]
    return ArchPreset(
        name=f"Tiny {name.upper()} (this lab)", family="KV Cache Lab", n_layers=cfg["n_layers"], d_model=d_model,
        n_heads=n_heads, n_kv_heads=cfg["n_kv_heads"], head_dim=d_model // n_heads, d_ff=cfg["d_ff"],
        vocab_size=cfg["vocab_size"], max_position_embeddings=cfg["max_seq_len"],
        source=f"sim/model/transformer.py PRESETS[{name!r}] (the lab's own model, trained by sim/model/train.py)",
        key=f"tiny-{name}", notes="Runs live on this machine: the Measured tab allocates its cache for real.",
    )


@lru_cache(maxsize=1)
def load_presets() -> dict[str, ArchPreset]:
    """Every preset by key: the published models of assets/presets/models.json, then the tiny ones."""
    data = json.loads(MODELS_JSON.read_text())
    out: dict[str, ArchPreset] = {}
    for entry in data["models"]:
        preset, _ = parse_hf_config_with_notes(json.dumps(entry["config"]), entry["name"], entry["source"])
        out[entry["key"]] = replace(
            preset, family=entry["family"], key=entry["key"], hf_id=entry.get("hf_id", ""),
            notes=entry.get("notes", ""), params_card=float(entry.get("params_card_billion", 0.0)),
        )
    for name, cfg in tiny_model_configs().items():
        out[f"tiny-{name}"] = tiny_preset(name, cfg)
    return out


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
