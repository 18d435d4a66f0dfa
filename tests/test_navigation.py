"""Pages never leak into each other: every ordered pair of pages, navigated through app/main.py.

A class moves between pages in one session. Each of the 132 ordered pairs (A, B) is walked once,
as one Eulerian circuit of the complete directed graph cut into one walk per page (a fresh session each):
entering B must show no exception and no error, and B's widget values must equal B opened alone.
The second set of walks changes one widget on every page before leaving it, and checks on the
way back that the page kept what was set there.
"""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.registry import PAGES

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
SLUGS = [p.slug for p in PAGES]
WIDGETS = ("slider", "select_slider", "number_input", "selectbox", "radio", "toggle", "checkbox", "text_input",
           "text_area", "multiselect", "segmented_control", "pills", "color_picker", "date_input", "time_input")


def eulerian_circuit(nodes: list[str]) -> list[str]:
    """Hierholzer's algorithm on the complete directed graph: every ordered pair exactly once."""
    out = {a: [b for b in reversed(nodes) if b != a] for a in nodes}
    stack, circuit = [nodes[0]], []
    while stack:
        v = stack[-1]
        if out[v]:
            stack.append(out[v].pop())
        else:
            circuit.append(stack.pop())
    return circuit[::-1]


CIRCUIT = eulerian_circuit(SLUGS)
N_WALKS = len(SLUGS)
STEP = (len(CIRCUIT) - 1) // N_WALKS
WALKS = [CIRCUIT[i * STEP: (i + 1) * STEP + 1] for i in range(N_WALKS)]


def test_the_walks_cover_every_ordered_pair_once():
    pairs = [(w[i], w[i + 1]) for w in WALKS for i in range(len(w) - 1)]
    assert len(pairs) == len(SLUGS) * (len(SLUGS) - 1) == 132  # 12 pages
    assert len(set(pairs)) == 132


def widget_values(at: AppTest) -> dict[str, object]:
    """Every keyed input widget's value (buttons and the lab's own run/stop controls left out)."""
    values = {}
    for kind in WIDGETS:
        for w in getattr(at, kind, []):
            key = getattr(w, "key", None)
            if key and not key.startswith("_"):
                values[key] = w.value
    return values


def problems(at: AppTest) -> list[str]:
    return [f"exception: {e.value}" for e in at.exception] + [f"error: {e.value}" for e in at.error]


def page_path(slug: str) -> str:
    return str(ROOT / "pages" / f"{slug}.py")


def goto(at: AppTest, slug: str) -> AppTest:
    """What a sidebar click does: the next page opens with the URL's query string cleared."""
    at.query_params.clear()
    return at.switch_page(page_path(slug)).run()


def fresh(slug: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=300).run()
    return at if slug == "home" else goto(at, slug)


@pytest.fixture(scope="module")
def alone() -> dict[str, dict[str, object]]:
    """Each page opened alone in a fresh session: the values every entry must show."""
    out = {}
    for slug in SLUGS:
        at = fresh(slug)
        assert not problems(at), (slug, problems(at))
        out[slug] = widget_values(at)
    return out


def change_one(at: AppTest) -> str | None:
    """Set the first enabled numeric widget to another valid value (its min, or its max when at the
    min: small values keep the work small); the key changed, None if the page has none."""
    for kind in ("number_input", "slider"):
        for w in getattr(at, kind, []):
            key = getattr(w, "key", None)
            if not key or key.startswith("_") or getattr(w, "disabled", False) or isinstance(w.value, tuple):
                continue
            lo, hi = w.min, w.max
            if lo is None or hi is None or lo == hi:
                continue
            w.set_value(lo if w.value != lo else hi)
            return key
    return None


@pytest.mark.parametrize("walk", WALKS, ids=lambda w: f"{w[0]}..{w[-1]}")
def test_walk_without_changes(walk, alone):
    at = fresh(walk[0])
    for a, b in zip(walk, walk[1:], strict=False):
        goto(at, b)
        assert not problems(at), f"{a} -> {b}: {problems(at)}"
        assert widget_values(at) == alone[b], f"{a} -> {b}: the page does not show its own defaults"


@pytest.mark.parametrize("walk", WALKS, ids=lambda w: f"{w[0]}..{w[-1]}")
def test_walk_changing_one_widget_on_each_page(walk, alone):
    at = fresh(walk[0])
    left_as: dict[str, dict[str, object]] = {}  # what each page showed when the walk left it
    current = walk[0]
    for b in walk[1:]:
        if change_one(at) is not None:
            at.run()  # the new value may be one the page refuses with a message; never an exception
            assert not at.exception, f"changing a widget on {current}: {[e.value for e in at.exception]}"
        left_as[current] = widget_values(at)
        goto(at, b)
        # a page left changed comes back as it was left: with the message its value earned, if any
        issues = [e.value for e in at.exception] if b in left_as else problems(at)
        assert not issues, f"{current} (changed) -> {b}: {issues}"
        expected = left_as.get(b, alone[b])
        got = widget_values(at)
        assert got == expected, (f"{current} (changed) -> {b}: "
                                 + ("not what was set there" if b in left_as else "not the page's own defaults")
                                 + f"; differing keys {sorted(k for k in got.keys() | expected.keys() if got.get(k) != expected.get(k))}")
        current = b
