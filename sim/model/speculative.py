"""Speculative decoding on the real tiny model: the drafts on offer (the target's first layers, or another
bundled model), greedy verification, the tokens proven identical to the target's own greedy output, and
what a run shows, worded from its measurements. Importing this module needs no torch."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sim.cost.presets import tiny_model_configs
from sim.refusal import Misuse
from sim.serving.speculative import check_spec, expected_tokens_per_pass
from sim.work.run_cost import ModelRates, cached_work

TARGET = "mha"  # the bundled model that is always the target
CHECKPOINTS = Path(__file__).resolve().parents[2] / "assets" / "models"  # sim.model.transformer.ASSETS_DIR, no torch
C_FAR_ABOVE = 1.5  # a measured c this many times the draft's share of the target's layers is "far above" it
VERIFY_ABOUT_ONE = 1.2  # a verify pass up to this many one-token steps costs "about one"


# ---------------------------------------------------------------------------------------------
# The drafts on offer


def target_layers() -> int:
    return int(tiny_model_configs()[TARGET].get("n_layers", 4))


def available_drafts() -> list[str]:
    """"firstN" (the target's first N layers, an early exit) for N = 1 .. layers − 1, then every other bundled
    model whose checkpoint is on disk."""
    return [f"first{n}" for n in range(1, target_layers())] + [
        name for name in tiny_model_configs() if name != TARGET and (CHECKPOINTS / f"{name}.safetensors").is_file()]


def draft_layers(key: str) -> int | None:
    """The layers an early-exit draft keeps (None for a separately trained model)."""
    return int(key.removeprefix("first")) if key.startswith("first") else None


def make_draft(target, key: str, load: Callable[[str], object]):
    """The draft a key names: an early exit of `target`, or the bundled model `load(key)` returns."""
    n = draft_layers(key)
    return truncated_draft(target, n) if n is not None else load(key)


def spec_run_seconds(rates: ModelRates, *, prompt_len: int, max_new_tokens: int, k: int) -> float:
    """What `speculative_generate` will take: the target alone, then rounds of k draft steps and one verify pass,
    so at most (k + 2) steps per token."""
    return (k + 2) * rates.seconds(cached_work(prompt_len, max_new_tokens))

# ---------------------------------------------------------------------------------------------
# Speculative decoding on the real tiny model (torch is imported only here)


def truncated_draft(model, num_layers: int):
    """A draft sharing the target's embedding, first `num_layers` layers, final norm and lm_head
    (an early exit, as in LayerSkip-style self-speculation). No weight is copied."""
    import torch

    from sim.model.transformer import Llama

    n = model.cfg.n_layers
    if not 1 <= num_layers < n:
        raise Misuse(f"a truncated draft keeps 1..{n - 1} of the target's {n} layers, got {num_layers}")
    cfg = replace(model.cfg, n_layers=num_layers, name=f"{model.cfg.name}-first{num_layers}")
    with torch.device("meta"):
        draft = Llama(cfg)
    draft.model.embed_tokens = model.model.embed_tokens
    draft.model.layers = torch.nn.ModuleList(list(model.model.layers)[:num_layers])
    draft.model.norm = model.model.norm
    draft.lm_head = model.lm_head
    draft.rope_cos, draft.rope_sin = model.rope_cos, model.rope_sin
    return draft.eval()


@dataclass(frozen=True, kw_only=True)
class SpecRun:
    k: int
    prompt_ids: list[int]
    new_ids: list[int]
    target_ids: list[int]  # the target alone, greedy
    accepted: list[int]  # drafts kept in each target pass
    spec_s: float  # wall time of the speculative loop (prefills included)
    target_s: float  # wall time of the target alone (prefill included)
    draft_step_s: float  # median draft forward (one token)
    target_step_s: float  # median target decode step, from the plain run
    verify_s: float  # median target pass over k + 1 tokens
    device: str = "cpu"
    dtype: str = "float32"
    target_layers: int | None = None
    draft_layers: int | None = None

    @property
    def identical(self) -> bool:
        return self.new_ids == self.target_ids

    @property
    def num_passes(self) -> int:
        return len(self.accepted)

    @property
    def tokens_per_pass(self) -> float:
        """New tokens per verifying target pass (the prefill's first token not counted)."""
        return (len(self.new_ids) - 1) / self.num_passes if self.num_passes else math.nan

    @property
    def acceptance_rate(self) -> float:
        acc = np.array(self.accepted)
        judged = acc.sum() + np.count_nonzero(acc < self.k)
        return float(acc.sum() / judged) if judged else math.nan

    @property
    def c(self) -> float:
        return self.draft_step_s / self.target_step_s

    @property
    def speedup(self) -> float:
        return self.target_s / self.spec_s

    @property
    def predicted_speedup(self) -> float:
        """From the measured pieces: tokens per pass × target step / (k draft steps + one verify pass)."""
        return self.tokens_per_pass * self.target_step_s / (self.k * self.draft_step_s + self.verify_s)

    @property
    def formula_tokens_per_pass(self) -> float:
        """E at the measured acceptance rate (nan when no draft was judged)."""
        a = self.acceptance_rate
        return expected_tokens_per_pass(a, self.k) if math.isfinite(a) else math.nan

    @property
    def verify_steps(self) -> float:
        """One verify pass over k + 1 tokens, in one-token target steps."""
        return self.verify_s / self.target_step_s

    @property
    def first_difference(self) -> int | None:
        from sim.model.generate import first_difference

        return first_difference(self.new_ids, self.target_ids)


def speculative_generate(target, draft, prompt_ids: list[int], *, max_new_tokens: int, k: int,
                         repeats: int = 3) -> SpecRun:
    """Greedy speculative decoding, batch 1: the draft proposes k tokens one at a time from its own
    cache; the target scores the last accepted token and the k drafts in one pass (k + 1 positions),
    keeps the drafts up to the first one that differs from its own argmax, and adds its own token.
    Both caches are truncated back to the accepted tokens. The target alone decodes the same prompt
    for the comparison. Both runs are repeated `repeats` times, interleaved, and the fastest of each
    is kept (a busy machine only ever adds time); the step times are medians over every repeat."""
    import statistics

    import torch

    from sim.model.device import Stopwatch
    from sim.model.generate import check_lengths, decode_loop, generate, greedy, prefill
    from sim.model.kvcache import ContiguousKVCache

    check_spec(0.5, k)
    if not 1 <= repeats <= 10:
        raise Misuse(f"repeats must be 1..10, got {repeats}")
    check_lengths(target, len(prompt_ids), max_new_tokens + k)
    device, dtype = target.device, target.dtype
    length = len(prompt_ids) + max_new_tokens + k
    draft_times: list[float] = []
    verify_times: list[float] = []

    def ids(xs):
        return torch.tensor([xs], dtype=torch.long, device=device)  # (1, T)

    @torch.inference_mode()
    def once() -> tuple[list[int], list[int], float]:
        t_cache = ContiguousKVCache(target.cfg, batch_size=1, max_seq_len=length, device=device, dtype=dtype)
        d_cache = ContiguousKVCache(draft.cfg, batch_size=1, max_seq_len=length, device=device, dtype=dtype)
        accepted: list[int] = []
        with Stopwatch(device) as total:
            seq = list(prompt_ids)
            seq.append(greedy(prefill(target, ids(seq), t_cache)[0]))
            new = [seq[-1]]
            while len(new) < max_new_tokens:
                # the draft catches up on the tokens it has not seen, then proposes k tokens
                steps = list(decode_loop(draft, seq[d_cache.num_tokens:], k, cache=d_cache, start_pos=d_cache.num_tokens))
                draft_times.extend(s.wall_s for s in steps)
                proposal = [s.token for s in steps]
                # the target scores the last token and the k drafts at once
                start = t_cache.num_tokens  # == len(seq) - 1
                with Stopwatch(device) as verify:
                    logits = prefill(target, ids(seq[start:] + proposal), t_cache, start_pos=start,
                                     last_only=False)[0]  # (k + 1, V)
                    best = logits.argmax(dim=-1).tolist()
                verify_times.append(verify.seconds)
                a = 0
                while a < k and proposal[a] == best[a]:
                    a += 1
                accepted.append(a)
                emitted = proposal[:a] + [best[a]]
                t_cache.truncate(start + 1 + a)  # the last token and the kept drafts
                d_cache.truncate(min(d_cache.num_tokens, len(seq) + a))
                seq += emitted
                new += emitted
        return new[:max_new_tokens], accepted, total.seconds

    # warm-up: first calls allocate and pick kernels
    prefill(target, ids(prompt_ids[:4]), ContiguousKVCache(target.cfg, batch_size=1, max_seq_len=8, device=device, dtype=dtype))
    prefill(draft, ids(prompt_ids[:4]), ContiguousKVCache(draft.cfg, batch_size=1, max_seq_len=8, device=device, dtype=dtype))
    spec_s, target_s, steps = math.inf, math.inf, []
    new, accepted, plain_ids = [], [], []
    for _ in range(repeats):
        new, accepted, wall = once()
        spec_s = min(spec_s, wall)
        with Stopwatch(device) as plain_clock:
            plain = generate(target, list(prompt_ids), max_new_tokens, mode="cached", count=False)
        target_s = min(target_s, plain_clock.seconds)
        steps += [st.wall_s for st in plain.steps[1:]] or [plain.steps[0].wall_s]
        plain_ids = plain.new_ids
    return SpecRun(k=k, prompt_ids=list(prompt_ids), new_ids=new, target_ids=plain_ids, accepted=accepted, spec_s=spec_s, target_s=target_s,
                   draft_step_s=statistics.median(draft_times) if draft_times else math.nan, target_step_s=statistics.median(steps),
                   verify_s=statistics.median(verify_times) if verify_times else math.nan, device=str(device),
                   dtype=str(dtype).removeprefix("torch."), target_layers=target.cfg.n_layers, draft_layers=draft.cfg.n_layers)
