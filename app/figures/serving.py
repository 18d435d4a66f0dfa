"""Figures for the Serving page: request timelines, batch occupancy, KV memory, latency percentiles,
speculative decoding curves. Data in, go.Figure out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, LEGEND_BELOW, NAIVE, base_layout
from app.figures.edges import room_above_labels
from app.figures.headline import FULL_WIDTH_CHARS, HALF_WIDTH_CHARS, set_headline
from sim.serving.speculative import SpecCurves
from sim.words import text
from sim.words.serving import policy_name

POLICY_COLORS = {"static": NAIVE, "continuous": CACHED}
QUEUE_COLOR = "#c7c7c7"
HELD_COLORS = {"static": "#f4b6b6", "continuous": "#aec7e8"}
ALPHA_COLORS = ["#9ecae1", "#6baed6", "#3182bd", "#08519c", "#08306b"]
SUBPLOT_TITLE_PX = 24  # room between the headline and the subplot titles under it


def legend_below(fig: go.Figure, height: int) -> go.Figure:
    """Legend under the plot, so it never covers a title or a subplot title."""
    fig.update_layout(legend=LEGEND_BELOW, height=height,
                      margin=dict(l=10, r=10, t=60, b=10))
    return fig


def gantt(results: dict, num_requests: int, title: str, lang: str = "en") -> go.Figure:
    """One row per request (the first `num_requests`), one panel per policy: waiting, computing, and (static)
    finished but still holding its row until the batch's slowest request is done. Ticks: first token.
    title: the takeaway (ServingComparison.takeaway)."""
    fig = make_subplots(rows=len(results), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[policy_name(lang, p) for p in results])
    shown: set[str] = set()
    for row, (policy, r) in enumerate(results.items(), start=1):
        n = min(num_requests, r.num_requests)
        req, start, end, held = r.seg_req, r.seg_start_s, r.seg_end_s, r.seg_row_end_s
        keep = req < n
        req, start, end, held = req[keep], start[keep], end[keep], held[keep]
        # waiting: arrival -> first start, and every gap between two running stretches (preempted)
        order = np.lexsort((start, req))
        req, start, end, held = req[order], start[order], end[order], held[order]
        prev_end = np.where(np.r_[True, req[1:] != req[:-1]], r.arrival_s[req], np.r_[0.0, held[:-1]])
        bars = [
            (text(lang, "serving.f.waiting"), QUEUE_COLOR, req, prev_end, start - prev_end),
            (text(lang, "serving.f.computing"), POLICY_COLORS[policy], req, start, end - start),
            (text(lang, "serving.f.held"), HELD_COLORS[policy], req, end, held - end),
        ]
        for name, color, y, base, width in bars:
            mask = width > 0
            if not mask.any():
                continue
            key = name if name != bars[1][0] else f"{name} {policy}"
            fig.add_bar(y=y[mask], x=width[mask], base=base[mask], orientation="h", marker_color=color,
                        name=name if name != bars[1][0] else text(lang, "serving.f.computing_policy",
                                                                          policy=policy_name(lang, policy).lower()),
                        legendgroup=key, showlegend=key not in shown, row=row, col=1,
                        customdata=np.stack([base[mask], base[mask] + width[mask]], axis=1),
                        hovertemplate=text(lang, "serving.f.request_hover") + "<extra>" + name
                        + "</extra>")
            shown.add(key)
        ids = np.arange(n)
        fig.add_scatter(x=r.first_token_s[:n], y=ids, mode="markers", marker=dict(symbol="line-ns-open", size=9,
                        color=FORMULA, line=dict(width=2)), name=text(lang, "serving.f.first_token"), legendgroup="first",
                        showlegend="first" not in shown, row=row, col=1,
                        hovertemplate=text(lang, "serving.f.first_hover") + "<extra></extra>")
        shown.add("first")
        fig.update_yaxes(autorange="reversed", title_text=text(lang, "serving.f.request"), row=row, col=1)
    fig.update_layout(barmode="overlay", bargap=0.25)
    fig.update_xaxes(title_text=text(lang, "serving.f.time_s"), row=len(results), col=1)
    n_rows = min(num_requests, next(iter(results.values())).num_requests)
    fig = base_layout(fig, "", "", "")
    fig.update_layout(legend=LEGEND_BELOW,
                      margin=dict(l=10, r=10, t=110, b=10), height=220 + 9 * max(n_rows, 10) * len(results))
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=24)  # below it: the first panel's title


def occupancy(series: pd.DataFrame, max_num_seqs: int, title: str, lang: str = "en") -> go.Figure:
    """Rows in each forward pass over time: useful ones for both policies, padded ones for static.
    title: the takeaway (sim.words.comparison.occupancy_takeaway)."""
    fig = go.Figure()
    for policy, g in series.groupby("policy", sort=False):
        fig.add_scatter(x=g["time_s"], y=g["useful_rows"], name=text(lang, "serving.f.rows_useful", policy=policy_name(lang, policy)),
                        line=dict(color=POLICY_COLORS[policy], width=2, shape="hv"))
        if policy == "static":
            fig.add_scatter(x=g["time_s"], y=g["rows"], name=text(lang, "serving.f.rows_padded"),
                            line=dict(color=POLICY_COLORS[policy], width=1.5, dash="dot", shape="hv"))
    fig.add_hline(y=max_num_seqs, line=dict(color=FORMULA, dash="dash", width=1),
                  annotation_text=text(lang, "serving.f.max_batch", n=f"{max_num_seqs}"), annotation_position="top left")
    fig = legend_below(base_layout(fig, "", text(lang, "serving.f.time_s"), text(lang, "serving.f.in_pass")), 470)
    return set_headline(fig, title, HALF_WIDTH_CHARS)


def kv_memory(series: pd.DataFrame, capacity_tokens: int, title: str, lang: str = "en") -> go.Figure:
    """KV slots claimed and holding real tokens over time, as % of the budget.
    title: the takeaway (sim.words.comparison.kv_takeaway)."""
    fig = go.Figure()
    for policy, g in series.groupby("policy", sort=False):
        color = POLICY_COLORS[policy]
        claimed = text(lang, "serving.f.reserved" if policy == "static" else "serving.f.allocated")
        fig.add_scatter(x=g["time_s"], y=100 * g["kv_claimed"] / capacity_tokens,
                        name=text(lang, "serving.f.policy_what", policy=policy_name(lang, policy), what=claimed), line=dict(color=color, width=2, shape="hv"))
        fig.add_scatter(x=g["time_s"], y=100 * g["kv_tokens"] / capacity_tokens,
                        name=text(lang, "serving.f.policy_what", policy=policy_name(lang, policy),
                                  what=text(lang, "serving.f.real_tokens")),
                        line=dict(color=color, width=1.5, dash="dot", shape="hv"))
    fig.add_hline(y=100, line=dict(color=FORMULA, dash="dash", width=1), annotation_text=text(lang, "serving.f.kv_budget"),
                  annotation_position="top left")
    fig = legend_below(base_layout(fig, "", text(lang, "serving.f.time_s"), text(lang, "serving.f.kv_pct")), 470)
    return set_headline(fig, title, HALF_WIDTH_CHARS)


def latency_percentiles(table: pd.DataFrame, title: str, lang: str = "en") -> go.Figure:
    """Grouped bars of p50/p95/p99 for TTFT, TPOT and end-to-end latency, one panel each.
    title: the takeaway (sim.words.comparison.latency_takeaway)."""
    panels = tuple((m, u, text(lang, f"serving.f.panel.{m}")) for m, u in (("ttft", "s"), ("tpot", "ms"), ("e2e", "s")))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[p[2] for p in panels], horizontal_spacing=0.07)
    for col, (metric, unit, _) in enumerate(panels, start=1):
        for _, row in table.iterrows():
            policy = row["policy"]
            vals = [row[f"{metric}_p{q}_{unit}"] for q in (50, 95, 99)]
            fig.add_bar(x=["p50", "p95", "p99"], y=vals, name=policy_name(lang, policy), legendgroup=policy,
                        marker_color=POLICY_COLORS[policy], showlegend=col == 1, row=1, col=col,
                        text=[f"{v:,.3g}" for v in vals], textposition="outside", cliponaxis=False,
                        hovertemplate=f"{policy_name(lang, policy)} %{{x}}: %{{y:,.4g}} {unit}<extra></extra>")
        fig.update_yaxes(rangemode="tozero", title_text=text(lang, "serving.f.latency", unit=unit), row=1, col=col)
    fig.update_xaxes(title_text=text(lang, "serving.f.percentile"))
    fig.update_layout(barmode="group")
    fig = legend_below(base_layout(fig, "", "", ""), 440)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def batch_sweep(frame: pd.DataFrame, chosen: int, title: str, lang: str = "en") -> go.Figure:
    """Throughput of both policies and their ratio as the max batch grows (same workload, same GPU).
    title: the takeaway (BatchSweep.takeaway)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for policy in ("static", "continuous"):
        fig.add_scatter(x=frame["max_batch"], y=frame[f"{policy}_tok_s"], name=policy_name(lang, policy),
                        mode="lines+markers", line=dict(color=POLICY_COLORS[policy], width=2))
    fig.add_scatter(x=frame["max_batch"], y=frame["ratio"], name=text(lang, "serving.f.ratio"), mode="lines+markers+text",
                    text=[f"{v:.1f}×" for v in frame["ratio"]], textposition="top center",
                    line=dict(color=FORMULA, dash="dash"), secondary_y=True)
    fig.add_vline(x=chosen, line=dict(color="#888", dash="dot"))
    fig.update_xaxes(type="log", tickvals=list(frame["max_batch"]))
    fig.update_yaxes(title_text=text(lang, "serving.f.out_tok_s"), secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text=text(lang, "serving.f.ratio_axis"), secondary_y=True, rangemode="tozero",
                     showgrid=False)
    room_above_labels(fig)  # the ratio is written over each of its points
    return set_headline(base_layout(fig, "", text(lang, "serving.f.max_batch_axis"), ""), title, FULL_WIDTH_CHARS)


