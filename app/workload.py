"""URL parameters of the seeded request workload that the Paged KV blocks and Serving pages
share (sim/alloc/workload.py's length workloads), registered once with the same bounds on both pages."""

from __future__ import annotations

from app.urlstate import UrlState
from sim.alloc.workload import LENGTH_DISTS, MAX_MODEL_LEN


def register_workload(url: UrlState, max_requests: int) -> None:
    url.int("requests", 1000, 1, max_requests, label="requests")
    url.choice("lengths", "chat", LENGTH_DISTS, label="length distribution")
    url.int("prompt_mean", 160, 1, MAX_MODEL_LEN - 1, label="mean prompt length")
    url.int("output_mean", 340, 1, MAX_MODEL_LEN - 1, label="mean output length")
    url.float("spread", 1.0, 0.05, 3.0, label="spread (log-normal sigma)")
    url.int("max_len", 2048, 64, MAX_MODEL_LEN, label="max model length")
    url.int("max_tokens", 1024, 1, MAX_MODEL_LEN - 1, label="max_tokens")
