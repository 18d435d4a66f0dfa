import pandas as pd
import streamlit as st

from app.present import show_table
from app.registry import PAGES
from app.resources import device_info
from app.urlstate import UrlState
from sim.claims import SEEDS

st.title("KV Cache Lab")
UrlState("home")  # no controls here; marks the page so the next page knows it is entered
st.markdown(
    """
A language model writes every token's **keys and values** once and reads them again at every
later step. Keeping them — the **KV cache** — turns each decoding step from recomputing the whole
prefix into one new row of work, and turns the problem into one of **memory**: how many bytes per
token, how to allocate them without waste, how to share and compress them, and why a decode step
waits on memory bandwidth rather than arithmetic.

Each page shows one fact three ways: the **formula**, an **exact simulation**, and a **measurement
on a real tiny language model** running on this machine — and says why they differ when they do.
"""
)

st.markdown(
    "**The seeds.** The lab follows four Korean articles on the KV cache — its cost, its memory, FlashAttention "
    "and quantization. Pages call them *seed 000 … 004*, quote them, and recompute every number they state; "
    "where a seed's number is off, the page shows the right one and says why."
)
st.caption(" · ".join(f"seed {k}: {en} (“{ko}”)" for k, (ko, en) in SEEDS.items()))

lesson = next(p for p in PAGES if p.slug == "lesson")
st.page_link(lesson.path, label=f"New here? Start with the {lesson.title}: {lesson.summary}", icon=lesson.icon)

st.subheader("Map of the lab")
rows = [{"Page": p.title, "Section": p.section, "What it shows": p.summary} for p in PAGES if p.slug != "home"]
show_table(pd.DataFrame(rows), hide_index=True, width="stretch")
cols = st.columns(3)
for i, p in enumerate(q for q in PAGES if q.slug != "home"):
    cols[i % 3].page_link(p.path, label=p.title, icon=p.icon)

st.subheader("This machine")
info = device_info()
c = st.columns(4)
c[0].metric("Device in use", info.device)
c[1].metric("Compute dtype", info.dtype)
c[2].metric("CPU threads" if info.device == "cpu" else "GPU memory",
            str(info.num_threads) if info.device == "cpu" else f"{info.memory_bytes / 2**30:.1f} GiB")
c[3].metric("torch", info.torch_version)
st.caption(f"Device name: {info.device_name}. Set `KVLAB_DEVICE=cpu` or `cuda` to override the automatic choice.")
st.markdown("**Scaled-dot-product attention backends** — each one was forced and run on a tiny causal "
            "input just now; a backend that refused says why.")
show_table(
    pd.DataFrame([{"Backend": b.name, "Runs here": "yes" if b.runs else "no", "Why not": b.reason}
                  for b in info.backends]),
    hide_index=True, width="stretch",
)
