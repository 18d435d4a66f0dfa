"""Training in phases (sim.model.curriculum): the rows each kind makes, the rate schedule, the recipe checks."""

import random

import pytest
import torch

from sim.model.curriculum import ALPHABET, Phase, RowKind, phase_lr, repeat_row, text_repeat_row
from sim.model.train import TrainConfig


def test_repeat_rows_over_a_small_alphabet_mark_what_only_copying_predicts():
    ids, mask = repeat_row(300, alphabet=8, lo=16, hi=48, rng=random.Random(1))
    assert ids.shape == mask.shape == (300,)
    assert set(ids.tolist()) <= set(ALPHABET[:8]) == set(b"etaoinsh")
    # the same draws made by hand: a length, that many symbols, the chunk twice; the mask on the second copy
    # after its first byte (the first could be any chunk's start)
    rng, want_ids, want_mask = random.Random(1), [], []
    while len(want_ids) < 300:
        chunk = [ALPHABET[rng.randrange(8)] for _ in range(rng.randint(16, 48))]
        want_ids += chunk * 2
        want_mask += [False] * (len(chunk) + 1) + [True] * (len(chunk) - 1)
    assert ids.tolist() == want_ids[:300] and mask.tolist() == want_mask[:300]
    assert 0 < mask.sum() < 150


def test_a_text_repeat_row_repeats_one_span_of_the_data_after_its_filler():
    data = torch.arange(10_000) % 251  # every 251-byte window is unique
    ids, mask = text_repeat_row(data, length=512, lo=40, hi=40, max_gap=300, rng=random.Random(5))
    marked = mask.nonzero().flatten().tolist()
    assert len(marked) == 40 - 8 and marked == list(range(marked[0], marked[0] + 32))
    start = marked[0] - 8  # the repeat's first byte
    span = ids[start : start + 40].tolist()
    first = next(j for j in range(start) if ids[j : j + 40].tolist() == span)
    assert 0 < start - (first + 40) <= 300  # the filler between them, at most max_gap bytes


def test_phase_rates_ramp_then_follow_the_cosine():
    ph = Phase(steps=100, seq_len=256, batch=16, lr=1e-3, mix=(RowKind(kind="text", p=1.0),), warmup=10, cosine=True, min_lr=1e-4)
    assert phase_lr(ph, 0) == pytest.approx(1e-3 * 1 / 10 * (1e-4 + 0.5 * 9e-4 * (1 + 1)) / 1e-3)
    assert phase_lr(ph, 50) == pytest.approx(1e-4 + 0.5 * 9e-4)
    assert phase_lr(ph, 99) > 1e-4 and phase_lr(Phase(steps=5, seq_len=64, batch=2, lr=1e-3, mix=(RowKind(kind="text", p=1.0),)), 3) == 1e-3


def test_recipes_are_checked():
    with pytest.raises(ValueError, match="not one of"):
        RowKind(kind="chunks", p=1.0)
    ph = Phase(steps=10, seq_len=64, batch=2, lr=1e-3, mix=(RowKind(kind="text", p=1.0),))
    with pytest.raises(ValueError, match="phases add up to 20"):
        TrainConfig(preset="x", steps=30, phases=(ph, ph))
    assert TrainConfig(preset="x", steps=20, phases=(ph, ph)).steps == 20


def test_a_far_repeat_row_puts_random_symbols_between_a_chunk_and_its_repeat():
    from sim.model.curriculum import far_repeat_row

    ids, mask = far_repeat_row(400, alphabet=8, lo=16, hi=48, max_gap=100, rng=random.Random(2))
    rng, want_ids, want_mask, gaps = random.Random(2), [], [], []
    while len(want_ids) < 400:
        chunk = [ALPHABET[rng.randrange(8)] for _ in range(rng.randint(16, 48))]
        gap = [ALPHABET[rng.randrange(8)] for _ in range(rng.randint(0, 100))]
        gaps.append(len(gap))
        want_ids += chunk + gap + chunk
        want_mask += [False] * (len(chunk) + len(gap) + 1) + [True] * (len(chunk) - 1)
    assert ids.tolist() == want_ids[:400] and mask.tolist() == want_mask[:400]
    assert max(gaps) > 0  # the repeat is not always right after its chunk


def test_a_text_chunks_row_repeats_earlier_spans_of_itself():
    from sim.model.curriculum import text_chunks_row

    data = torch.arange(20_000) % 251
    ids, mask = text_chunks_row(data, length=600, lo=12, hi=40, rng=random.Random(4))
    assert ids.shape == mask.shape == (600,) and 0.1 < mask.float().mean() < 0.9
    # every marked run is the tail of a span that occurred earlier in the row: its 4 bytes of key + the run
    runs, i = [], 0
    while i < 600:
        if mask[i]:
            j = i
            while j < 600 and mask[j]:
                j += 1
            runs.append((i - 4, j))
            i = j
        else:
            i += 1
    assert runs
    row = ids.tolist()
    for a, b in runs:
        piece = row[a:b]
        assert any(row[k : k + len(piece)] == piece for k in range(0, a)), (a, b)


def test_a_cipher_renames_text_bytes_one_to_one_and_keeps_the_rest():
    from sim.model.curriculum import TEXT_BYTES, cipher

    ids = torch.arange(256).repeat(2)
    out = cipher(ids, random.Random(3))
    assert torch.equal(out[:256], out[256:])  # one table for the whole row: a repeat stays a repeat
    text = torch.tensor(TEXT_BYTES)
    assert sorted(out[text].tolist()) == sorted(TEXT_BYTES) and not torch.equal(out[text], text)  # a permutation
    other = torch.tensor([b for b in range(256) if b not in TEXT_BYTES])
    assert torch.equal(out[other], other)  # digits and rare bytes are left as they are
    assert not torch.equal(cipher(ids, random.Random(4)), out)  # each row draws its own table
