"""Prefix caching on the real model: one system prompt and several user turns rendered by SmolLM2's own chat
template (ChatML from its GGUF metadata) and tokenized by its own tokenizer; the prefix cache's hits computed
from those token ids (sim.alloc's vLLM rules at the page's block size); and the prefill time those hits save,
measured on the model by prefilling each request from scratch and from its cached prefix, the two interleaved so
that both see the same load. Torch is imported only by the function that runs the model; no language here:
results carry message values (sim.msg.Msg) for the words layer.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from sim.msg import Msg
from sim.refusal import Refusal
from sim.work.conditions import Conditions, Measuring
from sim.work.run_cost import ModelRates, Work, prefill_work, smollm2_tokens, triangle

# Model input, not page text: a box office's system prompt and questions to it (English in either language).
DEFAULT_SYSTEM = (
    "You are the box office assistant of the Globe Theatre in London. Answer in one or two short sentences, "
    "politely, and only about this theatre. Tonight's play is Hamlet; doors open at 18:30 and the play starts "
    "at 19:30. Tickets cost 5 pounds for standing in the yard and 25 to 65 pounds for a seat in the galleries; "
    "students pay half price with a valid card. The theatre is open to the sky: bring a coat if it rains."
)
DEFAULT_TURNS = (
    "When does Hamlet start tonight?",
    "How much is a ticket for a student?",
    "Can I bring an umbrella into the yard?",
    "Is there a seat close to the stage?",
)
MAX_SYSTEM_BYTES = 1500  # UTF-8 bytes, as the URL keeps it (a Korean character is three)
MAX_TURN_BYTES = 200
MAX_TURNS = 6
MAX_TURNS_BYTES = MAX_TURNS * (MAX_TURN_BYTES + 1)  # the turns box: every turn and its newline
MAX_PROMPT_TOKENS = 1024  # one request (system + turn, with the template's markers)
REPEATS = 3  # timed rounds after one warm-up round
TEMPLATE_TOKENS = 16  # the ChatML markers around two messages and the assistant's opening (14 measured), rounded up


@dataclass(frozen=True)
class RealChat:
    """A system prompt and user turns as typed: each turn is one request, `[system, turn]`, as a chat
    service sends it (the same system prompt in front of every user's question)."""

    system: str
    turns: tuple[str, ...]

    def problem(self) -> Msg | None:
        """What is wrong with the text (None: it can run)."""
        if not self.system.strip():
            return Msg("rp.prefix.err.no_system")
        if len(self.system.encode()) > MAX_SYSTEM_BYTES:
            return Msg("rp.prefix.err.system_long", n=len(self.system.encode()), max=MAX_SYSTEM_BYTES)
        if not 1 <= len(self.turns) <= MAX_TURNS:
            return Msg("rp.prefix.err.turns", n=len(self.turns), max=MAX_TURNS)
        longest = max(len(s.encode()) for s in self.turns)
        if longest > MAX_TURN_BYTES:
            return Msg("rp.prefix.err.turn_long", n=longest, max=MAX_TURN_BYTES)
        return None

    def est_tokens(self) -> list[int]:
        """Each request's tokens estimated before the tokenizer is loaded (sim.work.run_cost.smollm2_tokens: from
        the bytes, digits and non-ASCII bytes a token each), with the template's markers."""
        base = smollm2_tokens(self.system) + TEMPLATE_TOKENS
        return [base + smollm2_tokens(turn) for turn in self.turns]

    def est_hits(self, block_size: int) -> list[int]:
        """Each request's cached tokens estimated the same way: none for the first, then the system prompt's
        whole blocks (the template's few leading markers ignored: errs towards less saved)."""
        shared = smollm2_tokens(self.system) // block_size * block_size
        return [0] + [shared] * (len(self.turns) - 1)


def prefill_seconds(rates: ModelRates, *, lengths: list[int], hits: list[int], repeats: int = REPEATS) -> float:
    """The cost model's seconds for measure_prefix_prefill over requests of these token counts and hits: each hit
    prefix written once, then `repeats` + 1 rounds of every request prefilled from scratch and from its hit (the
    suffix's positions, each attending over the prefix too)."""
    total = 0.0
    for n, h in zip(lengths, hits, strict=True):
        suffix = Work(1, n - h, triangle(h + 1, n + 1))
        total += (rates.seconds(prefill_work(h)) if h else 0.0) + \
            (repeats + 1) * (rates.seconds(prefill_work(n)) + rates.seconds(suffix))
    return total


def estimate_s(chat: RealChat, *, block_size: int, rates: ModelRates, repeats: int = REPEATS) -> float:
    """prefill_seconds over the chat's estimated tokens and hits (est_tokens, est_hits): known before the
    tokenizer is loaded."""
    return prefill_seconds(rates, lengths=chat.est_tokens(), hits=chat.est_hits(block_size), repeats=repeats)


def chat_turns(text: str) -> tuple[str, ...]:
    """The page's turns box: one user turn per non-blank line."""
    return tuple(line.strip() for line in text.split("\n") if line.strip())


def request_ids(real, chat: RealChat) -> list[list[int]]:
    """Each turn as the model reads it: `[system, turn]` rendered by the model's chat template (with the
    assistant's opening) and tokenized by its tokenizer."""
    return [real.chat_ids([("system", chat.system), ("user", turn)]) for turn in chat.turns]


def prefix_hits(prompts: list[list[int]], block_size: int) -> list[int]:
    """Tokens each request takes from the prefix cache when the requests arrive in order (a cache large enough to
    keep every block): vLLM's rules from sim.alloc, full blocks of `block_size` hashed along the chain, and the last
    prompt token always computed."""
    import numpy as np

    from sim.alloc.prefix_cache import CacheConfig, simulate_prefix_cache
    from sim.alloc.workload import Request, Trace

    trace = Trace(tuple(Request(np.asarray(p, dtype=np.int32), np.zeros(1, dtype=np.int32), label=f"{i}")
                        for i, p in enumerate(prompts)))
    capacity = (sum(math.ceil(len(p) / block_size) for p in prompts) + 1) * block_size
    res = simulate_prefix_cache(trace, CacheConfig(block_size=block_size, capacity_tokens=capacity))
    return [int(h) for h in res.hit_tokens]


def common_prefix(prompts: list[list[int]]) -> int:
    """Tokens every request starts with."""
    n = min(len(p) for p in prompts)
    for i in range(n):
        if any(p[i] != prompts[0][i] for p in prompts[1:]):
            return i
    return n


@dataclass(frozen=True, kw_only=True)
class RealPrefixRun:
    """Each request's prefill timed two ways on the real model: from scratch (all its tokens) and from the
    prefix cache (only the tokens after its hit, on top of the cached K/V of the hit), medians of `repeats`
    interleaved rounds after a warm-up. `max_abs_logit_diff` compares the two ways' next-token logits."""

    name: str
    block_size: int
    prompts: tuple[tuple[int, ...], ...]
    hit_tokens: tuple[int, ...]
    shared_tokens: int
    scratch_s: tuple[float, ...]
    cached_s: tuple[float, ...]
    max_abs_logit_diff: float
    same_next_tokens: bool
    repeats: int
    device: str
    conditions: Conditions
    first_text: str  # the first request decoded back: what the chat template rendered

    @property
    def num_prompt_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)

    @property
    def num_hit_tokens(self) -> int:
        return sum(self.hit_tokens)

    @property
    def hit_rate(self) -> float:
        return self.num_hit_tokens / self.num_prompt_tokens

    @property
    def scratch_total_s(self) -> float:
        return sum(self.scratch_s)

    @property
    def cached_total_s(self) -> float:
        return sum(self.cached_s)

    @property
    def saved_share(self) -> float:
        """The share of the prefill time the cache saved, measured."""
        return 1 - self.cached_total_s / self.scratch_total_s

    def rows(self) -> list[dict[str, float | int]]:
        """Per request: tokens, hit tokens, hit rate (%), both medians (ms) and the time saved (%)."""
        return [{"request": i + 1, "tokens": len(p), "hit": h, "hit_rate": 100 * h / len(p), "scratch_ms": 1e3 * s,
                 "cached_ms": 1e3 * c, "saved": 100 * (1 - c / s)}
                for i, (p, h, s, c) in enumerate(zip(self.prompts, self.hit_tokens, self.scratch_s, self.cached_s,
                                                     strict=True))]

    def metrics(self) -> list[tuple[str, Msg]]:
        """(label key, value) for the section's row of numbers."""
        return [("rp.prefix.m.hit_rate", Msg("rp.v.pct1", x=100 * self.hit_rate)),
                ("rp.prefix.m.scratch", Msg("rp.v.ms", x=1e3 * self.scratch_total_s)),
                ("rp.prefix.m.cached", Msg("rp.v.ms", x=1e3 * self.cached_total_s)),
                ("rp.prefix.m.saved", Msg("rp.v.pct0", x=100 * self.saved_share))]

    def hits_sentence(self) -> Msg:
        return Msg("rp.prefix.hits", n=len(self.prompts), tokens=self.num_prompt_tokens, shared=self.shared_tokens,
                   bs=self.block_size, hit=self.num_hit_tokens, rate=100 * self.hit_rate)

    def time_sentence(self) -> Msg:
        """What the hits saved in prefill time, measured, against what the token count alone predicts."""
        return Msg("rp.prefix.saved", scratch=1e3 * self.scratch_total_s, cached=1e3 * self.cached_total_s,
                   saved=100 * self.saved_share, by_tokens=100 * self.hit_rate, repeats=self.repeats)

    def title(self) -> Msg:
        return Msg("rp.prefix.title", n=len(self.prompts), scratch=1e3 * self.scratch_total_s,
                   cached=1e3 * self.cached_total_s, saved=100 * self.saved_share)

    def measured(self, now: float) -> Msg:
        """When and under what load the times were taken, and how long ago when the result is an earlier run's
        (the server keeps it for identical settings): a measured time is a fact about this machine then."""
        c = self.conditions
        age = now - c.started_at
        return Msg("rp.measured.busy" if c.busy else "rp.measured.quiet",
                   at=time.strftime("%H:%M:%S", time.gmtime(c.started_at)),
                   ago=Msg("rp.measured.ago", m=age / 60) if age >= 90 else "", before=c.load_before,
                   after=c.load_after, cpus=c.num_cpus)

    def check_sentence(self) -> Msg:
        return Msg("rp.prefix.same" if self.same_next_tokens else "rp.prefix.not_same",
                   diff=self.max_abs_logit_diff, n=len(self.prompts))


