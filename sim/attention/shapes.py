"""The attention problem the kernels page times: its shape, FLOPs and bytes, and named presets.

The same attention — softmax(Q·Kᵀ/√d [+ causal mask]) · V — for every implementation in `IMPLS`;
`sim/attention/limits.py` bounds it per device, `sim/attention/timing.py` times it. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.refusal import Misuse

IMPLS = ("eager", "math", "flash", "efficient", "cudnn", "flex")
IMPL_LABELS = {
    "eager": "eager (matmul + mask + softmax + matmul)",
    "math": "SDPA · MATH",
    "flash": "SDPA · FLASH_ATTENTION",
    "efficient": "SDPA · EFFICIENT_ATTENTION",
    "cudnn": "SDPA · CUDNN_ATTENTION",
    "flex": "FlexAttention (compiled)",
}
IMPL_SHORT = {"eager": "eager", "math": "MATH", "flash": "FLASH", "efficient": "EFFICIENT", "cudnn": "cuDNN",
              "flex": "Flex"}
KINDS = ("prefill", "decode")
DTYPES = ("float32", "float16", "bfloat16")
HEAD_DIMS = (16, 32, 64, 128, 256)
ELEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# Max abs difference from SDPA-MATH that still counts as "the same attention" for random normal
# inputs: a few units in the last place of outputs whose magnitude is about 1.
TOLERANCE = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3.2e-2}

MAX_BATCH = 16
MAX_HEADS = 64
MAX_SEQ_LEN = 65_536


def dtypes_for(device_type: str) -> tuple[str, ...]:
    """fp32 on CPU (its fp16/bf16 eager paths are slow emulations); half precisions on CUDA."""
    return ("float32",) if device_type == "cpu" else ("float16", "bfloat16", "float32")


def nearest(value: int, allowed: Sequence[int]) -> int:
    """The allowed value closest to `value` (the first of two equally close): a URL may carry any
    in-range integer where a widget offers only a few."""
    return min(allowed, key=lambda v: abs(v - value))


@dataclass(frozen=True)
class AttentionShape:
    batch: int = 1
    heads: int = 4
    seq_len: int = 1024  # N: keys, and queries too when prefill-shaped
    head_dim: int = 32
    causal: bool = True
    kind: str = "prefill"  # "prefill": N queries against N keys; "decode": 1 query against N keys
    dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        # the page's controls are declared with these bounds and choices; a device's caps are sim/attention/limits.py's
        # Refusal
        if not 1 <= self.batch <= MAX_BATCH:
            raise Misuse(f"batch {self.batch} is outside 1..{MAX_BATCH}")
        if not 1 <= self.heads <= MAX_HEADS:
            raise Misuse(f"heads {self.heads} is outside 1..{MAX_HEADS}")
        if not 1 <= self.seq_len <= MAX_SEQ_LEN:
            raise Misuse(f"sequence length {self.seq_len} is outside 1..{MAX_SEQ_LEN:,}")
        if self.head_dim not in HEAD_DIMS:
            raise Misuse(f"head dim {self.head_dim} is not one of {HEAD_DIMS}")
        if self.kind not in KINDS:
            raise Misuse(f"kind {self.kind!r} is not one of {KINDS}")
        if self.dtype not in DTYPES:
            raise Misuse(f"dtype {self.dtype!r} is not one of {DTYPES}")

    @property
    def num_queries(self) -> int:
        return self.seq_len if self.kind == "prefill" else 1

    @property
    def num_keys(self) -> int:
        return self.seq_len

    @property
    def is_causal(self) -> bool:
        """The causal mask only matters for N queries; a decode query is the last position and sees every key."""
        return self.causal and self.kind == "prefill"

    @property
    def score_elems(self) -> int:
        """B·H·N_q·N_k: the entries of one score matrix that eager attention writes out."""
        return self.batch * self.heads * self.num_queries * self.num_keys

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES[self.dtype]

    @property
    def score_bytes(self) -> int:
        """Bytes of one B·H·N_q·N_k score (or probability) matrix in this dtype."""
        return self.score_elems * self.elem_bytes

    @property
    def output_bytes(self) -> int:
        """Bytes of the output O: B·H·N_q·d in this dtype."""
        return self.batch * self.heads * self.num_queries * self.head_dim * self.elem_bytes

    @property
    def qkvo_bytes(self) -> int:
        b, h, d = self.batch, self.heads, self.head_dim
        return b * h * d * (2 * self.num_queries + 2 * self.num_keys) * self.elem_bytes

    @property
    def flops(self) -> int:
        return attention_flops(self.batch, self.heads, self.num_queries, self.num_keys, self.head_dim, self.is_causal)

    def label(self) -> str:
        q = f"{self.num_queries:,}" if self.kind == "prefill" else "1"
        return (f"B={self.batch}, H={self.heads}, {q} queries × {self.num_keys:,} keys, d={self.head_dim}, "
                f"{'causal' if self.is_causal else 'no mask'}, {self.dtype}")

    def sweep_label(self) -> str:
        """The label with N left open: what a sweep over the sequence length keeps fixed."""
        q = "N queries" if self.kind == "prefill" else "1 query"
        return (f"B={self.batch}, H={self.heads}, {q} × N keys, d={self.head_dim}, "
                f"{'causal' if self.is_causal else 'no mask'}, {self.dtype}")


def attention_flops(batch: int, heads: int, num_queries: int, num_keys: int, head_dim: int, causal: bool) -> int:
    """4·B·H·N_q·N_k·d (2 for Q·Kᵀ, 2 for P·V, multiply-add = 2 FLOPs), halved when causal.

    Halving is the convention the FlashAttention papers use for causal prefill (the exact count
    of visible pairs is N(N+1)/2, a hair over half). Softmax and scaling are not counted."""
    flops = 4 * batch * heads * num_queries * num_keys * head_dim
    return flops // 2 if causal else flops


SHAPE_PRESETS: dict[str, AttentionShape] = {
    # The bundled model: 4 query heads of 32 dims, trained on 1,024-token windows.
    "tiny": AttentionShape(batch=1, heads=4, seq_len=1024, head_dim=32, causal=True),
    # A Llama-style head (d = 128); 8 heads keep it inside the CPU cap at 1,024 tokens.
    "llama": AttentionShape(batch=1, heads=8, seq_len=1024, head_dim=128, causal=True),
    # The sweep's base shape: one head, so N can reach 4,096 on CPU.
    "sweep": AttentionShape(batch=1, heads=1, seq_len=4096, head_dim=64, causal=True),
}
PRESET_LABELS = {
    "tiny": "Tiny model (4 heads × 32, N = 1,024)",
    "llama": "Llama-like head (8 heads × 128, N = 1,024)",
    "sweep": "Sweep base (1 head × 64, N up to the cap)",
}
