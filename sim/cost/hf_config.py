"""A Hugging Face config.json, parsed as data (never run) into an ArchPreset.

The published presets (assets/presets/models.json) and a user's pasted or uploaded file go through the same
parser, so it is exercised on real files. Every missing, mistyped, out-of-range or contradictory field is
named in one Refusal; assumptions made (defaults filled in, head_dim vs hidden/heads) come back as notes. Both
are message values (kvmem.cfg.*), worded by sim/words in the page's language or, on the command line, English.
"""

from __future__ import annotations

import json
from typing import Any

from sim.cost.arch import FFN, GLOBAL, LIMITS, LOCAL, MAX_PATTERN, STATE, ArchPreset
from sim.cost.vllm_rules import NEMOTRON_H_MODEL_TYPES, NEMOTRON_H_SSM_DEFAULT
from sim.msg import Items, Msg
from sim.refusal import Refusal

MAX_CONFIG_CHARS = 200_000  # a real config.json is a few kB
MAX_NAME_CHARS = 80


def _say(which: str, /, **fields: object) -> Msg:
    return Msg(f"kvmem.cfg.{which}", **fields)


def _refuse(which: str, /, **fields: object) -> Refusal:
    return Refusal(f"kvmem.cfg.{which}", **fields)


def _loads(text: str) -> dict:
    if not isinstance(text, str):
        raise _refuse("not_text", type=type(text).__name__)
    if len(text) > MAX_CONFIG_CHARS:
        raise _refuse("too_long", n=f"{len(text):,}", max=f"{MAX_CONFIG_CHARS:,}")
    if not text.strip():
        raise _refuse("empty")
    try:
        data = json.loads(text)
    except RecursionError:
        raise _refuse("too_deep") from None
    except ValueError as exc:  # JSONDecodeError, and Python's limit on digits in an int
        raise _refuse("not_json", error=str(exc)[:200]) from None
    if not isinstance(data, dict):
        raise _refuse("not_object", type=type(data).__name__)
    return data


class _Reader:
    """Reads fields from a config dict, recording every problem instead of stopping at the first."""

    def __init__(self, data: dict, top: dict) -> None:
        self.data, self.top = data, top
        self.problems: list[Msg] = []
        self.notes: list[Msg] = []

    def problem(self, which: str, /, **fields: object) -> None:
        self.problems.append(_say(which, **fields))

    def note(self, which: str, /, **fields: object) -> None:
        self.notes.append(_say(which, **fields))

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
                self.problem("missing", name=name)
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:40] + "…"
            self.problem("not_int", key=key, shown=shown, type=type(value).__name__)
            return default
        if not lo <= value <= hi:
            shown = f"{value:,}" if abs(value) < 10**30 else _say("digits", n=len(str(abs(value))))
            self.problem("outside", key=key, shown=shown, lo=f"{lo:,}", hi=f"{hi:,}")
            return default
        return value

    def bool(self, key: str, default: bool) -> bool:
        k, value = self.raw(key)
        if k is None or value is None:
            return default
        if not isinstance(value, bool):
            self.problem("not_bool", key=key, value=repr(str(value)[:40]))
            return default
        return value

    def text(self, *keys: str) -> str:
        k, value = self.raw(*keys)
        if isinstance(value, list) and value and isinstance(value[0], str):
            value = value[0]
        return value if isinstance(value, str) else ""


NON_GATED_MLP = ("gpt2", "falcon", "gpt_neox", "gptj", "opt", "bloom", "gpt_bigcode", "starcoder2", "phi", "nemotron_h")
PURE_STATE_MODELS = ("mamba", "mamba2", "falcon_mamba")
NESTED_KEYS = ("text_config", "llm_config", "language_config")  # multimodal wrappers around the language model

# layer_types / layers_block_type entries -> a layer letter and, for local layers, what they keep
LAYER_TYPE_LETTERS: dict[str, tuple[str, str]] = {
    "full_attention": (GLOBAL, ""), "attention": (GLOBAL, ""), "global": (GLOBAL, ""),
    "sliding_attention": (LOCAL, "sliding"), "local": (LOCAL, "sliding"),
    "chunked_attention": (LOCAL, "chunked"),
    "linear_attention": (STATE, ""), "mamba": (STATE, ""),
}
# Nemotron-H's hybrid_override_pattern: M Mamba-2, * attention, - MLP, E MoE MLP
HYBRID_LETTERS = {"M": STATE, "*": GLOBAL, "-": FFN, "E": FFN}


