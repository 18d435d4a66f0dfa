"""What one forward pass of a serving batch costs, in seconds.

An iteration's cost is the roofline (sim.cost.roofline) of everything it does in one pass: the prompt tokens it
prefills and the one token per decoding request, with the weights read once per pass. So a pass costs
max(FLOPs / peak FLOP/s, bytes / bandwidth) with
    FLOPs = 2·(matmul weights)·tokens − lm_head for prompt rows whose logits are not needed + attention
    bytes = weights + KV of every row (read by decodes, written by prefills) + activations.
`RooflineCost` derives its coefficients from sim.cost.roofline.decode_step / prefill_step and sim.cost.memory,
and equals them exactly on a pure decode or a pure prefill batch (tests check it). `LinearCost` is a
hand-checkable stand-in for tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from sim.cost.arch import GLOBAL, LOCAL, ArchPreset
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS, MemoryConfig, layer_groups
from sim.cost.roofline import COMPUTE_DTYPES, RooflineConfig, decode_step, hardware, prefill_step
from sim.refusal import Misuse


@dataclass(frozen=True)
class PassWork:
    """What one forward pass does, summed over its rows.

    tokens  : tokens fed through the model (prompt tokens + one per decoding request)
    lm_skip : prompt tokens whose logits are not needed (all but the last of each prompt)
    keys_g  : query·key pairs in one full-attention layer, summed over the fed tokens
    keys_l  : the same in one sliding-window layer
    kv_g    : cached tokens read or written in one full-attention layer
    kv_l    : the same in one sliding-window layer (at most the window per request)
    Fields may be numpy arrays (one pass per element) except `tokens` where weights depend on it.
    """

    tokens: int
    lm_skip: object = 0
    keys_g: object = 0
    keys_l: object = 0
    kv_g: object = 0
    kv_l: object = 0


def keys_upto(n, window: int):
    """Σ_{i=1..n} min(i, window): keys seen by n causal queries starting at position 1."""
    n = np.asarray(n, dtype=np.float64)
    w = float(window)
    return np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w)


def extend_work(num_new, context, window: int, logits_rows=None) -> PassWork:
    """`num_new` tokens appended after `context` cached ones, per request (arrays allowed for context).
    logits_rows: rows whose logits are needed (default all). Decode at context S is extend(1, S - 1);
    a prefill of p tokens is extend(p, 0, logits_rows=1)."""
    q = np.asarray(num_new, dtype=np.float64)
    s = np.asarray(context, dtype=np.float64)
    keys_g = q * s + q * (q + 1) / 2
    keys_l = keys_upto(s + q, window) - keys_upto(s, window)
    lm_skip = 0 if logits_rows is None else q - logits_rows
    return PassWork(int(num_new) if np.ndim(num_new) == 0 else int(np.sum(num_new)), lm_skip, keys_g, keys_l, s + q,
                np.minimum(s + q, window))


def _scalar(x):
    return float(x) if np.ndim(x) == 0 else x


class RooflineCost:
    """Seconds for one pass of a model on a GPU, from sim.cost.roofline's counts.

    Coefficients come from decode_step/prefill_step at tiny sizes and from sim.cost.memory's layer groups,
    so a pure decode batch at context S costs exactly decode_step(batch, S).time(hw).
    """

    def __init__(self, arch: ArchPreset, gpu_key: str, weight_dtype: str = "bf16", kv_dtype: str = "fp16",
                 compute_dtype: str = "bf16") -> None:
        # every caller names a GPU and dtypes its controls or DeploymentConfig bounded first
        gpus = load_gpus()
        if gpu_key not in gpus:
            raise Misuse(f"unknown GPU {gpu_key!r}; one of {', '.join(gpus)}")
        if weight_dtype not in WEIGHT_DTYPE_BITS:
            raise Misuse(f"weight dtype must be one of {', '.join(WEIGHT_DTYPE_BITS)}, got {weight_dtype!r}")
        if kv_dtype not in KV_DTYPES:
            raise Misuse(f"KV dtype must be one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
        if compute_dtype not in COMPUTE_DTYPES:
            raise Misuse(f"compute dtype must be one of {COMPUTE_DTYPES}, got {compute_dtype!r}")
        self.arch, self.gpu = arch, gpus[gpu_key]
        self.hw = hardware(self.gpu, compute_dtype)
        self.weight_dtype, self.kv_dtype = weight_dtype, kv_dtype
        self.name = f"{arch.name} on {self.gpu.name}"
        rc = RooflineConfig(arch, 1, 1, weight_dtype, kv_dtype)
        d1 = decode_step(rc)
        p1, p2 = prefill_step(rc), prefill_step(replace(rc, context=2))
        self.lin = d1.flops_linear  # FLOPs per fed token, lm_head included
        self.lm = 2 * p1.flops_linear - p2.flops_linear  # lm_head FLOPs per token
        self.act = d1.bytes_activations  # bytes per fed token
        groups = {g.kind: g for g in layer_groups(MemoryConfig(arch, 1, 1, kv_dtype))}
        self.kv_g = groups[GLOBAL].num_storing_layers * groups[GLOBAL].bytes_per_token_per_layer if GLOBAL in groups else 0
        self.kv_l = groups[LOCAL].num_storing_layers * groups[LOCAL].bytes_per_token_per_layer if LOCAL in groups else 0
        g, loc = arch.num_global_layers, arch.num_local_layers
        per_key = d1.flops_attention / (g + loc)  # at context 1 every layer sees one key
        self.attn_g, self.attn_l = per_key * g, per_key * loc
        self.window = arch.sliding_window if loc else 1 << 40
        self._dense_weights = None if arch.is_moe else d1.bytes_weights
        self._moe_weights: dict[int, float] = {}

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes one token takes in every layer that stores it (local layers counted too: a bound)."""
        return int(self.kv_g + self.kv_l)

    def weight_bytes_read(self, tokens: int) -> float:
        if self._dense_weights is not None:
            return self._dense_weights
        tokens = max(1, int(tokens))
        if tokens not in self._moe_weights:  # experts touched depend on how many tokens are routed
            self._moe_weights[tokens] = prefill_step(RooflineConfig(self.arch, 1, min(tokens, 1 << 20),
                                                                    self.weight_dtype, self.kv_dtype)).bytes_weights
        return self._moe_weights[tokens]

    def flops(self, w: PassWork):
        return self.lin * w.tokens - self.lm * np.asarray(w.lm_skip) + self.attn_g * np.asarray(w.keys_g) \
            + self.attn_l * np.asarray(w.keys_l)

    def bytes(self, w: PassWork):
        return self.weight_bytes_read(w.tokens) + self.kv_g * np.asarray(w.kv_g) + self.kv_l * np.asarray(w.kv_l) \
            + self.act * w.tokens

    def seconds(self, w: PassWork):
        if all(isinstance(x, int | float) for x in (w.lm_skip, w.keys_g, w.keys_l, w.kv_g, w.kv_l)):  # fast path
            flops = self.lin * w.tokens - self.lm * w.lm_skip + self.attn_g * w.keys_g + self.attn_l * w.keys_l
            nbytes = self.weight_bytes_read(w.tokens) + self.kv_g * w.kv_g + self.kv_l * w.kv_l + self.act * w.tokens
            return max(flops / self.hw.peak_flops, nbytes / self.hw.bandwidth)
        return _scalar(np.maximum(self.flops(w) / self.hw.peak_flops, self.bytes(w) / self.hw.bandwidth))

    def bound(self, w: PassWork) -> str:
        return "compute" if float(self.flops(w)) / self.hw.peak_flops >= float(self.bytes(w)) / self.hw.bandwidth \
            else "memory"

    def decode_seconds(self, batch: int, context: int) -> float:
        """A batch of `batch` requests each attending to `context` keys (decode_step's meaning)."""
        w = extend_work(1, context - 1, self.window)
        return self.seconds(PassWork(batch, 0, w.keys_g * batch, w.keys_l * batch, w.kv_g * batch, w.kv_l * batch))

    def prefill_seconds(self, batch: int, prompt: int) -> float:
        w = extend_work(prompt, 0, self.window, logits_rows=1)
        return self.seconds(PassWork(batch * prompt, w.lm_skip * batch, w.keys_g * batch, w.keys_l * batch,
                                 w.kv_g * batch, w.kv_l * batch))

    def verify_seconds(self, num_tokens: int, context: int, batch: int = 1) -> float:
        """`batch` requests, each scoring `num_tokens` tokens after `context` cached ones (logits for each)."""
        return self.seconds(self.verify_work(num_tokens, context, batch))

    def verify_work(self, num_tokens: int, context: int, batch: int = 1) -> PassWork:
        w = extend_work(num_tokens, context, self.window)
        return PassWork(batch * num_tokens, 0, w.keys_g * batch, w.keys_l * batch, w.kv_g * batch, w.kv_l * batch)


@dataclass(frozen=True)
class LinearCost:
    """A hand-checkable cost: base + per fed token + per cached token read or written (seconds)."""

    base_s: float = 1.0
    per_token_s: float = 0.0
    per_kv_token_s: float = 0.0
    window: int = 1 << 40
    name: str = "linear"

    def seconds(self, w: PassWork):
        return _scalar(self.base_s + self.per_token_s * w.tokens + self.per_kv_token_s * np.asarray(w.kv_g))
