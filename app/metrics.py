"""Rows of `sim.readout.Metric`s, drawn as `st.metric`s."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from sim.readout import Metric


def show_metrics(metrics: Sequence[Metric], per_row: int | None = None) -> None:
    """`per_row` metrics to a row of columns (None: all of them in one row). Deltas describe, so they are
    never coloured or given an arrow."""
    per_row = per_row or len(metrics)
    for start in range(0, len(metrics), per_row):
        for col, m in zip(st.columns(per_row), metrics[start : start + per_row], strict=False):
            col.metric(m.label, m.value, m.delta, delta_color="off", delta_arrow="off", help=m.help)
