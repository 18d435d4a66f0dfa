"""Shrink the cache: the real model it runs (the copy-trained variant when it ships), and the grid run as
one queued, stoppable job whose result every session shares."""

from __future__ import annotations

import json

import streamlit as st

from app.i18n import lang, t
from app.work import run_job
from sim.cost.shrink import LONG_PROMPT, CopyAbility, ShrinkSetup, num_runs
from sim.i18n import text
from sim.work.run_cost import DEFAULT_RATES, cached_work

MODEL_NAMES = ("mha", "mha_copy")  # the shipped model, the copy-trained one; each labelled by shrink.model.<name>


def model_label(name: str, lang: str = "en") -> str:
    """A model's display label in `lang` (the catalog's shrink.model.<name>)."""
    return text(lang, f"shrink.model.{name}")


MODELS = {k: model_label(k) for k in MODEL_NAMES}  # name -> English label


def _report(name: str) -> dict:
    from app.registry import ROOT

    path = ROOT / "assets" / "models" / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def copy_abilities(lang: str = "en") -> list[CopyAbility]:
    """Each shipped model's recorded full-cache quote and fact scores (read from its training report, no torch),
    labelled in `lang`."""
    out = []
    for name in available_models():
        scores = _report(name).get("full_cache_scores")
        if scores:
            out.append(CopyAbility.from_report(model_label(name, lang), scores))
    return out


def available_models() -> dict[str, str]:
    """The shipped model and the copy-trained one when its checkpoint ships, the first whose recorded
    scores show it can copy first (the page's default)."""
    from app.registry import ROOT

    names = [k for k in MODELS if k == "mha" or (ROOT / "assets" / "models" / f"{k}.safetensors").is_file()]

    def copies(name: str) -> bool:
        scores = _report(name).get("full_cache_scores")
        return bool(scores) and CopyAbility.from_report(name, scores).copies

    names.sort(key=lambda k: not copies(k))  # stable: the shipped model first among equals
    return {k: MODELS[k] for k in names}


@st.cache_resource(show_spinner="Loading the tiny model…")
def load(name: str):
    from app.resources import model
    from sim.model.device import pick_device, pick_dtype
    from sim.model.transformer import checkpoint_path, load_model

    if name == "mha":
        return model("mha")
    device = pick_device()
    return load_model(checkpoint_path(name), device, pick_dtype(device))


def estimate_s(setup: ShrinkSetup) -> float:
    """The cost model's seconds: per run, the long generation plus the quote and fact trials (~900 and
    ~700 positions each), with the eager rates (H2O and SnapKV read the attention weights)."""
    one = cached_work(len(LONG_PROMPT.encode()), setup.num_new) + \
        (cached_work(850, 32) + cached_work(700, 12)) * setup.num_trials
    return DEFAULT_RATES["eager"].seconds(one * num_runs(setup)) * 1.3  # eviction's gathers on top


def run(name: str, setup: ShrinkSetup, go: bool):
    L = lang()  # the progress is worded in the language of the page that started the run

    def work(progress):
        from sim.model.shrink_run import run_shrink  # torch: only once the run starts

        return run_shrink(load(name), setup, progress, L)

    return run_job("shrink_cache.grid", (name, setup), estimate_s(setup), work,
                   what=t("shrink.job.what", n=f"{num_runs(setup)}"), go=go, button=t("shrink.run"), auto=False)

