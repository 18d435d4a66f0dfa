"""Presenter mode and the lab's page style: one place decides how text, tables and charts look.

`?present=1` (or the sidebar toggle) is the one setting that is not a page's own: it follows the teacher
from page to page, so it lives in the session and is written back into every page's URL. Pages show
charts with `show_chart` (presenter mode enlarges fonts after the figure builder is done, so a builder
never needs to know) and big tables with `show_table` (folded into an expander on a projector).
"""

from __future__ import annotations

import functools
import re

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from app.i18n import t
from app.urlstate import parse_bool

PRESENT_KEY = "present"  # session key and URL name
SEEN_KEY = "_present.url"  # the URL value this session last saw (a new one wins over the toggle)
PROBLEM_KEY = "_present.problem"  # a bad present= read this run, for the page's list of bad URL values

# Sizes in CSS px. Ticks of 16 px and titles of 20 px stay readable from the back of a classroom.
NORMAL = {"font": 14, "tick": 13, "title": 17}
PRESENTER = {"font": 17, "tick": 16, "title": 21}
# A projector shows 1280×720: below Streamlit's header (~60 px) 600 px of chart fit with a margin, so a taller
# figure (a Gantt row per request, a grid of heatmaps) is drawn at that height instead of running off the screen.
PRESENTER_MAX_HEIGHT = 600

# Always on: at 1024 px wide (sidebar open) columns wrap two to a row instead of squeezing metrics to
# "1…" and select boxes to "Llam"; long table cells wrap instead of being cut off. Korean lines break between
# words, not inside one (keep-all; English text breaks as before, and a word too long for its box still wraps).
BASE_CSS = """
<style>
@media (max-width: 1180px) {
  div[data-testid="stHorizontalBlock"] { flex-wrap: wrap; row-gap: 0.5rem; }
  div[data-testid="stHorizontalBlock"] > div[data-testid="stColumn"] { min-width: calc(50% - 1rem); }
}
div[data-testid="stMetricValue"] > div, div[data-testid="stMetricValue"] p { overflow: visible; text-overflow: clip;
  white-space: normal; }
div[data-testid="stMetricLabel"], div[data-testid="stMetricLabel"] * { overflow: visible; text-overflow: clip;
  white-space: normal; }
div[data-testid="stTable"] td, div[data-testid="stTable"] th { white-space: normal; overflow-wrap: anywhere; }
.stApp :is(p, li, td, th, label, h1, h2, h3) { word-break: keep-all !important; }
</style>
"""

# Presenter mode: larger type everywhere, full-contrast text (captions are not light grey).
PRESENTER_CSS = """
<style>
html { font-size: 19px; }
.stApp, .stApp p, .stApp li, .stApp label, .stApp td, .stApp th { color: var(--text-color, #000) !important; }
div[data-testid="stCaptionContainer"], div[data-testid="stCaptionContainer"] p { font-size: 0.95rem; opacity: 1; }
div[data-testid="stMetricValue"] { font-size: 2.4rem; }
div[data-testid="stMetricLabel"] p { font-size: 1.05rem; }
h1 { font-size: 2.6rem !important; }
</style>
"""


def read_present() -> bool:
    """The presenter setting for this run. A link's `present=` counts when it is new (a link just opened, or
    edited by hand); after that the sidebar toggle owns the setting and the URL only mirrors it."""
    ss = st.session_state
    raw = st.query_params.get(PRESENT_KEY)
    if raw != ss.get(SEEN_KEY):
        ss[SEEN_KEY] = raw
        if raw is not None:
            from app.i18n import lang
            from sim.words import text

            lg = lang()
            value, problem = parse_bool(raw, False, lg)
            if problem is None:
                ss[PRESENT_KEY] = value
            else:  # listed with the page's other bad values, as any other
                state = text(lg, "present.state_on" if ss.get(PRESENT_KEY) else "present.state_off")
                ss[PROBLEM_KEY] = text(lg, "present.url_bad", key=PRESENT_KEY, problem=problem, state=state)
    return bool(ss.get(PRESENT_KEY, False))


def take_present_problem() -> str | None:
    """The bad `present=` this run read, once (the page's URL state lists it among its bad values)."""
    return st.session_state.pop(PROBLEM_KEY, None)


def apply_page_style(present: bool) -> None:
    """The CSS of this run, and `present` mirrored into the URL so a copied link keeps it (navigating to another
    page clears the URL; the session carries the setting over and writes it back)."""
    st.html(BASE_CSS + (PRESENTER_CSS if present else ""))
    want = "1" if present else None
    if st.query_params.get(PRESENT_KEY) != want:
        if want:
            st.query_params[PRESENT_KEY] = want
        else:
            del st.query_params[PRESENT_KEY]
    st.session_state[SEEN_KEY] = want


