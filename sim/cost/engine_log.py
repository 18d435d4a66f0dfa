"""Reconcile an engine's startup log with the lab's own count, figure by figure.

A server prints what it set aside for the KV cache when it starts. vLLM (sim/cost/vllm_rules.py names the release
and the functions that print them):

    Available KV cache memory: 10.55 GiB                               a capacity: bytes given to the cache, per GPU
    GPU KV cache size: 230,528 tokens                                  derived: max concurrency × max_model_len
    Maximum concurrency for 100,000 tokens per request: 2.31x          derived: blocks ÷ blocks one request needs
    # GPU blocks: 1952                                                 a capacity (v0's line)
    block_size=16                                                      a setting (from the engine's config line)

SGLang:

    KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB    capacities (its GB are GiB)
    max_total_num_tokens=2086558, ..., context_len=256000, ...                   a capacity and a setting

Each figure found is set beside the lab's derivation of the same figure for the model, dtype, length and GPUs
chosen, with the residual. Derivations start from the log's own capacity (the bytes it gave the cache), so the
residual isolates the rule, not the memory profile; the available memory itself is set beside the lab's room for
KV (GPU × utilization − weights), which leaves out activations and CUDA graphs. The log is another program's
text: it is read with regular expressions, bounded in size, and never shown as Markdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sim.cost.kv_engine import EngineAllocation
from sim.cost.memory import GiB, KvMemory
from sim.cost.tensor_parallel import tp_split
from sim.refusal import Refusal

MAX_LOG_CHARS = 200_000
MAX_LOG_LINES = 5_000
_NUM = r"(\d[\d,]*(?:\.\d+)?)"
PATTERNS = {  # figure -> regular expression over one line of the engine's log
    "available": re.compile(r"Available KV cache memory:\s*" + _NUM + r"\s*GiB"),
    "kv_cache_size": re.compile(r"kv_cache_size=" + _NUM + r"\s*GiB"),  # v0's memory profiling line
    "tokens": re.compile(r"GPU KV cache size:\s*" + _NUM + r"\s*tokens"),
    "concurrency": re.compile(r"Maximum concurrency for\s*" + _NUM + r"\s*tokens per request:\s*" + _NUM + r"\s*x"),
    "gpu_blocks": re.compile(r"#?\s*GPU blocks:\s*" + _NUM),
    "block_size": re.compile(r"""['"]?block_size['"]?\s*[=:]\s*(\d+)"""),
    "sglang_alloc": re.compile(r"KV Cache is allocated\.\s*#tokens:\s*" + _NUM + r",\s*K size:\s*" + _NUM
                               + r"\s*GB,\s*V size:\s*" + _NUM + r"\s*GB"),
    "sglang_total": re.compile(r"max_total_num_tokens=" + _NUM),
    "sglang_context": re.compile(r"context_len=" + _NUM),
    "sglang_page": re.compile(r"page_size=(\d+)"),
}


def _number(s: str) -> float:
    return float(s.replace(",", ""))


@dataclass(frozen=True)
class EngineLog:
    engine: str  # "vllm" or "sglang"
    available_gib: float | None = None  # vLLM: Available KV cache memory (or v0's kv_cache_size)
    tokens: int | None = None  # vLLM: GPU KV cache size
    concurrency_len: int | None = None  # vLLM: the max_model_len of its Maximum concurrency line
    concurrency: float | None = None
    gpu_blocks: int | None = None  # vLLM v0
    block_size: int | None = None
    sglang_tokens: int | None = None  # KV Cache is allocated. #tokens
    k_gib: float | None = None
    v_gib: float | None = None
    max_total_tokens: int | None = None
    context_len: int | None = None


def parse_engine_log(text: str) -> EngineLog:
    """The figures an engine's startup log states (the first of each). A log with none of them is a Refusal."""
    if len(text) > MAX_LOG_CHARS:
        raise Refusal("engine.log.too_big", n=f"{len(text):,}", max=f"{MAX_LOG_CHARS:,}")
    found: dict[str, re.Match] = {}
    for line in text.splitlines()[:MAX_LOG_LINES]:
        for name, pattern in PATTERNS.items():
            if name not in found and (m := pattern.search(line[:4000])):
                found[name] = m
    g = {k: m.groups() for k, m in found.items()}
    sglang = "sglang_alloc" in g or "sglang_total" in g
    known = ("available", "kv_cache_size", "tokens", "concurrency", "gpu_blocks", "sglang_alloc", "sglang_total")
    if not any(k in g for k in known):
        raise Refusal("engine.log.nothing")
    avail = g.get("available") or g.get("kv_cache_size")
    conc = g.get("concurrency")
    alloc = g.get("sglang_alloc")
    page = g.get("sglang_page") if sglang else g.get("block_size")
    return EngineLog(
        engine="sglang" if sglang else "vllm",
        available_gib=_number(avail[0]) if avail else None,
        tokens=int(_number(g["tokens"][0])) if "tokens" in g else None,
        concurrency_len=int(_number(conc[0])) if conc else None,
        concurrency=_number(conc[1]) if conc else None,
        gpu_blocks=int(_number(g["gpu_blocks"][0])) if "gpu_blocks" in g else None,
        block_size=int(page[0]) if page else None,
        sglang_tokens=int(_number(alloc[0])) if alloc else None,
        k_gib=_number(alloc[1]) if alloc else None,
        v_gib=_number(alloc[2]) if alloc else None,
        max_total_tokens=int(_number(g["sglang_total"][0])) if "sglang_total" in g else None,
        context_len=int(_number(g["sglang_context"][0])) if "sglang_context" in g else None,
    )


