"""Roofline's choices: the slider stops, the "this machine" hardware entry, and the page's tabs."""

from app.tabs import LazyTabs

BATCHES = [2**k for k in range(13)]  # 1 … 4,096
CONTEXTS = [2**k for k in range(7, 21)]  # 128 … 1,048,576
THIS_MACHINE = "this-machine"
TABS = LazyTabs("roofline", {
    "roofline": "The roofline",
    "bytes": "Where a step's bytes go",
    "batching": "Batching",
    "levers": "What helps decode",
    "machine": "Measured on this machine",
    "claims": "The seeds' numbers",
})
