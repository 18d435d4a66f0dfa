"""The KV quantization page's runs on the real model: cached per setting, and handed to the server's one
queue as jobs (the long ones wait for their button)."""

from __future__ import annotations

import streamlit as st

from app.i18n import lang, t
from app.resources import model as cached_model
from app.work import run_job
from sim.model import quant_channels as qc
from sim.model import quant_errors as qe
from sim.model import quant_fp8 as qf
from sim.model import quant_generation as qg
from sim.model.quant_errors import PositionErrors
from sim.model.quant_setup import Job, QuantSetup
from sim.words.quant import free_sentence, jobs_sentence, title_of


@st.cache_data(max_entries=8, show_spinner=False)
def windows_for(num_windows: int, window_len: int):
    return qe.heldout_windows(qe.EvalConfig(num_windows, window_len))


@st.cache_data(max_entries=4, show_spinner=False)
def reference_for(variant: str, num_windows: int, window_len: int):
    return qe.reference_logits(cached_model(variant), windows_for(num_windows, window_len))


@st.cache_data(max_entries=256, show_spinner=False)
def evaluate(variant: str, num_windows: int, window_len: int, scheme):
    return qe.evaluate_scheme(cached_model(variant), windows_for(num_windows, window_len), scheme,
                              ref_logits=reference_for(variant, num_windows, window_len))


@st.cache_data(max_entries=32, show_spinner=False)
def free_for(variant: str, prompt: tuple, n: int, scheme):
    return qg.free_run(cached_model(variant), list(prompt), n, scheme=scheme)


@st.cache_data(max_entries=32, show_spinner=False)
def divergence_for(variant: str, prompt: tuple, ref: tuple, schemes: tuple):
    return qg.divergence_positions(cached_model(variant), list(prompt), ref_ids=list(ref), schemes=schemes)


@st.cache_data(max_entries=8, show_spinner=False)
def stats_for(variant: str, window_len: int):
    return qc.channel_stats(cached_model(variant), windows_for(1, window_len)[:, :-1])


@st.cache_data(max_entries=16, show_spinner=False)
def demo_for(variant: str, window_len: int, num_tokens: int, layer: int, head: int, bits: int, G: int, g: int,
             ch: int, factor: float):
    q, k = qc.queries_and_keys(cached_model(variant), windows_for(1, window_len)[:, :-1], layer=layer, kv_head=head)
    return qc.outlier_demo(k[:num_tokens], q[:num_tokens], bits=bits, chunk=G, channel_group=g, channel=ch, factor=factor)[1]


@st.cache_data(max_entries=8, show_spinner=False)
def fp8_scales_for(variant: str, num_windows: int, window_len: int):
    return qf.fp8_scale_check(cached_model(variant), windows_for(num_windows, window_len), calib_ids=qf.calibration_ids(),
                              ref_logits=reference_for(variant, num_windows, window_len))


def fp8_scales(setup: QuantSetup, run_s: float):
    """FP8 at scale 1.0 against calibrated per-tensor and per-head scales and INT8 (sim.model.quant_fp8), as one job
    of the server's queue (four teacher-forced runs and two capture passes); None while it waits for its button."""
    ecfg = setup.eval

    def work(progress):
        progress(0.0, t("fp8.job"))
        return fp8_scales_for(setup.variant, ecfg.num_windows, ecfg.window_len)

    return run_job("kv_quantization.fp8_scales", (setup.variant, ecfg), 5 * run_s, work,
                   what=jobs_sentence(setup, t("fp8.job"), 4, lang()))


class Measured:
    """The teacher-forced runs measured in this page run, (kind, bits) -> PositionErrors."""

    def __init__(self, setup: QuantSetup, run_s: float) -> None:
        self.setup, self.run_s = setup, run_s  # run_s: estimated seconds of one run
        self.results: dict[Job, PositionErrors] = {}

    def run(self, jobs: list[Job], what: str, name: str) -> bool:
        """Measure the jobs not measured yet this run, as one job of the server's queue; False while it
        waits for its button."""
        todo = [j for j in jobs if j not in self.results]
        if not todo:
            return True
        setup, ecfg, L = self.setup, self.setup.eval, lang()

        def measure(progress):
            out = {}
            for i, (kind, b) in enumerate(todo):
                scheme = setup.scheme(kind, b)
                progress(i / len(todo), t("quant.job.run", i=f"{i + 1}", n=f"{len(todo)}", scheme=title_of(scheme, L)))
                out[(kind, b)] = evaluate(setup.variant, ecfg.num_windows, ecfg.window_len, scheme)
            return out

        got = run_job(f"kv_quantization.{name}", setup.job_params(todo), self.run_s * len(todo), measure,
                      what=jobs_sentence(setup, what, len(todo), L))
        self.results.update(got or {})
        return got is not None


def free_and_divergence(setup: QuantSetup, prompt_ids: list[int], n_new: int, kind: str, schemes: dict,
                        seconds: float):
    """(the free run through `kind`'s cache, where every scheme parts from it), or None while it waits."""
    greedy, parting = t("quant.job.greedy"), t("quant.job.parting")

    def work(progress):
        progress(0.0, greedy)
        fr = free_for(setup.variant, tuple(prompt_ids), n_new, schemes[kind])  # bounded: always fits
        progress(0.7, parting)
        return fr, divergence_for(setup.variant, tuple(prompt_ids), tuple(fr.ref_ids), tuple(schemes.values()))

    return run_job("kv_quantization.free", setup.free_key(prompt_ids, n_new, kind), seconds, work,
                   what=free_sentence(n_new, lang()))
