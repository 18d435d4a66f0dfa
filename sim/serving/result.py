"""What a serving run produced: per request (arrival, first token, finish), per running stretch, per forward pass.

Both schedulers (sim.serving.schedulers) return one `ServingResult`; its properties and `metrics()` are what the
Serving page's table, charts and sentences show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.msg import Msg

POLICIES_NAMED = ("static", "continuous", "chunked")  # worded by sim.words.serving.policy_name


PERCENTILES = (50, 95, 99)
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2e")


def percentile_column(metric: str, q: int, unit: str) -> str:
    """A results table's column of one latency percentile: ('ttft', 50, 's') -> 'ttft_p50_s'."""
    return f"{metric}_p{q}_{unit}"


# every percentile column a serving table may hold, with the message that names it on screen
PERCENTILE_COLUMNS: dict[str, Msg] = {
    percentile_column(m, q, u): Msg("serving.col.percentile", metric=Msg(f"serving.col.m.{m}"), q=q, unit=u)
    for m in PERCENTILE_METRICS for q in (50, 90, 95, 99) for u in ("s", "ms")}


@dataclass(frozen=True)
class ServingResult:
    policy: str
    capacity_tokens: int
    max_num_seqs: int
    # per request
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_len: np.ndarray
    output_len: np.ndarray
    num_preempted: np.ndarray  # times each request was preempted
    # running stretches: a request computes from start_s to end_s; static rows stay in the batch until row_end_s
    seg_req: np.ndarray
    seg_start_s: np.ndarray
    seg_end_s: np.ndarray
    seg_row_end_s: np.ndarray
    # per iteration (one forward pass)
    it_start_s: np.ndarray
    it_seconds: np.ndarray
    it_rows: np.ndarray  # rows computed (static: the padded batch)
    it_tokens: np.ndarray  # output tokens produced (rows doing useful work)
    it_prefills: np.ndarray  # requests prefilled in this pass
    it_prefill_tokens: np.ndarray
    it_kv_claimed: np.ndarray  # KV slots held (continuous: blocks × block size; static: the reservation)
    it_kv_tokens: np.ndarray  # slots holding real tokens
    it_finished: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # every gap between two consecutive tokens of one request; None: derived from the passes (see itl_s)
    token_gaps_s: np.ndarray | None = None

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def num_iterations(self) -> int:
        return len(self.it_seconds)

    @property
    def num_output_tokens(self) -> int:
        return int(self.output_len.sum())

    @property
    def num_preemptions(self) -> int:
        return int(self.num_preempted.sum())

    @property
    def makespan_s(self) -> float:
        """From the first arrival to the last token."""
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def tokens_per_s(self) -> float:
        return self.num_output_tokens / self.makespan_s

    @property
    def requests_per_s(self) -> float:
        return self.num_requests / self.makespan_s

    @property
    def busy_s(self) -> float:
        return float(self.it_seconds.sum())

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(last token − first token) / (output − 1), for requests with more than one output token."""
        many = self.output_len > 1
        return (self.finish_s[many] - self.first_token_s[many]) / (self.output_len[many] - 1)

    @property
    def itl_s(self) -> np.ndarray:
        """Inter-token latency: every gap between two consecutive tokens of one request.

        Given by the scheduler (token_gaps_s), or derived for the static and continuous schedulers, where every row
        of a pass produces one token: a pass with no prefill in a row gives that row a gap of the pass's time
        (it_tokens - it_prefills such rows), and a request recomputed after a preemption waits from the end of its
        last stretch to the end of the pass that prefills it again."""
        if self.token_gaps_s is not None:
            return self.token_gaps_s
        gaps = np.repeat(self.it_seconds, self.it_tokens - self.it_prefills)
        order = np.lexsort((self.seg_start_s, self.seg_req))
        req, start, end = self.seg_req[order], self.seg_start_s[order], self.seg_end_s[order]
        again = np.flatnonzero(req[1:] == req[:-1]) + 1  # stretches after a preemption
        if len(again):
            it = np.searchsorted(self.it_start_s, start[again])  # the pass that starts the stretch
            gaps = np.concatenate([gaps, self.it_start_s[it] + self.it_seconds[it] - end[again - 1]])
        return gaps

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def mean_batch(self) -> float:
        """Useful rows per pass, weighted by each pass's duration."""
        return float(np.sum(self.it_tokens * self.it_seconds) / self.busy_s)

    @property
    def useful_row_share(self) -> float:
        """Of the rows computed, the share that produced a token someone asked for."""
        return float(self.it_tokens.sum() / self.it_rows.sum())

    @property
    def peak_kv_claimed(self) -> int:
        return int(self.it_kv_claimed.max())

    @property
    def mean_kv_claimed(self) -> float:
        """KV slots claimed in an average pass, weighted by each pass's duration (as mean_batch)."""
        return float(np.sum(self.it_kv_claimed * self.it_seconds) / self.busy_s)

    def percentiles(self, values: np.ndarray) -> tuple[float, ...]:
        if len(values) == 0:
            return tuple(math.nan for _ in PERCENTILES)
        return tuple(float(v) for v in np.percentile(values, PERCENTILES))

    def metrics(self) -> dict[str, float]:
        row = {"policy": self.policy, "throughput_tok_s": self.tokens_per_s, "requests_per_s": self.requests_per_s,
               "makespan_s": self.makespan_s}
        for name, vals, scale in (("ttft", self.ttft_s, 1.0), ("tpot", self.tpot_s, 1e3), ("itl", self.itl_s, 1e3),
                                  ("e2e", self.e2e_s, 1.0)):
            unit = "ms" if scale == 1e3 else "s"
            for q, v in zip(PERCENTILES, self.percentiles(vals), strict=True):
                row[percentile_column(name, q, unit)] = v * scale
        row.update({"mean_batch": self.mean_batch, "useful_rows_pct": 100 * self.useful_row_share,
                    "forward_passes": self.num_iterations, "preemptions": self.num_preemptions,
                    "peak_kv_pct": 100 * self.peak_kv_claimed / self.capacity_tokens})
        return row

    def series(self, num_points: int = 600):
        """Sampled at evenly spaced times: the pass in progress (useful rows, rows, KV slots)."""
        import pandas as pd

        end = float(self.it_start_s[-1] + self.it_seconds[-1])
        times = np.linspace(float(self.it_start_s[0]), end, num_points, endpoint=False)
        i = np.clip(np.searchsorted(self.it_start_s, times, side="right") - 1, 0, self.num_iterations - 1)
        idle = times >= self.it_start_s[i] + self.it_seconds[i]  # between passes, waiting for arrivals
        z = np.where(idle, 0, 1)
        return pd.DataFrame({"policy": self.policy, "time_s": times, "useful_rows": self.it_tokens[i] * z,
                             "rows": self.it_rows[i] * z, "kv_claimed": self.it_kv_claimed[i] * z,
                             "kv_tokens": self.it_kv_tokens[i] * z})