def speculative(curves: SpecCurves, measured=None, measured_label: str = "", title: str = "",
                lang: str = "en") -> go.Figure:
    """Left: tokens per target pass vs k (closed form, Monte Carlo dots). Right: speedup vs k for several α,
    each optimum marked; the roofline-timed curve when c came from the roofline; and `measured` (a real run's k,
    tokens_per_pass and speedup) as a star. title: the takeaway (SpecCurves.takeaway)."""
    ks, chosen_alpha = list(curves.ks), curves.setup.alpha
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=[
        text(lang, "serving.f.spec_left"), text(lang, "serving.f.spec_right", c=f"{curves.c:.3g}")])
    for i, a in enumerate(curves.alphas):
        color = ALPHA_COLORS[i % len(ALPHA_COLORS)] if a != chosen_alpha else NAIVE
        width = 3 if a == chosen_alpha else 1.5
        speedups = curves.speedups(a)
        fig.add_scatter(x=ks, y=curves.tokens(a), name=f"α = {a:g}", legendgroup=f"a{a}",
                        line=dict(color=color, width=width), row=1, col=1,
                        hovertemplate=text(lang, "serving.f.tokens_hover", a=f"{a:g}") + "<extra></extra>")
        fig.add_scatter(x=ks, y=speedups, name=f"α = {a:g}", legendgroup=f"a{a}", showlegend=False,
                        line=dict(color=color, width=width), row=1, col=2,
                        hovertemplate=f"α={a:g}, k=%{{x}}: %{{y:.3f}}×<extra></extra>")
        k_best = curves.best_k(a)
        fig.add_scatter(x=[k_best], y=[speedups[ks.index(k_best)]], mode="markers", legendgroup=f"a{a}",
                        showlegend=False, marker=dict(color=color, size=11, symbol="diamond-open", line=dict(width=2)),
                        row=1, col=2, hovertemplate=text(lang, "serving.f.best_hover", a=f"{a:g}") + "<extra></extra>")
    mc = curves.mc_frame()
    fig.add_scatter(x=mc["k"], y=mc["mean"], error_y=dict(type="data", array=2 * mc["stderr"], visible=True),
                    mode="markers", marker=dict(color=FORMULA, size=7, symbol="x"),
                    name=text(lang, "serving.f.mc", a=f"{chosen_alpha:g}"), row=1, col=1,
                    hovertemplate=text(lang, "serving.f.mc_hover") + "<extra></extra>")
    if curves.timed is not None:
        fig.add_scatter(x=ks, y=curves.timed, name=text(lang, "serving.f.timed", a=f"{chosen_alpha:g}"),
                        line=dict(color=NAIVE, dash="dot", width=2), row=1, col=2,
                        hovertemplate="k=%{x}: %{y:.3f}×<extra></extra>")
    if measured is not None:
        fig.add_scatter(x=[measured.k], y=[measured.tokens_per_pass], mode="markers",
                        marker=dict(symbol="star", size=16, color="#2ca02c", line=dict(color=FORMULA, width=1)),
                        name=measured_label, legendgroup="measured", row=1, col=1,
                        hovertemplate=text(lang, "serving.f.real_tokens_hover") + "<extra></extra>")
        fig.add_scatter(x=[measured.k], y=[measured.speedup], mode="markers", showlegend=False,
                        marker=dict(symbol="star", size=16, color="#2ca02c", line=dict(color=FORMULA, width=1)),
                        legendgroup="measured", row=1, col=2,
                        hovertemplate=text(lang, "serving.f.real_speed_hover") + "<extra></extra>")
    fig.add_hline(y=1, line=dict(color="#888", dash="dash", width=1), row=1, col=2)
    fig.update_xaxes(title_text=text(lang, "serving.f.k_axis"), dtick=1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=text(lang, "serving.f.tokens_axis"), row=1, col=1)
    fig.update_yaxes(title_text=text(lang, "serving.f.speedup_axis"), row=1, col=2)
    fig = legend_below(base_layout(fig, "", "", ""), 520)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=SUBPLOT_TITLE_PX)


def spec_vs_batch(points: list, title: str, lang: str = "en") -> go.Figure:
    """Speculation's speedup at each batch size; title: the takeaway (sim.words.speculative.batch_sweep_takeaway), which
    names the pair, α and k."""
    b = [p.batch for p in points]
    fig = go.Figure()
    fig.add_scatter(x=b, y=[p.speedup for p in points], mode="lines+markers+text", line=dict(color=CACHED, width=2),
                    text=[f"{p.speedup:.2f}×" for p in points], textposition="top center", name=text(lang, "serving.f.speedup"),
                    customdata=[p.verify_bound for p in points],
                    hovertemplate=text(lang, "serving.f.batch_hover") + "<extra></extra>")
    fig.add_hline(y=1, line=dict(color=NAIVE, dash="dash", width=1), annotation_text=text(lang, "serving.f.no_gain"),
                  annotation_position="bottom left")
    fig.update_xaxes(type="log", tickvals=b)
    fig.update_yaxes(rangemode="tozero")
    room_above_labels(fig)  # each point's speedup is written over it
    fig = base_layout(fig, "", text(lang, "serving.f.batch_axis"), text(lang, "serving.f.speedup_axis"), height=360)
    return set_headline(fig, title, FULL_WIDTH_CHARS)
