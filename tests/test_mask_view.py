"""sim/attention/mask_view.py: the attention-masks page's numbers, worked out by hand on tiny masks."""

import numpy as np
import torch

from sim.attention.mask_view import leaks, mask_view, same_next_tokens, sink_figures
from sim.attention.masks import VARIANTS


def test_causal_view_with_padding_counts_by_hand():
    view = mask_view("causal", [65, 66, 67], window=4, prefix=6, pad=2)
    assert view.mask.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert view.num_masked == 3  # the strict upper triangle of 3×3
    assert view.prefix_len == 3  # the setting (6) cut to the prompt's 3 tokens
    assert view.shown.shape == (5, 5) and view.num_empty_rows == 2  # the two pad queries read nothing
    assert view.shown[2:, 2:].tolist() == view.mask.tolist()  # the prompt's own block is the unpadded mask
    assert not view.shown[:, :2].any()  # no query reads a pad key
    same = mask_view("causal", [65, 66, 67], window=4, prefix=6, pad=0)
    assert same.shown is same.mask and same.num_empty_rows == 0


def test_leaks_of_the_variants():
    torch.manual_seed(0)
    scores = torch.randn(4, 4)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    weights, rows = leaks(scores, mask)
    assert [r.key for r in rows] == [v.key for v in VARIANTS] and set(weights) == {v.label for v in VARIANTS}
    first = rows[0]  # add −inf: nothing leaks, no row is NaN (every row reads itself), no difference from itself
    assert (first.mean, first.worst, first.nan_rows, first.error) == (0.0, 0.0, 0, 0.0)
    times_zero = next(r for r in rows if r.key == "times_zero")
    assert times_zero.worst > 0  # a masked score of 0 still gets e^0 of the mass


def test_same_next_tokens_and_sink_figures():
    a = torch.tensor([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0]])
    b = torch.tensor([[0.0, 5.0], [0.0, 2.0], [1.0, 9.0]])
    assert same_next_tokens(a, b) == 2  # rows 0 and 2 pick token 1; row 1 picks 0 against 1
    fig = sink_figures(np.array([0.5, 0.125, 0.75, 0.25]), 0.375, 0.0625)
    assert (fig.lowest, fig.highest, fig.lowest_layer, fig.highest_layer) == (0.125, 0.75, 1, 2)
    assert f"{fig.median:.1%}" == f"{100 * fig.median:.1f}%" == "37.5%"  # the page's percent, as it was worded
