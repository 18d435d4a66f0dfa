"""Each control declared once (app/controls/declared.py): the range the link accepts is the widget's range, the
label is the declared one, and pages draw no widget and read no URL value of their own.

The AppTest checks open each page (and each of its tabs that holds controls) and compare every drawn widget whose
key a declaration registered with that declaration. The AST checks read the page files and app/ for calls that
would declare a value a second time.
"""

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.controls.declared import Among, Choice, Number, Slider, Stops, Text, Toggle
from app.i18n import t
from app.registry import PAGES
from app.urlstate import CONTROLS_KEY
from tests.conftest import PAGES_DIR

ROOT = Path(__file__).resolve().parent.parent
SLUGS = [p.slug for p in PAGES if p.slug != "home"]
WIDGET_CALLS = {"slider", "number_input", "selectbox", "radio", "select_slider", "segmented_control", "pills",
                "toggle", "checkbox", "text_input", "text_area", "multiselect", "date_input", "time_input",
                "color_picker"}
URL_READS = {"int", "float", "choice", "bool", "text"}  # UrlState's readers: a declaration calls them
# Pages still drawing widgets or reading URL values themselves, with how many calls: may only fall (to empty).
PAGE_CALLS_BASELINE: dict[str, int] = {}
# Pages whose widgets are not drawn from declarations yet: may only shrink.
NOT_YET_DECLARED: set[str] = set()
# app/ modules still reading URL values by hand (url.int(...) with its range) rather than through a declaration:
# may only fall. app/urlstate.py (the readers) and app/tabs.py (the open tab, no widget of its own) are not counted.
URL_READS_BASELINE: dict[str, int] = {}


def open_page(slug: str, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(PAGES_DIR / f"{slug}.py"), default_timeout=300)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


def _range_of(widget) -> tuple:
    return widget.min, widget.max


def check_widgets(at: AppTest) -> set[str]:
    """Every drawn widget under a declared key against its declaration; the keys checked."""
    assert not at.exception, [e.value for e in at.exception]
    declared = at.session_state[CONTROLS_KEY]
    checked = set()
    for kind in ("slider", "number_input", "select_slider", "selectbox", "radio", "toggle", "checkbox",
                 "text_input", "text_area"):
        for w in getattr(at, kind):
            control = declared.get(w.key)
            if control is None:
                continue
            checked.add(w.key)
            if not control.fielded:  # a label with the page's fields is checked by the page's own tests
                assert w.label in control.label_texts(), (w.key, w.label)
            if isinstance(control, Slider | Number):
                assert kind == ("slider" if isinstance(control, Slider) else "number_input"), (w.key, kind)
                if control.narrows:
                    assert control.lo <= w.min <= w.max <= control.hi, (w.key, w.min, w.max)
                else:
                    assert (w.min, w.max) == (control.lo, control.hi), (w.key, w.min, w.max)
                if control.step is not None:
                    assert w.step == control.step, (w.key, w.step)
            elif isinstance(control, Among):
                assert kind == control.widget, (w.key, kind)
                assert control.lo <= w.value <= control.hi, (w.key, w.value)  # the options are shown worded
            elif isinstance(control, Stops):
                assert kind == "select_slider"
                assert w.options == [str(w.format_func(s)) for s in control.stops], w.key
            elif isinstance(control, Choice):
                assert kind == control.widget, (w.key, kind)
                assert w.options == [str(w.format_func(o)) for o in control.choices()], w.key
            elif isinstance(control, Toggle):
                assert kind == control.widget, (w.key, kind)
            elif isinstance(control, Text):
                assert kind == control.widget, (w.key, kind)
                if kind == "text_input":
                    assert w.max_chars == control.max_chars, w.key
    return checked


# (page, URL values that open the tab or section holding more of its controls)
VIEWS = [(slug, {}) for slug in SLUGS] + [
    ("roofline", {"tab": "machine"}),
    *[("attention_kernels", {"tab": tab}) for tab in ("sweep", "stepper")],
    *[("lesson", {"step": f"{k}"}) for k in (2, 4, 5, 6, 9, 10, 11, 12)],  # the steps that hold controls
    *[("paged_blocks", {"tab": tab}) for tab in ("pool", "block_size", "fork", "live")],
    *[("serving", {"tab": tab}) for tab in ("spec", "chunked", "preemption", "steps", "offload", "disagg", "routing")],
    ("kv_memory", {"model": "custom", "measure": "1"}),
    ("kv_memory", {"tab": "prefix_hit"}),
    ("kv_memory", {"tab": "log"}),
]


