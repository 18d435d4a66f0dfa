"""sim/ never imports streamlit or plotly: checked in the source and in a fresh interpreter."""

import ast
import subprocess
import sys
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "sim"
FORBIDDEN = ("streamlit", "plotly")


def test_no_forbidden_import_in_source():
    offenders = []
    for path in sorted(SIM.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_all_of_sim_loads_neither():
    modules = [".".join(p.relative_to(SIM.parent).with_suffix("").parts) for p in SIM.rglob("*.py")]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(sorted(n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=SIM.parent, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_user_facing_error_type():
    """Every refusal a user can cause is a sim.refusal.Refusal, imported from there under its own name: no alias
    module (sim/alloc/errors.py's `WordedError`, sim/serving/errors.py) and no second name for it; a trace's
    TraceError is a Refusal that adds its line and field."""
    from sim.alloc.trace import TraceError
    from sim.refusal import Refusal

    assert not (SIM / "alloc" / "errors.py").exists() and not (SIM / "serving" / "errors.py").exists()
    renamed = []
    for folder in ("sim", "app", "pages", "tests", "benchmarks"):
        for path in sorted((SIM.parent / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom):
                    renamed += [f"{path.relative_to(SIM.parent)}: {node.module}.{a.name} as {a.asname}"
                                for a in node.names if a.name in ("Refusal", "Misuse")
                                and (node.module != "sim.refusal" or a.asname not in (None, a.name))]
    assert renamed == []  # `from sim.refusal import Refusal`, nothing else
    assert issubclass(TraceError, Refusal)
    bad = TraceError(3, "output_len", "not_regular", path="'x'")
    assert isinstance(bad, Refusal) and bad.key == "not_regular" and str(bad).startswith("line 3: output_len: ")
    defined = []
    for path in SIM.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "ValueError" for b in node.bases)
                    and any(isinstance(f, ast.FunctionDef) and f.name in ("words", "in_lang") for f in node.body)
                    and path.name != "refusal.py"):
                defined.append(f"{path.relative_to(SIM)}:{node.name}")  # a ValueError that words itself
    assert defined == []  # no second worded ValueError class


# Words live in sim/words only (issue 35): no other sim module reads the catalogs, no sim function takes a language.
# The one exception, and why: a Refusal's str() is its English, for logs and the command line's one line.
CATALOG_READERS_ALLOWED = {"refusal.py"}
# sim modules that may use regular expressions: each reads text a user or a file gave, never text the lab wrote
REGEX_READERS = {"sim/alloc/trace.py", "sim/cost/engine_log.py", "sim/cost/hf_config.py", "sim/model/chat_template.py",
                 "sim/model/gguf_load.py", "sim/model/real_source.py",
                 "sim/claims.py",  # the seeds' LaTeX
                 "sim/lesson/quiz.py"}  # a student's typed answer
REGEX_BASELINE: set[str] = set()  # none reads the lab's own English any more


def _sim_outside_words():
    return [p for p in sorted(SIM.rglob("*.py")) if "words" not in p.relative_to(SIM).parts]


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def test_only_sim_words_reads_the_catalogs():
    readers = {str(p.relative_to(SIM)) for p in _sim_outside_words() if any(m.startswith("sim.words") for m in _imports(p))}
    assert readers == CATALOG_READERS_ALLOWED


def test_the_catalogs_are_read_through_sim_words_only():
    """sim/i18n.py (the shim the words layer replaced) is gone: nothing in the lab imports it."""
    assert not (SIM / "i18n.py").exists()
    importers = [str(p.relative_to(SIM.parent)) for d in ("app", "pages", "sim", "tests")
                 for p in sorted((SIM.parent / d).rglob("*.py")) if any(m.startswith("sim.i18n") for m in _imports(p))]
    assert importers == []


def test_no_sim_function_takes_a_language():
    taking = []
    for path in _sim_outside_words():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                if "lang" in [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]:
                    taking.append(f"{path.relative_to(SIM)}:{node.name}")
    assert taking == []


def test_no_regex_reads_the_labs_own_text():
    using = {str(p.relative_to(SIM.parent)) for p in _sim_outside_words() if "re" in set(_imports(p))}
    assert using - REGEX_READERS <= REGEX_BASELINE, sorted(using - REGEX_READERS - REGEX_BASELINE)


def test_one_class_per_config_name():
    """Issue 35: two classes were named EngineConfig (the serving engine's and KV memory's); one name, one class."""
    names = [node.name for path in _sim_outside_words()
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)]
    assert names.count("EngineConfig") == 1


# Every raise in sim/ says whose mistake it is: a Refusal (a user can cause it; worded in both languages) or a
# Misuse (only a bug in the lab can). A bare ValueError says neither, and sim/ raises none (315 when the rule began).


def _bare_value_errors(path):
    n = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            f = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            n += isinstance(f, ast.Name) and f.id == "ValueError"
    return n


def test_every_raise_in_sim_says_whose_mistake_it_is():
    bare = {str(p.relative_to(SIM)): n for p in sorted(SIM.rglob("*.py")) if (n := _bare_value_errors(p))}
    assert bare == {}, "raise Refusal(key, **fields) (a user can cause it) or Misuse (only a bug can), not ValueError"
