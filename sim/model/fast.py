"""The CPU fast paths, applied to a built model: the same arithmetic as sim.model.transformer in fewer, larger
operator calls (a decode step is a few hundred small calls, each with microseconds of dispatch).

    apply_fast_paths(model)   q, k and v from one fused matmul, gate and up from another; every projection one
                              `mm` against a stored (in, out) view of its weight; RMSNorm in 8 calls instead of
                              about 20; RoPE on the query and key heads at once
    remove_fast_paths(model)  back to the reference modules (training does this itself: see `train` below)

Each fast module is its reference class with one method replaced (the instance's class is swapped, so the
parameters, their names and the checkpoint stay as they are). The tests prove the result bit-identical to the
reference: the same BLAS calls on the same bits (sim.model.transformer.build_model aligns the weights so that a
weight alone and inside a fused copy gives the same sums) and elementwise operations that are exact rearrangements.

One option is not bit-identical, by design: `contiguous=True` multiplies by (in, out) *copies* of the weights. For
a single row against a 576-wide or wider weight (the real model's decode step) this CPU's BLAS runs about 1.5×
faster from that layout, but it sums in another order, so it is checked against transformers to a tolerance and by
the tokens (tests/test_real_model.py), not bit for bit. The real model's loader asks for it; the tiny ones do not.
The fused copies are derived from the weights when applied (and again after `.to()`); they do not follow later
in-place updates, which is why a model put back into training drops them.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from sim.model.transformer import MLP, Attention, Llama, RMSNorm, apply_rope


def _transposed(w: torch.Tensor, contiguous: bool) -> torch.Tensor:
    """(out, in) weight -> its (in, out) view, or an (in, out) copy."""
    w = w.detach()
    return w.t().contiguous() if contiguous else w.t()


class _Fast:
    """What every fast module shares: derive its copies once, again after .to(), drop them for training."""

    reference: type[nn.Module]
    contiguous: bool

    def derive(self) -> None:
        raise NotImplementedError

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        self.derive()  # .to() converted the weights, not the copies: derive them again
        return out

    def train(self, mode: bool = True):
        if mode:  # the copies would not follow the updates: train the reference module
            _restore(self)
            return self.train(mode)
        return super().train(mode)


class FastLinear(_Fast, nn.Linear):
    """nn.Linear (no bias) as one `mm` of the rows by the (in, out) weight: F.linear makes linear, t, matmul and
    mm of the same BLAS call."""

    reference = nn.Linear

    def derive(self) -> None:
        self.weight_t = _transposed(self.weight, self.contiguous)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(x.reshape(-1, x.shape[-1]), self.weight_t).view(*x.shape[:-1], -1)


class FastRMSNorm(_Fast, RMSNorm):
    """fp32 inference: Llama's arithmetic (mean = sum / dim) in 8 operator calls; otherwise the reference."""

    reference = RMSNorm

    def derive(self) -> None:
        # fp32 scalars as tensors: a Python number is converted to a tensor on every call
        self.dim_t = torch.tensor(float(self.weight.shape[0]), device="cpu")
        self.eps_t = torch.tensor(self.eps, device="cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad)):
            return super().forward(x)
        return x * torch.mul(x, x).sum(-1, keepdim=True).div_(self.dim_t).add_(self.eps_t).rsqrt_() * self.weight


class FastAttention(_Fast, Attention):
    """q, k, v from one matmul by the fused (q+k+v) weight; RoPE on the query and key heads in one go."""

    reference = Attention

    def derive(self) -> None:
        wqkv = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]).detach()  # ((H+2Hkv)·D, d)
        self.wqkv_t = wqkv.t().contiguous() if self.contiguous else wqkv.t()

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        B, T, d = x.shape
        H, Hkv, D = self.cfg.n_heads, self.cfg.n_kv_heads, self.cfg.head_dim
        qkv = torch.mm(x.reshape(B * T, d), self.wqkv_t).view(B, T, H + 2 * Hkv, D)
        qk = apply_rope(qkv.narrow(2, 0, H + Hkv), cos.unsqueeze(1), sin.unsqueeze(1))  # (B, T, H + Hkv, D)
        return (qk.narrow(2, 0, H).transpose(1, 2), qk.narrow(2, H, Hkv).transpose(1, 2),
                qkv.narrow(2, H + Hkv, Hkv).transpose(1, 2))


class FastMLP(_Fast, MLP):
    """gate and up from one matmul by the fused (gate+up) weight."""

    reference = MLP

    def derive(self) -> None:
        w = torch.cat([self.gate_proj.weight, self.up_proj.weight]).detach()  # (2·d_ff, d)
        self.w_gate_up_t = w.t().contiguous() if self.contiguous else w.t()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = torch.mm(x.reshape(-1, x.shape[-1]), self.w_gate_up_t).chunk(2, dim=-1)  # (N, d_ff) ×2
        return self.down_proj(F.silu(gate) * up).view(*x.shape[:-1], -1)


_FAST = {nn.Linear: FastLinear, RMSNorm: FastRMSNorm, Attention: FastAttention, MLP: FastMLP}
_DERIVED = ("weight_t", "dim_t", "eps_t", "wqkv_t", "w_gate_up_t", "contiguous")


def _restore(module: nn.Module) -> None:
    module.__class__ = module.reference
    for name in _DERIVED:
        module.__dict__.pop(name, None)


def apply_fast_paths(model: Llama, *, contiguous: bool = False) -> Llama:
    """Swap every module of `model` for its fast twin, in place (inference only; see the module docstring)."""
    for module in model.modules():
        if isinstance(module, _Fast):
            _restore(module)
        fast = _FAST.get(type(module))
        if fast is not None:
            module.__class__ = fast
            module.contiguous = contiguous
            module.derive()
    return model


def remove_fast_paths(model: Llama) -> Llama:
    """Every module back to the reference class, the derived copies dropped."""
    for module in model.modules():
        if isinstance(module, _Fast):
            _restore(module)
    return model


def has_fast_paths(model: Llama) -> bool:
    return any(isinstance(m, _Fast) for m in model.modules())
