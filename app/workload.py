"""The seeded request workload that the Paged KV blocks and Serving pages share (sim/alloc/workload.py's
length workloads): its URL parameters, registered with the same bounds on both pages, its widgets, drawn
by one function, and the config they make."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app.i18n import t
from app.urlstate import UrlState
from sim.alloc.workload import ARRIVALS, LENGTH_DISTS, MAX_MODEL_LEN, LengthWorkloadConfig


def length_label(dist: str) -> str:
    """'chat (long-tailed)', 'uniform', 'fixed' in the page language (the URL keeps the identifier)."""
    return t(f"wl.len.{dist}")


def arrival_label(arrival: str) -> str:
    return t(f"wl.arr.{arrival}")


@dataclass(frozen=True)
class RateInput:
    """The arrival-rate widget, whose unit is the page's own (requests per decode step, or per second)."""

    label: str
    lo: float
    hi: float
    step: float
    format: str | None = None


def register_workload(url: UrlState, max_requests: int) -> None:
    url.int("requests", 1000, 1, max_requests, label=t("wl.url.requests"))
    url.choice("lengths", "chat", LENGTH_DISTS, label=t("wl.url.lengths"))
    url.int("prompt_mean", 160, 1, MAX_MODEL_LEN - 1, label=t("wl.url.prompt_mean"))
    url.int("output_mean", 340, 1, MAX_MODEL_LEN - 1, label=t("wl.url.output_mean"))
    url.float("spread", 1.0, 0.05, 3.0, label=t("wl.url.spread"))
    url.int("max_len", 2048, 64, MAX_MODEL_LEN, label=t("wl.url.max_len"))
    url.int("max_tokens", 1024, 1, MAX_MODEL_LEN - 1, label=t("wl.url.max_tokens"))


def draw_workload(max_requests: int, rate: RateInput, helps: dict[str, str] | None = None) -> list:
    """The workload's widgets in two rows of six columns (keys as registered, plus `seed`, `arrival` and `rate`,
    which each page registers with its own defaults); `helps` adds page-specific help by key. Returns the two
    columns left free at the end of the second row, for the page's own widgets."""
    helps = helps or {}
    c = st.columns(6)
    c[0].number_input(t("wl.requests"), 1, max_requests, step=100, key="requests",
                      help=t("wl.requests_help", n=f"{max_requests:,}"))
    c[1].selectbox(t("wl.lengths"), LENGTH_DISTS, key="lengths", format_func=length_label, help=t("wl.lengths_help"))
    c[2].number_input(t("wl.prompt_mean"), 1, MAX_MODEL_LEN - 1, step=16, key="prompt_mean",
                      help=t("wl.prompt_mean_help"))
    c[3].number_input(t("wl.output_mean"), 1, MAX_MODEL_LEN - 1, step=16, key="output_mean",
                      help=t("wl.output_mean_help"))
    c[4].slider(t("wl.spread"), 0.05, 3.0, step=0.05, key="spread", help=t("wl.spread_help"))
    c[5].number_input(t("wl.seed"), 0, 2**31 - 1, key="seed")
    c = st.columns(6)
    c[0].number_input(t("wl.max_len"), 64, MAX_MODEL_LEN, step=256, key="max_len", help=helps.get("max_len"))
    c[1].number_input(t("wl.max_tokens"), 1, MAX_MODEL_LEN - 1, step=128, key="max_tokens",
                      help=helps.get("max_tokens"))
    c[2].radio(t("wl.arrivals"), ARRIVALS, key="arrival", horizontal=True, format_func=arrival_label)
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
