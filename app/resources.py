"""Heavy things, loaded once per server process (read-only after load).

Streamlit fixes a cached function's spinner text when it is decorated, so each loader is decorated once per
language (`_per_language`): the decorations share one cache (the same function), each says its spinner in its
own language, and the caller picks the one for the page language. Like any cached function, the spinner shows
only while the value is first made.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app.i18n import lang, t
from app.text import code, plain
from sim.words import LANGS, text, why


def _per_language(spinner_key: str, load: Callable) -> dict[str, Callable]:
    """lang -> `load` cached with `spinner_key`'s message as its spinner (one cache for them all)."""
    return {lg: st.cache_resource(show_spinner=text(lg, spinner_key))(load) for lg in LANGS}


def _load_model(name: str):
    from sim.model.device import configure_threads, pick_device, pick_dtype

    configure_threads()
    device = pick_device()
    from sim.model.transformer import load_model

    return load_model(name, device, pick_dtype(device))


_MODEL = _per_language("res.loading", _load_model)


def device_info():
    """The device and which SDPA backends really run on it: probed once per server, alone in the queue (forcing
    an SDPA backend is process-wide); the wait shows its place and can be left."""
    from app.work import once
    from sim.model.device import describe_device

    return once("res.device_info", (), describe_device, what=t("res.probing"))


def model(name: str):
    """One of the bundled presets ("mha", "gqa", "mqa") on the lab's device and dtype."""
    return _MODEL[lang()](name)


def model_or_stop(name: str):
    """The model, or a clear error in the page (a missing or corrupt checkpoint) and stop."""
    from sim.model.errors import CheckpointError
    from sim.refusal import Refusal

    try:
        return model(name)
    except Refusal as exc:  # KVLAB_DEVICE names a device torch does not have
        st.error(plain(why(exc, lang())))
        st.stop()
    except CheckpointError as exc:
        st.error(t("res.cannot_load", name=code(name), error=plain(exc),
                   command=code(f"python -m sim.model.train --preset {name}")))
        st.stop()


def model_rates(name: str, attn_impl: str):
    """Seconds per forward call, per token and per attention pair of this model on this device,
    measured in the server's queue (so no other run disturbs it) once per process; the wait shows its place and
    can be left. Counted on app.work's work clock: on a CPU with one torch thread that is the thread's CPU time,
    so rates measured while a class's browsers load the machine are the model's, not the load's."""
    from app.work import once, work_clock
    from sim.model.measure import measure_rates

    m = model(name)
    clock = work_clock() if m.device.type == "cpu" else None
    return once("res.model_rates", (name, attn_impl), lambda: measure_rates(m, attn_impl=attn_impl, clock=clock),
                what=t("res.timing"))


def live_result(run, cannot: str):
    """`run()` on the real model, or None with the reason in the page: a missing checkpoint is a warning (the
    simulators above still hold), bad settings an error starting with `cannot` ("Cannot decode")."""
    from sim.model.errors import CheckpointError

    try:
        return run()
    except CheckpointError as exc:
        st.warning(t("res.unavailable", error=plain(exc)))
    except ValueError as exc:
        st.error(t("res.cannot", cannot=cannot, error=plain(why(exc, lang()))))
    return None


@st.cache_resource(show_spinner=False)
def _real_holder() -> dict:
    """The one real model of this server process, filled on first use (see real_model)."""
    import threading

    return {"model": None, "lock": threading.Lock()}


def real_model():
    """SmolLM2-135M-Instruct (sim.model.gguf_load.RealModel), loaded once per server; the first load shows its
    progress (hash, dequantize, save: seconds; a warm start reads the converted copy back). Raises the loader's
    Refusal (no wheel, a bad file): callers show it with real_model_or_none."""
    holder = _real_holder()
    with holder["lock"]:
        if holder["model"] is None:
            from sim.model.device import configure_threads
            from sim.model.gguf_load import load_real_model

            configure_threads()
            bar = st.progress(0.0, text=t("real.loading"))

            def progress(stage: str, done: int, total: int) -> None:
                bar.progress(min(1.0, done / max(total, 1)), text=t("real.progress", stage=t(f"real.stage.{stage}"),
                                                                    done=f"{done:,}", total=f"{total:,}"))

            try:
                holder["model"] = load_real_model(progress=progress)
            finally:
                bar.empty()
        return holder["model"]


def real_model_or_none():
    """The real model, or None with its one-line reason in the page (how to install it, or what is wrong with
    the file); the tiny models keep working either way."""
    from sim.refusal import Refusal

    try:
        return real_model()
    except Refusal as exc:
        (st.info if exc.key == "real.err.no_wheel" else st.error)(plain(why(exc, lang())))
    return None
