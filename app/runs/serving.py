"""The Serving page's cached simulations, its figures (built once per input), and the jobs it queues."""

from __future__ import annotations

import streamlit as st

from app.controls.serving import LIVE_MAX_PROMPT, LiveChoice
from app.figures import serving as figs
from app.i18n import t
from app.work import AUTO_RUN_S, job_seconds, run_job
from sim.model import speculative as sp
from sim.refusal import Refusal
from sim.serving import comparison as cp
from sim.serving import speculative as sps
from sim.words import comparison as cmp_words
from sim.words import speculative as spec_words


@st.cache_data(max_entries=8, show_spinner=False)
def serve(setup: cp.ServingSetup) -> cp.ServingComparison:
    return cp.run_serving(setup)


def batching(setup: cp.ServingSetup) -> cp.ServingComparison | None:
    # bounded in sim/serving (requests, iterations): about a second at the page's limits
    return run_job("serving.batching", setup, 1.0, lambda progress: serve(setup), real_model=False,
                   what=t("serving.job.batching"))


@st.cache_resource(max_entries=8, show_spinner=False)
def batching_figures(setup: cp.ServingSetup, gantt_n: int, lang: str = "en") -> dict:
    """Built once per input and only read afterwards (plotly figures take tens of ms to build)."""
    cmp = serve(setup)
    series = cmp.series()
    return {"gantt": figs.gantt(cmp.results, gantt_n, cmp_words.gantt_takeaway(cmp, gantt_n, lang), lang),
            "occupancy": figs.occupancy(series, setup.max_num_seqs, cmp_words.occupancy_takeaway(cmp, lang), lang),
            "kv": figs.kv_memory(series, cmp.capacity_tokens, cmp_words.kv_takeaway(cmp, lang), lang),
            "latency": figs.latency_percentiles(cmp.to_frame().round(3), cmp_words.latency_takeaway(cmp, lang), lang)}


@st.cache_data(max_entries=16, show_spinner=False)
def spec_curves(spec: sps.SpecSetup) -> sps.SpecCurves:
    return sps.run_speculative(spec)


@st.cache_resource(max_entries=16, show_spinner=False)
def speculative_figure(spec: sps.SpecSetup, run: sp.SpecRun | None, label: str, lang: str = "en") -> object:
    curves = spec_curves(spec)
    return figs.speculative(curves, run, label, spec_words.curves_takeaway(curves, lang), lang)


def sweep(setup: cp.ServingSetup):
    """Both schedulers at six more batch sizes; about six times the main run, so it may wait for a button."""
    main_s = job_seconds("serving.batching", setup)
    estimate = len(cp.SWEEP_BATCHES) * (main_s if main_s is not None else AUTO_RUN_S)
    return run_job("serving.sweep", setup, estimate, lambda progress: cp.sweep_max_batch(setup, progress=progress),
                   real_model=False, what=t("serving.job.sweep", n=f"{len(cp.SWEEP_BATCHES)}"))


def live_run(choice: LiveChoice) -> sp.SpecRun | None:
    """Greedy speculation on the real model against the target alone (None while it waits for a button)."""
    from app.resources import model, model_rates
    from sim.model.generate import encode

    ids = encode(choice.prompt)
    if len(ids) > LIVE_MAX_PROMPT:
        raise Refusal("serving.err.live_prompt", n=f"{len(ids):,}", max=f"{LIVE_MAX_PROMPT}")
    n_new, k = choice.max_new_tokens, choice.k

    def run(progress):
        target = model(sp.TARGET)
        return sp.speculative_generate(target, sp.make_draft(target, choice.draft, model), ids, n_new, k)

    estimate = sp.spec_run_seconds(model_rates(sp.TARGET, "eager"), len(ids), n_new, k)
    return run_job("serving.live", (tuple(ids), n_new, k, choice.draft), estimate, run,
                   what=t("serving.job.live", n=f"{n_new}", k=f"{k}"))
