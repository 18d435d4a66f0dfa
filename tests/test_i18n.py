"""English and Korean: the catalogs agree, converted pages render in Korean (mostly Hangul, no exception), the
language switch keeps every other URL value, and no converted file shows a sentence from outside the catalogs."""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.registry import PAGES, SECTIONS
from sim.msg import Msg
from sim.words import LANGS, catalog, placeholders, say, text
from sim.words.catalog import PSEUDO
from tests.conftest import run_in_app, run_page

ROOT = Path(__file__).resolve().parent.parent

# Pages converted so far: tests/i18n/<slug>.json names the files that word what the page shows (page, figure
# builders, sentence functions), the literals those files keep on purpose ("kept": model input, plotly's own
# names; each as its repr), the Korean messages with no Hangul on purpose ("latin_ok": flags, dtype names) and,
# where the default view warns on purpose, how many warnings and why ("warnings": {"count", "why"}).
I18N_TESTS = ROOT / "tests" / "i18n"
CONVERTED = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(I18N_TESTS.glob("*.json"))}
# The shared modules every page draws with (URL problems, the work queue, presenter mode, the claims table, ...).
# app/registry.py is left out: its English titles are what the English catalog is checked against (below), and
# nothing shows them but through the catalog.
SHARED_FILES = ["app/sidebar.py", "app/urlstate.py", "app/work.py", "app/present.py", "app/text.py", "app/tabs.py",
                "app/metrics.py", "app/links.py", "app/resources.py", "app/claims.py", "sim/claims.py",
                "sim/readout.py", "app/main.py", "app/figures/headline.py", "app/figures/__init__.py",
                "app/controls/__init__.py", "app/runs/__init__.py"]
# Literals the shared files keep on purpose: the Verdict enum's values (identifiers; the table words them from
# the catalog), and the seeds' English titles (shown beside the Korean ones in both languages, like the claims).
SHARED_KEPT = {
    "sim/claims.py": ["'needs context'",
                      "'Mastering the KV cache: the transformer structure that sets LLM inference speed and memory "
                      "cost'", "'KV cache quantization — this overflows before the weights do'",
                      "'KV 캐시(KV Cache), Flash Attention과 추론 최적화(Inference Optimization)'",
                      "'The KV cache, FlashAttention and inference optimization'", "'KV Cahce'",
                      "'KV Cache (the title is misspelt in the original): a step-by-step walk-through'"],
}


# --- the catalogs -------------------------------------------------------------------------------------------------

def test_both_catalogs_have_the_same_keys():
    en, ko = catalog("en"), catalog("ko")
    assert sorted(set(en) - set(ko)) == [] and sorted(set(ko) - set(en)) == []


def test_every_key_has_the_same_placeholders_in_both():
    en, ko = catalog("en"), catalog("ko")
    differ = {k: (placeholders(en[k]), placeholders(ko[k])) for k in en if placeholders(en[k]) != placeholders(ko[k])}
    assert differ == {}


