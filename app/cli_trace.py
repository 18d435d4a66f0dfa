"""`python -m app.cli prefix|serve --trace PATH ...`: a JSONL trace (sim/alloc/trace.py) through the prefix cache or
a serving policy. A table for people, then the LAST line one JSON object for scripts. Bad input: exit code 2 and
one line on stderr (a bad trace names its line and field)."""

from __future__ import annotations

import argparse
import json
import math
import textwrap

from app.cli import fail, shown
from sim.alloc.trace import read_trace
from sim.refusal import Refusal

SERVE_POLICIES = ("static", "continuous", "chunked")


class _UsageError(Exception):
    pass


class _Help(argparse.HelpFormatter):
    def _split_lines(self, text: str, width: int) -> list[str]:  # a name like gpt-oss-20b is never cut at a hyphen
        return textwrap.wrap(text, width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    def __init__(self, **kwargs) -> None:
        super().__init__(formatter_class=_Help, **kwargs)

    def error(self, message: str):  # argparse would print the usage too: one line is the contract
        raise _UsageError(f"{self.prog.split()[-1]}: {message}")  # as every error line starts: 'prefix: ...'


def _int_in(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {lo:,}..{hi:,}, got {value:,}")
        return value
    return parse


def _json_value(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _emit(table: list[tuple[str, str]], payload: dict) -> None:
    width = max(len(k) for k, _ in table)
    for k, v in table:
        print(f"{k:<{width}}  {v}")
    print(json.dumps({k: _json_value(v) for k, v in payload.items()}, separators=(", ", ": ")))


def _prefix(argv: list[str]) -> int:
    from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
    from sim.alloc.prefix_cache import MAX_PREFIX_CACHE_BLOCK_SIZE, CacheConfig, simulate_prefix_cache
    from sim.alloc.trace import TraceFile, blocks_to_hold

    ap = _Parser(prog="python -m app.cli prefix", description="Replay a JSONL trace, one request at a time in file "
                 "order, through a prefix cache (hashed full blocks chained to their parent, least recently freed evicted first).")
    ap.add_argument("--trace", required=True, help="JSONL: one request per line (see sim/alloc/trace.py)")
    ap.add_argument("--block-size", type=_int_in(1, MAX_PREFIX_CACHE_BLOCK_SIZE), default=16)
    ap.add_argument("--num-blocks", type=_int_in(1, MAX_CAPACITY_TOKENS),
                    help="blocks in the pool (default: enough to hold the whole trace, so nothing is evicted)")
    args = ap.parse_args(argv)
    tf = read_trace(args.trace)
    bs = args.block_size
    num_blocks = args.num_blocks or min(blocks_to_hold(tf, bs), MAX_CAPACITY_TOKENS // bs)
    if num_blocks * bs > MAX_CAPACITY_TOKENS:
        raise Refusal("cli.err.pool_limit", blocks=num_blocks, bs=bs, slots=num_blocks * bs, max=MAX_CAPACITY_TOKENS)
    # A request that cannot fit is named by its line, as every other trace message is (the simulator counts from 0)
    for r in tf.requests:
        if (need := blocks_to_hold(TraceFile((r,), 0), bs)) > num_blocks:
            raise Refusal("cli.err.request_too_big", line=r.line, tokens=r.prompt_len + r.output_len - 1, need=need,
                          bs=bs, blocks=num_blocks)
    res = simulate_prefix_cache(tf.to_prefix_trace(), CacheConfig(bs, num_blocks * bs, max_running=1))
    hits = [int(h) for h in res.hit_tokens]
    table = [(f"{shown(r.label)} (line {r.line})" if r.label != f"line {r.line}" else r.label,
              f"prompt {r.prompt_len:,}, from the cache {h:,}, computed {r.prompt_len - h:,}")
             for r, h in zip(tf.requests, hits, strict=True)]
    table += [("requests", f"{res.num_requests:,}"), ("block size", f"{bs}"), ("blocks", f"{num_blocks:,}"),
              ("prompt tokens", f"{res.num_prompt_tokens:,}"), ("from the cache", f"{res.num_hit_tokens:,}"),
              ("hit rate", f"{res.hit_rate:.2%}"), ("evictions", f"{res.num_evictions:,}")]
    _emit(table, {"hit_tokens": hits, "hit_rate": res.hit_rate, "num_requests": res.num_requests,
                  "prompt_tokens": res.num_prompt_tokens, "num_hit_tokens": res.num_hit_tokens, "block_size": bs,
                  "num_blocks": num_blocks, "evictions": res.num_evictions})
    return 0


def _serve(argv: list[str]) -> int:
    from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.serving.comparison import DeploymentConfig
    from sim.serving.config import MAX_CPU_CAPACITY_TOKENS, PREEMPTION_MODES, EngineConfig
    from sim.serving.engine import simulate_engine
    from sim.serving.links import HOST_LINKS
    from sim.serving.schedulers import MAX_BATCH, simulate_static

    ap = _Parser(prog="python -m app.cli serve", description="Serve a JSONL trace on a simulated GPU: every forward pass timed by the "
                 "roofline, the KV cache in paged blocks.")
    ap.add_argument("--trace", required=True, help="JSONL: one request per line (see sim/alloc/trace.py)")
    ap.add_argument("--policy", choices=SERVE_POLICIES, default="continuous")
    models, gpus = list(load_presets()), list(load_gpus())
    ap.add_argument("--model", choices=models, default="llama-3.1-8b", metavar="MODEL",
                    help=f"one of {', '.join(models)} (default llama-3.1-8b)")
    ap.add_argument("--gpu", choices=gpus, default="h100-sxm", metavar="GPU",
                    help=f"one of {', '.join(gpus)} (default h100-sxm)")
    ap.add_argument("--kv-tokens", type=_int_in(0, MAX_CAPACITY_TOKENS), default=0,
                    help="cap the GPU's KV token slots (default 0: what the weights leave)")
    ap.add_argument("--max-batch", type=_int_in(1, MAX_BATCH), default=256, help="most requests running at once")
    ap.add_argument("--block-size", type=_int_in(1, 256), default=16)
    ap.add_argument("--token-budget", type=_int_in(1, 1 << 20), default=8192,
                    help="tokens one forward pass may compute (chunked; continuous: prompt tokens only)")
    ap.add_argument("--preemption", choices=PREEMPTION_MODES, default="recompute")
    ap.add_argument("--cpu-tokens", type=_int_in(0, MAX_CPU_CAPACITY_TOKENS), default=0,
                    help="host KV slots for swapping (default 0: as many as the GPU's)")
    ap.add_argument("--link", choices=list(HOST_LINKS), default="pcie5", help="the GPU <-> host link swaps cross")
    ap.add_argument("--prefix-caching", action="store_true", help="reuse cached prompt blocks (continuous, chunked)")
    args = ap.parse_args(argv)
    tf = read_trace(args.trace)
    wl = tf.to_workload()
    dep = DeploymentConfig(args.model, args.gpu, kv_limit_tokens=args.kv_tokens)
    cost = dep.cost()
    _, _, slots = dep.kv_budget(cost)
    extra: dict = {}
    if args.policy == "static":
        if args.preemption != "recompute" or args.prefix_caching:
            raise Refusal("cli.err.static_options")
        r = simulate_static(wl, EngineConfig(max_num_seqs=args.max_batch, capacity_tokens=slots,
                                             block_size=args.block_size, watermark=0.01, max_num_batched_tokens=1 << 20,
                                             enable_chunked_prefill=False), cost)
    else:
        cfg = EngineConfig(max_num_seqs=args.max_batch, capacity_tokens=slots, block_size=args.block_size,
                           watermark=0.0, max_num_batched_tokens=args.token_budget,  # v1: no watermark
                           enable_chunked_prefill=args.policy == "chunked", preemption_mode=args.preemption,
                           cpu_capacity_tokens=args.cpu_tokens or slots, link=args.link,
                           enable_prefix_caching=args.prefix_caching)
        run = simulate_engine(wl, cfg, cost, prompt_hashes=tf.prompt_hashes(args.block_size)
                              if args.prefix_caching else None)
        r = run.result
        extra = {"recomputes": run.num_recomputes, "swaps": run.num_swaps,
                 "recomputed_tokens": run.recomputed_tokens, "recompute_flops": run.recompute_flops,
                 "swap_bytes": run.swap_bytes, "swap_s": run.swap_seconds, "prefix_hit_tokens": run.prefix_hit_tokens}
    ttft, itl, e2e = r.percentiles(r.ttft_s), r.percentiles(r.itl_s), r.percentiles(r.e2e_s)
    payload = {"policy": args.policy, "model": args.model, "gpu": args.gpu, "requests": r.num_requests,
               "output_tokens": r.num_output_tokens, "kv_capacity_tokens": slots,
               "throughput_tok_s": r.tokens_per_s, "requests_per_s": r.requests_per_s, "makespan_s": r.makespan_s,
               "ttft_p50_s": ttft[0], "ttft_p95_s": ttft[1], "ttft_p99_s": ttft[2],
               "itl_p50_s": itl[0], "itl_p95_s": itl[1], "itl_p99_s": itl[2],
               "e2e_p50_s": e2e[0], "e2e_p95_s": e2e[1], "forward_passes": r.num_iterations,
               "preemptions": r.num_preemptions, **extra}
    ms = lambda x: "n/a (every output is 1 token)" if math.isnan(x) else f"{x * 1e3:,.2f} ms"  # noqa: E731
    table = [("policy", args.policy), ("model on GPU", cost.name), ("KV slots", f"{slots:,}"),
             ("requests", f"{r.num_requests:,}"), ("output tokens", f"{r.num_output_tokens:,}"),
             ("throughput", f"{r.tokens_per_s:,.1f} tokens/s"), ("makespan", f"{r.makespan_s:,.3f} s"),
             ("TTFT p50 / p95", f"{ttft[0]:,.3f} s / {ttft[1]:,.3f} s"), ("ITL p50", ms(itl[0])),
             ("ITL p95", ms(itl[1])), ("preemptions", f"{r.num_preemptions:,}")]
    if extra:
        table += [("recomputed tokens", f"{extra['recomputed_tokens']:,}"),
                  ("swapped", f"{extra['swap_bytes'] / 1e9:,.3f} GB in {extra['swap_s']:,.3f} s"),
                  ("prefix cache hits", f"{extra['prefix_hit_tokens']:,} tokens")]
    _emit(table, payload)
    return 0


def main(name: str, argv: list[str]) -> int:
    """The subcommand `name` ("prefix" or "serve") with its arguments; the exit code."""
    try:
        return _prefix(argv) if name == "prefix" else _serve(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except _UsageError as exc:
        return fail(exc)
    except ValueError as exc:  # a bad trace (TraceError: its line and field) or settings the simulators refuse
        return fail(exc, name)
