"""Shrink the cache: the real model it runs (the copy-trained variant when it ships), and the grid run as
one queued, stoppable job whose result every session shares."""

from __future__ import annotations

import json

import streamlit as st

from app.i18n import lang, t
from app.work import run_job
from sim.cost.shrink import LONG_PROMPT, CopyAbility, ShrinkSetup, num_runs
from sim.words import text
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
        from sim.words import say

        return run_shrink(load(name), setup, lambda f, m: progress(f, say(L, m)))

    return run_job("shrink_cache.grid", (name, setup), estimate_s(setup), work,
                   what=t("shrink.job.what", n=f"{num_runs(setup)}"), go=go, button=t("shrink.run"), auto=False)



# ---------------------------------------------------------------------------------------------
# The real model (SmolLM2-135M-Instruct): the recorded grid at once, any one cell live behind its button


def real_cells() -> list[str]:
    """The recorded grid's cells ("full", "window@0.25", ...), read without torch; ["full"] when none ships."""
    from sim.model.real_recorded import cell_key, load_recorded

    data = load_recorded()
    return [cell_key(r["method"], r["budget"]) for r in data["rows"]] if data else ["full"]


def _cell_s(row: dict, setup) -> float:
    """The cost model's seconds for one cell (eager attention: H2O and SnapKV read the weights): the long generation,
    then each quote (its prompt: the recorded positions less the scored tokens) and each chat (~160 tokens)."""
    from sim.work.run_cost import smollm2_rates

    rates = smollm2_rates("eager")
    quote = rates.cached_s(row["num_tokens"] - 23, 24)
    return rates.cached_s(48, setup.num_new) + (quote + rates.cached_s(160, 20)) * setup.num_trials


def recorded_finding() -> bool:
    """The page's finding, shown at once whatever model is picked (read from the recorded file, no torch): the
    recorded SmolLM2 grid's verdict, its chart and its provenance. False when no recorded grid ships."""
    from app.figures.shrink import scores_vs_bytes
    from app.present import show_chart
    from app.text import code, plain
    from sim.model.real_recorded import load_recorded
    from sim.model.shrink_quant import blur_ranking
    from sim.words import say
    from sim.words.shrink import recorded_score, recorded_verdict

    L = lang()
    data = load_recorded()
    if data is None:
        return False
    rows, prov = data["rows"], data["provenance"]
    st.subheader(t("real.h.recorded"))
    head, sentence = recorded_verdict(rows, L)
    scores = [recorded_score(r, L) for r in rows]
    # the chart's title is the verdict's head; the whole verdict, every pairing counted, right under it
    show_chart(scores_vs_bytes(scores[1:], scores[0], head, L, score_title=t("real.fig.score")), key="shrink_real")
    st.markdown(f"**{plain(sentence, 4000)}**")
    st.caption(t("real.provenance", command=code(prov["command"]), commit=code(prov["commit"][:12]),
                 machine=plain(prov["machine"]), torch=plain(prov["torch"]), threads=f"{prov['threads']}",
                 date=plain(prov["date"]), cells=f"{len(rows)}", seconds=f"{prov['seconds']:,.0f}",
                 tokens=f"{rows[0]['num_tokens']:,}"))
    for msg in blur_ranking(scores):
        st.markdown(plain(say(L, msg), 4000))
    return True


def real_section() -> None:
    """Under the recorded finding (`recorded_finding`), when the real model is picked: the recorded table and what
    it ran; then the cell picked (`cell` in the page's URL) rerun live when its button is pressed."""
    from app.model_picker import real_unavailable
    from app.present import show_table
    from app.text import code
    from sim.model.real_recorded import RealShrinkSetup, cell_key, load_recorded
    from sim.words.shrink import recorded_label, recorded_rows

    L = lang()
    why = real_unavailable()
    if why:
        st.info(why, icon=":material/download:")
    data = load_recorded()
    if data is None:
        st.info(t("real.no_recorded", command=code("python -m sim.model.record_shrink")))
        return
    rows = data["rows"]
    setup = RealShrinkSetup.from_dict(data["setup"])
    st.markdown(t("real.recorded_intro", n=f"{setup.num_new:,}"))
    import pandas as pd

    show_table(pd.DataFrame(recorded_rows(rows, L)), hide_index=True, width="stretch")
    st.caption(t("real.chat_answer", answer=code(rows[0]["chat_answer"].split("<|im_end|>")[0])))  # its own turn
    if why:
        return
    st.markdown(f"**{t('real.rerun.h')}**")
    by_key = {cell_key(r["method"], r["budget"]): r for r in rows}
    from app.controls.shrink_cache import CELL

    CELL.draw(format_func=lambda k: recorded_label(by_key[k]["method"], by_key[k]["budget"], L))
    cell = st.session_state["cell"]
    rec = by_key.get(cell, rows[0])
    name = recorded_label(rec["method"], rec["budget"], L)

    def work(progress):
        from app.resources import real_model
        from sim.model.real_checks import make_prompts, run_cell

        real = real_model()
        prompts = make_prompts(real, setup)
        reference = None
        if rec["method"] != "full":
            progress(0.0, t("real.job.cell", cell=recorded_label("full", None, L)))
            reference = run_cell(real, method="full", budget=None, setup=setup, prompts=prompts, reference=None)["long_tokens"]
        progress(0.5, t("real.job.cell", cell=name))
        out = run_cell(real, method=rec["method"], budget=rec["budget"], setup=setup, prompts=prompts, reference=reference)
        out.pop("long_tokens")
        return out

    estimate = _cell_s(rec, setup) * (2 if rec["method"] != "full" else 1)  # the full cache first: the reference
    live = run_job("shrink_cache.real_cell", (cell, json.dumps(data["setup"], sort_keys=True)), estimate, work,
                   what=t("real.rerun.what"), button=t("real.rerun.button"), auto=False)
    if live is None:
        return

    def pct(r: dict) -> tuple[str, str, str]:
        return (f"{100 * r['long_same'] / r['num_new']:.0f}%", f"{100 * r['quote_prefix'] / r['quote_max']:.0f}%",
                f"{100 * r['chat_prefix'] / r['chat_max']:.0f}%")

    (lo, qu, ch), (rlo, rqu, rch) = pct(live), pct(rec)
    if (lo, qu, ch) == (rlo, rqu, rch):
        st.success(t("real.rerun.same", cell=name, long=lo, quote=qu, chat=ch))
    else:
        st.warning(t("real.rerun.differs", cell=name, long=lo, quote=qu, chat=ch, rlong=rlo, rquote=rqu, rchat=rch))
