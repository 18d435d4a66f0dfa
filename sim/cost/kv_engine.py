"""What vLLM's paged allocator reserves for the cache that sim.cost.memory counts exactly.

The formula counts the bytes a request's cache holds. An engine hands out fixed-size blocks, and
vLLM's KV cache manager (v1, with its hybrid allocator; the release and the source of each rule are in
sim/cost/vllm_rules.py) sizes them like this:

- Every caching layer has a spec: full attention (one block per block_size tokens of the whole
  context), sliding window W (the last W − 1 computed tokens plus a step's newly scheduled ones, plus
  one block because the window need not start at a block boundary), chunked local attention (a chunk of
  W plus the new tokens), or Mamba / linear-attention state (one page per request).
- Models whose layers are all full attention form one group; one block id covers a block_size slice of
  every layer, so a block costs the sum of their pages (MLA latents and sparse-attention indexer keys
  may differ in size).
- Hybrid models need one page size for all groups. Layers of one spec are split into groups of equal
  size (the smallest spec's layer count, or the largest when it is less than 1.25× the smallest), the
  last group of a spec padded with empty slots; one block id then costs page × layers-per-group.
  Mamba state pages force the attention block size up to a multiple of 16 whose page holds the state,
  and the state is padded up to that page. --mamba-ssm-cache-dtype changes the recurrent state only; with
  none chosen vLLM keeps Nemotron-H's in fp32 (a version-dependent default).
- DeepSeek-V3.2's fp8 cache is fp8_ds_mla: 656 bytes a token and layer (FP8 latent, its scales, a BF16 RoPE
  key), not the 576 of a plain FP8 latent.
- Without the hybrid manager (--disable-hybrid-kv-cache-manager) sliding and chunked layers are
  reserved as full attention.

engine_allocation() returns the blocks and bytes a request of the chosen context needs at its peak with
max_model_len = that context: the figure behind vLLM's "Maximum concurrency for N tokens per request"
line. Activations, CUDA graphs and prefix-cache retention are not modelled (the formula leaves them out
too). vllm_command() writes the command line that serves the same view.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.arch import GLOBAL, LOCAL, ArchPreset
from sim.cost.memory import (
    INDEXER,
    MAX_CONTEXT,
    KvMemory,
    MemoryConfig,
    _check_int,
    indexer_token_bytes,
    layer_groups,
    state_layer_bytes,
    token_layer_bytes,
)
from sim.cost.vllm_rules import (
    BLOCK_SIZES,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    FLASHMLA_BLOCK,
    FP8_DS_MLA_SHAPE,
    FP8_DS_MLA_TOKEN_BYTES,
    INT8_KV_CACHE_DTYPE,
    KERNEL_ALIGN,
    SLIDING_EXTRA_BLOCKS,
    int8_token_layer_bytes,
)
from sim.msg import Msg
from sim.refusal import Misuse

DEFAULT_BATCHED_TOKENS = DEFAULT_MAX_NUM_BATCHED_TOKENS
MAX_TP = 64  # tensor-parallel ranks
SPECS = ("full", "sliding", "chunked", "state", "indexer")


@dataclass(frozen=True)
class KVEngineConfig:
    block_size: int = 16  # tokens per block, --block-size
    max_num_batched_tokens: int = DEFAULT_BATCHED_TOKENS  # tokens one step may schedule (chunked prefill)
    hybrid: bool = True  # the hybrid KV cache manager; False = --disable-hybrid-kv-cache-manager

    def __post_init__(self) -> None:
        # block size and hybrid are a choice and a toggle on the page and argparse choices / a flag in the commands
        if self.block_size not in BLOCK_SIZES:
            raise Misuse(f"block_size must be one of {', '.join(map(str, BLOCK_SIZES))}, got {self.block_size!r}")
        _check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_CONTEXT)
        if not isinstance(self.hybrid, bool):
            raise Misuse(f"hybrid must be true or false, got {self.hybrid!r}")


@dataclass(frozen=True)
class EngineGroup:
    """One vLLM KV cache group: layers of one spec that share a block table."""

    spec: str  # one of SPECS
    kind: str  # the sim.cost.memory.LayerGroup kind its layers belong to
    layer_ids: tuple[int, ...]
    slots: int  # layers one block id covers in this group (layer_ids plus padding)
    tokens_reserved: int  # tokens its blocks must hold for one request (0 for state)
    blocks_per_request: int


@dataclass(frozen=True)
class EngineAllocation:
    config: MemoryConfig
    engine: KVEngineConfig
    block_size: int  # attention tokens per block actually used (raised when Mamba pages need it)
    page_bytes: int  # one layer's page; hybrid models: the one page size every group uses
    block_bytes: int  # what one block id costs across every layer that shares it
    groups: tuple[EngineGroup, ...]
    hybrid: bool  # whether the hybrid manager's per-spec groups were used
    padding_layers: int  # empty slots added so that every group has the same number of layers
    state_padding_bytes: int  # per state layer: its page minus its real state
    notes: tuple[Msg, ...]  # worded by sim.words
    uniform_pages: tuple[tuple[str, int], ...] = ()  # one group of full layers: (kind, its pages' bytes per block)

    @property
    def blocks_per_request(self) -> int:
        return sum(g.blocks_per_request for g in self.groups)

    @property
    def per_request_bytes(self) -> int:
        return self.blocks_per_request * self.block_bytes

    @property
    def total_bytes(self) -> int:
        return self.per_request_bytes * self.config.batch

    def kind_bytes(self) -> dict[str, int]:
        """Per request, what each LayerGroup kind's layers reserve (their share of each block id)."""
        out: dict[str, int] = {}
        for g in self.groups:
            if self.hybrid:
                out[g.kind] = out.get(g.kind, 0) + g.blocks_per_request * self.block_bytes
        if not self.hybrid:  # one group; each kind takes its pages' share of a block
            (g,) = self.groups
            for kind, nbytes in self.uniform_pages:
                out[kind] = g.blocks_per_request * nbytes
        return out

    def num_blocks(self, kv_budget: int) -> int:
        """Blocks vLLM would carve out of kv_budget bytes."""
        return max(kv_budget, 0) // self.block_bytes

    def max_concurrency(self, kv_budget: int) -> float:
        """vLLM's 'Maximum concurrency for S tokens per request': blocks / blocks one request needs."""
        return self.num_blocks(kv_budget) / self.blocks_per_request

    def max_requests(self, kv_budget: int) -> int:
        return self.num_blocks(kv_budget) // self.blocks_per_request


