"""`python -m app.cli prefix-hit`: how much of a prompt sent twice vLLM takes from its prefix cache, for any Hugging
Face config.json (the KV memory page's Prefix hits tab, from a shell).

    python -m app.cli prefix-hit --config PATH --prompt-len N [--kv-dtype fp16|bf16|fp8|int8|int4]
                                 [--block-size 16] [--state-dtype fp32|bf16|fp16]

Prints what it found, then as its LAST line one JSON object:

    {"block_size": <the engine's, raised on hybrid models>, "min_cacheable_prompt": <int>, "hit_tokens": <int>,
     "hit_rate": <float>, "prompt_len": N, "requested_block_size": <int>, "recomputed_tokens": <int>, ...}

A prompt length of 0 or less, a config that cannot be read or parsed, or a bad option: exit code 2 and one line on
stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli import run_parsed
from app.cli_kv import CLI_KV_DTYPES, UsageError, _read
from sim.cost.hf_config import parse_hf_config_with_notes
from sim.cost.kv_engine import BLOCK_SIZES, KVEngineConfig
from sim.cost.memory import MemoryConfig
from sim.cost.prefix_hit import prefix_hit
from sim.cost.vllm_rules import VLLM_VERSION, version_label
from sim.words import text as words_text
from sim.words.engine import hit_advice


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage too: one line is the contract
        raise UsageError(message)


def _parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="Prefix-cache hits for a prompt sent twice: the engine's block size (raised "
                                       "on hybrid Mamba / linear-attention models), the shortest prompt that hits, "
                                       "and the tokens served from the cache.")
    p.add_argument("--config", required=True, help="path to a config.json")
    p.add_argument("--prompt-len", required=True, type=int, help="prompt tokens (1 or more)")
    p.add_argument("--kv-dtype", default="bf16", choices=CLI_KV_DTYPES, help="KV cache dtype (default bf16)")
    p.add_argument("--block-size", type=int, default=16, choices=BLOCK_SIZES, help="--block-size asked (default 16)")
    p.add_argument("--state-dtype", default="", choices=("", "fp32", "bf16", "fp16"),
                   help="the recurrent state's dtype, as vLLM's --mamba-ssm-cache-dtype (default: vLLM's)")
    return p


def run(args: argparse.Namespace) -> str:
    """Everything the command prints to stdout; ValueError / UsageError on bad input."""
    text = _read(args.config)
    arch, _ = parse_hf_config_with_notes(text, source=f"file {Path(args.config).name[:80]}",
                                          unnamed=words_text("en", "kvmem.cfg.unnamed"))
    cfg = MemoryConfig(arch, kv_dtype=args.kv_dtype, state_dtype=args.state_dtype)
    hit = prefix_hit(cfg, KVEngineConfig(block_size=args.block_size), args.prompt_len)
    lines = [f"{arch.name}: {arch.describe_layers()}",
             f"block size      {hit.block_size:,} tokens ({version_label()}; asked {hit.requested_block_size})",
             f"shortest prompt that hits  {hit.min_cacheable_prompt:,} tokens",
             f"prompt          {hit.prompt_len:,} tokens, sent twice",
             f"from the cache  {hit.hit_tokens:,} tokens ({hit.hit_rate:.2%}); computed {hit.recomputed_tokens:,}",
             hit_advice(hit)]
    result = {"model": arch.name, "prompt_len": hit.prompt_len, "block_size": hit.block_size,
              "requested_block_size": hit.requested_block_size, "min_cacheable_prompt": hit.min_cacheable_prompt,
              "hit_tokens": hit.hit_tokens, "hit_rate": hit.hit_rate, "recomputed_tokens": hit.recomputed_tokens,
              "state_aligned": hit.state_aligned, "kv_dtype": args.kv_dtype, "vllm_version": VLLM_VERSION}
    lines.append(json.dumps(result))
    return "\n".join(lines)


def main(name: str = "prefix-hit", argv: list[str] | None = None) -> int:
    return run_parsed(_parser(f"python -m app.cli {name}"), run, name, argv, (UsageError, ValueError))


if __name__ == "__main__":
    sys.exit(main("prefix-hit"))
