"""The architecture presets' notes in Korean: every note has one, with the same numbers, and the KV memory page
shows it when the page is in Korean."""

from __future__ import annotations

import re

import pytest

from sim.cost.presets import load_presets
from tests.conftest import run_page

NUMBER = re.compile(r"\d[\d,.]*")


def _numbers(s: str) -> list[str]:
    return sorted(n.rstrip(".,") for n in NUMBER.findall(s))


@pytest.mark.parametrize("key", [k for k, p in load_presets().items() if p.notes])
def test_every_note_has_a_korean_one_with_the_same_numbers(key):
    p = load_presets()[key]
    assert re.search("[가-힣]", p.notes_ko), key
    assert _numbers(p.notes_ko) == _numbers(p.notes), (key, p.notes, p.notes_ko)


def test_the_page_shows_the_preset_note_in_the_page_language():
    note = load_presets()["qwen3-32b"]
    for lang, want in (("ko", note.notes_ko), ("en", note.notes)):
        at = run_page("kv_memory", {"lang": lang, "model": "qwen3-32b"}, timeout=300)
        assert not at.exception
        assert want in [c.value for c in at.caption], lang
