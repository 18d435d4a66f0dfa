"""The attention implementations timed on the kernels page, and which of them run here.

* `eager`: explicit matmul, additive causal mask, softmax, matmul (every N×N step written out),
* `F.scaled_dot_product_attention` forced onto each backend (MATH, FLASH_ATTENTION,
  EFFICIENT_ATTENTION, CUDNN_ATTENTION; the ones that refuse are reported with the reason, from
  `sim.model.device.probe_sdpa_backends`),
* FlexAttention: only its availability here; it is compiled and timed in a child process
  (`sim/attention/flex.py`).

Torch is imported inside the functions: this module imports without it.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from sim.attention.shapes import IMPLS, AttentionShape
from sim.msg import Msg
from sim.refusal import Misuse


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def make_inputs(shape: AttentionShape, device):
    """Seeded Q, K, V: the same numbers in every process for the same shape and seed."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(shape.seed)
    b, h, d = shape.batch, shape.heads, shape.head_dim
    q = torch.randn(b, h, shape.num_queries, d, generator=gen)  # (B, H, Nq, D)
    k = torch.randn(b, h, shape.num_keys, d, generator=gen)  # (B, H, Nk, D)
    v = torch.randn(b, h, shape.num_keys, d, generator=gen)  # (B, H, Nk, D)
    dt = torch_dtype(shape.dtype)
    return tuple(t.to(device=device, dtype=dt).contiguous() for t in (q, k, v))


def eager_attention(q, k, v, causal: bool):
    """What a model without a fused kernel does: every N_q×N_k intermediate is a real tensor."""
    import torch

    from sim.model.transformer import causal_additive_mask

    nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # (B, H, Nq, Nk)
    if causal:
        scores = scores + causal_additive_mask(nq, nk, device=q.device, dtype=scores.dtype)  # (Nq, Nk) broadcast
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (B, H, Nq, Nk)
    return probs @ v  # (B, H, Nq, D)


def sdpa_attention(q, k, v, causal: bool, backend: str):
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    from sim.model.device import sdpa_backend_enum

    with sdpa_kernel(sdpa_backend_enum(backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (B, H, Nq, D)


def kernel_fn(impl: str, shape: AttentionShape, q, k, v) -> Callable[[], object]:
    """A no-argument callable computing the attention with `impl` (not flex: that runs in a child)."""
    causal = shape.is_causal
    if impl == "eager":
        return lambda: eager_attention(q, k, v, causal)
    if impl in ("math", "flash", "efficient", "cudnn"):
        return lambda: sdpa_attention(q, k, v, causal, impl)
    raise Misuse(f"no in-process kernel {impl!r}; choose one of {IMPLS[:-1]}")


@dataclass(frozen=True)
class ImplStatus:
    impl: str
    runs: bool
    reason: str | Msg  # "" when it runs; the lab's own reason is a message value, torch's its own words


def flex_status(device) -> ImplStatus:
    """Whether FlexAttention can be compiled here (without compiling it). The reasons are message values
    (sim.words.attention.reason_text words them in the page language)."""
    import torch

    device = torch.device(device)
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError as exc:
        return ImplStatus("flex", False, Msg("kernels.why.flex_missing", error=f"{exc}"))
    if device.type == "cuda":
        try:
            import triton  # noqa: F401
        except ImportError:
            return ImplStatus("flex", False, Msg("kernels.why.flex_triton"))
        return ImplStatus("flex", True, "")
    if device.type != "cpu":
        return ImplStatus("flex", False, Msg("kernels.why.flex_device", device=device.type))
    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        return ImplStatus("flex", False, Msg("kernels.why.flex_cxx"))
    return ImplStatus("flex", True, "")


def impl_statuses(device, dtype: str) -> list[ImplStatus]:
    """Every implementation in IMPLS order: eager always runs; SDPA backends as probed; flex as found."""
    import torch

    from sim.model.device import probe_sdpa_backends

    device = torch.device(device)
    probes = {p.name: p for p in probe_sdpa_backends(device, torch_dtype(dtype))}
    out = [ImplStatus("eager", True, "")]
    out += [ImplStatus(n, probes[n].runs, probes[n].reason) for n in ("math", "flash", "efficient", "cudnn")]
    out.append(flex_status(device))
    return out

