"""The seeded request workload that the Paged KV blocks and Serving pages share (sim/alloc/workload.py's
length workloads): its URL parameters, registered with the same bounds on both pages, its widgets, drawn
by one function, and the config they make."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.urlstate import UrlState
from sim.alloc.workload import ARRIVALS, LENGTH_DISTS, MAX_MODEL_LEN, LengthWorkloadConfig

LENGTH_LABELS = {"chat": "chat (long-tailed)", "uniform": "uniform", "fixed": "fixed"}
ARRIVAL_LABELS = {"burst": "all queued at once", "poisson": "Poisson"}


@dataclass(frozen=True)
class RateInput:
    """The arrival-rate widget, whose unit is the page's own (requests per decode step, or per second)."""

    label: str
    lo: float
    hi: float
    step: float
    format: str | None = None


def register_workload(url: UrlState, max_requests: int) -> None:
    url.int("requests", 1000, 1, max_requests, label="requests")
    url.choice("lengths", "chat", LENGTH_DISTS, label="length distribution")
    url.int("prompt_mean", 160, 1, MAX_MODEL_LEN - 1, label="mean prompt length")
    url.int("output_mean", 340, 1, MAX_MODEL_LEN - 1, label="mean output length")
    url.float("spread", 1.0, 0.05, 3.0, label="spread (log-normal sigma)")
    url.int("max_len", 2048, 64, MAX_MODEL_LEN, label="max model length")
    url.int("max_tokens", 1024, 1, MAX_MODEL_LEN - 1, label="max_tokens")


def draw_workload(max_requests: int, rate: RateInput, helps: dict[str, str] | None = None) -> list:
    """The workload's widgets in two rows of six columns (keys as registered, plus `seed`, `arrival` and `rate`,
    which each page registers with its own defaults); `helps` adds page-specific help by key. Returns the two
    columns left free at the end of the second row, for the page's own widgets."""
    helps = helps or {}
    c = st.columns(6)
    c[0].number_input("Requests", 1, max_requests, step=100, key="requests",
                      help=f"1 to {max_requests:,} chat completions.")
    c[1].selectbox("Lengths", LENGTH_DISTS, key="lengths", format_func=LENGTH_LABELS.get,
                   help="chat: log-normal, most requests short and a few very long (like ShareGPT); "
                        "uniform: 1 … 2×mean−1; fixed: every request the mean.")
    c[2].number_input("Mean prompt tokens", 1, MAX_MODEL_LEN - 1, step=16, key="prompt_mean",
                      help="ShareGPT's mean is 161 (vLLM paper).")
    c[3].number_input("Mean output tokens", 1, MAX_MODEL_LEN - 1, step=16, key="output_mean",
                      help="ShareGPT's mean is 338 (vLLM paper). Outputs stop at max_tokens.")
    c[4].slider("Spread σ (chat only)", 0.05, 3.0, step=0.05, key="spread",
                help="Sigma of the log-normal: larger means a longer tail.")
    c[5].number_input("Seed", 0, 2**31 - 1, key="seed")
    c = st.columns(6)
    c[0].number_input("Max model length", 64, MAX_MODEL_LEN, step=256, key="max_len", help=helps.get("max_len"))
    c[1].number_input("max_tokens (client's output cap)", 1, MAX_MODEL_LEN - 1, step=128, key="max_tokens",
                      help=helps.get("max_tokens"))
    c[2].radio("Arrivals", ARRIVALS, key="arrival", horizontal=True, format_func=ARRIVAL_LABELS.get)
    c[3].number_input(rate.label, rate.lo, rate.hi, step=rate.step, format=rate.format, key="rate",
                      disabled=st.session_state["arrival"] != "poisson")
    return c[4:]


def workload_config(rate_scale: float = 1.0) -> LengthWorkloadConfig:
    """The config the widgets describe; `rate_scale` turns the rate widget's unit into arrivals per step.
    Raises ValueError for settings that cannot be drawn."""
    ss = st.session_state
    return LengthWorkloadConfig(
        num_requests=ss["requests"], length_dist=ss["lengths"], prompt_mean=ss["prompt_mean"],
        output_mean=ss["output_mean"], spread=ss["spread"], max_model_len=ss["max_len"], max_tokens=ss["max_tokens"],
        arrival=ss["arrival"], arrival_rate=ss["rate"] * rate_scale, seed=ss["seed"])
