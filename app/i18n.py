"""The lab in English or Korean: `?lang=en` (the default) or `?lang=ko`, switched in the sidebar.

How the pieces fit:

- Catalogs. `assets/i18n/en/*.json` and `assets/i18n/ko/*.json` (one file per area: core.json, then one per
  page) hold every sentence a converted page shows, under flat keys (`home.title`, `masks.s.window_caption.all`),
  with `str.format` placeholders. Both languages have the same files, keys and placeholders per key
  (tests/test_i18n.py). Numbers are formatted by the caller before
  they are filled in (`t("x", n=f"{n:,}")`), so a number reads the same in both languages.
- Looking up. `sim/words/catalog.py` reads the catalogs with no Streamlit: `text(lang, key, **fields)`. This module's
  `t(key, **fields)` is the same lookup in the current page language (English when no Streamlit script runs,
  so a builder or a test can call it bare).
- sim/ sentence functions (sim/**/readouts.py and the like) never import Streamlit, so they take the language
  as an argument, `lang: str = "en"`, and build each sentence from catalog entries with `sim.words.text`; a
  page passes `lang()`. Figure builders (app/figures) take `lang="en"` the same way: data and language in,
  go.Figure out. English stays the default everywhere, so a caller that passes nothing sees today's English.
- The language in the URL. Like presenter mode, `lang` is the one value every page shares: a link's `lang=`
  counts when it is new (a link just opened), after that the sidebar switch owns it and the URL mirrors it
  (`lang=ko` written back after each page change; English leaves the URL without it). Moving between pages
  clears the URL, the session carries the choice over. A bad `lang=` is listed with the page's other bad URL
  values (app/urlstate.py) and English is used.
"""

from __future__ import annotations

from sim.words.catalog import DEFAULT_LANG, LANG_NAMES, LANGS, catalog, text

LANG_KEY = "lang"  # URL name and the sidebar switch's session key
SEEN_KEY = "_lang.url"  # the URL value this session last saw (a new one wins over the switch)
PROBLEM_KEY = "_lang.problem"  # a bad lang= read this run, for the page's list of bad URL values

__all__ = ["LANG_KEY", "LANGS", "LANG_NAMES", "lang", "page_summary", "page_title", "read_lang", "section_title",
           "show_lang", "t", "take_lang_problem"]


def _running() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


def read_lang() -> str:
    """The language of this run. A `lang=` the session has not seen yet sets it (a bad one is kept as a problem
    for the page to list, and English is used); otherwise the sidebar switch's value stands."""
    import streamlit as st

    from app.urlstate import parse_choice

    ss = st.session_state
    raws = st.query_params.get_all(LANG_KEY)
    raw = raws[-1] if raws else None
    if raw != ss.get(SEEN_KEY):
        ss[SEEN_KEY] = raw
        if raw is not None:
            value, problem = parse_choice(raw, DEFAULT_LANG, LANGS)
            # worded in English: a bad lang= falls back to English, the language the page is then shown in
            ss[PROBLEM_KEY] = None if problem is None else text(DEFAULT_LANG, "sidebar.lang_bad", key=LANG_KEY,
                                                                  problem=problem, value=value)
            if problem is None or LANG_KEY not in ss:
                ss[LANG_KEY] = value
    return ss.get(LANG_KEY, DEFAULT_LANG)


def lang() -> str:
    """The current page language; English outside a Streamlit script run."""
    return read_lang() if _running() else DEFAULT_LANG


def t(key: str, /, **fields: object) -> str:
    """The message `key` in the current language, placeholders filled from `fields` (already formatted). A message
    that names the vLLM release whose rule it states has `{vllm}` filled from sim.cost.vllm_rules, the one place
    that holds it."""
    if "vllm" not in fields and "{vllm}" in catalog(lang()).get(key, ""):
        from sim.cost.vllm_rules import version_label

        fields["vllm"] = version_label()
    return text(lang(), key, **fields)


def take_lang_problem() -> str | None:
    """The bad `lang=` this run read, once (the page's URL state lists it among its bad values)."""
    import streamlit as st

    return st.session_state.pop(PROBLEM_KEY, None)


def show_lang() -> None:
    """Mirror the current language into the URL (leaving every other value alone): `lang=ko`, or no `lang` for
    English, so a copied link opens in the sender's language."""
    import streamlit as st

    want = None if lang() == DEFAULT_LANG else lang()
    if st.query_params.get_all(LANG_KEY) != ([want] if want else []):
        if want:
            st.query_params[LANG_KEY] = want
        else:
            del st.query_params[LANG_KEY]
    st.session_state[SEEN_KEY] = want


def page_title(slug: str) -> str:
    """A page's title in the current language (the registry's English title under `page.<slug>.title`)."""
    return t(f"page.{slug}.title")


def page_summary(slug: str) -> str:
    return t(f"page.{slug}.summary")


def section_title(section: str) -> str:
    """A navigation section's name ('Memory') in the current language."""
    return t(f"section.{section.lower()}")