def _shortest_cycle(pattern: str) -> str:
    """The shortest prefix whose repetition reproduces the pattern."""
    for n in range(1, len(pattern) + 1):
        if all(pattern[i] == pattern[i % n] for i in range(len(pattern))):
            return pattern[:n]
    return pattern


def _from_layer_types(r: _Reader, key: str, types, n_layers: int) -> tuple[str, str] | None:
    if not isinstance(types, list) or len(types) != n_layers:
        got = (_say("n_entries", n=len(types)) if isinstance(types, list)
               else _say("a_type", type=type(types).__name__))
        r.problem("types_list", key=key, n=n_layers, got=got)
        return None
    letters, local_kinds = [], set()
    for t in types:
        hit = LAYER_TYPE_LETTERS.get(t) if isinstance(t, str) else None
        if hit is None:
            r.problem("types_entry", key=key, entry=repr(str(t)[:40]), choices=", ".join(LAYER_TYPE_LETTERS))
            return None
        letters.append(hit[0])
        if hit[1]:
            local_kinds.add(hit[1])
    if len(local_kinds) > 1:
        r.problem("types_mixed", key=key)
        return None
    return "".join(letters), (local_kinds.pop() if local_kinds else "sliding")


def _layer_pattern(r: _Reader, model_type: str, n_layers: int) -> tuple[str, str, int]:
    """(layer letters for every layer, what local layers keep, their window) from whichever of the config's
    ways of saying it is present: layer_types, hybrid_override_pattern, attn_layer_period, full_attention_interval,
    attention_chunk_size + no_rope_layers, sliding_window + sliding_window_pattern / max_window_layers."""
    window = r.int("sliding_window", lo=0, hi=LIMITS["sliding_window"][1], default=0, required=False, null_ok=True) or 0
    if window and not r.bool("use_sliding_window", True):
        r.note("window_off", w=f"{window:,}")
        window = 0
    chunk = r.int("attention_chunk_size", lo=1, hi=LIMITS["sliding_window"][1], required=False, null_ok=True) or 0
    letters, local = None, "sliding"
    for key in ("layer_types", "layers_block_type"):
        k, types = r.raw(key)
        if k is not None and types is not None:
            got = _from_layer_types(r, key, types, n_layers)
            if got is None:
                return "", "sliding", 0
            letters, local = got
            break
    if letters is None:
        letters, local = _derived_pattern(r, model_type, n_layers, window, chunk)
    if letters is None:
        return "", "sliding", 0
    if LOCAL in letters:
        size = chunk if local == "chunked" else window
        if not size:
            field = "attention_chunk_size" if local == "chunked" else "sliding_window"
            r.problem("local_no_size", n=letters.count(LOCAL), spec=Msg(f"kvmem.r.spec.{local}"),
                      field=field)
            return "", "sliding", 0
        window = size
    pattern = _shortest_cycle(letters)
    return ("" if pattern in (LOCAL, GLOBAL) else pattern), local, (window if LOCAL in letters else 0)


