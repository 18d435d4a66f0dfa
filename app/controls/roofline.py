"""Roofline's choices: the slider stops, the "this machine" hardware entry, and the page's tabs."""


from app.i18n import t
from app.tabs import LazyTabs
from sim.i18n import text

BATCHES = [2**k for k in range(13)]  # 1 … 4,096
CONTEXTS = [2**k for k in range(7, 21)]  # 128 … 1,048,576
THIS_MACHINE = "this-machine"
TAB_SLUGS = ("roofline", "bytes", "batching", "levers", "machine", "claims")
TABS = LazyTabs("roofline", {k: text("en", f"roofline.tab.{k}") for k in TAB_SLUGS})  # English: the tests' names


def tabs() -> LazyTabs:
    """The page's tabs labelled in the page language (the same widget key and link values as TABS)."""
    return LazyTabs("roofline", {k: t(f"roofline.tab.{k}") for k in TAB_SLUGS})