@pytest.mark.parametrize(("slug", "params"), VIEWS)
def test_every_declared_range_is_its_widgets_range(slug, params):
    at = open_page(slug, params)
    checked = check_widgets(at)
    if slug not in NOT_YET_DECLARED:  # its controls are declared, and drawn from the declarations
        assert checked, slug
    elif not params:
        assert not checked, f"{slug} declares its controls now: take it out of NOT_YET_DECLARED"


def test_declared_ranges_hold_their_defaults():
    """A declaration whose default lies outside its range cannot be built (the link would refuse its own default)."""
    with pytest.raises(AssertionError):
        Slider("n", 0, 1, 10)
    with pytest.raises(AssertionError):
        Number("n", 1.0, 0, 2)  # a float default on an int range: the widget would refuse it
    with pytest.raises(AssertionError):
        Stops("n", 3, (1, 2, 4))


def test_a_link_between_stops_snaps_to_the_nearest():
    at = open_page("roofline", {"batch": "48", "context": "100000"})
    assert not at.exception and not at.warning
    assert at.session_state["batch"] == 32  # 48 is as far from 32 as from 64: the lower stop
    assert at.session_state["context"] == 131072
    at = open_page("roofline", {"batch": "5000"})
    assert at.session_state["batch"] == 1 and "`5000` is outside 1..4096" in " ".join(w.value for w in at.warning)


def _calls(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node


def _page_calls(path: Path) -> list[str]:
    """Widget calls (st.slider, c[0].selectbox, ...) and UrlState reads (url.int, ...) in a page file."""
    found = []
    for node in _calls(path):
        name = node.func.attr
        owner = node.func.value
        if name in WIDGET_CALLS or (name in URL_READS and isinstance(owner, ast.Name) and owner.id == "url"):
            found.append(f"{path.name}:{node.lineno} {name}")
    return found


def test_pages_draw_no_widget_and_read_no_url_value_themselves():
    found = {p.stem: _page_calls(p) for p in sorted(PAGES_DIR.glob("*.py"))}
    found = {k: v for k, v in found.items() if v}
    over = {k: v for k, v in found.items() if len(v) > PAGE_CALLS_BASELINE.get(k, 0)}
    assert not over, over
    assert set(found) == set(PAGE_CALLS_BASELINE), f"lower PAGE_CALLS_BASELINE to {dict(map(len, found.items()))}"


def _url_reads(path: Path) -> int:
    return sum(1 for node in _calls(path) if node.func.attr in URL_READS and isinstance(node.func.value, ast.Name)
               and node.func.value.id == "url")


def test_app_reads_url_values_only_through_declarations():
    skip = {"app/urlstate.py", "app/tabs.py", "app/controls/declared.py"}
    found = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in skip and (n := _url_reads(path)):
            found[rel] = n
    over = {k: n for k, n in found.items() if n > URL_READS_BASELINE.get(k, 0)}
    assert not over, over
    assert found == URL_READS_BASELINE, f"lower URL_READS_BASELINE to {found}"


def _outside(control) -> str | None:
    """A link value just outside the control's declared range (None for values that have no outside)."""
    if isinstance(control, Slider | Number | Among | Stops):
        return f"{control.hi + 1}"
    if isinstance(control, Choice):
        return "not-an-option"
    return None


@pytest.mark.parametrize("slug", SLUGS)
def test_every_declared_value_out_of_range_falls_back_to_its_default_named_once(slug):
    """Each declaration's range is the one the link is checked against: one past its end is refused, the default is
    used, and the page's one warning names it by its declared URL label."""
    declared = open_page(slug).session_state[CONTROLS_KEY]
    bad = {key: v for key, control in declared.items() if (v := _outside(control)) is not None}
    at = open_page(slug, bad)
    assert not at.exception, [e.value for e in at.exception]
    warned = " ".join(w.value for w in at.warning)
    for key in bad:
        control = declared[key]
        assert f"`{key}` ({t(control.url_label)})" in warned, (slug, key)
        if not getattr(control, "narrows", False):  # a narrowed widget may clamp the default to the data on show
            default = control.default_value() if isinstance(control, Choice) else control.default
            assert at.session_state[key] == default, (slug, key, at.session_state[key], default)
    assert len(at.expander) >= 1 and sum(w.value.count("\n- ") for w in at.warning) >= len(bad)


def test_ranged_widgets_are_drawn_only_by_declarations():
    """A slider, number box or select slider has a range: only app/controls/declared.py draws one, from the range
    that also checks the link."""
    found = [f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.func.attr}"
             for folder in ("app", "pages") for path in sorted((ROOT / folder).rglob("*.py"))
             if path.relative_to(ROOT).as_posix() != "app/controls/declared.py"
             for node in _calls(path) if node.func.attr in {"slider", "number_input", "select_slider"}]
    assert not found, found