def _derived_pattern(r: _Reader, model_type: str, n: int, window: int, chunk: int) -> tuple[str | None, str]:
    """The layer letters when the config has no layer_types list (transformers' own defaults for each family)."""
    key, hybrid = r.raw("hybrid_override_pattern")
    if key is not None and hybrid is not None:
        if not isinstance(hybrid, str) or len(hybrid) != n or set(hybrid) - set(HYBRID_LETTERS):
            r.problem("hybrid_pattern", n=n, got=repr(str(hybrid)[:40]))
            return None, "sliding"
        return "".join(HYBRID_LETTERS[c] for c in hybrid), "sliding"
    period = r.int("attn_layer_period", lo=1, hi=MAX_PATTERN, required=False, null_ok=True)
    if period is not None:  # Jamba: attention where i % period == offset, Mamba elsewhere
        offset = r.int("attn_layer_offset", lo=0, hi=period - 1, default=0, required=False, null_ok=True) or 0
        return "".join(GLOBAL if i % period == offset else STATE for i in range(n)), "sliding"
    interval = r.int("full_attention_interval", lo=1, hi=MAX_PATTERN, required=False, null_ok=True)
    if interval is not None:  # Qwen3-Next: every interval-th layer full attention, the rest linear attention
        return "".join(GLOBAL if (i + 1) % interval == 0 else STATE for i in range(n)), "sliding"
    if model_type in PURE_STATE_MODELS:
        return STATE * n, "sliding"
    if chunk:  # Llama 4: RoPE layers attend within chunks, the NoPE ones (every 4th by default) to everything
        k, rope = r.raw("no_rope_layers")
        if isinstance(rope, list) and rope:
            if len(rope) != n or any(v not in (0, 1) or isinstance(v, bool) for v in rope):
                r.problem("no_rope", n=n, got=repr(str(rope)[:40]))
                return None, "sliding"
            return "".join(LOCAL if v else GLOBAL for v in rope), "chunked"
        every = r.int("no_rope_layer_interval", lo=1, hi=MAX_PATTERN, default=4, required=False, null_ok=True) or 4
        return "".join(GLOBAL if (i + 1) % every == 0 else LOCAL for i in range(n)), "chunked"
    if not window:
        return GLOBAL * n, "sliding"
    every = r.int("sliding_window_pattern", lo=1, hi=MAX_PATTERN, required=False, null_ok=True)
    if every is None and model_type.startswith("gemma3"):
        every = 6
        r.note("gemma3")
    if every is not None:
        cycle = LOCAL * (every - 1) + GLOBAL if every > 1 else GLOBAL
        return "".join(cycle[i % len(cycle)] for i in range(n)), "sliding"
    if model_type == "gemma2":
        return "".join((LOCAL, GLOBAL)[i % 2] for i in range(n)), "sliding"  # transformers: even layers local
    if model_type.startswith(("qwen2", "qwen3")):
        first = r.int("max_window_layers", lo=0, hi=n, default=0, required=False, null_ok=True) or 0
        return "".join(GLOBAL if i < first else LOCAL for i in range(n)), "sliding"  # layers from max_window_layers
    return LOCAL * n, "sliding"


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def _dtype(r: _Reader, *keys: str, default: str) -> str:
    k, value = r.raw(*keys)
    if k is None or value is None or value == "auto":
        return default
    if not isinstance(value, str) or value not in TORCH_DTYPES:
        r.problem("dtype_choice", key=k, choices=", ".join(TORCH_DTYPES), got=repr(str(value)[:40]))
        return default
    return TORCH_DTYPES[value]


