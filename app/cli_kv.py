"""`python -m app.cli kv`: the KV memory page's count for any Hugging Face config.json, from a shell.

    python -m app.cli kv --config PATH --context N [--batch B] [--kv-dtype fp16|bf16|fp8|int8|int4]
                         [--block-size 16] [--max-num-batched-tokens 8192] [--no-hybrid] [--state-dtype fp32]
                         [--tp N]

Prints one row per layer group (what it keeps, its layers, its bytes by the exact formula and what a
vLLM-style allocator reserves), then as its LAST line one JSON object:

    {"total_bytes": <exact formula, int>, "engine_bytes": <vLLM's blocks, int>,
     "per_gpu_bytes": <exact formula on one of N GPUs, int>, "kv_heads_per_gpu": <int>,
     "groups": [{"kind", "layers", "bytes", ...}], "vllm_version": "...", ...}

Figures attributed to vLLM follow the release named in sim/cost/vllm_rules.py.

A config that cannot be read or parsed, or a bad option, exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli import run_parsed
from sim.cost.hf_config import MAX_CONFIG_CHARS, parse_hf_config_with_notes
from sim.cost.kv_engine import BLOCK_SIZES, DEFAULT_BATCHED_TOKENS, MAX_TP, KVEngineConfig, engine_allocation
from sim.cost.memory import MAX_BATCH, MAX_CONTEXT, MemoryConfig, fmt_bytes, kv_memory
from sim.cost.tensor_parallel import tp_split
from sim.cost.vllm_rules import VLLM_VERSION, version_label
from sim.words import say
from sim.words import text as words_text
from sim.words.cost import group_rows

CLI_KV_DTYPES = ("fp16", "bf16", "fp8", "int8", "int4")
KIND_NAMES = {"G": "full", "L": "local", "R": "state", "I": "indexer"}  # the JSON's group kinds


class UsageError(Exception):
    """A bad command line; main() turns it into one stderr line and exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage too: one line is the contract
        raise UsageError(message)


def _parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="KV-cache bytes per layer group for a Hugging Face config.json: the exact "
                                       "formula and what a vLLM-style paged allocator reserves.")
    p.add_argument("--config", required=True, help="path to a config.json")
    p.add_argument("--context", required=True, type=int, help=f"tokens per request (1..{MAX_CONTEXT:,})")
    p.add_argument("--batch", type=int, default=1, help=f"concurrent requests (1..{MAX_BATCH:,}; default 1)")
    p.add_argument("--kv-dtype", default="bf16", choices=CLI_KV_DTYPES, help="KV cache dtype (default bf16)")
    p.add_argument("--group-size", type=int, default=128, help="int8/int4: values per scale + zero point (default 128)")
    p.add_argument("--block-size", type=int, default=16, choices=BLOCK_SIZES, help="tokens per block (default 16)")
    p.add_argument("--max-num-batched-tokens", type=int, default=DEFAULT_BATCHED_TOKENS,
                   help=f"tokens one engine step schedules; sliding layers reserve them too (default {DEFAULT_BATCHED_TOKENS})")
    p.add_argument("--no-hybrid", action="store_true",
                   help="as vLLM's --disable-hybrid-kv-cache-manager: sliding layers reserved as full")
    p.add_argument("--state-dtype", default="", choices=("", "fp32", "bf16", "fp16"),
                   help="the recurrent state's dtype, as vLLM's --mamba-ssm-cache-dtype (default: the config's; "
                        "the conv state keeps the config's)")
    p.add_argument("--tp", type=int, default=1,
                   help=f"tensor-parallel GPUs (1..{MAX_TP}): K/V heads split across them, copied past the K/V heads; "
                        "MLA's latent kept whole on each")
    return p


def _read(path: str) -> str:
    """The config file's text, or UsageError naming what is wrong with it."""
    f = Path(path)
    try:
        size = f.stat().st_size
        if not f.is_file():
            raise UsageError(f"{path[:200]} is not a file")
        if size > MAX_CONFIG_CHARS * 4:
            raise UsageError(f"{path[:200]} is {size:,} bytes; a config.json is at most {MAX_CONFIG_CHARS:,} characters")
        return f.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path[:200]} is not UTF-8 text (byte {exc.start:,})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path[:200]}: {exc.strerror or exc}") from None


