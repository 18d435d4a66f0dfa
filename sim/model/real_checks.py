"""Shrink the cache on the real model (SmolLM2-135M-Instruct): the lecture's three checks in its own tokens.

1. long generation: `num_new` greedy tokens answering a chat request; the share equal to the full cache's.
2. exact quote: a made-up passage (names, places, numbers: nothing the model could know by heart) early in a plain
   text, held-out filler after it, then the passage's opening again, cut at a word boundary; score = the tokens
   of the passage reproduced exactly, up to the first mistake.
3. chat fact: a chat through the model's own template whose first turn states a made-up fact ("my locker number
   is 4172"), three small-talk turns after it, then the question; score = the fact's digit tokens reproduced
   exactly, from the first digit the answer writes.

Prompts come from `random.Random(f"<check>:{seed}")` over fixed word lists and the held-out corpus text: same
seed, same prompts, same scores. Every cache runs eager attention (H2O and SnapKV read the attention weights).
`run_cell` is one (method, budget) of the grid, `run_grid` all of it: the recorded result and a live rerun of any
one cell come from the same code.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from sim.model.evict_cache import budget_for, make_shrunk_cache, shrunk_bytes
from sim.model.generate import check_lengths, decode_loop, greedy
from sim.model.gguf_load import RealModel
from sim.model.real_recorded import RealShrinkSetup
from sim.model.shrink_checks import agreement, copy_score

LONG_REQUEST = "Write a long, detailed story about a lighthouse keeper who finds a message in a bottle."
FIRST = ("Mira", "Tobin", "Ansel", "Petra", "Corwin", "Ilse", "Dagny", "Osric", "Wren", "Lucan")
LAST = ("Vance", "Holloway", "Marsh", "Quill", "Ashdown", "Brennick", "Tull", "Okafor", "Sandoval", "Reyes")
THINGS = ("copper key", "blue ledger", "folded map", "glass jar", "iron box", "wool scarf", "silver coin",
          "paper lantern", "leather satchel", "clay whistle")
PLACES = ("the mill", "the north gate", "the old quarry", "the ferry dock", "the chapel", "the orchard",
          "the salt shed", "the lower bridge", "the bakery", "the signal tower")
VERBS = ("hid", "left", "buried", "found", "traded", "painted", "counted", "returned", "wrapped", "weighed")
ITEMS = ("locker number", "door code", "room number", "bike lock code", "gate code", "seat number")
SMALL_TALK = (("What is the capital of France?", "The capital of France is Paris."),
              ("How many legs does a spider have?", "A spider has eight legs."),
              ("What colour is the sky on a clear day?", "On a clear day the sky is blue."),
              ("Which planet is closest to the Sun?", "Mercury is the planet closest to the Sun."),
              ("What do bees make?", "Bees make honey and wax."),
              ("How many days are in a week?", "There are seven days in a week."))
QUOTE_SCORED = 24  # passage tokens scored after the cue
CHAT_NEW = 20  # tokens the chat answer may take to state the fact


def _sentence(rng: random.Random) -> str:
    who = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    return (f"{who} {rng.choice(VERBS)} the {rng.choice(THINGS)} near {rng.choice(PLACES)} at "
            f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}, then walked {rng.randint(2, 97)} steps to "
            f"{rng.choice(PLACES)}.")


def _held_out_text() -> str:
    from sim.model.train import load_corpus

    return bytes(load_corpus()[1].tolist()).decode("utf-8", errors="replace")


def _filler(real: RealModel, rng: random.Random, text: str, num_tokens: int) -> list[int]:
    """num_tokens tokens of held-out text, starting at a line start."""
    start = text.find("\n", rng.randrange(0, len(text) - 8 * num_tokens)) + 1
    ids = real.encode(text[start : start + 6 * num_tokens])[:num_tokens]
    return ids


def word_starts(real: RealModel, ids: list[int]) -> list[int]:
    """Indices of the tokens that begin a word (their text starts with a space)."""
    return [i for i, t in enumerate(ids) if real.decode([t]).startswith(" ")]


@dataclass(frozen=True)
class Prompts:
    long: list[int]
    quotes: list[tuple[list[int], list[int]]]  # (prompt ids, expected passage tokens)
    chats: list[tuple[list[int], list[int]]]  # (prompt ids, the fact's digit tokens)


def make_prompts(real: RealModel, setup: RealShrinkSetup) -> Prompts:
    text = _held_out_text()
    long = real.chat_ids([("user", LONG_REQUEST)])
    rng = random.Random(f"exact_quote:{setup.seed}")
    quotes = []
    for _ in range(setup.num_trials):
        passage = real.encode(" ".join(_sentence(rng) for _ in range(4)))
        starts = [i for i in word_starts(real, passage) if 10 <= i <= len(passage) - QUOTE_SCORED]
        cut = starts[len(starts) // 3]  # the opening, cut where a word begins
        lead = real.encode("Notes from the harbour office.\n\n")
        filler = _filler(real, rng, text, setup.filler_tokens)
        prompt = lead + passage + real.encode("\n\n") + filler + real.encode("\n\n") + passage[:cut]
        quotes.append((prompt, passage[cut : cut + QUOTE_SCORED]))
    rng = random.Random(f"chat_fact:{setup.seed}")
    chats = []
    for _ in range(setup.num_trials):
        item, value = rng.choice(ITEMS), f"{rng.randint(1000, 9999)}"
        turns = [("user", f"Hi! My {item} is {value}."), ("assistant", "Nice to meet you! How can I help you today?")]
        for question, answer in rng.sample(SMALL_TALK, 3):
            turns += [("user", question), ("assistant", answer)]
        turns.append(("user", f"What is my {item}?"))
        chats.append((real.chat_ids(turns), real.encode(value)))
    return Prompts(long, quotes, chats)


def _greedy(real: RealModel, make_cache: Callable[[int], object], ids: list[int], num_new: int) -> list[int]:
    check_lengths(real.model, len(ids), num_new)
    cache = make_cache(len(ids) + num_new - 1)
    return [r.token for r in decode_loop(real.model, list(ids), num_new, cache=cache, pick=greedy, attn_impl="eager")]


def _digits_from_first(real: RealModel, produced: list[int], n: int) -> list[int]:
    """n tokens from the first one that is a digit (all of produced's last n when none is)."""
    first = next((i for i, t in enumerate(produced) if real.decode([t]).strip().isdigit()), len(produced) - n)
    window = produced[first : first + n]
    return window + [-1] * (n - len(window))


@torch.inference_mode()
def run_cell(real: RealModel, *, method: str, budget: float | None, setup: RealShrinkSetup, prompts: Prompts,
             reference: list[int] | None) -> dict:
    """One cache through the three checks: the numbers a row of the recorded table holds (reference: the full
    cache's long generation; None runs it here, for the full cache itself)."""
    model = real.model

    def make(n: int):
        kept = budget_for(budget, n) if budget is not None else None
        return make_shrunk_cache(model.cfg, method=method, budget_tokens=kept, max_seq_len=n, device=model.device, dtype=model.dtype)

    t0 = time.perf_counter()
    tokens = _greedy(real, make, prompts.long, setup.num_new)
    same, first = agreement(tokens, reference if reference is not None else tokens)
    quote_prefix = quote_matched = quote_max = 0
    for ids, expected in prompts.quotes:
        prefix, matched = copy_score(_greedy(real, make, ids, len(expected)), expected)
        quote_prefix, quote_matched, quote_max = quote_prefix + prefix, quote_matched + matched, quote_max + len(expected)
    chat_prefix = chat_max = 0
    answers = []
    for ids, fact in prompts.chats:
        produced = _greedy(real, make, ids, CHAT_NEW)
        answers.append(real.decode(produced))
        prefix, _ = copy_score(_digits_from_first(real, produced, len(fact)), fact)
        chat_prefix, chat_max = chat_prefix + prefix, chat_max + len(fact)
    n = len(prompts.quotes[0][0]) + QUOTE_SCORED - 1  # bytes at the longest check's end (the quote's)
    acct = shrunk_bytes(model.cfg, method=method, budget_tokens=budget_for(budget, n) if budget is not None else None, num_tokens=n)
    return {"method": method, "budget": budget, "byte_fraction": acct.fraction_of_full, "kept_tokens": acct.kept_tokens,
            "num_tokens": acct.num_tokens, "long_same": same, "long_first_divergence": first,
            "num_new": setup.num_new, "quote_prefix": quote_prefix, "quote_matched": quote_matched,
            "quote_max": quote_max, "chat_prefix": chat_prefix, "chat_max": chat_max,
            "seconds": round(time.perf_counter() - t0, 2), "chat_answer": answers[0][:200],
            "long_text": real.decode(tokens)[:300], "long_tokens": tokens}


def run_grid(real: RealModel, setup: RealShrinkSetup, progress: Callable[[int, int, str], None] | None = None
             ) -> list[dict]:
    """The full cache first (the reference), then every (method, budget) of the setup."""
    prompts = make_prompts(real, setup)
    cells = setup.cells()
    rows = []
    for i, (method, budget) in enumerate(cells):
        if progress:
            progress(i, len(cells), method if budget is None else f"{method}@{budget}")
        ref = rows[0]["long_tokens"] if rows else None
        rows.append(run_cell(real, method=method, budget=budget, setup=setup, prompts=prompts, reference=ref))
    if progress:
        progress(len(cells), len(cells), "done")
    return rows
