"""The Roofline page's results in words (moved here from sim/cost/roofline.py): the takeaways and captions that
state the step's numbers, the tables of steps and levers, the measured tiny model's verdict and the context
trend, in either language (catalog area roofline.json)."""

from __future__ import annotations

from sim.cost.memory import fmt_decimal
from sim.cost.roofline import (
    ContextTrend,
    Hardware,
    Lever,
    RooflineConfig,
    StepCost,
    SweepPoint,
    TinyDecodePoint,
    _reach_by_context,
    decode_intensity_limit,
    memory_bound_until,
)
from sim.readout import times
from sim.words import join, say, text


def phase_name(phase: str, lang: str = "en") -> str:
    """'prefill' / 'decode' as the page's tables and charts name the step."""
    return text(lang, f"roofline.phase.{phase}")


def bound_name(bound: str, lang: str = "en") -> str:
    """'memory' / 'compute' (StepCost.bound) as a table cell."""
    return text(lang, f"roofline.bound.{bound}")


def steps_frame(steps: list[StepCost], hw: Hardware, lang: str = "en"):
    """One row per step: FLOPs, bytes by kind, intensity, both times and what bounds it."""
    import pandas as pd

    col = {k: text(lang, f"roofline.col.{k}") for k in ("step", "flops", "b_weights", "b_kv", "b_act", "intensity",
                                                       "t_compute", "t_memory", "bound")}
    return pd.DataFrame([{
        col["step"]: phase_name(s.phase, lang), col["flops"]: s.flops,
        col["b_weights"]: s.bytes_weights, col["b_kv"]: s.bytes_kv,
        col["b_act"]: s.bytes_activations, col["intensity"]: s.intensity,
        col["t_compute"]: s.time_compute(hw) * 1e3, col["t_memory"]: s.time_memory(hw) * 1e3,
        col["bound"]: bound_name(s.bound(hw), lang)} for s in steps])


def levers_frame(levers: list[Lever], lang: str = "en"):
    """What each lever does to a decode step, against the first (the configuration as chosen)."""
    import pandas as pd

    col = {k: text(lang, f"roofline.col.{k}") for k in ("change", "bytes_step", "tok_s", "vs", "why")}
    return pd.DataFrame([{col["change"]: say(lang, x.name), col["bytes_step"]: x.bytes_per_step,
                          col["tok_s"]: x.tokens_per_s, col["vs"]: f"{x.tokens_per_s / levers[0].tokens_per_s:,.2f}×",
                          col["why"]: say(lang, x.note)} for x in levers])


def _against_ridge(s: StepCost, hw: Hardware, lang: str = "en") -> str:
    """'memory-bound, 281× below the ridge' / 'compute-bound, 8.5× above it' / 'exactly at the ridge'."""
    if s.intensity < hw.ridge:
        return text(lang, "roofline.s.below_ridge", x=times(hw.ridge / s.intensity))
    if s.intensity > hw.ridge:
        return text(lang, "roofline.s.above_ridge", x=times(s.intensity / hw.ridge))
    return text(lang, "roofline.s.at_ridge")


def roofline_takeaway(decode: StepCost, prefill: StepCost, hw: Hardware, lang: str = "en") -> str:
    """The roofline chart's title: where each phase sits against the ridge, worded from the numbers
    (decode's intensity with 2 decimals, prefill's and the ridge's rounded, as the page's metrics)."""
    return text(lang, "roofline.s.takeaway", d=f"{decode.intensity:,.2f}", d_where=_against_ridge(decode, hw, lang),
                ridge=f"{hw.ridge:,.0f}", p=f"{prefill.intensity:,.0f}", p_where=_against_ridge(prefill, hw, lang))


def _share(x: float, lang: str = "en") -> str:
    """A share as a whole percent, never rounded up to a 100% it is not."""
    return text(lang, "roofline.s.over_99") if 0.995 <= x < 1 else f"{x:.0%}"


def bytes_takeaway(decode: StepCost, lang: str = "en") -> str:
    """The bytes chart's title: what a decode step reads, weights against KV cache, and the larger one's
    share of all the step's bytes (activations included)."""
    w, kv = decode.bytes_weights, decode.bytes_kv
    fields = {"w": fmt_decimal(w), "kv": fmt_decimal(kv)}
    if w > kv:
        return text(lang, "roofline.s.bytes.weights", share=_share(w / decode.bytes, lang), **fields)
    if kv > w:
        return text(lang, "roofline.s.bytes.kv", share=_share(kv / decode.bytes, lang), **fields)
    return text(lang, "roofline.s.bytes.each", share=_share(w / decode.bytes, lang), **fields)


def turning_points(turns: dict[int, int | None], lang: str = "en") -> str:
    """{context: the batch from which decode is compute-bound, or None} as one line."""
    return " · ".join(text(lang, "roofline.s.turn.from", S=f"{S:,}", b=f"{b:,}") if b else
                      text(lang, "roofline.s.turn.never", S=f"{S:,}") for S, b in turns.items())