def measure_prefix_prefill(real, chat: RealChat, block_size: int, *, repeats: int = REPEATS,
                           progress: Callable[[int, int], None] | None = None) -> RealPrefixRun:
    """Tokenize the chat, compute the prefix cache's hits at `block_size`, then time every request's prefill
    from scratch and from its cached prefix: one warm-up round and `repeats` timed rounds, the two ways
    interleaved request by request (their order alternating) so that both see the same load. The caches are
    allocated and the cached prefix written outside the timed region: what is timed is the prefill alone."""
    import torch

    from sim.model.generate import prefill
    from sim.model.kvcache import ContiguousKVCache

    if (problem := chat.problem()) is not None:
        raise Refusal(problem.key, **problem.fields)
    if not 1 <= repeats <= 10:
        raise Refusal("rp.prefix.err.repeats", n=repeats)
    prompts = request_ids(real, chat)
    longest = max(len(p) for p in prompts)
    if longest > MAX_PROMPT_TOKENS:
        raise Refusal("rp.prefix.err.tokens", n=longest, max=MAX_PROMPT_TOKENS)
    hits = prefix_hits(prompts, block_size)
    model, cfg = real.model, real.cfg
    device = model.device

    def tensor(ids: list[int]) -> torch.Tensor:
        return torch.tensor([ids], device=device)  # (1, T)

    cached = []  # each request's cache, its hit prefix written once (the prefix cache's blocks)
    for p, h in zip(prompts, hits, strict=True):
        c = ContiguousKVCache(cfg, batch_size=1, max_seq_len=len(p), device=device, dtype=model.dtype)
        if h:
            prefill(model, tensor(p[:h]), c, attn_impl="sdpa")
        cached.append(c)
    scratch_caches = [ContiguousKVCache(cfg, batch_size=1, max_seq_len=len(p), device=device, dtype=model.dtype) for p in prompts]
    scratch_runs: list[list[float]] = [[] for _ in prompts]
    cached_runs: list[list[float]] = [[] for _ in prompts]
    diff, same = 0.0, True
    total, done = (repeats + 1) * 2 * len(prompts), 0

    def timed(fn) -> tuple[float, torch.Tensor]:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out

    with Measuring() as measuring:
        for rnd in range(repeats + 1):  # round 0 warms up and is not kept
            for i, (p, h) in enumerate(zip(prompts, hits, strict=True)):
                def scratch(i=i, p=p):
                    scratch_caches[i].truncate(0)
                    return prefill(model, tensor(p), scratch_caches[i], attn_impl="sdpa")

                def from_cache(i=i, p=p, h=h):
                    cached[i].truncate(h)
                    return prefill(model, tensor(p[h:]), cached[i], attn_impl="sdpa", start_pos=h)

                order = (("scratch", scratch), ("cached", from_cache))
                for kind, fn in order if (rnd + i) % 2 == 0 else order[::-1]:
                    seconds, logits = timed(fn)
                    if rnd:
                        (scratch_runs if kind == "scratch" else cached_runs)[i].append(seconds)
                    if kind == "scratch":
                        want = logits
                    else:
                        got = logits
                    done += 1
                    if progress:
                        progress(done, total)
                diff = max(diff, float((want - got).abs().max()))
                same = same and int(want.argmax()) == int(got.argmax())
    return RealPrefixRun(name=cfg.name, block_size=block_size, prompts=tuple(tuple(p) for p in prompts), hit_tokens=tuple(hits), shared_tokens=common_prefix(prompts),
                         scratch_s=tuple(statistics.median(r) for r in scratch_runs),
                         cached_s=tuple(statistics.median(r) for r in cached_runs), max_abs_logit_diff=diff, same_next_tokens=same, repeats=repeats, device=device.type,
                         conditions=measuring.conditions, first_text=real.decode(prompts[0]))