def test_catalog_files_are_flat_string_maps_with_no_empty_message():
    areas = {lang: sorted(p.name for p in (ROOT / "assets" / "i18n" / lang).glob("*.json")) for lang in LANGS}
    assert areas["en"] == areas["ko"] and "core.json" in areas["en"], areas
    for lang in LANGS:
        for name in areas[lang]:
            raw = json.loads((ROOT / "assets" / "i18n" / lang / name).read_text(encoding="utf-8"))
            assert all(isinstance(v, str) and v for v in raw.values()), (lang, name)
            assert all(re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", k) for k in raw), (lang, name)
        en_keys = set(json.loads((ROOT / "assets" / "i18n" / "en" / name).read_text(encoding="utf-8")))
        ko_keys = set(json.loads((ROOT / "assets" / "i18n" / "ko" / name).read_text(encoding="utf-8")))
        assert en_keys == ko_keys, (name, sorted(en_keys ^ ko_keys))  # a key sits in the same area in both


def test_korean_messages_are_korean():
    """Every Korean message that has letters has Hangul, except identifiers kept as they are (vLLM flags, dtype
    and backend names) and the language switch's label, which names itself in both."""
    same_ok = {"sidebar.lang", "list.and", "clause.sep", *(k for page in CONVERTED.values() for k in page["latin_ok"])}
    ko = catalog("ko")
    bare = {k: re.sub(r"\{[^}]*\}", "", v) for k, v in ko.items()}  # placeholders are not text
    missing = [k for k, v in bare.items() if k not in same_ok and re.search("[A-Za-z]{2}", v)
               and not re.search("[\uac00-\ud7a3]", v)]
    assert missing == []


def test_english_page_titles_are_the_registry_s():
    """Navigation, Home's map and the tests read PAGES; the English catalog must say the same."""
    assert {p.slug: text("en", f"page.{p.slug}.title") for p in PAGES} == {p.slug: p.title for p in PAGES}
    assert {p.slug: text("en", f"page.{p.slug}.summary") for p in PAGES} == {p.slug: p.summary for p in PAGES}
    assert [text("en", f"section.{s.lower()}") for s in SECTIONS] == list(SECTIONS)


def test_lookup_needs_no_streamlit_and_says_what_is_missing():
    from app.i18n import t

    assert t("masks.s.win.where", layer="1", head="2") == "Layer 1, head 2"  # no script run: English
    assert text("ko", "masks.s.win.where", layer="1", head="2") == "층 1, 헤드 2"
    with pytest.raises(KeyError, match="no message 'nope.key' in assets/i18n/ko/"):
        text("ko", "nope.key")
    with pytest.raises(ValueError, match="'fr' is not one of en, ko"):
        text("fr", "home.title")


# --- sentences both ways (numbers formatted the same) ---------------------------------------------------------------

def test_mask_takeaway_in_korean():
    from sim.words.masks import mask_name, mask_takeaway

    causal = np.tril(np.ones((4, 4), dtype=bool))  # 4·5/2 = 10 of 16 pairs
    assert mask_takeaway(causal, mask_name("causal", 4, 0, lang="ko"), lang="ko") == (
        "인과 마스크: 질의–키 쌍 16개 중 10개(62.5%)에 어텐션을 허용 — 각 질의는 자기 자신과 앞선 모든 키를 보고, "
        "뒤의 키는 하나도 보지 않는다")
    # w = 2 on 4 tokens: rows see 1, 2, 2, 2 keys = 7 pairs, 3 fewer than causal's 10
    window = causal & ~np.tril(np.ones((4, 4), dtype=bool), -2)
    name = mask_name("sliding_window", 2, 0, pad=1, lang="ko")
    assert name == "슬라이딩 윈도 마스크 (w = 2), 왼쪽 패딩 1개"
    assert mask_takeaway(window, name, lang="ko") == (
        "슬라이딩 윈도 마스크 (w = 2), 왼쪽 패딩 1개: 질의–키 쌍 16개 중 7개(43.8%)에 어텐션을 허용 — "
        "일반 인과 마스크(10개)보다 3개 적다. 각 질의는 키 1–2개를 본다")
    assert mask_takeaway(window, mask_name("sliding_window", 2, 0, pad=1, lang=PSEUDO), lang=PSEUDO) == (
        'masks.s.mask.other(head=masks.s.mask.head(name=masks.s.name.padded(name=masks.s.name.sliding_window(w=2), pad=1), allowed=7, total=16, share=43.8%), '
        'against=masks.s.against.fewer(diff=3, causal=10), keys=masks.s.keys.range(lo=1, hi=2))')


def test_row_and_window_sentences_in_korean():
    from sim.words.masks import row_takeaway, window_caption, window_takeaway

    allowed = np.array([1, 1, 0, 0], dtype=bool)
    weights = {"neg_inf": np.array([0.5, 0.5, 0, 0]), "times_zero": np.array([0.25, 0.25, 0.25, 0.25])}
    assert row_takeaway(1, weights, allowed, lang="ko") == (
        "질의 행 1: 가려진 키 2개에 실린 가중치는 0 곱하기 50.0%; −inf 더하기는 하나도 싣지 않는다")
    # causal weights of 3 tokens, w = 2: row 2 loses key 0, which held 0.2 of its weight
    probs = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    assert window_takeaway(probs, 2, 0, 1, lang="ko") == (
        "층 0, 헤드 1: 키를 잃는 행 1개에서 w = 2 윈도가 없애는 인과 가중치는 평균 20.0%, 최대 20.0%(행 2) — "
        "그 대부분은 이미 윈도 안에 있었다")
    assert window_caption(2, 3, 2, lang="ko") == (
        "윈도는 1칸보다 더 앞선 키를 모두 없애고, 그 키들이 갖던 가중치는 남은 키들에 다시 나뉜다. 모델은 온전한 인과 "
        "어텐션으로 학습되었다. 윈도를 씌우면 다음 바이트 예측이 위치 3곳 중 1곳에서 바뀌고 2곳에서는 그대로다.")


def test_masked_row_table_in_korean_keeps_the_measured_numbers():
    from sim.attention.masks import MaskedRow
    from sim.words.masks import behaviour_rows, masked_row_caption

    measured = (MaskedRow("softmax_inf", "nan"), MaskedRow("softmax_1e9", "uniform", (0.0625,)),
                MaskedRow("math", "finite", (0.1, 0.2)), MaskedRow("flash", "unavailable"))
    assert behaviour_rows(measured, PSEUDO) == [('masks.s.where.softmax_inf', 'masks.s.result.nan'), ('masks.s.where.softmax_1e9', 'masks.s.result.uniform(x=0.062)'), ('masks.s.where.sdpa(name=math)', 'masks.s.result.finite(values=0.100, 0.200)'), ('masks.s.where.sdpa(name=flash)', 'masks.s.result.unavailable')]
    assert behaviour_rows(measured, "ko") == [
        ("−inf를 넣은 소프트맥스", "NaN (0/0: 모든 exp(−inf)가 0)"),
        ("−1e9를 넣은 소프트맥스", "모두 균등하게 0.062: 보면 안 되는 키를 모두, 아무 경고 없이 본다"),
        ("SDPA math", "유한한 값: 0.100, 0.200"), ("SDPA flash", "이 장치에서는 쓸 수 없음")]
    assert masked_row_caption(measured, "ko").endswith(
        "방금 이 장치에서 잰 torch의 SDPA 커널 가운데 math 커널은 유한한 값을 낸다; flash 커널은 쓸 수 없다.")


# --- pages rendered in Korean -------------------------------------------------------------------------------------

UNITS = {"B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "ms", "µs", "s", "GB/s", "TB/s"}


def _chart_texts(spec: dict) -> list[str]:
    layout = spec.get("layout", {})
    out = [layout.get("title", {}).get("text", "")]
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")):
            out.append(axis.get("title", {}).get("text", ""))
    out += [a.get("text", "") for a in layout.get("annotations", [])]
    out += [a.get("label", {}).get("text", "") for a in layout.get("shapes", [])]
    for trace in spec.get("data", []):
        out.append(trace.get("name", ""))
        out.append(trace.get("colorbar", {}).get("title", {}).get("text", ""))
    return out


# The claims table (app/claims.py) quotes each seed's Korean and shows its English translation beside it, on
# purpose, in both languages: that English column is left out of the Hangul share (its header still counts).
TRANSLATION_COLUMNS = {text(lang, "claims.col.statement") for lang in LANGS}


def rendered_text(at) -> list[str]:
    """Every piece of text the page shows: headings, prose, messages, widget labels, metric labels, table
    headers and text cells (but the claims table's English translation), chart titles, axis titles, legends and
    annotations."""
    out = [e.value for kind in ("title", "header", "subheader", "markdown", "caption", "warning", "error", "info",
                                "success") for e in getattr(at, kind)]
    for kind in ("slider", "selectbox", "radio", "text_input", "toggle", "checkbox", "button", "number_input",
                 "multiselect", "select_slider", "text_area"):
        out += [w.label for w in getattr(at, kind)]
    out += [m.label for m in at.metric]
    for frame in [*at.dataframe, *at.table]:
        df = frame.value
        out += [str(c) for c in df.columns]
        # text columns: object dtype, or pandas 3's string dtype (a `dtype == object` test alone misses those)
        out += [v for col in df.columns if (df[col].dtype == object or pd.api.types.is_string_dtype(df[col]))
                and col not in TRANSLATION_COLUMNS for v in df[col] if isinstance(v, str)]
    for chart in at.get("plotly_chart"):
        out += _chart_texts(json.loads(chart.proto.spec))
    return [s for s in out if s]


def hangul_share(texts: list[str]) -> float:
    """Hangul letters over all letters, leaving out `code`, HTML tags, numbers (and words with a digit, like fp16
    or w=4), and units."""
    letters = hangul = 0
    for s in texts:
        s = re.sub(r"`[^`]*`", " ", s)
        s = re.sub(r"<[^>]+>", " ", s)
        for word in re.split(r"[\s/()\[\],;:·—–|*]+", s):
            if not word or re.search(r"\d", word) or word in UNITS:
                continue
            for ch in word:
                if ch.isalpha():
                    letters += 1
                    hangul += unicodedata.name(ch, "").startswith("HANGUL")
    return hangul / letters if letters else 0.0


def _ko(slug: str, params: dict | None = None):
    params = {"lang": "ko", **(params or {})}
    return run_in_app(slug, params) if slug == "home" else run_page(slug, params, timeout=300)


@pytest.mark.parametrize("slug", list(CONVERTED))
def test_converted_page_renders_in_korean(slug):
    at = _ko(slug)
    assert not at.exception, at.exception
    # a page whose default view warns on purpose says so in its tests/i18n entry ("warnings": {"count", "why"})
    expected = CONVERTED[slug].get("warnings", {}).get("count", 0)
    assert not at.error and len(at.warning) == expected, [e.value for e in [*at.error, *at.warning]]
    assert all(re.search("[\uac00-\ud7a3]", w.value) for w in at.warning), [w.value for w in at.warning]
    texts = rendered_text(at)
    share = hangul_share(texts)
    print(f"{slug}: {share:.1%} of {sum(c.isalpha() for s in texts for c in s):,} letters are Hangul")
    assert share >= 0.60, (slug, share)
    assert at.title[0].value == text("ko", "home.title" if slug == "home" else f"page.{slug}.title")
    from tests.test_chart_axes import overlong_titles

    assert overlong_titles(at) == {}  # Hangul is about two Latin letters wide: the wrap must count it so


def test_hangul_share_counts_what_it_says():
    # 'KV' counts as Latin (an identifier the reader still reads), fp16 and 12 GiB and `code` are left out
    assert hangul_share(["KV 캐시", "fp16 12 GiB `x = 1`"]) == pytest.approx(2 / 4)
    assert hangul_share(["<b>캐시</b> w=4"]) == 1.0


# --- the language in the URL ----------------------------------------------------------------------------------------

def test_switching_language_keeps_every_other_url_value():
    at = run_in_app("attention_masks", {"kind": "sliding_window", "w": "3", "layer": "2", "present": "1"})
    assert not at.exception
    at.slider(key="head").set_value(1).run()
    before = dict(at.query_params)
    assert "lang" not in before and before["kind"] == "sliding_window" and before["head"] == "1"
    at.radio(key="lang").set_value("ko").run()
    assert not at.exception
    assert at.title[0].value == "어텐션 마스크"
    assert dict(at.query_params) == {**before, "lang": "ko"}
    assert (at.selectbox(key="kind").value, at.slider(key="w").value, at.slider(key="head").value) == \
        ("sliding_window", 3, 1)
    at.radio(key="lang").set_value("en").run()
    assert at.title[0].value == "Attention masks" and dict(at.query_params) == before


def test_the_language_follows_to_the_next_page_and_into_its_url():
    at = run_in_app("home", {"lang": "ko"})
    assert at.title[0].value == "KV 캐시 실습실"
    at.switch_page(str(ROOT / "pages" / "attention_masks.py")).run()
    assert not at.exception
    assert at.title[0].value == "어텐션 마스크" and at.query_params["lang"] == "ko"
    assert at.radio(key="lang").value == "ko"


def test_a_bad_language_is_listed_and_english_is_used():
    at = run_page("attention_masks", {"lang": "fr", "w": "2"}, timeout=300)
    assert not at.exception
    assert at.title[0].value == "Attention masks"
    warning = " ".join(w.value for w in at.warning)
    assert say("en", Msg("url.not_one_of", value="`fr`", options="en, ko")) in warning


# --- no sentence outside the catalogs -------------------------------------------------------------------------------

UI_CALLS = {"title", "header", "subheader", "markdown", "caption", "write", "text", "error", "warning", "info",
            "success", "metric", "button", "slider", "selectbox", "radio", "toggle", "checkbox", "text_input",
            "number_input", "text_area", "multiselect", "select_slider", "expander", "tabs", "page_link", "popover",
            "download_button", "spinner", "progress"}
TEXT_KEYWORDS = {"label", "help", "placeholder", "caption", "title", "title_text", "name", "text", "annotation_text",
                 "hovertemplate", "subplot_titles", "yaxis_title", "xaxis_title",
                 "what", "button", "cannot"}  # app.work's run_job and queued, app.resources' live_result

def _words(node: ast.AST) -> list[str]:
    """The literal text a string expression carries (constants and the fixed parts of an f-string)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp):
        return _words(node.left) + _words(node.right)
    if isinstance(node, ast.IfExp):
        return _words(node.body) + _words(node.orelse)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [w for e in node.elts for w in _words(e)]
    return []


def _catalog_key(word: str) -> bool:
    """A control's declared label (app/controls/declared.py) is a catalog key, looked up when it is drawn: a key, or
    the prefix of keys a declaration completes (`serving.e.` + its URL name), is not text."""
    keys = catalog("en")
    return word in keys or (word.endswith(".") and any(k.startswith(word) for k in keys))


def _literal_text(path: Path) -> list[str]:
    """'file:line: text' for every user-visible literal: the text argument of a Streamlit call or a figure
    keyword, and in every file any string with two words of letters that is not a docstring."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "url":
                name = "url." + name  # UrlState's readers take a URL key first, not text
            args = [*(node.args[:1] if name in UI_CALLS else []),
                    *(node.args[1:2] if name in ("queued", "live_result") else []),
                    *(node.args[1:4] if name == "base_layout" else []),
                    *(k.value for k in node.keywords if k.arg in TEXT_KEYWORDS)]
            for arg in args:
                hits += [f"{path.relative_to(ROOT)}:{node.lineno}: {w!r}" for w in _words(arg)
                         if re.search(r"[A-Za-z]{2}", w) and w not in LANGS and not _catalog_key(w)]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value.lstrip().startswith("<style>"):  # a page style sheet: CSS, not text
                continue
            if re.search(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}", node.value):
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return hits


# Literals a converted file keeps on purpose: model input and the keys of measured results, not prose.
KEPT = {path: set(literals) for page in [*CONVERTED.values(), {"kept": SHARED_KEPT}]
        for path, literals in page["kept"].items()}


@pytest.mark.parametrize("path", sorted({p for page in CONVERTED.values() for p in page["files"]} | set(SHARED_FILES)))
def test_converted_files_show_no_text_outside_the_catalogs(path):
    hits = [h for h in _literal_text(ROOT / path) if h.split(": ", 1)[1] not in KEPT.get(path, set())]
    # sim/attention/maps.py raises a ValueError on a prompt the page never sends: only its sentences count
    if path == "sim/attention/maps.py":
        hits = [h for h in hits if "must be" not in h and "need at least" not in h]
    assert hits == []


def test_the_scan_finds_a_literal():
    """The scan above can fail: a title, a label, a help text and a figure's axis written in the page."""
    probe = ROOT / "test-output" / "i18n_probe.py"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text('import streamlit as st\nst.title("Hello there")\nst.slider(t("x"), help="Pick one")\n'
                     'fig.update_xaxes(title_text="key (token)")\nx = f"{n} keys left"\n')
    try:
        hits = _literal_text(probe)
    finally:
        probe.unlink()
    assert {h.split(": ", 1)[1] for h in hits} == {"'Hello there'", "'Pick one'", "'key (token)'", "' keys left'"}


# --- in the browser: Korean pages with Hangul drawn by a real font -------------------------------------------------

@pytest.fixture(scope="module")
def ko_browser(request):
    """(browser, server url): the browser tests' shared ones where a conftest provides them, else this module's
    own (one Playwright per thread: a second sync_playwright beside a live one fails)."""
    from tests.test_browser import _need_browser

    _need_browser()
    try:
        yield request.getfixturevalue("browser"), request.getfixturevalue("app_url")
        return
    except pytest.FixtureLookupError:
        pass
    from playwright.sync_api import sync_playwright

    from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS, AppServer

    server = AppServer(ROOT / "test-output" / "streamlit_ko.log").start()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser, server.url
            browser.close()
    finally:
        server.stop()


@pytest.mark.browser
def test_a_korean_link_opens_the_page_in_korean(ko_browser):
    """A link with ?lang=ko opened fresh in Chromium: the Korean page (title, no exception, a chart drawn, Hangul
    drawn by a font); screenshot decode_cost_ko_link.png. Every page's Korean view is checked in the browser by
    tests/test_browser.py (switched in the sidebar, on the tab it has loaded)."""
    from tests.test_browser import SHOTS, check_korean, open_page

    browser, url = ko_browser
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, f"{url}/decode_cost?lang=ko", 1280, 1600)
    try:
        check_korean(page, "decode_cost")
    finally:
        page.screenshot(path=str(SHOTS / "decode_cost_ko_link.png"), full_page=True)
        page.close()


def test_no_english_article_before_a_number():
    """'A {n}-token …' reads 'A 8-token' for n = 8 and 'A 11-layer' for 11: no English message puts the article
    'a'/'an' straight before a number's placeholder (say 'a timestamp of {n} tokens' instead)."""
    import json
    import re

    from tests.conftest import ROOT

    bad = []
    for path in sorted((ROOT / "assets" / "i18n" / "en").glob("*.json")):
        for key, message in json.loads(path.read_text(encoding="utf-8")).items():
            for m in re.finditer(r"(?:^|[^\w])(?:[Aa]n?) \{(\w+)\}-", message):
                bad.append(f"{path.name}:{key}: …{m.group(0).strip()}…")
    assert bad == []
