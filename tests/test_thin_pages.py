"""Pages are thin: controls -> one sim call -> words -> draw. They hold no arithmetic on numbers and no test hooks.

What counts as arithmetic in a page file (read with `ast`, so it is about the code as written, not its types):
- a binary operation `+ - * / // % ** @`, or an augmented assignment with one of them;
- a unary minus on anything but a literal (`-x`; `-1` is a number, not a computation);
- a call to a builtin that computes on numbers (`sum min max abs round divmod pow`) or to a reducing method
  (`.sum() .mean() .nanmean() .max() .min() .argmax() .argmin() .prod() .cumsum() .std()`).

What is not (layout and wording, which belong to a page):
- string building: `+` or `%` where one side is a string literal, an f-string, a call that returns words
  (`t text plain code str say for_plotly decode`), or such a `+` itself;
- anything inside the arguments of a `.columns(...)` call (the grid's proportions);
- a keyword argument named `height`, `width`, `share` or `gap` (a widget's or figure's size on screen);
- `%` as a list index (`cols[i % 3]`: the i-th item's place in a grid).

Pages over the line are listed in ARITHMETIC_BASELINE with their count, which may only fall.
"""

import ast

from tests.conftest import PAGES_DIR

ARITH_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
REDUCERS = {"sum", "min", "max", "abs", "round", "divmod", "pow"}
METHOD_REDUCERS = {"sum", "mean", "nanmean", "max", "min", "argmax", "argmin", "prod", "cumsum", "std"}
WORDING = {"t", "text", "plain", "code", "str", "say", "for_plotly", "decode"}
LAYOUT_KEYWORDS = {"height", "width", "share", "gap"}
# page -> arithmetic nodes it still holds: may only fall (to none). Moved so far: see git log for tests/test_thin_pages.py.
ARITHMETIC_BASELINE: dict[str, int] = {}  # none left: every page's numbers come from sim/ or app/runs


def _wording(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        return isinstance(f, ast.Name) and f.id in WORDING or isinstance(f, ast.Attribute) and f.attr in WORDING
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _wording(node.left) or _wording(node.right)
    if isinstance(node, ast.IfExp):
        return _wording(node.body) or _wording(node.orelse)
    return False


def arithmetic(source: str) -> list[str]:
    """Each arithmetic node of a page's source, as `line: code`."""
    tree = ast.parse(source)
    layout: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "columns":
            layout.update(id(sub) for arg in [*node.args, *node.keywords] for sub in ast.walk(arg))
        if isinstance(node, ast.Call):
            layout.update(id(sub) for kw in node.keywords if kw.arg in LAYOUT_KEYWORDS for sub in ast.walk(kw.value))
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.BinOp) and isinstance(node.slice.op, ast.Mod):
            layout.add(id(node.slice))
    found = []
    for node in ast.walk(tree):
        if id(node) in layout:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ARITH_OPS):
            words = isinstance(node.op, ast.Add | ast.Mod) and (_wording(node.left) or _wording(node.right))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ARITH_OPS):
            words = _wording(node.value)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            words = isinstance(node.operand, ast.Constant)
        elif isinstance(node, ast.Call):
            f = node.func
            words = not (isinstance(f, ast.Name) and f.id in REDUCERS
                         or isinstance(f, ast.Attribute) and f.attr in METHOD_REDUCERS)
        else:
            continue
        if not words:
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return sorted(found)


def test_the_rule_sees_arithmetic_and_lets_layout_and_words_pass():
    assert arithmetic("x = a * b\ny = -n\nz = max(a, b)\nw = s.sum()\nk += 1") == [
        "1: a * b", "2: -n", "3: max(a, b)", "4: s.sum()", "5: k += 1"]
    assert arithmetic('c = st.columns([3, 2 * 1])\nlink = cols[i % 3]\nst.table(df, height=36 * (n + 1))\n'
                      'msg = t("a") + t("b")\nline = "x" + name\nlabel = f"{v}" + suffix\nx = -1') == []


def test_pages_hold_no_arithmetic():
    found = {p.stem: arithmetic(p.read_text(encoding="utf-8")) for p in sorted(PAGES_DIR.glob("*.py"))}
    counts = {k: len(v) for k, v in found.items() if v}
    over = {k: found[k] for k, n in counts.items() if n > ARITHMETIC_BASELINE.get(k, 0)}
    assert not over, over
    assert counts == ARITHMETIC_BASELINE, f"lower ARITHMETIC_BASELINE to {counts}"


def _written_keys(source: str) -> list[tuple[int, str]]:
    """(line, key) of each `st.session_state["key"] = ...` / `ss["key"] = ...` with a literal key."""
    out = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str) and ast.unparse(target.value) in ("st.session_state", "ss")):
                out.append((node.lineno, target.slice.value))
    return out


def test_pages_hold_no_test_hooks():
    """A test hook is a value a page writes that nothing in the app reads: every literal session key a page writes
    is read (named) somewhere else in app/ or pages/."""
    root = PAGES_DIR.parent
    sources = {p: p.read_text(encoding="utf-8") for d in ("app", "pages") for p in sorted((root / d).rglob("*.py"))}
    hooks = []
    for path in sorted(PAGES_DIR.glob("*.py")):
        for line, key in _written_keys(sources[path]):
            named = sum(src.count(f'"{key}"') + src.count(f"'{key}'") for src in sources.values())
            if named < 2:  # the write itself is the only mention
                hooks.append(f"{path.name}:{line} {key}")
    assert not hooks, hooks
