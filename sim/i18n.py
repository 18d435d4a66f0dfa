"""Moved to sim/words/catalog.py (the one layer that reads the catalogs). This name stays only while modules
still import it; tests/test_purity.py counts them and the count may only fall."""

from sim.words.catalog import CATALOG_DIR, DEFAULT_LANG, LANG_NAMES, LANGS, catalog, join, placeholders, text

__all__ = ["CATALOG_DIR", "DEFAULT_LANG", "LANG_NAMES", "LANGS", "catalog", "join", "placeholders", "text"]
