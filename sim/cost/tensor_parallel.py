"""The KV cache per GPU under tensor parallelism (vLLM's --tensor-parallel-size N).

Each rank runs a slice of every attention layer's heads and keeps the K/V of its own K/V heads:

    K/V heads per GPU = H_kv / N          when N divides H_kv
                      = 1                 when N is a multiple of H_kv (each head is copied to N / H_kv ranks)

so past N = H_kv adding GPUs stops shrinking the cache per GPU, and the copies cost memory. MLA caches one latent
per token that every head reads: each rank keeps it whole, whatever N. DeepSeek's sparse-attention indexer key
is one per token too (kept whole). A Mamba / linear-attention layer's state is split with its heads (counted
here as an even split, rounded up). The rule and its vLLM source: sim/cost/vllm_rules.py (kv_heads_per_rank).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.arch import GLOBAL, LOCAL, STATE
from sim.cost.kv_engine import MAX_TP
from sim.cost.memory import KvMemory, _check_int
from sim.cost.vllm_rules import kv_heads_per_rank
from sim.refusal import Refusal


@dataclass(frozen=True)
class TpSplit:
    tp: int
    kv_heads: int  # the model's K/V heads (1 latent for MLA)
    kv_heads_per_gpu: int
    copies: int  # ranks holding each K/V head (1: no copies)
    latent: bool  # MLA: the whole latent on every rank
    per_request_per_gpu_bytes: int
    per_gpu_bytes: int  # every request (the batch) on one GPU
    all_gpus_bytes: int  # summed over the N GPUs (copies included)

    @property
    def replicated(self) -> bool:
        return self.copies > 1 or (self.latent and self.tp > 1)


def check_tp(n_kv_heads: int, tp: int, mla: bool) -> None:
    """vLLM needs N to divide the K/V heads or be a multiple of them (MLA: any N)."""
    _check_int("tp", tp, 1, MAX_TP)
    if not mla and n_kv_heads % tp and tp % n_kv_heads:
        raise Refusal("cost.err.tp_heads", tp=tp, heads=n_kv_heads)  # the `kv` command's --tp, the page's GPUs


def tp_split(kv: KvMemory, tp: int) -> TpSplit:
    """What one GPU of `tp` keeps of the cache `kv` counts (the exact formula's bytes, split by the rule above)."""
    a = kv.config.arch
    mla = a.attention == "MLA"
    check_tp(a.n_kv_heads, tp, mla)
    per_gpu_heads = kv_heads_per_rank(a.n_kv_heads, tp, mla)
    heads = 1 if mla else a.n_kv_heads
    per_request = 0
    for g in kv.groups:
        if g.kind in (GLOBAL, LOCAL) and not mla:
            assert g.bytes_per_request % a.n_kv_heads == 0  # bytes are linear in the K/V heads
            per_request += g.bytes_per_request // a.n_kv_heads * per_gpu_heads
        elif g.kind == STATE:
            per_request += -(-g.bytes_per_request // tp)
        else:  # MLA latents and indexer keys: whole on every rank
            per_request += g.bytes_per_request
    copies = 1 if mla else max(1, tp // a.n_kv_heads)
    per_gpu = per_request * kv.config.batch
    return TpSplit(tp, heads, per_gpu_heads, copies, mla, per_request, per_gpu, per_gpu * tp)

