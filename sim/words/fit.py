"""Where a roofline example runs, in words (moved here from sim/cost/roofline_fit.py): the fit sentence and the
GPUs a compute-bound batch needs, for the Roofline page and the Lesson's cost step."""

from __future__ import annotations

from dataclasses import replace

from sim.cost.gpus import GpuPreset
from sim.cost.memory import MAX_GPUS, fmt_decimal
from sim.cost.roofline import RooflineConfig
from sim.cost.roofline_fit import UTILIZATION, Fit, fit
from sim.words import text


def fit_sentence(f: Fit, model: str, lang: str = "en") -> str:
    """Where the example runs, in a sentence: one GPU, n of them (and why one GPU's roofline still holds), or more
    than the lab counts (shown for the arithmetic only)."""
    fields = dict(model=model, gpu=f.gpu, need=fmt_decimal(f.need_bytes), w=fmt_decimal(f.weight_bytes),
                  kv=fmt_decimal(f.kv_bytes), usable=fmt_decimal(f.usable_per_gpu), util=f"{UTILIZATION:.0%}")
    if f.num_gpus == 1:
        return text(lang, "roofline.fit.one", **fields)
    if f.num_gpus is None:
        return text(lang, "roofline.fit.none", max=f"{MAX_GPUS}", **fields)
    return text(lang, "roofline.fit.many", n=f"{f.num_gpus}", **fields)


def turn_fits(turns: dict[int, int | None], cfg: RooflineConfig, gpu: GpuPreset, lang: str = "en") -> str:
    """For each context whose decode turns compute-bound at some batch: how many GPUs that batch needs (the batch
    sweep calls a step compute-bound; this says what it takes to run it)."""
    parts = []
    for S, b in turns.items():
        if b is None:
            continue
        f = fit(replace(cfg, batch=b, context=S), gpu)
        key = "roofline.fit.turn_one" if f.num_gpus == 1 else "roofline.fit.turn_none" if f.num_gpus is None \
            else "roofline.fit.turn_many"
        parts.append(text(lang, key, S=f"{S:,}", b=f"{b:,}", need=fmt_decimal(f.need_bytes), gpu=f.gpu,
                          n=f"{f.num_gpus}", max=f"{MAX_GPUS}"))
    return text(lang, "roofline.fit.turn_sep").join(parts)
