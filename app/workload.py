"""The seeded request workload that the Paged KV blocks and Serving pages share (sim/alloc/workload.py's
length workloads): its controls, declared once (URL value and widget), drawn by one function, and the config
they make."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice, Control, Number, Slider
from app.i18n import t
from app.urlstate import UrlState
from sim.alloc.workload import LENGTH_DISTS, MAX_MODEL_LEN, LengthWorkloadConfig


def length_label(dist: str) -> str:
    """'chat (long-tailed)', 'uniform', 'fixed' in the page language (the URL keeps the identifier)."""
    return t(f"wl.len.{dist}")


def arrival_label(arrival: str) -> str:
    return t(f"wl.arr.{arrival}")


def workload_controls(max_requests: int) -> tuple[Control, ...]:
    """The workload's declarations; the number of requests is capped by the page (its simulator's limit)."""
    requests = Number("requests", 1000, 1, max_requests, step=100, label="wl.requests", url_label="wl.url.requests")
    return (requests, LENGTHS, PROMPT_MEAN, OUTPUT_MEAN, SPREAD, MAX_LEN, MAX_TOKENS)


LENGTHS = Choice("lengths", "chat", LENGTH_DISTS, label="wl.lengths", url_label="wl.url.lengths")
PROMPT_MEAN = Number("prompt_mean", 160, 1, MAX_MODEL_LEN - 1, step=16, label="wl.prompt_mean",
                     url_label="wl.url.prompt_mean")
OUTPUT_MEAN = Number("output_mean", 340, 1, MAX_MODEL_LEN - 1, step=16, label="wl.output_mean",
                     url_label="wl.url.output_mean")
SPREAD = Slider("spread", 1.0, 0.05, 3.0, step=0.05, label="wl.spread", url_label="wl.url.spread")
MAX_LEN = Number("max_len", 2048, 64, MAX_MODEL_LEN, step=256, label="wl.max_len", url_label="wl.url.max_len")
MAX_TOKENS = Number("max_tokens", 1024, 1, MAX_MODEL_LEN - 1, step=128, label="wl.max_tokens",
                    url_label="wl.url.max_tokens")


def register_workload(url: UrlState, max_requests: int) -> None:
    url.add(*workload_controls(max_requests))


def draw_workload(max_requests: int, seed: Number, arrival: Choice, rate: Number, rate_format: str | None = None,
                  helps: dict[str, str] | None = None) -> list:
    """The workload's widgets in two rows of six columns (keys as registered, plus the `seed`, `arrival` and `rate`
    each page declares with its own defaults, range and unit); `helps` adds page-specific help by key. Returns the
    two columns left free at the end of the second row, for the page's own widgets."""
    helps = helps or {}
    requests = workload_controls(max_requests)[0]
    c = st.columns(6)
    requests.draw(c[0], help=t("wl.requests_help", n=f"{max_requests:,}"))
    LENGTHS.draw(c[1], format_func=length_label, help=t("wl.lengths_help"))
    PROMPT_MEAN.draw(c[2], help=t("wl.prompt_mean_help"))
    OUTPUT_MEAN.draw(c[3], help=t("wl.output_mean_help"))
    SPREAD.draw(c[4], help=t("wl.spread_help"))
    seed.draw(c[5])
    c = st.columns(6)
    MAX_LEN.draw(c[0], help=helps.get("max_len"))
    MAX_TOKENS.draw(c[1], help=helps.get("max_tokens"))
    arrival.draw(c[2], horizontal=True, format_func=arrival_label)
    rate.draw(c[3], format=rate_format, disabled=st.session_state["arrival"] != "poisson")
    return c[4:]


def workload_config(rate_scale: float = 1.0) -> LengthWorkloadConfig:
    """The config the widgets describe; `rate_scale` turns the rate widget's unit into arrivals per step.
    Raises ValueError for settings that cannot be drawn."""
    ss = st.session_state
    return LengthWorkloadConfig(
        num_requests=ss["requests"], length_dist=ss["lengths"], prompt_mean=ss["prompt_mean"],
        output_mean=ss["output_mean"], spread=ss["spread"], max_model_len=ss["max_len"], max_tokens=ss["max_tokens"],
        arrival=ss["arrival"], arrival_rate=ss["rate"] * rate_scale, seed=ss["seed"])
