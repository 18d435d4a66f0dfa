"""What the pages say about the model they run and what they measure on it, as message values (no torch at
import, no language here): the picked model named from its own config, and the real model's KV cache bytes
measured from its cache tensors after a short prefill, next to the formula's."""

from __future__ import annotations

from dataclasses import dataclass

from sim.msg import Msg

# A warm load of the real model (its converted copy read back, once per server), added to estimates of work that
# may be the server's first use of it; the target is at most 2 s, measured here at about 0.5 s.
WARM_LOAD_S = 0.5


def model_named(cfg, *, real: bool) -> Msg:
    """The model a page runs, named and shaped from its config: layers, query heads, K/V heads, tokens."""
    return Msg("rp.model.real" if real else "rp.model.tiny", name=cfg.name, layers=cfg.n_layers, heads=cfg.n_heads,
               kv_heads=cfg.n_kv_heads, kind=cfg.attention_kind, vocab=cfg.vocab_size)


def fixed_shape(cfg) -> Msg:
    """Why a page's MHA/GQA/MQA choice does not apply: the real model's attention shape is its own."""
    return Msg("rp.fixed_shape", name=cfg.name, kind=cfg.attention_kind, heads=cfg.n_heads, kv_heads=cfg.n_kv_heads,
               group=cfg.group_size)


# --- KV memory: the real model's cache, measured --------------------------------------------------------------

# The prefill the KV memory page measures after: a few tokens of model input (English, whatever the page language).
CACHE_PROBE_TEXT = "Keys and values, one row per token."


@dataclass(frozen=True, kw_only=True)
class RealCacheBytes:
    """The real model's cache after a prefill of `num_tokens` tokens: the bytes its K and V tensors hold as run
    (`run_dtype`, fp32 on the CPU) and cast to FP16, next to the formula's bytes for the same tokens."""

    name: str
    device: str
    num_tokens: int
    num_tensors: int  # K and V of every layer
    run_dtype: str  # "fp32"
    run_bytes: int  # Σ nbytes of the filled K and V tensors, as run
    fp16_bytes: int  # Σ nbytes of the same tensors cast to FP16
    formula_run_bytes: int  # sim.cost's formula for the preset, at run_dtype
    formula_fp16_bytes: int

    @property
    def agree(self) -> bool:
        return self.run_bytes == self.formula_run_bytes and self.fp16_bytes == self.formula_fp16_bytes

    def per_token(self, total: int) -> int:
        return total // self.num_tokens

    def rows(self) -> tuple[tuple[str, int, int, int, bool], ...]:
        """(what: "run" or "fp16", measured B, formula B, measured B per token, equal) for the page's table."""
        return tuple((what, got, want, self.per_token(got), got == want)
                     for what, got, want in (("run", self.run_bytes, self.formula_run_bytes),
                                             ("fp16", self.fp16_bytes, self.formula_fp16_bytes)))

    def verdict(self) -> Msg:
        """One sentence with every number, and whether measured and formula agree (computed)."""
        return Msg("rp.kv.agree" if self.agree else "rp.kv.differ", name=self.name, n=self.num_tokens,
                   tensors=self.num_tensors, run_dtype=self.run_dtype.upper(), run=self.run_bytes,
                   run_tok=self.per_token(self.run_bytes), fp16=self.fp16_bytes, fp16_tok=self.per_token(self.fp16_bytes),
                   formula_run=self.formula_run_bytes, formula_fp16=self.formula_fp16_bytes,
                   formula_fp16_tok=self.per_token(self.formula_fp16_bytes))


def measure_cache_bytes(model, ids: list[int], preset) -> RealCacheBytes:
    """Prefill `ids` into a cache of exactly that length on the model's device and dtype, then sum the nbytes of
    its K and V tensors (as run, and cast to FP16); the formula's bytes come from sim.cost for `preset` (the
    KV memory page's row for this model), so the two are independent counts of the same cache."""
    import torch

    from sim.cost.memory import MemoryConfig, kv_memory
    from sim.model.generate import prefill
    from sim.model.kvcache import ContiguousKVCache
    from sim.model.measure import TORCH_DTYPE_TO_KV

    assert ids, "a prefill needs at least one token"
    cfg = model.cfg
    run_dtype = TORCH_DTYPE_TO_KV[str(model.dtype).removeprefix("torch.")]
    cache = ContiguousKVCache(cfg, batch_size=1, max_seq_len=len(ids), device=model.device, dtype=model.dtype)
    prefill(model, torch.tensor([ids], device=model.device), cache, attn_impl="sdpa")  # (1, T)
    assert cache.num_tokens == len(ids)
    tensors = [t for layer in range(cfg.n_layers) for t in cache.filled(layer)]  # each (1, Hkv, T, D)
    run_bytes = sum(t.nbytes for t in tensors)
    fp16_bytes = sum(t.to(torch.float16).nbytes for t in tensors)

    def formula(kv_dtype: str) -> int:
        return kv_memory(MemoryConfig(preset, batch=1, context=len(ids), kv_dtype=kv_dtype)).per_request_bytes

    return RealCacheBytes(name=cfg.name, device=model.device.type, num_tokens=len(ids), num_tensors=len(tensors), run_dtype=run_dtype, run_bytes=run_bytes, fp16_bytes=fp16_bytes, formula_run_bytes=formula(run_dtype),
                          formula_fp16_bytes=formula("fp16"))
