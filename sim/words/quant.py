"""The KV quantization page's words (moved here from sim/model/): chart titles, each stating the chart's takeaway in one sentence, worded from
the very numbers the chart draws, so that it flips when the comparison does. Numpy and pandas only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sim.model.quant_errors import PositionErrors
from sim.readout import times
from sim.words import text


def metric_name(metric: str, lang: str = "en") -> str:
    """'KL', 'Δ loss', 'top-1 agreement' in `lang`."""
    return text(lang, f"quant.metric.{metric}")


def _metric_text(metric: str, x: float, lang: str = "en") -> str:
    if metric == "kl":
        return text(lang, "quant.s.kl_value", x=f"{x:.2e}")
    if metric == "agreement":
        return f"{x:.2%}"
    return text(lang, "quant.s.dl_value", x=f"{x:+.5f}")


# --- error by token position --------------------------------------------------------------------------


def position_takeaway(kivi: PositionErrors, naive: PositionErrors, metric: str, lang: str = "en") -> str:
    """The error-by-position chart's title: KIVI against naive per-token at one bit width, on the chart's
    metric averaged over every position it draws, worded by which of the two is better."""
    k, n, bits, T = kivi.mean_of(metric), naive.mean_of(metric), kivi.bits, kivi.num_positions
    f = dict(bits=f"{bits}", T=f"{T:,}")

    def say(key: str, **more: str) -> str:
        return text(lang, f"quant.t.pos.{key}", **f, **more)

    if metric == "agreement":
        ks, ns = f"{k:.2%}", f"{n:.2%}"
        if k > n:
            return say("agree_more", k=ks, n=ns)
        if k < n:
            return say("agree_less", k=ks, n=ns)
        return say("agree_same", k=ks)
    if metric == "delta_loss":
        ks, ns = f"{k:+.5f}", f"{n:+.5f}"
        if k < n:
            return say("dl_kivi", k=ks, n=ns)
        if k > n:
            return say("dl_naive", k=ks, n=ns)
        return say("dl_same", k=ks, n=ns)
    ks, ns = f"{k:.2e}", f"{n:.2e}"
    if k == n:
        return say("kl_same", k=ks)
    if k == 0:
        return say("kl_kivi_zero", n=ns)
    if n == 0:
        return say("kl_naive_zero", k=ks)
    if k < n:
        return say("kl_below", k=ks, n=ns, x=times(n / k))
    return say("kl_above", k=ks, n=ns, x=times(k / n))


# --- bits × scheme -----------------------------------------------------------------------------------


def heatmap_takeaway(grid, metric: str, lang: str = "en") -> str:
    """The bits × scheme heatmap's title: at the lowest bit width where two or more schemes were measured,
    the best and the worst of them on `metric` (metric_grid's table: schemes down, '4 bits' across)."""
    name = metric_name(metric, lang)
    higher_better = metric == "agreement"
    for col in reversed(list(grid.columns)):
        vals = grid[col].dropna()
        if len(vals) >= 2:
            break
    else:
        return text(lang, "quant.t.grid.none", name=name)
    width = col
    best = vals.idxmax() if higher_better else vals.idxmin()
    worst = vals.idxmin() if higher_better else vals.idxmax()
    b, w = float(vals[best]), float(vals[worst])
    f = dict(width=width, name=name, best=best, worst=worst, b=_metric_text(metric, b, lang),
             w=_metric_text(metric, w, lang))
    if b == w:
        return text(lang, "quant.t.grid.same", **f)
    if metric == "kl" and b > 0:
        return text(lang, "quant.t.grid.kl", x=times(w / b), **f)
    return text(lang, "quant.t.grid.higher" if higher_better else "quant.t.grid.lower", **f)


# --- bytes --------------------------------------------------------------------------------------------


def context_takeaway(curves: Mapping[str, tuple[str, Sequence[int], Sequence[float]]], key: str = "kivi",
                     lang: str = "en") -> str:
    """The bytes-vs-context chart's title: how one scheme's average bytes per token move from the shortest
    context drawn to the longest, and its share of FP16's at the longest (sim.model.quant_bytes.bytes_curves)."""
    label, xs, ys = curves[key]
    fp16 = curves["fp16"][2][-1]
    a, b = ys[0], ys[-1]
    f = dict(label=label[:1].upper() + label[1:], a=f"{a:,.1f}", b=f"{b:,.1f}", first=f"{xs[0]:,}",
             last=f"{xs[-1]:,}", share=f"{b / fp16:.1%}", fp16=f"{fp16:,.0f}")
    f["first"] = text(lang, "quant.s.token_one" if xs[0] == 1 else "quant.s.tokens", n=f["first"])
    if b < a:
        return text(lang, "quant.t.ctx.falls", **f)
    if b > a:
        return text(lang, "quant.t.ctx.rises", **f)
    return text(lang, "quant.t.ctx.stays", **f)


# --- keys vs values, channel by channel ------------------------------------------------------------------


def _top_channel(arr: np.ndarray) -> tuple[int, float]:
    """(T, D): the channel that most often holds a token's largest |value|, and the share of tokens it does."""
    top = np.argmax(arr, axis=-1)
    counts = np.bincount(top, minlength=arr.shape[-1])
    ch = int(np.argmax(counts))
    return ch, float(counts[ch] / len(top))


def heatmaps_takeaway(k_abs: np.ndarray, v_abs: np.ndarray, layer: int, head: int, lang: str = "en") -> str:
    """The |K| and |V| heatmaps' title: how consistently one channel holds a token's largest value, K against V."""
    (ck, sk), (cv, sv) = _top_channel(k_abs), _top_channel(v_abs)
    f = dict(layer=f"{layer}", head=f"{head}", T=f"{k_abs.shape[0]:,}", ck=f"{ck}", cv=f"{cv}", sk=f"{sk:.0%}",
             sv=f"{sv:.0%}")
    if sk > sv:
        return text(lang, "quant.t.maps.k", **f)
    if sv > sk:
        return text(lang, "quant.t.maps.v", **f)
    return text(lang, "quant.t.maps.same", **f)


def bars_takeaway(k_mean: np.ndarray, v_mean: np.ndarray, lang: str = "en") -> str:
    """The channel bars' title: K's and V's largest channel over their median channel (what the bars draw)."""
    rk, rv = float(k_mean.max() / np.median(k_mean)), float(v_mean.max() / np.median(v_mean))
    ck, cv = int(np.argmax(k_mean)), int(np.argmax(v_mean))
    f = dict(ck=f"{ck}", cv=f"{cv}", rk=f"{rk:,.1f}", rv=f"{rv:,.1f}")
    if round(rk, 1) > round(rv, 1):
        return text(lang, "quant.t.bars.k", **f)
    if round(rv, 1) > round(rk, 1):
        return text(lang, "quant.t.bars.v", **f)
    return text(lang, "quant.t.bars.same", **f)


def outlier_takeaway(cases, channel: int, factor: float, bits: int, lang: str = "en") -> str:
    """The injected-outlier chart's title: the ordinary channels' error with the outlier in, per-channel
    against per-token K (sim.model.quant_channels.outlier_demo's cases)."""
    inj = {x.axis: x.rel_error_other for x in cases if x.case == "injected"}
    c, t = inj["channel"], inj["token"]
    f = dict(ch=f"{channel}", factor=f"{factor:g}", bits=f"{bits}", c=f"{c:.1%}", t=f"{t:.1%}")
    if round(c, 3) < round(t, 3):
        tail = text(lang, "quant.t.outlier.more", x=times(t / c)) if c > 0 else ""
        return text(lang, "quant.t.outlier.channel", tail=tail, **f)
    if round(t, 3) < round(c, 3):
        tail = text(lang, "quant.t.outlier.more", x=times(c / t)) if t > 0 else ""
        return text(lang, "quant.t.outlier.token", tail=tail, **f)
    return text(lang, "quant.t.outlier.same", **f)
