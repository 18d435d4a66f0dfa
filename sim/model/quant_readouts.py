"""The KV quantization page's chart titles: each states the chart's takeaway in one sentence, worded from
the very numbers the chart draws, so that it flips when the comparison does. Numpy and pandas only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sim.model.quant_errors import PositionErrors
from sim.readout import times

METRIC_NAMES = {"kl": "KL", "delta_loss": "Δ loss", "agreement": "top-1 agreement"}


def _metric_text(metric: str, x: float) -> str:
    if metric == "kl":
        return f"{x:.2e} nats"
    if metric == "agreement":
        return f"{x:.2%}"
    return f"{x:+.5f} nats per byte"


# --- error by token position --------------------------------------------------------------------------


def position_takeaway(kivi: PositionErrors, naive: PositionErrors, metric: str) -> str:
    """The error-by-position chart's title: KIVI against naive per-token at one bit width, on the chart's
    metric averaged over every position it draws, worded by which of the two is better."""
    k, n, bits, T = kivi.mean_of(metric), naive.mean_of(metric), kivi.bits, kivi.num_positions
    over = f"over {T:,} positions"
    if metric == "agreement":
        head = f"INT{bits} KIVI keeps full precision's top-1 next byte"
        if k > n:
            return f"{head} more often than naive per-token {over}: {k:.2%} vs {n:.2%}"
        if k < n:
            return f"{head} less often than naive per-token {over}: {k:.2%} vs {n:.2%}"
        return f"INT{bits} KIVI and naive per-token keep full precision's top-1 next byte equally often {over}: {k:.2%}"
    if metric == "delta_loss":
        head = f"INT{bits} KIVI changes the loss by {k:+.5f} nats per byte, naive per-token by {n:+.5f} {over}"
        if k < n:
            return f"{head}: KIVI's loss is lower"
        if k > n:
            return f"{head}: naive per-token's loss is lower"
        return f"{head}: the same"
    if k == n:
        return f"INT{bits} KIVI and naive per-token both average a KL of {k:.2e} nats per prediction {over}"
    if k == 0:
        return (f"INT{bits} KIVI's KL is exactly 0 {over} (it reads every key and value in full precision); "
                f"naive per-token's averages {n:.2e} nats")
    if n == 0:
        return (f"Naive per-token INT{bits}'s KL is exactly 0 {over}; KIVI's averages {k:.2e} nats per prediction")
    if k < n:
        return (f"INT{bits} KIVI's KL averages {k:.2e} nats per prediction {over}, {times(n / k)} below naive "
                f"per-token's {n:.2e}")
    return (f"INT{bits} KIVI's KL averages {k:.2e} nats per prediction {over}, {times(k / n)} above naive "
            f"per-token's {n:.2e}")


# --- bits × scheme -----------------------------------------------------------------------------------


def heatmap_takeaway(grid, metric: str) -> str:
    """The bits × scheme heatmap's title: at the lowest bit width where two or more schemes were measured,
    the best and the worst of them on `metric` (metric_grid's table: schemes down, '4 bits' across)."""
    name = METRIC_NAMES[metric]
    higher_better = metric == "agreement"
    for col in reversed(list(grid.columns)):
        vals = grid[col].dropna()
        if len(vals) >= 2:
            break
    else:
        return f"{name} of every scheme measured, at every bit width"
    width = col
    best = vals.idxmax() if higher_better else vals.idxmin()
    worst = vals.idxmin() if higher_better else vals.idxmax()
    b, w = float(vals[best]), float(vals[worst])
    if b == w:
        return f"At {width}, every scheme measured has the same {name}: {_metric_text(metric, b)}"
    top, bottom = ("highest", "lowest") if higher_better else ("lowest", "highest")
    if metric == "kl" and b > 0:
        return (f"At {width}, {best} has the lowest KL, {_metric_text(metric, b)}, {times(w / b)} below {worst}'s "
                f"{_metric_text(metric, w)}")
    return (f"At {width}, {best} has the {top} {name}, {_metric_text(metric, b)}, and {worst} the {bottom}, "
            f"{_metric_text(metric, w)}")


# --- bytes --------------------------------------------------------------------------------------------


def context_takeaway(curves: Mapping[str, tuple[str, Sequence[int], Sequence[float]]], key: str = "kivi") -> str:
    """The bytes-vs-context chart's title: how one scheme's average bytes per token move from the shortest
    context drawn to the longest, and its share of FP16's at the longest (sim.model.quant_bytes.bytes_curves)."""
    label, xs, ys = curves[key]
    fp16 = curves["fp16"][2][-1]
    a, b = ys[0], ys[-1]
    first = f"{xs[0]:,} token" + ("" if xs[0] == 1 else "s")
    share = f"{b / fp16:.1%} of FP16's {fp16:,.0f}"
    label = label[:1].upper() + label[1:]
    if b < a:
        return f"{label} falls from {a:,.1f} B per token at {first} to {b:,.1f} at {xs[-1]:,} tokens ({share})"
    if b > a:
        return f"{label} rises from {a:,.1f} B per token at {first} to {b:,.1f} at {xs[-1]:,} tokens ({share})"
    return f"{label} stays at {a:,.1f} B per token from {first} to {xs[-1]:,} tokens ({share})"


# --- keys vs values, channel by channel ------------------------------------------------------------------


def _top_channel(arr: np.ndarray) -> tuple[int, float]:
    """(T, D): the channel that most often holds a token's largest |value|, and the share of tokens it does."""
    top = np.argmax(arr, axis=-1)
    counts = np.bincount(top, minlength=arr.shape[-1])
    ch = int(np.argmax(counts))
    return ch, float(counts[ch] / len(top))


def heatmaps_takeaway(k_abs: np.ndarray, v_abs: np.ndarray, layer: int, head: int) -> str:
    """The |K| and |V| heatmaps' title: how consistently one channel holds a token's largest value, K against V."""
    (ck, sk), (cv, sv) = _top_channel(k_abs), _top_channel(v_abs)
    T = k_abs.shape[0]
    where = f"Layer {layer}, KV head {head}, {T:,} tokens"
    if sk > sv:
        return (f"{where}: a token's largest |K| is in channel {ck} for {sk:.0%} of them, its largest |V| in channel "
                f"{cv} for only {sv:.0%}")
    if sv > sk:
        return (f"{where}: a token's largest |V| is in channel {cv} for {sv:.0%} of them, its largest |K| in channel "
                f"{ck} for only {sk:.0%}")
    return (f"{where}: a token's largest |K| is in channel {ck} and its largest |V| in channel {cv}, each for {sk:.0%} "
            "of them")


def bars_takeaway(k_mean: np.ndarray, v_mean: np.ndarray) -> str:
    """The channel bars' title: K's and V's largest channel over their median channel (what the bars draw)."""
    rk, rv = float(k_mean.max() / np.median(k_mean)), float(v_mean.max() / np.median(v_mean))
    ck, cv = int(np.argmax(k_mean)), int(np.argmax(v_mean))
    said = f"K's largest channel ({ck}) averages {rk:,.1f}× the median channel, V's ({cv}) {rv:,.1f}×"
    if round(rk, 1) > round(rv, 1):
        return f"{said}: K's stands out more"
    if round(rv, 1) > round(rk, 1):
        return f"{said}: V's stands out more"
    return f"{said}: the same"


def outlier_takeaway(cases, channel: int, factor: float, bits: int) -> str:
    """The injected-outlier chart's title: the ordinary channels' error with the outlier in, per-channel
    against per-token K (sim.model.quant_channels.outlier_demo's cases)."""
    inj = {x.axis: x.rel_error_other for x in cases if x.case == "injected"}
    c, t = inj["channel"], inj["token"]
    head = f"Channel {channel} raised {factor:g}× the mean |K|, INT{bits}: the ordinary channels lose"
    if round(c, 3) < round(t, 3):
        tail = f", {times(t / c)} more" if c > 0 else ""
        return f"{head} {c:.1%} (RMS) per-channel and {t:.1%} per-token{tail}"
    if round(t, 3) < round(c, 3):
        tail = f", {times(c / t)} more" if t > 0 else ""
        return f"{head} {t:.1%} (RMS) per-token and {c:.1%} per-channel{tail}"
    return f"{head} {c:.1%} (RMS) per-channel and per-token alike"