def _state(r: _Reader, model_type: str, d_model: int, n_state: int) -> dict:
    """What one linear-attention / Mamba layer keeps per request, and its mixer's weights, from the config's own
    fields (transformers' and vLLM's state shapes). {} when the model has no state layers."""
    if not n_state:
        return {}
    L = 1 << 24
    model_dtype = _dtype(r, "torch_dtype", "dtype", default="bf16")
    conv_dtype = _dtype(r, "mamba_cache_dtype", "mamba_conv_dtype", default=model_dtype)
    ssm_dtype = _dtype(r, "mamba_ssm_dtype", "mamba_ssm_cache_dtype", default=model_dtype)
    base = {"state_conv_dtype": conv_dtype, "state_ssm_dtype": ssm_dtype}
    if model_type in NEMOTRON_H_MODEL_TYPES and r.raw("mamba_ssm_cache_dtype")[1] in (None, "auto"):
        base["engine_ssm_dtype"] = NEMOTRON_H_SSM_DEFAULT  # vLLM's hook, when the config names no SSM dtype
    _, types = r.raw("layer_types")
    linear = (r.raw("linear_key_head_dim")[0] is not None or model_type.startswith(("qwen3_next", "qwen3_5"))
              or r.raw("full_attention_interval")[0] is not None
              or (isinstance(types, list) and "linear_attention" in types))
    if linear:
        # Gated DeltaNet (Qwen3-Next): conv over q, k and v; one dk × dv state matrix per value head
        nk = r.int("linear_num_key_heads", hi=L, required=False)
        nv = r.int("linear_num_value_heads", hi=L, required=False)
        dk = r.int("linear_key_head_dim", hi=L, required=False)
        dv = r.int("linear_value_head_dim", hi=L, required=False)
        kernel = r.int("linear_conv_kernel_dim", lo=2, hi=1024, default=4, required=False, null_ok=True)
        if None in (nk, nv, dk, dv):
            r.problem("linear_needs", n=n_state)
            return {}
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        params = d_model * (2 * key_dim + 2 * value_dim) + d_model * 2 * nv + conv_dim * kernel + value_dim * d_model
        return {**base, "state_kind": "gated_deltanet", "state_conv_shape": (conv_dim, kernel - 1),
                "state_ssm_shape": (nv, dk, dv), "state_params": params}
    heads_key, _ = r.raw("mamba_num_heads", "mamba_n_heads")
    if heads_key is not None or model_type == "mamba2":
        # Mamba-2 (Nemotron-H, Granite 4, Bamba): conv over x, B and C; one head_dim × d_state state per head
        heads = r.int("mamba_num_heads", "mamba_n_heads", "num_heads", hi=L, required=False)
        head_dim = r.int("mamba_head_dim", "mamba_d_head", "head_dim", hi=L, required=False)
        d_state = r.int("ssm_state_size", "mamba_d_state", "state_size", hi=L, required=False)
        groups = r.int("n_groups", "mamba_n_groups", default=1, required=False, null_ok=True, hi=L)
        kernel = r.int("conv_kernel", "mamba_d_conv", lo=2, hi=1024, default=4, required=False, null_ok=True)
        if None in (heads, head_dim, d_state):
            r.problem("mamba2_needs", n=n_state)
            return {}
        inner = heads * head_dim
        conv_dim = inner + 2 * groups * d_state
        params = d_model * (2 * inner + 2 * groups * d_state + heads) + conv_dim * kernel + inner * d_model
        return {**base, "state_kind": "mamba2", "state_conv_shape": (conv_dim, kernel - 1),
                "state_ssm_shape": (heads, head_dim, d_state), "state_params": params}
    # Mamba (Jamba, Falcon-Mamba): d_inner = expand · hidden channels, a d_state-wide state each
    d_state = r.int("mamba_d_state", "state_size", "ssm_state_size", hi=L, required=False)
    kernel = r.int("mamba_d_conv", "conv_kernel", lo=2, hi=1024, default=4, required=False, null_ok=True)
    expand = r.int("mamba_expand", "expand", hi=64, default=2, required=False, null_ok=True)
    if d_state is None:
        r.problem("mamba_needs", n=n_state)
        return {}
    inner = expand * d_model
    if model_type in ("mamba", "falcon_mamba"):
        inner = r.int("intermediate_size", hi=L, default=inner, required=False, null_ok=True) or inner
    dt_rank = r.int("mamba_dt_rank", "time_step_rank", hi=L, default=-(-d_model // 16), required=False, null_ok=True)
    params = (d_model * 2 * inner + inner * kernel + inner * (dt_rank + 2 * d_state) + dt_rank * inner
              + inner * d_state + inner * d_model)
    return {**base, "state_kind": "mamba", "state_conv_shape": (inner, kernel - 1), "state_ssm_shape": (inner, d_state),
            "state_params": params}


def _read_config(data: dict, name: str, source: str, unnamed: str) -> tuple[ArchPreset, list[Msg]]:
    top = data
    for key in NESTED_KEYS:
        if isinstance(data.get(key), dict):
            data = data[key]
            break
    r = _Reader(data, top)
    model_type = r.text("model_type").lower()
    L = LIMITS
    n_layers = r.int("num_hidden_layers", "n_layer", "num_layers", lo=L["n_layers"][0], hi=L["n_layers"][1])
    d_model = r.int("hidden_size", "n_embd", "d_model", lo=L["d_model"][0], hi=L["d_model"][1])
    pure_state = model_type in PURE_STATE_MODELS  # no attention at all: the head fields are not needed
    n_heads = r.int("num_attention_heads", "n_head", lo=L["n_heads"][0], hi=L["n_heads"][1],
                    default=1 if pure_state else None)
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
            r.problem("multi_query", key=kv_key, n=n_kv)
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
            r.problem("not_divisible", d=d_model, h=n_heads)
        else:
            head_dim = d_model // n_heads
    elif head_dim is not None and not kv_lora and d_model and n_heads and head_dim * n_heads != d_model:
        shown = f"{d_model // n_heads}" if d_model % n_heads == 0 else f"{d_model / n_heads:.2f}"
        r.note("head_dim", hd=head_dim, d=d_model, h=n_heads, shown=shown)

    d_ff = r.int("intermediate_size", "n_inner", "ffn_hidden_size", lo=1, hi=L["d_ff"][1],
                 required=False, null_ok=True)
    if d_ff is None and d_model:
        d_ff = 4 * d_model
        if model_type not in ("gpt2", "falcon"):
            r.note("no_ff", n=f"{d_ff:,}")
    max_pos = r.int("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                    lo=1, hi=L["max_position_embeddings"][1], required=False, null_ok=True)
    if max_pos is None:
        max_pos = 2048
        r.note("no_max_pos")

    if n_layers:
        letters, local, window = _layer_pattern(r, model_type, n_layers)
    else:
        letters, local, window = "", "sliding", 0
    kinds = letters or GLOBAL
    if window and window >= max_pos and LOCAL in kinds:
        r.note("window_big", field="attention_chunk_size" if local == "chunked" else "sliding_window",
               w=f"{window:,}", n=f"{max_pos:,}")
    n_state = sum(kinds[i % len(kinds)] == STATE for i in range(n_layers or 0))
    state = _state(r, model_type, d_model or 0, n_state) if n_layers and d_model else {}
    kv_shared = r.int("num_kv_shared_layers", lo=0, hi=max((n_layers or 1) - 1, 0), default=0, required=False,
                   null_ok=True) or 0
    index_dim = r.int("index_head_dim", lo=0, hi=L["index_head_dim"][1], default=0, required=False, null_ok=True) or 0
    index_heads = r.int("index_n_heads", lo=0, hi=L["index_n_heads"][1], default=0, required=False, null_ok=True) or 0
    if index_dim and not kv_lora:
        r.note("indexer", n=index_dim)
    model_dtype = _dtype(r, "torch_dtype", "dtype", default="bf16")

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
    moe_period, moe_offset = 1, 0
    step = r.int("interleave_moe_layer_step", "expert_layer_period", "decoder_sparse_step", lo=1, hi=MAX_PATTERN,
                 required=False, null_ok=True)
    if step is not None and experts > 1:
        moe_period = step
        if r.raw("expert_layer_period")[0] is not None:  # Jamba: MoE where i % period == offset
            moe_offset = r.int("expert_layer_offset", lo=0, hi=step - 1, default=0, required=False, null_ok=True) or 0
        elif r.raw("interleave_moe_layer_step")[0] is not None:  # Llama 4: layers step−1, 2·step−1, ...
            moe_offset = step - 1
    if model_type.startswith("llama4") and experts > 1 and not shared:
        shared = 1  # Llama 4's MoE layers always add one shared expert (the config has no field for it)
        r.note("llama4")
    if r.raw("shared_expert_intermediate_size")[0] is not None and experts > 1 and not shared:
        shared = 1  # Qwen-MoE style: one shared expert of that width
    shared_ff = r.int("shared_expert_intermediate_size", lo=0, hi=L["moe_d_ff"][1], default=0, required=False,
                      null_ok=True) or 0 if experts > 1 else 0
    tie = r.bool("tie_word_embeddings", True)

    if n_heads and n_kv:
        if n_kv > n_heads:
            r.problem("kv_more", kv=n_kv, h=n_heads)
        elif n_heads % n_kv:
            r.problem("kv_divisible", kv=n_kv, h=n_heads)
    if r.problems:
        raise _refuse("prefix", problems=Items(r.problems, sep="; "))
    name = name or r.text("_name_or_path") or r.text("architectures") or model_type or unnamed
    name = "".join(ch for ch in name if ch.isprintable())[:MAX_NAME_CHARS] or unnamed
    try:
        preset = ArchPreset(
            name=name, family=model_type or "custom", n_layers=n_layers, d_model=d_model, n_heads=n_heads,
            n_kv_heads=n_kv, head_dim=head_dim, d_ff=d_ff, vocab_size=vocab, max_position_embeddings=max_pos,
            source=source, num_experts_per_tok=per_tok, num_experts=experts, num_shared_experts=shared,
            moe_d_ff=moe_ff, first_dense_layers=first_dense if experts > 1 else 0, kv_lora_rank=kv_lora,
            qk_rope_head_dim=rope_dim, q_lora_rank=q_lora, v_head_dim=v_head if v_head != head_dim else 0,
            sliding_window=window, layer_pattern=letters, tie_word_embeddings=tie,
            mlp_gated=model_type not in NON_GATED_MLP, local_attention=local, kv_shared_layers=kv_shared,
            index_head_dim=index_dim, index_n_heads=index_heads, mlp_in_own_layers=FFN in letters,
            shared_expert_d_ff=shared_ff, moe_layer_period=moe_period, moe_layer_offset=moe_offset, model_dtype=model_dtype, **state,
        )
    except ValueError as exc:
        raise _refuse("prefix", problems=exc.msg if isinstance(exc, Refusal) else str(exc)) from None
    return preset, r.notes


def parse_hf_config_with_notes(text: str, name: str = "", source: str = "pasted config.json", *,
                               unnamed: str = "config.json") -> tuple[ArchPreset, list[Msg]]:
    """Parse a Hugging Face config.json (as text, data only). Returns the preset and notes (message values) on
    assumptions made (defaults filled in, head_dim vs hidden/heads, ...). Raises a Refusal naming every missing,
    mistyped, out-of-range or contradictory field. `unnamed`: the name when the file gives none (the page passes
    its own words for "unnamed model")."""
    return _read_config(_loads(text), name, source, unnamed)


def parse_hf_config(text: str) -> ArchPreset:
    return parse_hf_config_with_notes(text)[0]
