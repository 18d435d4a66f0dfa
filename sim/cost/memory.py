"""How many bytes the KV cache takes, and what fits on a GPU.

    bytes = 2 · L · H_kv · d_h · p · B · S

2 for K and V, L layers, H_kv K/V heads of d_h values, p bytes per value, B concurrent requests,
S tokens of context each. The same count, generalised:

- MHA / GQA / MQA differ only in H_kv (n_heads, a divisor of it, 1).
- MLA (DeepSeek-V2/V3) caches one latent vector of d_c values plus one RoPE key of d_R values per
  token and layer, shared by K and V of every head: (d_c + d_R) · p, with no 2 and no H_kv.
- A sliding-window layer keeps at most W tokens: min(S, W) instead of S. Hybrid models mix
  such local layers with global ones (Gemma 2: 1:1, Gemma 3: 5:1).
- A chunked layer (Llama 4) keeps the current chunk of W tokens: (S − 1) mod W + 1 of them after S tokens
  (vLLM frees the blocks before the chunk's start; sim/cost/vllm_rules.py). Its peak while a request grows to S
  is min(S, W): what fitting a request needs (`peak=True`).
- A linear-attention or Mamba layer keeps no K/V at all but a constant state per request (a short
  convolution's last inputs plus a recurrent matrix), sized from the config; it does not grow with S.
- DeepSeek sparse attention adds an indexer key per token and layer (FP8 plus a 4-byte scale per 128).
- Cross-layer sharing: k adjacent layers of the same kind read one stored K/V (⌈L / k⌉ layers store);
  a config's num_kv_shared_layers makes its last layers store none.
- Integer formats store, per group of g values, a 2-byte scale and a 2-byte zero point.

Everything is exact integer arithmetic. Results are dataclasses; `to_frame()` gives tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sim.cost.arch import (
    GLOBAL,
    LOCAL,
    STATE,
    STATE_DTYPE_BYTES,
    STATE_NAMES,
    ArchPreset,
    attention_variants,
    estimate_num_params,
)
from sim.cost.vllm_rules import chunked_tokens_held
from sim.msg import Msg
from sim.refusal import Misuse, Refusal

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40


@dataclass(frozen=True)
class KvDtype:
    name: str
    bits: int
    grouped: bool  # integer formats: a scale and a zero point per group of values
    label: str


KV_DTYPES: dict[str, KvDtype] = {
    "fp32": KvDtype("fp32", 32, False, "FP32"),
    "fp16": KvDtype("fp16", 16, False, "FP16"),
    "bf16": KvDtype("bf16", 16, False, "BF16"),
    "fp8": KvDtype("fp8", 8, False, "FP8 (per-tensor scale)"),
    "int8": KvDtype("int8", 8, True, "INT8 + group scales"),
    "int4": KvDtype("int4", 4, True, "INT4 + group scales"),
    "int2": KvDtype("int2", 2, True, "INT2 + group scales"),
}
WEIGHT_DTYPE_BITS: dict[str, int] = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
GROUP_SIZES = (16, 32, 64, 128, 256)
SCALE_BYTES = 2  # an fp16 scale per group
ZERO_BYTES = 2  # an fp16 zero point per group (asymmetric quantization, as KIVI does)
MAX_TINY_BATCH = 32  # the real tiny model's cache, allocated on the KV memory page (sim/model/measure.py)
MAX_BATCH = 1 << 16
MAX_CONTEXT = 1 << 27
MAX_LAYERS_PER_KV = 8
MAX_GPUS = 64
INDEXER = "I"  # LayerGroup.kind of DeepSeek sparse attention's indexer keys
INDEX_QUANT_BLOCK = 128  # the indexer's keys: FP8 values plus one FP32 scale per 128
STATE_DTYPES = ("", *STATE_DTYPE_BYTES)  # "" = what the config says (its mamba_ssm_dtype, else its torch_dtype)


def _check_int(name: str, value, lo: int, hi: int) -> None:
    """A setting's value within lo..hi. Out of range is the user's (the `kv` command's --context, --batch, --tp and
    --max-num-batched-tokens take any whole number; a pasted config with fewer layers than the page's layers-per-K/V
    slider); not a whole number at all is the caller's bug (argparse and the page's controls hand over ints)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Misuse(f"{name} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise Refusal("cost.err.outside", name=name, value=value, lo=lo, hi=hi)


@dataclass(frozen=True)
class MemoryConfig:
    arch: ArchPreset
    batch: int = 1
    context: int = 4096
    kv_dtype: str = "fp16"
    group_size: int = 128  # only used by the integer formats
    layers_per_kv: int = 1  # cross-layer sharing: layers that read one stored K/V
    state_dtype: str = ""  # linear-attention / Mamba state; "" = the config's own

    def __post_init__(self) -> None:
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("context", self.context, 1, MAX_CONTEXT)
        # the dtypes are choices on every page and command (argparse's choices): another one is a caller's bug
        if self.kv_dtype not in KV_DTYPES:
            raise Misuse(f"kv_dtype must be one of {', '.join(KV_DTYPES)}, got {self.kv_dtype!r}")
        _check_int("group_size", self.group_size, 1, 4096)
        _check_int("layers_per_kv", self.layers_per_kv, 1, min(MAX_LAYERS_PER_KV, self.arch.n_layers))
        if self.state_dtype not in STATE_DTYPES:
            raise Misuse(f"state_dtype must be one of {', '.join(STATE_DTYPES[1:])} (or empty for the config's), "
                         f"got {self.state_dtype!r}")

    @property
    def dtype(self) -> KvDtype:
        return KV_DTYPES[self.kv_dtype]


# --- the count ---------------------------------------------------------------------------------


def vector_bytes(length: int, kv_dtype: str, group_size: int = 128) -> int:
    """Bytes to store one cached vector of `length` values (one head's K, or one MLA latent)."""
    d = KV_DTYPES[kv_dtype]
    data = -(-length * d.bits // 8)
    if not d.grouped:
        return data
    return data + -(-length // group_size) * (SCALE_BYTES + ZERO_BYTES)


def token_layer_bytes(arch: ArchPreset, kv_dtype: str = "fp16", group_size: int = 128) -> int:
    """Bytes one token adds to one layer's cache."""
    if arch.attention == "MLA":
        return vector_bytes(arch.kv_lora_rank + arch.qk_rope_head_dim, kv_dtype, group_size)
    return arch.n_kv_heads * (vector_bytes(arch.head_dim, kv_dtype, group_size)
                              + vector_bytes(arch.v_dim, kv_dtype, group_size))


def indexer_token_bytes(arch: ArchPreset) -> int:
    """Bytes one token adds to one layer's sparse-attention indexer: FP8 keys and an FP32 scale per block
    (DeepSeek-V3.2 keeps them so whatever the K/V dtype)."""
    d = arch.index_head_dim
    return d + 4 * -(-d // INDEX_QUANT_BLOCK) if d else 0


def state_dtypes(cfg: MemoryConfig, engine: bool = False) -> tuple[str, str]:
    """(conv state dtype, recurrent state dtype). A chosen state dtype (the page's, the CLI's
    --mamba-ssm-cache-dtype) sets the recurrent state only, as vLLM's flag does; the conv state stays the config's.
    engine=True: what vLLM picks when nothing is chosen (Nemotron-H: fp32; sim/cost/vllm_rules.py)."""
    a = cfg.arch
    default = (a.engine_ssm_dtype or a.state_ssm_dtype) if engine else a.state_ssm_dtype
    return (a.state_conv_dtype, cfg.state_dtype or default)


def state_layer_bytes(cfg: MemoryConfig, engine: bool = False) -> int:
    """Bytes one linear-attention / Mamba layer keeps per request (0 for a model without them); engine=True with
    the recurrent state in vLLM's default dtype."""
    a = cfg.arch
    if not a.num_state_layers:
        return 0
    conv_dt, ssm_dt = state_dtypes(cfg, engine)
    conv = math.prod(a.state_conv_shape) if a.state_conv_shape else 0
    return conv * STATE_DTYPE_BYTES[conv_dt] + math.prod(a.state_ssm_shape) * STATE_DTYPE_BYTES[ssm_dt]


@dataclass(frozen=True)
class LayerGroup:
    """Layers that keep the same thing: "G" every token, "L" the last `window` tokens (or the current chunk),
    "R" a constant state per request, "I" sparse-attention indexer keys for every token."""

    kind: str
    num_layers: int
    num_storing_layers: int  # after cross-layer sharing
    tokens_kept: int  # per request, at this context (0 for "R")
    bytes_per_token_per_layer: int  # 0 for "R"
    state_bytes_per_layer: int = 0  # "R" only: per request, whatever the context
    layer_ids: tuple[int, ...] = ()  # which layers (0-based)

    @property
    def bytes_per_request(self) -> int:
        return self.num_storing_layers * (self.tokens_kept * self.bytes_per_token_per_layer + self.state_bytes_per_layer)

    @property
    def grows_with_context(self) -> bool:
        return self.kind != STATE


def group_label(kind: str, arch: ArchPreset) -> str:
    """What a LayerGroup's kind means for this model, in a few words."""
    if kind == GLOBAL:
        return "MLA latent (full context)" if arch.attention == "MLA" else "full attention"
    if kind == LOCAL:
        return f"{'chunked' if arch.local_attention == 'chunked' else 'sliding'} {arch.window_word} " \
               f"W = {arch.sliding_window:,}"
    if kind == STATE:
        return f"{STATE_NAMES.get(arch.state_kind, 'recurrent')} state"
    return "sparse-attention indexer"


def _storing(ids: list[int], arch: ArchPreset, layers_per_kv: int) -> int:
    """Layers among ids that store K/V: none of the last kv_shared_layers, one in every layers_per_kv."""
    own = [i for i in ids if i < arch.n_layers - arch.kv_shared_layers]
    return -(-len(own) // layers_per_kv)


def layer_groups(cfg: MemoryConfig, context: int | None = None, peak: bool = False) -> tuple[LayerGroup, ...]:
    """peak=True: a chunked layer at its most while the request grew to S, min(S, W); else what it holds at S."""
    arch = cfg.arch
    S = cfg.context if context is None else context
    bpl = token_layer_bytes(arch, cfg.kv_dtype, cfg.group_size)
    kinds = arch.layer_kinds
    out = []
    for kind in (GLOBAL, LOCAL):
        ids = [i for i, k in enumerate(kinds) if k == kind]
        if ids:
            if kind == GLOBAL:
                kept = S
            elif arch.local_attention == "chunked" and not peak:
                kept = chunked_tokens_held(S, arch.sliding_window)
            else:
                kept = min(S, arch.sliding_window)
            out.append(LayerGroup(kind, len(ids), _storing(ids, arch, cfg.layers_per_kv), kept, bpl,
                                  layer_ids=tuple(ids)))
    if arch.index_head_dim:
        ids = [i for i, k in enumerate(kinds) if k in (GLOBAL, LOCAL)]
        out.append(LayerGroup(INDEXER, len(ids), _storing(ids, arch, cfg.layers_per_kv), S, indexer_token_bytes(arch),
                              layer_ids=tuple(ids)))
    ids = [i for i, k in enumerate(kinds) if k == STATE]
    if ids:
        out.append(LayerGroup(STATE, len(ids), len(ids), 0, 0, state_layer_bytes(cfg), tuple(ids)))
    return tuple(out)


def request_bytes(cfg: MemoryConfig, context: int | None = None, peak: bool = False) -> int:
    """KV bytes of one request at `context` tokens (cfg.context when None); peak=True: the most it held on the way
    (differs only for chunked attention)."""
    return sum(g.bytes_per_request for g in layer_groups(cfg, context, peak))


def first_context_over(cfg: MemoryConfig, limit_bytes: int, max_context: int) -> int | None:
    """The fewest tokens (1 to max_context) at which one request's cache holds more than `limit_bytes`; None when
    it never does by max_context. A request's peak bytes never shrink as its context grows (a sliding window only
    stops them growing), so a bisection finds it."""
    if request_bytes(cfg, max_context, peak=True) <= limit_bytes:
        return None
    lo, hi = 0, max_context  # request_bytes(hi) > limit_bytes; lo = 0 tokens hold nothing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if request_bytes(cfg, mid, peak=True) > limit_bytes else (mid, hi)
    return hi


@dataclass(frozen=True)
class FormulaStep:
    """One line of the formula: what it counts and the arithmetic with this view's numbers, as message values
    (sim/words/cost.py words them; the arithmetic's digits and operators read the same in every language)."""

    what: Msg
    math: Msg
    bytes: int | None  # None for a step that is not a byte count


@dataclass(frozen=True)
class KvMemory:
    config: MemoryConfig
    bytes_per_token_per_layer: int  # one attention layer's K/V (or MLA latent)
    bytes_per_token: int  # every storing layer, while the context fits in every window (indexer keys included)
    groups: tuple[LayerGroup, ...]
    per_request_bytes: int
    total_bytes: int
    steps: tuple[FormulaStep, ...]

    @property
    def state_bytes(self) -> int:
        """Per request: every linear-attention / Mamba layer's state (constant in the context)."""
        return sum(g.bytes_per_request for g in self.groups if g.kind == STATE)

    @property
    def avg_bytes_per_token(self) -> float:
        """Per request divided by the context: below bytes_per_token once windows are full."""
        return self.per_request_bytes / self.config.context


def kv_memory(cfg: MemoryConfig) -> KvMemory:
    groups = layer_groups(cfg)
    bpl = token_layer_bytes(cfg.arch, cfg.kv_dtype, cfg.group_size)
    bpt = sum(g.bytes_per_token_per_layer * g.num_storing_layers for g in groups)
    per_request = sum(g.bytes_per_request for g in groups)
    total = per_request * cfg.batch
    return KvMemory(cfg, bpl, bpt, groups, per_request, total, _steps(cfg, groups, bpl, bpt, per_request, total))


def _plus(parts: list) -> object:
    """Message values joined by ' + ' (one part is itself)."""
    out = parts[-1]
    for part in reversed(parts[:-1]):
        out = Msg("kvf.plus", a=part, b=out)
    return out


def _state_name(a: ArchPreset) -> Msg:
    return Msg(f"kvmem.r.state.{a.state_kind}")


def _steps(cfg: MemoryConfig, groups, bpl: int, bpt: int, per_request: int, total: int) -> tuple[FormulaStep, ...]:
    a, d, g = cfg.arch, cfg.dtype, cfg.group_size
    steps = []
    if d.grouped:
        steps.append(FormulaStep(Msg("kvf.what.value"), Msg("kvf.math.value_grouped", bits=d.bits, p=d.bits / 8,
                                                             scale=SCALE_BYTES, zero=ZERO_BYTES, g=g), None))
    else:
        steps.append(FormulaStep(Msg("kvf.what.value"), Msg("kvf.math.value", bits=d.bits, p=d.bits // 8), None))

    def vec(n: int) -> str:  # arithmetic only: the same in every language
        if not d.grouped:
            return f"{n} × {d.bits // 8}"
        return f"(⌈{n}·{d.bits}/8⌉ + ⌈{n}/{g}⌉·{SCALE_BYTES + ZERO_BYTES})"

    if a.attention == "MLA":
        n = a.kv_lora_rank + a.qk_rope_head_dim
        body = (f"(d_c + d_R) × p = ({a.kv_lora_rank} + {a.qk_rope_head_dim}) × {d.bits // 8}" if not d.grouped
                else f"{vec(n)}")
        steps.append(FormulaStep(Msg("kvf.what.token_layer_mla"),
                                 Msg("kvf.math.mla", expr=body, b=bpl, heads=a.n_heads), bpl))
    elif a.v_dim != a.head_dim:
        steps.append(FormulaStep(Msg("kvf.what.token_layer"), Msg(
            "kvf.math.k_and_v_dims", h=a.n_kv_heads, k=vec(a.head_dim), v=vec(a.v_dim), b=bpl), bpl))
    elif d.grouped:
        steps.append(FormulaStep(Msg("kvf.what.token_layer"), Msg(
            "kvf.math.k_and_v_grouped", vec=vec(a.head_dim), h=a.n_kv_heads,
            vb=vector_bytes(a.head_dim, cfg.kv_dtype, g), b=bpl), bpl))
    else:
        steps.append(FormulaStep(Msg("kvf.what.token_layer"), Msg(
            "kvf.math.k_and_v", h=a.n_kv_heads, d=a.head_dim, p=d.bits // 8, b=bpl), bpl))

    attn = [x for x in groups if x.kind in (GLOBAL, LOCAL)]
    storing = sum(x.num_storing_layers for x in attn)
    n_attn = a.num_attention_layers
    notes = []
    if a.kv_shared_layers:
        notes.append(Msg("kvf.math.reuse", n=a.kv_shared_layers))
    if cfg.layers_per_kv > 1:
        notes.append(Msg("kvf.math.adjacent", n=cfg.layers_per_kv))
    share = []
    if notes:
        share.append(Msg("kvf.math.storing", storing=storing, of=n_attn,
                         notes=notes[0] if len(notes) == 1 else Msg("kvf.semi", a=notes[0], b=notes[1])))
    if len(attn) == 2:
        gl, lo = attn
        layers: object = Msg("kvf.math.global_local", g=gl.num_storing_layers, l=lo.num_storing_layers)
    else:
        layers = storing
    skipped = a.n_layers - n_attn
    if a.num_state_layers:
        share.append(Msg("kvf.math.no_kv", n=a.num_state_layers, name=_state_name(a)))
    elif skipped:
        share.append(Msg("kvf.math.mlp_only", n=skipped))
    tail = "" if not share else Msg("kvf.colon", a=share[0]) if len(share) == 1 else \
        Msg("kvf.colon_semi", a=share[0], b=share[1])
    index = next((x for x in groups if x.kind == INDEXER), None)
    if index is not None:
        d_i = a.index_head_dim
        steps.append(FormulaStep(Msg("kvf.what.indexer"), Msg(
            "kvf.math.indexer", q=INDEX_QUANT_BLOCK, d=d_i, k=-(-d_i // INDEX_QUANT_BLOCK),
            b=index.bytes_per_token_per_layer), index.bytes_per_token_per_layer))
        body_msg = Msg("kvf.math.layers_indexer", b=bpl, layers=layers, ib=index.bytes_per_token_per_layer,
                       n=index.num_storing_layers)
    else:
        body_msg = Msg("kvf.math.layers", b=bpl, layers=layers)
    steps.append(FormulaStep(Msg("kvf.what.token_all"), Msg("kvf.math.token_all", body=body_msg, b=bpt,
                                                            readable=fmt_bytes(bpt), share=tail), bpt))

    state = next((x for x in groups if x.kind == STATE), None)
    if state is not None:
        steps.append(_state_step(cfg, state))

    S = cfg.context
    terms, values = [], []
    for x in groups:
        if x.kind == STATE:
            terms.append(Msg("kvf.math.term_state", n=x.num_storing_layers, b=x.state_bytes_per_layer))
            values.append(x.bytes_per_request)
            continue
        t = f"{S:,}" if x.kind in (GLOBAL, INDEXER) else _local_kept(a, S)
        terms.append(Msg("kvf.math.term", b=x.bytes_per_token_per_layer, n=x.num_storing_layers, t=t))
        values.append(x.bytes_per_request)
    readable = fmt_bytes(per_request)
    if len(terms) == 1:
        steps.append(FormulaStep(Msg("kvf.what.request", s=S), Msg("kvf.math.request", bpt=bpt, s=S, b=per_request,
                                                                   readable=readable), per_request))
    elif a.num_local_layers and not state and not index:
        parts = [f"{x.num_storing_layers} × {S:,}" if x.kind == GLOBAL else
                 f"{x.num_storing_layers} × {_local_kept(a, S)}" for x in groups]
        kept = " + ".join(f"{x.num_storing_layers * x.tokens_kept:,}" for x in groups)
        key = "kvf.what.request_chunk" if a.local_attention == "chunked" else "kvf.what.request_window"
        steps.append(FormulaStep(Msg(key, s=S, w=a.sliding_window), Msg(
            "kvf.math.request_local", bpl=bpl, parts=" + ".join(parts), kept=kept, b=per_request, readable=readable),
            per_request))
    else:
        steps.append(FormulaStep(Msg("kvf.what.request", s=S), Msg(
            "kvf.math.request_sum", terms=_plus(terms), values=" + ".join(f"{v:,}" for v in values), b=per_request,
            readable=readable), per_request))
    steps.append(FormulaStep(Msg("kvf.what.all", b=cfg.batch), Msg(
        "kvf.math.all", per=per_request, batch=cfg.batch, b=total, readable=fmt_bytes(total)), total))
    return tuple(steps)


def _local_kept(a: ArchPreset, S: int) -> str:
    """What a local layer keeps at S tokens, as the formula writes it (arithmetic only)."""
    if a.local_attention == "chunked":
        return f"(({S:,} − 1) % {a.sliding_window:,} + 1 = {chunked_tokens_held(S, a.sliding_window):,})"
    return f"min({S:,}, {a.sliding_window:,})"


def _state_step(cfg: MemoryConfig, state: LayerGroup) -> FormulaStep:
    a = cfg.arch
    conv_dt, ssm_dt = state_dtypes(cfg)
    conv = " × ".join(str(n) for n in a.state_conv_shape)
    ssm = " × ".join(str(n) for n in a.state_ssm_shape)
    ssm_part = Msg("kvf.math.recurrent", shape=ssm, b=STATE_DTYPE_BYTES[ssm_dt], dtype=ssm_dt)
    body = Msg("kvf.plus", a=Msg("kvf.math.conv", shape=conv, b=STATE_DTYPE_BYTES[conv_dt], dtype=conv_dt),
               b=ssm_part) if a.state_conv_shape else ssm_part
    return FormulaStep(
        Msg("kvf.what.state", name=_state_name(a)),
        Msg("kvf.math.state", body=body, per_layer=state.state_bytes_per_layer, n=state.num_storing_layers,
            b=state.bytes_per_request, readable=fmt_bytes(state.bytes_per_request)),
        state.bytes_per_request)


# --- grids and curves ----------------------------------------------------------------------


def half_octaves(lo_exp: int, hi_exp: int) -> tuple[int, ...]:
    """Integers near 2^(k/2) for k in [2·lo_exp, 2·hi_exp], without duplicates."""
    return tuple(sorted({round(2 ** (k / 2)) for k in range(2 * lo_exp, 2 * hi_exp + 1)}))


def grid_axes(cfg: MemoryConfig) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(batches, contexts) covering the chosen point and the model's trained context."""
    top_ctx = max(cfg.context, cfg.arch.max_position_embeddings)
    ctx_hi = min(max(math.ceil(math.log2(top_ctx)) + 1, 14), 27)
    batch_hi = min(max(math.ceil(math.log2(cfg.batch)) + 1, 10), 16)
    return half_octaves(0, batch_hi), half_octaves(8, ctx_hi)


@dataclass(frozen=True)
class KvGrid:
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    total_bytes: tuple[tuple[int, ...], ...]  # [batch index][context index]

    def to_frame(self, kv_budget_bytes: int | None = None):
        import pandas as pd

        rows = []
        for i, b in enumerate(self.batches):
            for j, s in enumerate(self.contexts):
                row = {"batch": b, "context": s, "kv_bytes": self.total_bytes[i][j],
                       "kv_gib": self.total_bytes[i][j] / GiB}
                if kv_budget_bytes is not None:
                    row["fits"] = self.total_bytes[i][j] <= kv_budget_bytes
                rows.append(row)
        return pd.DataFrame(rows)


def kv_grid(cfg: MemoryConfig, batches=None, contexts=None) -> KvGrid:
    if batches is None or contexts is None:
        batches, contexts = grid_axes(cfg)
    per_request = [request_bytes(cfg, s) for s in contexts]
    return KvGrid(tuple(batches), tuple(contexts), tuple(tuple(b * r for r in per_request) for b in batches))


@dataclass(frozen=True)
class VariantCurves:
    contexts: tuple[int, ...]
    batch: int
    name_to_arch: dict[str, ArchPreset]
    name_to_bytes: dict[str, tuple[int, ...]]  # total KV bytes at each context
    name_to_token_bytes: dict[str, int]  # per token, all layers

    def to_frame(self):
        import pandas as pd

        rows = [{"attention": n, "context": s, "batch": self.batch, "kv_bytes": v}
                for n, vs in self.name_to_bytes.items() for s, v in zip(self.contexts, vs, strict=True)]
        return pd.DataFrame(rows)


def variant_curves(cfg: MemoryConfig, contexts=None) -> VariantCurves:
    """Total KV bytes vs context for the same model as MHA, GQA, MQA and MLA (same layers,
    windows, dtype and batch)."""
    contexts = tuple(contexts if contexts is not None else grid_axes(cfg)[1])
    name_to_arch = attention_variants(cfg.arch)
    out, per_token = {}, {}
    for name, arch in name_to_arch.items():
        c = replace(cfg, arch=arch)
        out[name] = tuple(cfg.batch * request_bytes(c, s) for s in contexts)
        per_token[name] = kv_memory(replace(c, context=1)).bytes_per_token
    return VariantCurves(contexts, cfg.batch, name_to_arch, out, per_token)


def weight_bytes(arch: ArchPreset, weight_dtype: str) -> int:
    return -(-estimate_num_params(arch) * WEIGHT_DTYPE_BITS[weight_dtype] // 8)


# --- formatting -----------------------------------------------------------------------------


def _trim(v: float) -> str:
    s = f"{v:.1f}" if v >= 100 else f"{v:.2f}" if v >= 10 else f"{v:.3f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def fmt_bytes(n: int | float) -> str:
    """Binary units: 131072 -> '128 KiB', 4294967296 -> '4 GiB'."""
    sign = "−" if n < 0 else ""
    n = abs(n)
    if n < KiB:
        return f"{sign}{n:,.0f} B"
    for unit, size in (("YiB", 1 << 80), ("ZiB", 1 << 70), ("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", TiB),
                       ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            return f"{sign}{_trim(n / size)} {unit}"
    raise AssertionError("unreachable")


def fmt_decimal(n: int | float) -> str:
    """Decimal units, as the seeds (and disk vendors) write them: 1310720000 -> '1.31 GB'."""
    sign = "−" if n < 0 else ""
    n = abs(n)
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{sign}{_trim(n / size)} {unit}"
    return f"{sign}{n:,.0f} B"


def fmt_both(n: int) -> str:
    return f"{n:,} B = {fmt_decimal(n)} = {fmt_bytes(n)}"


# --- tables the KV memory page shows ----------------------------------------------------------


def variant_rows(curves: VariantCurves, kv_dtype: str, group_size: int) -> list[dict]:
    """One row per attention kind: what one token stores in one layer, and in all of them."""
    rows = []
    for name, a in curves.name_to_arch.items():
        kv_part = (f"({a.kv_lora_rank} + {a.qk_rope_head_dim}) latent" if name == "MLA"
                   else f"2 × {a.n_kv_heads} × {a.head_dim}" if a.v_dim == a.head_dim
                   else f"{a.n_kv_heads} × ({a.head_dim} + {a.v_dim})")
        rows.append({"Attention": name, "K/V heads": str(a.n_kv_heads) if name != "MLA" else "1 latent",
                     "Values per token per layer": kv_part,
                     "Bytes per token per layer": token_layer_bytes(a, kv_dtype, group_size),
                     "Per token, all layers": fmt_bytes(curves.name_to_token_bytes[name])})
    return rows


def presets_frame(presets: dict[str, ArchPreset]):
    """Every preset's shape, FP16 KV bytes per token and parameter counts (estimated and from its card)."""
    import pandas as pd

    rows = []
    for key, a in presets.items():
        per_token = kv_memory(MemoryConfig(a, context=1)).bytes_per_token
        rows.append({"Model": a.name, "Attention": a.attention, "Layers": a.describe_layers(),
                     "Query heads": a.n_heads, "K/V heads": a.n_kv_heads, "Head dim": a.head_dim,
                     "KV per token, FP16": fmt_bytes(per_token), "KV per token (B)": per_token,
                     "Parameters (estimate)": f"{estimate_num_params(a) / 1e9:.4g} B",
                     "Parameters (model card)": f"{a.params_card:g} B" if a.params_card else "",
                     "Trained context": a.max_position_embeddings, "Source": a.source, "Key": key})
    return pd.DataFrame(rows)


ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def measurement_rows(r) -> list[dict]:
    """The tiny model's measured cache (sim.model.measure.TinyCacheMeasurement) next to the formulas; each count
    named by a message value (sim.words.cost.measurement_frame words it)."""
    B, H, S, D = r.tensor_shape
    p = ELEMENT_BYTES[r.dtype]
    rows = [
        {"Count": Msg("kvmem.r.meas.measured", n=r.num_tensors), "Bytes": r.measured_bytes},
        {"Count": Msg("kvf.meas.formula", layers=r.num_tensors // 2, h=H, d=D, p=p, b=B, s=S), "Bytes": r.opcount_bytes},
        {"Count": Msg("kvmem.r.meas.calculator"), "Bytes": r.calculator_bytes},
    ]
    if r.cuda_allocated_delta is not None:
        rows.append({"Count": Msg("kvmem.r.meas.cuda"), "Bytes": r.cuda_allocated_delta})
        rows.append({"Count": Msg("kvmem.r.meas.rounded"), "Bytes": r.cuda_expected})
    return rows