def presenting() -> bool:
    return bool(st.session_state.get(PRESENT_KEY, False))


_AXIS = re.compile(r"[xy]axis\d*$")


@functools.cache
def _template_json(name: str) -> dict:
    return pio.templates[name].to_plotly_json()


def styled(fig: go.Figure, present: bool) -> go.Figure:
    """A new figure: `fig` with the lab's type sizes (larger in presenter mode); axis titles are never touched.
    `fig` itself is left as it was: it may be a cached figure every session shares (a presenter's view restyling it
    in place made every viewer's Serving timeline 600 px tall instead of 940).

    The layout is edited as plain data and set back once: plotly's update_layout / update_xaxes put every
    call through its change machinery (30 ms a three-panel chart, on every chart of every rerun; 2.5 ms this
    way, the same figure: tests/test_present.py holds it to the update_* version). The default template is left
    out of the data and plotly attaches it again: validated from its JSON it would be deep-copied whole."""
    sizes = PRESENTER if present else NORMAL
    layout = fig.layout.to_plotly_json()
    template = layout.pop("template", None)
    if template is not None and template != _template_json(pio.templates.default):
        layout["template"] = template  # a figure's own template is kept
    layout.setdefault("font", {})["size"] = sizes["font"]
    layout.setdefault("title", {}).setdefault("font", {})["size"] = sizes["title"]
    for name in {"xaxis", "yaxis"} | {k for k in layout if _AXIS.match(k)}:  # as update_x/yaxes: every axis
        axis = layout.setdefault(name, {})
        axis.setdefault("tickfont", {})["size"] = sizes["tick"]
        axis.setdefault("title", {}).setdefault("font", {})["size"] = sizes["font"]
    if present and layout.get("height"):
        layout["height"] = min(round(layout["height"] * 1.15), PRESENTER_MAX_HEIGHT)
    # to_plotly_json gave copies of the layout's dicts; the traces are copied by the new figure (already valid)
    return go.Figure(data=fig.data, layout=layout, frames=fig.frames or None, _validate=False)


def show_chart(fig: go.Figure, **kwargs) -> None:
    """st.plotly_chart with the lab's style; the Streamlit theme (light or dark) colours it."""
    show_chart_in(st, fig, **kwargs)


def show_chart_in(where, fig: go.Figure, **kwargs) -> None:
    """show_chart inside a column or container (`show_chart_in(cols[0], fig)`)."""
    kwargs.setdefault("config", {"displaylogo": False})
    where.plotly_chart(styled(fig, presenting()), **kwargs)


def number_formats(df) -> dict:
    """Column formats for a results table: whole numbers with thousands separators (582,748,632,776,704,
    not 582748632776704), large floats rounded to whole numbers, the rest to 4 significant digits."""
    import pandas as pd

    formats = {}
    for name in df.columns:
        col = df[name]
        if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_numeric_dtype(col):
            continue
        finite = col[pd.notna(col)]
        if pd.api.types.is_integer_dtype(col) or (len(finite) and (finite.abs().min() >= 1e4 or
                                                                   (finite == finite.round()).all())):
            formats[name] = st.column_config.NumberColumn(format="localized")
        else:
            formats[name] = st.column_config.NumberColumn(format="%.4g")
    return formats


def is_dense(df) -> bool:
    """Too many numbers to read from the back of a room: more than 8 rows, or more than 4 numeric columns.
    A short table of words (what helps a decode step) is the content itself and stays open."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        return True
    return len(df) > 8 or sum(pd.api.types.is_numeric_dtype(df[c]) for c in df.columns) > 4


def show_table(df, label: str | None = None, where=None, **kwargs) -> None:
    """A results table with readable numbers (its toolbar downloads it as CSV): inline normally; in presenter
    mode a dense one is folded into an expander (unreadable on a projector; the chart carries the point), its
    label `label` ("Show the table" in the page language by default)."""
    import pandas as pd

    if isinstance(df, pd.DataFrame):
        kwargs["column_config"] = {**number_formats(df), **(kwargs.get("column_config") or {})}
    target = where if where is not None else st
    if presenting() and is_dense(df):
        with target.expander(label or t("present.show_table")):
            st.dataframe(df, **kwargs)
    else:
        target.dataframe(df, **kwargs)