def _table(rows: list[dict]) -> str:
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    """Everything the command prints to stdout, for parsed arguments; ValueError / UsageError on bad input."""
    text = _read(args.config)
    arch, notes = parse_hf_config_with_notes(text, source=f"file {Path(args.config).name[:80]}",
                                          unnamed=words_text("en", "kvmem.cfg.unnamed"))
    cfg = MemoryConfig(arch, batch=args.batch, context=args.context, kv_dtype=args.kv_dtype,
                       group_size=args.group_size, state_dtype=args.state_dtype)
    engine = KVEngineConfig(block_size=args.block_size, max_num_batched_tokens=args.max_num_batched_tokens,
                          hybrid=not args.no_hybrid)
    kv, alloc = kv_memory(cfg), engine_allocation(cfg, engine)
    split = tp_split(kv, args.tp)
    rows = group_rows(kv, alloc)
    reserved = alloc.kind_bytes()
    out = [f"{arch.name}: {arch.describe_layers()}; context {cfg.context:,}, batch {cfg.batch:,}, "
           f"KV {cfg.kv_dtype}", ""]
    table_rows = [{"group": r["Group"], "layers": r["Layers"], "keeps": r["Keeps"],
                   "formula per request (B)": f"{r['Per request (B)']:,}", "share": r["Share"],
                   "vLLM reserves (B)": f"{r['vLLM reserves (B)']:,}"} for r in rows]
    out.append(_table(table_rows))
    out.append("")
    out.append(f"formula: {fmt_bytes(kv.per_request_bytes)} per request, {kv.total_bytes:,} B "
               f"({fmt_bytes(kv.total_bytes)}) for {cfg.batch:,}")
    if args.tp > 1:
        heads = "the whole latent" if split.latent else f"{split.kv_heads_per_gpu:,} of {split.kv_heads:,} K/V heads"
        copies = f", each head on {split.copies} GPUs" if split.copies > 1 else ""
        out.append(f"per GPU of {args.tp}: {heads}{copies}: {split.per_gpu_bytes:,} B ({fmt_bytes(split.per_gpu_bytes)})")
    out.append(f"{version_label()}: {alloc.blocks_per_request:,} blocks of {alloc.block_size} tokens "
               f"({alloc.block_bytes:,} B each) per request, {alloc.total_bytes:,} B ({fmt_bytes(alloc.total_bytes)}) "
               f"for {cfg.batch:,}")
    notes = [*(say("en", n) for n in notes), *(say("en", n) for n in alloc.notes)]
    for note in notes:
        out.append(f"note: {note}")
    groups = [{"kind": KIND_NAMES[g.kind], "label": r["Group"], "layers": g.num_layers,
               "storing_layers": g.num_storing_layers, "layer_ids": list(g.layer_ids),
               "bytes": g.bytes_per_request * cfg.batch, "per_request_bytes": g.bytes_per_request,
               "bytes_per_token": g.bytes_per_token_per_layer * g.num_storing_layers,
               "state_bytes_per_request": g.num_storing_layers * g.state_bytes_per_layer,
               "tokens_kept": g.tokens_kept, "engine_bytes": reserved.get(g.kind, 0) * cfg.batch}
              for g, r in zip(kv.groups, rows, strict=True)]
    result = {"model": arch.name, "context": cfg.context, "batch": cfg.batch, "kv_dtype": cfg.kv_dtype,
              "total_bytes": kv.total_bytes, "engine_bytes": alloc.total_bytes,
              "per_request_bytes": kv.per_request_bytes, "engine_per_request_bytes": alloc.per_request_bytes,
              "bytes_per_token": kv.bytes_per_token, "groups": groups,
              "tp": args.tp, "per_gpu_bytes": split.per_gpu_bytes, "kv_heads_per_gpu": split.kv_heads_per_gpu,
              "vllm_version": VLLM_VERSION,
              "engine": {"block_size": alloc.block_size, "page_bytes": alloc.page_bytes,
                         "block_bytes": alloc.block_bytes, "blocks_per_request": alloc.blocks_per_request,
                         "kv_cache_groups": len(alloc.groups), "padding_layers": alloc.padding_layers,
                         "hybrid": alloc.hybrid},
              "notes": notes}
    out.append(json.dumps(result))
    return "\n".join(out)


def main(name: str = "kv", argv: list[str] | None = None) -> int:
    return run_parsed(_parser(f"python -m app.cli {name}"), run, name, argv, (UsageError, ValueError))


if __name__ == "__main__":
    sys.exit(main("kv"))