def _note(key: str, **fields: object) -> Msg:
    return Msg(f"kvmem.eng.{key}", **fields)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tokens(spec: str, window: int, context: int, batched: int) -> int:
    """Tokens one request's blocks must hold in a layer of this spec at max_model_len = context."""
    if spec in ("full", "indexer"):
        return context
    if spec == "sliding":
        return min(window - 1 + batched, context)
    if spec == "chunked":
        return min(window + batched, context)
    return 0


def _blocks(spec: str, tokens: int, block_size: int) -> int:
    if spec == "state":
        return 1
    extra = SLIDING_EXTRA_BLOCKS if spec == "sliding" else 0  # the window may start mid-block
    return _cdiv(tokens, block_size) + extra


def _spec_layers(cfg: MemoryConfig, hybrid: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """(spec, LayerGroup kind, storing layer ids) for every kind of caching layer."""
    a = cfg.arch
    out = []
    for g in layer_groups(cfg):
        ids = g.layer_ids[:g.num_storing_layers]
        if g.kind == GLOBAL:
            out.append(("full", g.kind, ids))
        elif g.kind == LOCAL:
            out.append(((a.local_attention if hybrid else "full"), g.kind, ids))
        elif g.kind == INDEXER:
            out.append(("indexer", g.kind, ids))
        else:
            out.append(("state", g.kind, ids))
    return out


def uses_fp8_ds_mla(arch: ArchPreset, kv_dtype: str) -> bool:
    """DeepSeek-V3.2 (MLA with a sparse-attention indexer) asked for an fp8 cache: vLLM stores fp8_ds_mla."""
    return (kv_dtype == "fp8" and arch.attention == "MLA" and bool(arch.index_head_dim)
            and (arch.kv_lora_rank, arch.qk_rope_head_dim) == FP8_DS_MLA_SHAPE)


def engine_token_layer_bytes(arch: ArchPreset, kv_dtype: str, group_size: int = 128) -> int:
    """Bytes one token takes in one attention layer's page in vLLM: the formula's, but fp8_ds_mla's 656 and INT8's
    per-token-head FP32 scales in place of the lab's group scales and zero points."""
    if uses_fp8_ds_mla(arch, kv_dtype):
        return FP8_DS_MLA_TOKEN_BYTES
    if kv_dtype == "int8" and arch.attention != "MLA":
        return int8_token_layer_bytes(arch.n_kv_heads, arch.head_dim, arch.v_dim)
    return token_layer_bytes(arch, kv_dtype, group_size)


def engine_allocation(cfg: MemoryConfig, engine: KVEngineConfig = KVEngineConfig()) -> EngineAllocation:
    """The blocks one request needs; its notes (what vLLM does differently, or cannot) as message values."""
    a = cfg.arch
    S, T = cfg.context, engine.max_num_batched_tokens
    notes: list[Msg] = []
    hybrid = engine.hybrid
    if not hybrid and a.num_state_layers:
        notes.append(_note("no_disable"))
        hybrid = True
    if not hybrid and a.num_local_layers:
        notes.append(_note("as_full", n=a.num_local_layers, spec=Msg(f"kvmem.r.spec.{a.local_attention}"), s=S,
                           w=a.sliding_window, word=Msg(f"kvmem.r.word.{a.window_word}")))
    specs = _spec_layers(cfg, hybrid)
    bpl = engine_token_layer_bytes(a, cfg.kv_dtype, cfg.group_size)
    if uses_fp8_ds_mla(a, cfg.kv_dtype):
        notes.append(_note("fp8_ds_mla", b=FP8_DS_MLA_TOKEN_BYTES, plain=token_layer_bytes(a, "fp8")))
    if a.num_state_layers and a.engine_ssm_dtype and not cfg.state_dtype:
        notes.append(_note("ssm_default", dtype=a.engine_ssm_dtype, config=a.state_ssm_dtype))
    idx = indexer_token_bytes(a)
    bs = engine.block_size
    if a.attention == "MLA" and bs % FLASHMLA_BLOCK:
        notes.append(_note("flashmla", bs=bs))
    full_only = all(spec in ("full", "indexer") for spec, _, _ in specs)
    if full_only:
        # one group of every layer; a block id costs one page of each (pages may differ: MLA + indexer)
        per_kind = {kind: bs * len(ids) * (idx if spec == "indexer" else bpl) for spec, kind, ids in specs}
        ids = tuple(sorted({i for _, _, layer_ids in specs for i in layer_ids}))
        blocks = _cdiv(S, bs)
        group = EngineGroup("full", GLOBAL, ids, len(ids), blocks * bs, blocks)
        return EngineAllocation(cfg, engine, bs, bs * bpl, sum(per_kind.values()), (group,), False, 0, 0,
                                tuple(notes), tuple(per_kind.items()))

    state_bytes = state_layer_bytes(cfg, engine=True)
    has_attention = any(spec != "state" for spec, _, _ in specs)
    if state_bytes and has_attention:
        need = KERNEL_ALIGN * _cdiv(state_bytes, KERNEL_ALIGN * bpl)
        if bs < need:
            notes.append(_note("state_page", state=state_bytes, bs=bs, need=need, bpl=bpl))
            bs = need
        page = bs * bpl
    elif state_bytes:
        page = state_bytes
    else:
        page = bs * bpl
    if idx and any(spec == "indexer" for spec, _, _ in specs):
        notes.append(_note("indexer"))
    counts = [len(ids) for _, _, ids in specs]
    lo, hi = min(counts), max(counts)
    per_group = hi if len(specs) == 1 or hi < 1.25 * lo else lo
    groups, padding = [], 0
    for spec, kind, ids in specs:
        n_groups = _cdiv(len(ids), per_group)
        padding += n_groups * per_group - len(ids)
        window = a.sliding_window if spec in ("sliding", "chunked") else 0
        tokens = _tokens(spec, window, S, T)
        for i in range(n_groups):
            groups.append(EngineGroup(spec, kind, ids[i::n_groups], per_group, tokens, _blocks(spec, tokens, bs)))
    if padding:
        notes.append(_note(f"padding.{'one' if padding == 1 else 'other'}", n=padding, per=per_group))
    state_pad = page - state_bytes if state_bytes else 0
    return EngineAllocation(cfg, engine, bs, page, page * per_group, tuple(groups), True, padding, state_pad,
                            tuple(notes))


# --- the command line that serves this view -----------------------------------------------------

VLLM_KV_DTYPES = {"fp8": "fp8"}  # our dtype -> vLLM's --kv-cache-dtype (16-bit: "auto", the model's dtype)
TORCH_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def vllm_command(arch: ArchPreset, kv: KvMemory, alloc: EngineAllocation, utilization: float, num_gpus: int,
                 model_ref: str = "") -> tuple[str, tuple[Msg, ...]]:
    """(`vllm serve ...` with this view's settings, notes on what vLLM cannot do the same way)."""
    cfg = kv.config
    notes = []
    ref = model_ref or arch.hf_id or "path/to/model"
    args = [f"vllm serve {ref}"]
    if cfg.kv_dtype in VLLM_KV_DTYPES:
        args.append(f"--kv-cache-dtype {VLLM_KV_DTYPES[cfg.kv_dtype]}")
    elif cfg.kv_dtype == "int8" and arch.attention != "MLA":
        args.append(f"--kv-cache-dtype {INT8_KV_CACHE_DTYPE}")
        b = int8_token_layer_bytes(arch.n_kv_heads, arch.head_dim, arch.v_dim)
        notes.append(_note("int8", b=b, g=cfg.group_size, lab=token_layer_bytes(arch, "int8", cfg.group_size)))
    elif cfg.kv_dtype in TORCH_NAMES:
        args.append("--kv-cache-dtype auto")
        if cfg.kv_dtype != arch.model_dtype:
            args.append(f"--dtype {TORCH_NAMES[cfg.kv_dtype]}")  # auto stores K/V in the model's dtype
    else:
        args.append("--kv-cache-dtype fp8")
        notes.append(_note("no_dtype", dtype=cfg.kv_dtype.upper()))
    args += [f"--block-size {alloc.block_size}", f"--max-model-len {cfg.context}",
             f"--gpu-memory-utilization {utilization:g}", f"--max-num-seqs {cfg.batch}"]
    # stated always: its default depends on the GPU and the vLLM release (vllm_rules.default_batch_limits)
    args.append(f"--max-num-batched-tokens {alloc.engine.max_num_batched_tokens}")
    if num_gpus > 1:
        args.append(f"--tensor-parallel-size {num_gpus}")
    if not alloc.engine.hybrid and not arch.num_state_layers:
        args.append("--disable-hybrid-kv-cache-manager")
    if arch.num_state_layers and cfg.state_dtype and cfg.state_dtype != (arch.engine_ssm_dtype or arch.state_ssm_dtype):
        args.append(f"--mamba-ssm-cache-dtype {TORCH_NAMES[cfg.state_dtype]}")
    if cfg.layers_per_kv > 1:
        notes.append(_note("no_sharing", n=cfg.layers_per_kv))
    return " \\\n  ".join(args), tuple(notes)
