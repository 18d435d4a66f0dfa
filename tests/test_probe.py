"""This machine measured with torch (sim/model/probe.py): the op counter counts what a call dispatches."""

import torch

from sim.model.probe import count_ops


def test_count_ops_counts_each_dispatched_operation():
    x = torch.ones(4)
    assert count_ops(lambda: x + 1) == 1
    assert count_ops(lambda: (x * 2).sum()) == 2
    assert count_ops(lambda: None) == 0
