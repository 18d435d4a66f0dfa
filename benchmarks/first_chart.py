"""How long KV memory and Roofline take to draw their first chart, against this machine's floor.

    python -m benchmarks.first_chart

Starts the lab on 127.0.0.1 and opens /kv_memory and /roofline, each in a fresh headless Chromium
context: cold (the first load after the server started) and warm (the same URL again). The time is
from navigation until the first plotly chart has drawn (`.js-plotly-plot .main-svg` visible). Then
the same two URLs on a minimal two-page Streamlit app with one plotly chart each, written to a temp
dir now: the floor (Streamlit, plotly and the browser on this machine, with no lab in them). Prints
one line per load, then as its LAST line exactly:
    first_chart_worst_s=<x> floor_worst_s=<x> first_chart_vs_floor=<ratio>
(worst = the slowest of the four loads, cold and warm, of each app).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS, AppServer

PAGES = ("kv_memory", "roofline")
CHART = ".js-plotly-plot .main-svg"
TIMEOUT_MS = 120_000

FLOOR_MAIN = '''import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
pg = st.navigation([st.Page("{dir}/kv_memory.py", url_path="kv_memory", default=True),
                    st.Page("{dir}/roofline.py", url_path="roofline")])
pg.run()
'''
FLOOR_PAGE = '''import plotly.graph_objects as go
import streamlit as st

st.title("{title}")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9])))
'''


def write_floor_app(folder: Path) -> Path:
    for slug in PAGES:
        (folder / f"{slug}.py").write_text(FLOOR_PAGE.format(title=slug))
    main = folder / "floor_main.py"
    main.write_text(FLOOR_MAIN.format(dir=folder))
    return main


def time_loads(browser, server: AppServer) -> dict[tuple[str, str], float]:
    """{(page, "cold" | "warm"): seconds to the first drawn chart}; each load in a fresh context."""
    out = {}
    for run in ("cold", "warm"):
        for slug in PAGES:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            t0 = time.perf_counter()
            page.goto(f"{server.url}/{slug}")
            page.locator(CHART).first.wait_for(state="visible", timeout=TIMEOUT_MS)
            out[(slug, run)] = time.perf_counter() - t0
            context.close()
    return out


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="first_chart_") as tmp, sync_playwright() as pw:
        folder = Path(tmp)
        floor_main = write_floor_app(folder)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        results = {}
        for app, script in (("lab", None), ("floor", floor_main)):
            with AppServer(folder / f"{app}.log", script=script) as server:
                results[app] = time_loads(browser, server)
        browser.close()
    for app, times in results.items():
        for (slug, run), s in times.items():
            print(f"{app:5} {slug:10} {run:4} {s:6.2f} s")
    lab, floor = max(results["lab"].values()), max(results["floor"].values())
    print(f"first_chart_worst_s={lab:.2f} floor_worst_s={floor:.2f} first_chart_vs_floor={lab / floor:.2f}")


if __name__ == "__main__":
    main()
