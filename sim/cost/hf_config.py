"""A Hugging Face config.json, parsed as data (never run) into an ArchPreset.

The published presets (assets/presets/models.json) and a user's pasted or uploaded file go through the same
parser, so it is exercised on real files. Every missing, mistyped, out-of-range or contradictory field is
named in one ValueError; assumptions made (defaults filled in, head_dim vs hidden/heads) come back as notes.
"""

from __future__ import annotations

import json
from typing import Any

from sim.cost.arch import GLOBAL, LIMITS, LOCAL, MAX_PATTERN, ArchPreset

MAX_CONFIG_CHARS = 200_000  # a real config.json is a few kB
MAX_NAME_CHARS = 80


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
