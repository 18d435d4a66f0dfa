"""Heavy things, loaded once per server process (read-only after load)."""

from __future__ import annotations

import streamlit as st

from app.text import code, plain


@st.cache_resource(show_spinner="Probing the device…")
def device_info():
    from app.work import server
    from sim.model.device import describe_device

    with server().queue.slot(exclusive=True):  # forcing an SDPA backend is process-wide: run alone
        return describe_device()


@st.cache_resource(show_spinner="Loading the tiny model…")
def model(name: str):
    """One of the bundled presets ("mha", "gqa", "mqa") on the lab's device and dtype."""
    from sim.model.device import configure_threads, pick_device, pick_dtype

    configure_threads()
    device = pick_device()
    from sim.model.transformer import load_model

    return load_model(name, device, pick_dtype(device))


def model_or_stop(name: str):
    """The model, or a clear error in the page (a missing or corrupt checkpoint) and stop."""
    from sim.model.errors import CheckpointError

    try:
        return model(name)
    except CheckpointError as exc:
        st.error(f"The bundled model {code(name)} could not be loaded: {plain(exc)}. Rebuild it with "
                 f"`python -m sim.model.train --preset {name}`.")
        st.stop()


@st.cache_resource(show_spinner="Timing the model once, to know how long a run will take…")
def model_rates(name: str, attn_impl: str):
    """Seconds per forward call, per token and per attention pair of this model on this device,
    measured in the server's queue (so no other run disturbs it) once per process."""
    from app.work import server
    from sim.model.measure import measure_rates

    m = model(name)
    with server().queue.slot(exclusive=True):  # a timing: nothing else may run beside it
        return measure_rates(m, attn_impl)


def live_result(run, cannot: str):
    """`run()` on the real model, or None with the reason in the page: a missing checkpoint is a warning (the
    simulators above still hold), bad settings an error starting with `cannot` ("Cannot decode")."""
    from sim.model.errors import CheckpointError

    try:
        return run()
    except CheckpointError as exc:
        st.warning(f"The tiny model is not available: {plain(exc)}")
    except ValueError as exc:
        st.error(f"{cannot}: {plain(exc)}")
    return None
