"""Training in phases, each a mix of row kinds: how a byte-level model is taught to copy.

A copying ("induction") circuit finds where the last few bytes occurred before and predicts the byte that
followed them there. On random bytes one byte is enough of a key (a byte seldom repeats within a chunk), so the
circuit that random repeats teach matches on a single byte, and on text, where every byte recurs every few
positions, that key points everywhere. Rows over a small alphabet (8 symbols: a byte recurs every 8 positions,
so only a run of 3-4 bytes points at one place) make the circuit match on several bytes; rows where a span of
the corpus comes back after filler text teach it to fire on text and to ignore the n-gram guess.

Row kinds (`RowKind.kind`):
  text         a window of the training text
  repeat       chunks of `lo`-`hi` symbols from an alphabet of `alphabet` bytes, each written twice in a row
  far_repeat   the same, with up to `max_gap` random symbols between a chunk and its repeat (the key must then
               be long enough to point at one place among that many)
  text_repeat  [text][a corpus span of lo-hi bytes][filler, up to max_gap bytes][the span again][text]
  text_chunks  corpus spans of lo-hi bytes one after another, half of them a span written earlier in the row
               (any distance back): half the bytes are copies, where a text_repeat row has one span
  cipher_chunks  a text_chunks row with its text bytes renamed by a permutation drawn for the row (a substitution
               cipher): the text's own recurrences ("the ", "ing"), so a key must be several bytes long to point at
               one place, and no prior to lean on, so only copying predicts a repeat
  copy         train.copy_sequence: a passage or fact lines, filler, then the passage or one line again

Every random draw comes from the two streams `train_phases` seeds (a torch.Generator for text offsets, a
random.Random for everything else), so a recipe gives the same weights on the same torch build and threads.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from sim.refusal import Misuse

# Symbols of the small alphabets: the commonest letters first, so a repeat over 8 symbols is made of e t a o
# i n s h (bytes the text model knows); past the printable ones, every other byte.
_PRINTABLE = list(b"etaoinshrdlucmfwypvbgkjqxz ETAOINSHRDLUCMFWYPVBGKJQXZ.,;:!?'-\n0123456789")
ALPHABET = _PRINTABLE + [c for c in range(256) if c not in _PRINTABLE]
ROW_KINDS = ("text", "repeat", "far_repeat", "text_repeat", "text_chunks", "cipher_chunks", "copy")
# The corpus's text bytes (those it holds 100 times or more; the rest are digits and rare signs): a cipher
# permutes these among themselves, so every renamed byte is one whose embedding the text has trained.
TEXT_BYTES = tuple(b"\n !'-,.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz\"")
PROBE_EVERY = 250


@dataclass(frozen=True, kw_only=True)
class RowKind:
    kind: str
    p: float  # weight of this kind among the phase's rows
    alphabet: int = 256  # repeat: symbols drawn from ALPHABET[:alphabet]
    lo: int = 8  # repeat: chunk length; text_repeat: span length
    hi: int = 24
    max_gap: int = 800  # text_repeat, far_repeat: the most filler between the span and its repeat

    def __post_init__(self) -> None:
        if self.kind not in ROW_KINDS:
            raise Misuse(f"row kind {self.kind!r} is not one of {ROW_KINDS}")
        if not (0 < self.p and 1 <= self.alphabet <= 256 and 1 <= self.lo <= self.hi):
            raise Misuse(f"bad row kind {self}")


@dataclass(frozen=True, kw_only=True)
class Phase:
    steps: int
    seq_len: int
    batch: int
    lr: float
    mix: tuple[RowKind, ...]
    warmup: int = 1  # linear ramp over the phase's first steps
    cosine: bool = False  # cosine from lr to min_lr over the phase
    min_lr: float | None = None  # default lr / 10


def repeat_row(length: int, *, alphabet: int, lo: int, hi: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """`length` bytes of chunks over ALPHABET[:alphabet], each chunk twice in a row; and the mask of the
    positions only copying predicts (the repeat's bytes after its first)."""
    ids: list[int] = []
    copied: list[bool] = []
    while len(ids) < length:
        chunk = [ALPHABET[rng.randrange(alphabet)] for _ in range(rng.randint(lo, hi))]
        ids += chunk + chunk
        copied += [False] * (len(chunk) + 1) + [True] * (len(chunk) - 1)
    return torch.tensor(ids[:length]), torch.tensor(copied[:length])


def far_repeat_row(length: int, *, alphabet: int, lo: int, hi: int, max_gap: int,
                   rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """[chunk][0-max_gap random symbols][the chunk again]... over ALPHABET[:alphabet], until `length` bytes; the
    mask marks each repeat's bytes after its first."""
    ids: list[int] = []
    copied: list[bool] = []
    while len(ids) < length:
        chunk = [ALPHABET[rng.randrange(alphabet)] for _ in range(rng.randint(lo, hi))]
        gap = [ALPHABET[rng.randrange(alphabet)] for _ in range(rng.randint(0, max_gap))]
        ids += chunk + gap + chunk
        copied += [False] * (len(chunk) + len(gap) + 1) + [True] * (len(chunk) - 1)
    return torch.tensor(ids[:length]), torch.tensor(copied[:length])


def text_repeat_row(data: torch.Tensor, *, length: int, lo: int, hi: int, max_gap: int,
                    rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """[text][span][filler][span again][text] from `data`; the mask marks the repeat's bytes after its 8th
    (by then 8 bytes of key point at the one earlier place)."""

    def span(n: int) -> list[int]:
        start = rng.randrange(0, len(data) - n - 1)
        return data[start : start + n].tolist()

    n = rng.randint(lo, hi)
    lead = span(rng.randint(0, 32))
    first = span(n)
    gap = span(rng.randint(0, max(0, min(max_gap, length - len(lead) - 2 * n))))
    ids = lead + first + gap + first
    mask = [False] * (len(lead) + len(first) + len(gap) + 8) + [True] * (n - 8)
    ids += span(max(0, length - len(ids)))
    mask += [False] * (length - len(mask))
    return torch.tensor(ids[:length]), torch.tensor(mask[:length])


def text_chunks_row(data: torch.Tensor, *, length: int, lo: int, hi: int,
                    rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """Spans of `data` (lo-hi bytes) until `length` bytes, each, after the first, with even odds an earlier
    span of the row again; the mask marks a repeated span's bytes after its 4th."""
    ids: list[int] = []
    copied: list[bool] = []
    spans: list[list[int]] = []
    while len(ids) < length:
        if spans and rng.random() < 0.5:
            chunk = rng.choice(spans)
            copied += [False] * 4 + [True] * (len(chunk) - 4)
        else:
            n = rng.randint(lo, hi)
            start = rng.randrange(0, len(data) - n - 1)
            chunk = data[start : start + n].tolist()
            spans.append(chunk)
            copied += [False] * len(chunk)
        ids += chunk
    return torch.tensor(ids[:length]), torch.tensor(copied[:length])


def _device(model) -> torch.device:
    return next(model.parameters()).device


def cipher(ids: torch.Tensor, rng: random.Random) -> torch.Tensor:
    """`ids` with each of TEXT_BYTES renamed by one random permutation of them; other bytes unchanged."""
    shuffled = list(TEXT_BYTES)
    rng.shuffle(shuffled)
    table = torch.arange(256)
    table[list(TEXT_BYTES)] = torch.tensor(shuffled)
    return table[ids]


def phase_lr(ph: Phase, s: int) -> float:
    """The learning rate at step s of the phase."""
    lr = ph.lr
    if ph.cosine:
        low = ph.lr / 10 if ph.min_lr is None else ph.min_lr
        lr = low + 0.5 * (ph.lr - low) * (1 + math.cos(math.pi * s / ph.steps))
    return lr * min(1.0, (s + 1) / ph.warmup)


@torch.no_grad()
def copy_probe(model, val: torch.Tensor) -> dict[str, float]:
    """How well the model copies, teacher-forced on 16 fixed rows each: the share of copy-only positions whose
    argmax is the right byte. r256 / r8: repeats over 256 / 8 symbols; t0 / t600: a held-out text span of 80
    bytes repeated at once / after 600 bytes of filler (what text alone predicts is ~0.55 here); c0: t0's rows
    enciphered (no prior: only copying scores); f8: chunks over 8 symbols repeated after up to 600 others."""
    was_training = model.training
    model.eval()
    rng = random.Random(7)
    makers = {"r256": lambda: repeat_row(257, alphabet=256, lo=8, hi=24, rng=rng), "r8": lambda: repeat_row(257, alphabet=8, lo=16, hi=48, rng=rng),
              "t0": lambda: text_repeat_row(val, length=257, lo=80, hi=80, max_gap=0, rng=rng),
              "c0": lambda: (lambda ids, m: (cipher(ids, rng), m))(*text_repeat_row(val, length=257, lo=80, hi=80, max_gap=0, rng=rng)),
              "t600": lambda: text_repeat_row(val, length=1025, lo=80, hi=80, max_gap=600, rng=rng),
              "f8": lambda: far_repeat_row(1025, alphabet=8, lo=16, hi=48, max_gap=600, rng=rng)}
    out = {}
    for label, make in makers.items():
        rows = [make() for _ in range(16)]
        x = torch.stack([ids for ids, _ in rows])
        mask = torch.stack([m for _, m in rows])[:, 1:]
        pred = model(x[:, :-1].to(_device(model)), attn_impl="sdpa").argmax(-1).cpu()
        out[label] = round((pred == x[:, 1:])[mask].float().mean().item(), 3)
    model.train(was_training)
    return out


def train_phases(model, phases: tuple[Phase, ...], *, train_data: torch.Tensor, val_data: torch.Tensor, seed: int,
                 evaluate, log=print) -> list[dict]:
    """Train `model` in place through the phases (AdamW, no weight decay, gradients clipped at 1); returns the
    history: every PROBE_EVERY steps the loss, the copy probes and the validation loss on 16 windows."""
    from sim.model.train import copy_sequence  # here, not at the top: train.py imports this module

    opt = torch.optim.AdamW(model.parameters(), lr=phases[0].lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)

    def row(kind: RowKind, length: int) -> torch.Tensor:
        if kind.kind == "text":
            start = int(torch.randint(0, len(train_data) - length - 1, (1,), generator=gen))
            return train_data[start : start + length]
        if kind.kind == "repeat":
            return repeat_row(length, alphabet=kind.alphabet, lo=kind.lo, hi=kind.hi, rng=rng)[0]
        if kind.kind == "far_repeat":
            return far_repeat_row(length, alphabet=kind.alphabet, lo=kind.lo, hi=kind.hi, max_gap=kind.max_gap, rng=rng)[0]
        if kind.kind == "text_chunks":
            return text_chunks_row(train_data, length=length, lo=kind.lo, hi=kind.hi, rng=rng)[0]
        if kind.kind == "cipher_chunks":
            return cipher(text_chunks_row(train_data, length=length, lo=kind.lo, hi=kind.hi, rng=rng)[0], rng)
        if kind.kind == "text_repeat":
            return text_repeat_row(train_data, length=length, lo=kind.lo, hi=kind.hi, max_gap=kind.max_gap, rng=rng)[0]
        return copy_sequence(train_data, length, rng)

    history: list[dict] = []
    device = _device(model)
    t0 = time.perf_counter()
    total = sum(ph.steps for ph in phases)
    step = 0
    for index, ph in enumerate(phases):
        weights = [k.p for k in ph.mix]
        for s in range(ph.steps):
            lr = phase_lr(ph, s)
            for g in opt.param_groups:
                g["lr"] = lr
            # rows are built on the CPU (the same streams on any device), then sent to the model's device
            batch = torch.stack([row(rng.choices(ph.mix, weights)[0], ph.seq_len + 1) for _ in range(ph.batch)])
            batch = batch.to(device, non_blocking=True)
            logits = model(batch[:, :-1], attn_impl="sdpa")
            loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if step % PROBE_EVERY == 0 or step == total - 1:
                entry = {"step": step, "phase": index, "loss": round(loss.item(), 4),
                         "elapsed_s": round(time.perf_counter() - t0, 1), **copy_probe(model, val_data)}
                entry["val_16"] = round(evaluate(model, val_data, 1024, max_windows=16), 4)
                log(f"step {step:5d}  phase {index}  T={ph.seq_len:4d}  loss {loss.item():.3f}  lr {lr:.2e}  "
                    + "  ".join(f"{k} {v}" for k, v in entry.items() if k not in ("step", "phase", "loss")))
                history.append(entry)
            step += 1
    return history