def intensity_takeaway(rows: list[SweepPoint], ridge: float, lang: str = "en") -> str:
    """The batch sweep's intensity chart title: at which of its contexts decode reaches the ridge, and by which
    swept batch (rows: `batch_sweep`'s points, the ones the chart draws)."""
    reach = _reach_by_context(rows, ridge)
    top = max(r.batch for r in rows)
    fields = {"ridge": f"{ridge:,.0f}", "top": f"{top:,}"}
    never = [S for S, b in reach.items() if b is None]
    if len(never) == len(reach):
        peak = max(rows, key=lambda r: r.intensity)
        return text(lang, "roofline.s.reach.none", peak=f"{peak.intensity:,.0f}", pc=f"{peak.context:,}",
                    pb=f"{peak.batch:,}", **fields)
    reached = text(lang, "roofline.s.reach.sep").join(text(lang, "roofline.s.reach.item", S=f"{S:,}", b=f"{b:,}")
                                                      for S, b in reach.items() if b is not None)
    if not never:
        return text(lang, "roofline.s.reach.all", reached=reached, **fields)
    key = "roofline.s.reach.some_many" if len(never) > 1 else "roofline.s.reach.some_one"
    return text(lang, key, reached=reached, never=join(lang, [f"{v:,}" for v in never]), **fields)


def _rate(x: float) -> str:
    """A rate (tokens/s, FLOP/B) to the unit from 100 up, else to 3 significant figures (24 would hide a 2% step)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def tokens_takeaway(rows: list[SweepPoint], context: int, lang: str = "en") -> str:
    """The batch sweep's tokens/s chart title: what the largest swept batch gains over batch 1 at `context`."""
    pts = sorted((r for r in rows if r.context == context), key=lambda r: r.batch)
    lo, hi = pts[0], pts[-1]
    gain, more = hi.tokens_per_s / lo.tokens_per_s, hi.batch / lo.batch
    fields = {"S": f"{context:,}", "B": f"{hi.batch:,}", "lo": f"{lo.batch:,}", "gain": times(gain),
              "more": times(more), "both": text(lang, "roofline.s.tok.both", hi=_rate(hi.tokens_per_s),
                                                lo=_rate(lo.tokens_per_s))}
    if gain < 1.1:
        return text(lang, "roofline.s.tok.barely", **fields)
    if gain >= 0.8 * more:
        return text(lang, "roofline.s.tok.proportional", **fields)
    return text(lang, "roofline.s.tok.only", **fields)


def batching_caption(cfg: RooflineConfig, hw: Hardware, max_batch: int = 4096, lang: str = "en") -> str:
    """Under the batch sweep: why the intensity levels off, and whether that level is above the ridge at the
    chosen context (from the step's own FLOPs and bytes)."""
    limit = decode_intensity_limit(cfg)
    shown, ridge = _rate(limit), _rate(hw.ridge)  # 3 figures below 100: a limit near the ridge reads apart from it
    said = text(lang, "roofline.s.batch.said", S=f"{cfg.context:,}", limit=shown)
    if limit <= hw.ridge:  # it only approaches its limit: at the ridge exactly it never gets there
        return said + text(lang, "roofline.s.batch.below", x=times(hw.ridge / limit), ridge=ridge)
    turn = memory_bound_until(cfg, hw, max_batch)
    if turn is None:
        return said + text(lang, "roofline.s.batch.beyond", ridge=ridge, max=f"{max_batch:,}")
    return said + text(lang, "roofline.s.batch.from", ridge=ridge, turn=f"{turn:,}")


def tiny_takeaway(point: TinyDecodePoint, lang: str = "en") -> str:
    """The chart's title: how close the measured step came to its roof."""
    return text(lang, "roofline.s.tiny.takeaway", share=f"{point.fraction_of_roof:.1%}")


def tiny_verdict(point: TinyDecodePoint, lang: str = "en") -> str:
    """What one measured step moved, did and took, against the roof."""
    said = text(lang, "roofline.s.tiny.said", mb=f"{point.bytes_per_step / 1e6:,.2f}",
                mflop=f"{point.flops_per_step / 1e6:,.2f}", predicted=f"{point.predicted_s * 1e6:,.0f}",
                measured=f"{point.measured_s * 1e6:,.0f}", share=f"{point.fraction_of_roof:.1%}")
    if point.fraction_of_roof < 0.25:
        return said + text(lang, "roofline.s.tiny.launch", ops=f"{point.num_ops}")
    return said + text(lang, "roofline.s.tiny.close", ops=f"{point.num_ops}")


def trend_verdict(trend: ContextTrend, lang: str = "en") -> str:
    """How a batch-1 decode step's intensity moves from a short to a long context, in words."""
    def tokens(n: int) -> str:
        return text(lang, "roofline.s.trend.token" if n == 1 else "roofline.s.trend.tokens", n=f"{n:,}")

    fields = {"short": f"{trend.short:.2f}", "long": f"{trend.long:.2f}", "at_short": tokens(trend.short_context),
              "at_long": tokens(trend.long_context), "group": f"{trend.group}"}
    if abs(trend.long - trend.short) <= 0.1 * trend.short:
        way = text(lang, "roofline.s.trend.flat", **fields)
    elif trend.long > trend.short:
        way = text(lang, "roofline.s.trend.rises", **fields)
    else:
        way = text(lang, "roofline.s.trend.falls", **fields)
    return text(lang, "roofline.s.trend.verdict", way=way)
