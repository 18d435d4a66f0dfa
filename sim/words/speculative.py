"""The Serving page's speculative-decoding tab in words (moved here from sim/serving/speculative.py): the timing
and fit captions, the curves' title and caption, and the batch sweep's title, gain sentence and caption."""

from __future__ import annotations

from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets
from sim.serving.speculative import FIT_UTILIZATION, SpecBatchPoint, SpecCurves, SpecTiming, spec_fit
from sim.words import serving_readouts as ro
from sim.words import text


def timing_caption(timing: SpecTiming, k: int, lang: str = "en") -> str:
    """Where c comes from, and what verifying k + 1 tokens costs, in one sentence."""
    presets, ratio = load_presets(), timing.verify_s[k] / timing.target_step_s
    why = (text(lang, "serving.s.timing.one_step") if ratio < 1.1 else
           text(lang, "serving.s.timing.steps", r=f"{ratio:.2f}"))
    return text(lang, "serving.s.timing", gpu=load_gpus()[timing.gpu].name, ctx=f"{timing.context:,}",
                draft=presets[timing.draft].name, d=f"{timing.draft_step_s * 1e3:.2f}", target=presets[timing.target].name,
                t=f"{timing.target_step_s * 1e3:.2f}", c=f"{timing.c:.3f}", k1=f"{k + 1}",
                v=f"{timing.verify_s[k] * 1e3:.2f}", why=why)


def curves_takeaway(curves: SpecCurves, lang: str = "en") -> str:
    """The curves' title: the best draft length at the chosen α and c against the chosen k, or that no k
    pays."""
    best_k, best = curves.best_speedup
    return ro.spec_curves_takeaway(curves.setup.alpha, curves.c, curves.setup.k, curves.chosen_speedup, best_k, best,
                                   lang)


def curves_caption(curves: SpecCurves, measured: bool, lang: str = "en") -> str:
    """What the chart's marks are, the Monte Carlo agreement counted; `measured`: a real run's star is drawn."""
    return (text(lang, "serving.s.curves.diamonds")
            + ro.monte_carlo_sentence(curves.setup.alpha, curves.num_mc_within, len(curves.monte_carlo), lang)
            + (text(lang, "serving.s.curves.dotted") if curves.timing is not None else "")
            + (text(lang, "serving.s.curves.star") if measured else ""))


def batch_sweep_takeaway(points: list[SpecBatchPoint], label: str, alpha: float, k: int, lang: str = "en") -> str:
    """The batch chart's title: up to which batch speculation pays, or that it pays at every batch or none."""
    return ro.spec_batch_takeaway(label, alpha, k, [p.batch for p in points], [p.speedup for p in points], lang)


def batch_gain_sentence(points: list[SpecBatchPoint], alpha: float, k: int, lang: str = "en") -> str:
    """How the gain changes from the smallest batch to the largest, as one sentence."""
    return ro.batch_gain_sentence(alpha, k, [p.batch for p in points], [p.speedup for p in points], lang)


def batch_sweep_caption(points: list[SpecBatchPoint], lang: str = "en") -> str:
    """What the sweep shows: from which batch on the verify pass is compute-bound, and what that does to the
    speedup there (worded from the points: it falls, holds or rises)."""
    i = next((j for j, p in enumerate(points) if p.verify_bound == "compute"), None)
    if i == 0:
        where = text(lang, "serving.s.bc.already", b=f"{points[0].batch}", s=f"{points[0].speedup:.2f}")
    else:
        where = text(lang, "serving.s.bc.batch1")
        if i is None:
            where += text(lang, "serving.s.bc.stays_memory")
        else:
            before, at = points[i - 1], points[i]
            how = ("falls" if at.speedup < before.speedup else "rises" if at.speedup > before.speedup else "stays")
            where += text(lang, f"serving.s.bc.{how}", b=f"{at.batch}", s0=f"{before.speedup:.2f}",
                          b0=f"{before.batch}", s=f"{at.speedup:.2f}")
    return text(lang, "serving.s.bc", where=where)


def fit_caption(timing: SpecTiming, weight_dtype: str = "bf16", lang: str = "en") -> str:
    """Whether the pair fits the one GPU its timing is drawn on, and if not, how many it takes and why one GPU's
    timing still gives c."""
    from sim.cost.memory import MAX_GPUS, fmt_decimal

    f, presets = spec_fit(timing.target, timing.draft, timing.gpu, timing.context, weight_dtype), load_presets()
    fields = dict(target=presets[timing.target].name, draft=presets[timing.draft].name, gpu=load_gpus()[timing.gpu].name,
                  need=fmt_decimal(f.need_bytes), usable=fmt_decimal(f.usable_per_gpu), util=f"{FIT_UTILIZATION:.0%}",
                  dtype=weight_dtype.upper())
    if f.num_gpus == 1:
        return text(lang, "serving.s.fit.one", **fields)
    return text(lang, "serving.s.fit.many", n=f"{f.num_gpus}" if f.num_gpus else f"> {MAX_GPUS}", **fields)