@dataclass(frozen=True)
class ReconRow:
    figure: str  # engine.log.fig.<figure>
    kind: str  # "capacity", "derived" or "setting"
    engine: float  # what the log says
    lab: float  # the lab's derivation
    unit: str  # "GiB", "tokens", "x", "blocks"
    how: str  # engine.log.how.<how>: how the lab derived it
    fields: tuple[tuple[str, str], ...] = ()  # the numbers `how` names

    @property
    def residual(self) -> float:
        return self.engine - self.lab

    @property
    def relative(self) -> float | None:
        return self.residual / self.lab if self.lab else None


@dataclass(frozen=True)
class Reconciliation:
    log: EngineLog
    rows: tuple[ReconRow, ...]
    max_model_len: int  # the length the derivations use
    block_bytes_per_gpu: int  # vLLM: one block id's bytes on one GPU
    token_bytes_per_gpu: int  # one token of K/V on one GPU (every attention layer)
    tp: int


def reconcile(log: EngineLog, kv: KvMemory, alloc: EngineAllocation, tp: int, kv_budget_per_gpu: int) -> Reconciliation:
    """Each figure of `log` beside the lab's: kv and alloc are the lab's count for the chosen model and dtype (at
    the log's max_model_len when it states one), tp the GPUs it was served on, kv_budget_per_gpu the lab's room for
    KV on one GPU."""
    split = tp_split(kv, tp)
    heads = split.kv_heads
    per_gpu = split.kv_heads_per_gpu
    block_gpu = alloc.block_bytes * per_gpu // heads if kv.config.arch.attention != "MLA" else alloc.block_bytes
    token_gpu = kv.bytes_per_token * per_gpu // heads if kv.config.arch.attention != "MLA" else kv.bytes_per_token
    L = kv.config.context
    rows: list[ReconRow] = []
    if log.block_size is not None:
        rows.append(ReconRow("block_size", "setting", log.block_size, alloc.block_size, "tokens", "block_size"))
    if log.engine == "vllm":
        if log.available_gib is not None:
            rows.append(ReconRow("available", "capacity", log.available_gib, kv_budget_per_gpu / GiB, "GiB", "room",
                                 (("tp", f"{tp:,}"),)))
            blocks = int(log.available_gib * GiB) // block_gpu
            conc = blocks / alloc.blocks_per_request
            f = (("blocks", f"{blocks:,}"), ("block", f"{block_gpu:,}"), ("per", f"{alloc.blocks_per_request:,}"),
                 ("len", f"{L:,}"))
            if log.gpu_blocks is not None:
                rows.append(ReconRow("gpu_blocks", "capacity", log.gpu_blocks, blocks, "blocks", "blocks", f))
            if log.concurrency is not None:
                rows.append(ReconRow("concurrency", "derived", log.concurrency, conc, "x", "concurrency", f))
            if log.tokens is not None:
                rows.append(ReconRow("tokens", "derived", log.tokens, int(conc * L), "tokens", "tokens", f))
        elif log.concurrency is not None and log.tokens is not None:
            # no capacity line: check the two derived figures against each other (tokens = concurrency × length)
            rows.append(ReconRow("tokens", "derived", log.tokens, log.concurrency * L, "tokens", "tokens_only",
                                 (("len", f"{L:,}"),)))
    else:
        if log.sglang_tokens is not None and log.k_gib is not None:
            kv_bytes = (log.k_gib + log.v_gib) * GiB
            rows.append(ReconRow("sglang_tokens", "capacity", log.sglang_tokens, kv_bytes / token_gpu, "tokens",
                                 "sglang_tokens", (("b", f"{token_gpu:,}"),)))
            rows.append(ReconRow("sglang_kv", "capacity", log.k_gib + log.v_gib,
                                 log.sglang_tokens * token_gpu / GiB, "GiB", "sglang_kv", (("b", f"{token_gpu:,}"),)))
        if log.max_total_tokens is not None:
            rows.append(ReconRow("sglang_total", "capacity", log.max_total_tokens, kv_budget_per_gpu / token_gpu,
                                 "tokens", "sglang_total", (("b", f"{token_gpu:,}"), ("tp", f"{tp:,}"))))
    return Reconciliation(log, tuple(rows), L, block_gpu, token_gpu, tp)


def log_length(log: EngineLog) -> int | None:
    """The max_model_len the log states (vLLM's concurrency line, SGLang's context_len), if any."""
    return log.concurrency_len or log.context_len
