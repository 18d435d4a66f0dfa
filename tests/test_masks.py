"""Mask builders (exact small matrices), leak figures worked by hand, and cache validity on the
real model."""

import math

import pytest
import torch

from sim.attention.maps import cache_validity, capture_attention
from sim.attention.masks import (
    VARIANTS,
    MaskedRow,
    additive,
    build,
    causal,
    combine,
    document,
    fully_masked_row_behaviour,
    leaked_mass,
    left_padding,
    masked_softmax,
    prefix_lm,
    segments_from_text,
    sliding_window,
)

V = {v.key: v for v in VARIANTS}


def m(rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_causal_and_window():
    assert causal(3).tolist() == m([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).tolist()
    assert sliding_window(4, 2).tolist() == m([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]).tolist()
    assert torch.equal(sliding_window(5, 5), causal(5))


def test_prefix_lm():
    assert prefix_lm(4, 2).tolist() == m([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).tolist()
    assert torch.equal(prefix_lm(4, 0), causal(4))


def test_document_packing():
    assert segments_from_text(list(b"ab|cd")) == [0, 0, 0, 1, 1]
    assert document([0, 0, 1, 1]).tolist() == m([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]).tolist()


def test_left_padding_and_combination():
    pads = left_padding([2, 3], 3)  # first sequence has one pad token in front
    assert pads[0].tolist() == m([[0, 0, 0], [0, 1, 0], [0, 1, 1]]).tolist()
    assert torch.equal(pads[1], causal(3))
    both = combine(sliding_window(3, 1), pads[0])
    assert both.tolist() == m([[0, 0, 0], [0, 1, 0], [0, 0, 1]]).tolist()
    with pytest.raises(ValueError, match=r"\(3, 3\) vs \(2, 2\)"):
        combine(causal(3), causal(2))


def test_bad_sizes_name_the_numbers():
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        sliding_window(4, 0)
    with pytest.raises(ValueError, match="prefix length must be 0..4, got 5"):
        prefix_lm(4, 5)
    with pytest.raises(ValueError, match="mask size must be 1..4096, got 5000"):
        causal(5000)
    with pytest.raises(ValueError, match="need 3 segment ids, got 2"):
        build("document", 3, segment_ids=[0, 1])


def test_additive():
    a = additive(causal(2))
    assert a[0, 0] == 0 and a[0, 1] == float("-inf") and a[1].tolist() == [0, 0]


def test_leak_by_hand():
    """Row 0 may see key 0 only. Scores [1, 2, 3]: ×0 turns them into [1, 0, 0], so the two
    forbidden keys get 2/(e + 2) of the mass; −inf gives them exactly 0."""
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    mask = causal(3)[:1]
    w0 = masked_softmax(scores, mask, V["times_zero"])
    assert leaked_mass(w0, mask).item() == pytest.approx(2 / (math.e + 2), abs=1e-7)
    assert w0[0, 0].item() == pytest.approx(math.e / (math.e + 2), abs=1e-7)
    for key in ("neg_inf", "neg_1e4", "neg_1e9", "neg_1e9_fp16"):
        assert leaked_mass(masked_softmax(scores, mask, V[key]), mask).item() == 0.0


def test_fully_masked_rows():
    scores = torch.tensor([[0.5, 1.0]])
    none = torch.zeros(1, 2, dtype=torch.bool)
    assert masked_softmax(scores, none, V["neg_inf"]).isnan().all()
    assert masked_softmax(scores, none, V["neg_1e9"]).tolist() == [[0.5, 0.5]]
    behaviour = {r.where: r for r in fully_masked_row_behaviour()}
    assert list(behaviour)[:3] == ["softmax_inf", "softmax_1e9", "math"]
    assert behaviour["softmax_inf"] == MaskedRow("softmax_inf", "nan")
    assert behaviour["softmax_1e9"] == MaskedRow("softmax_1e9", "uniform", (behaviour["softmax_1e9"].values[0],))
    assert abs(behaviour["softmax_1e9"].values[0] - 1 / 3) < 1e-6  # three equal scores after −1e9
    assert behaviour["math"] == MaskedRow("math", "zeros")  # measured on this torch build


def test_cache_validity_on_the_real_model(shipped_models):
    ids = list(b"Now is the winter of our discontent")
    for name in ("mha", "mqa"):
        with_mask = cache_validity(shipped_models[name], ids, causal_mask=True)
        without = cache_validity(shipped_models[name], ids, causal_mask=False)
        assert with_mask.num_tokens == len(ids) - 1
        assert with_mask.max_diff <= 1e-5  # unchanged to fp32 precision
        assert without.max_diff_logits > 1e-2 and without.max_diff_k > 1e-3  # earlier K changes from layer 1 on


def test_capture_matches_model_and_mask(shipped_models):
    model = shipped_models["gqa"]
    ids = list(b"What's in a name?")
    cap = capture_attention(model, ids)
    assert cap.probs.shape == (4, 4, len(ids), len(ids))
    torch.testing.assert_close(cap.probs.sum(-1), torch.ones(4, 4, len(ids)))
    assert (cap.probs.triu(1) == 0).all()  # causal: nothing above the diagonal
    torch.testing.assert_close(cap.logits, model(torch.tensor([ids]))[0], rtol=0, atol=1e-5)
    win = capture_attention(model, ids, sliding_window(len(ids), 3))
    assert (win.probs[..., 5, :3] == 0).all() and torch.allclose(win.probs.sum(-1), torch.ones(4, 4, len(ids)))


def test_masked_rows_in_korean_are_the_korean_catalog_filled_never_the_english_read_back(monkeypatch):
    from sim.words.catalog import catalog
    from sim.words.masks import behaviour_rows

    rows = (MaskedRow("softmax_inf", "nan"), MaskedRow("softmax_1e9", "uniform", (1 / 3,)),
            MaskedRow("flash", "finite", (0.25, 0.5)), MaskedRow("cudnn", "unavailable"))
    ko = catalog("ko")
    korean = behaviour_rows(rows, "ko")
    assert korean == [(ko["masks.s.where.softmax_inf"], ko["masks.s.result.nan"]),
                      (ko["masks.s.where.softmax_1e9"], ko["masks.s.result.uniform"].format(x="0.333")),
                      (ko["masks.s.where.sdpa"].format(name="flash"), ko["masks.s.result.finite"].format(values="0.250, 0.500")),
                      (ko["masks.s.where.sdpa"].format(name="cudnn"), ko["masks.s.result.unavailable"])]
    for key in [k for k in catalog("en") if k.startswith(("masks.s.where.", "masks.s.result."))]:
        monkeypatch.setitem(catalog("en"), key, "REWORDED")
    assert behaviour_rows(rows, "ko") == korean
