"""The tests' pseudo-language (sim.words.catalog.PSEUDO): each entry is its key with its fields, formatted by the
English entry's specs, so a test can pin which message a function chose and with which numbers, not its wording."""

import string

from sim.msg import Items, Msg
from sim.words import LANGS, catalog, placeholders, say, text
from sim.words.catalog import PSEUDO


def test_every_entry_has_a_pseudo_form_with_the_same_fields():
    en, keys = catalog("en"), catalog(PSEUDO)
    assert keys.keys() == en.keys()
    assert {k for k in en if placeholders(en[k]) != placeholders(keys[k])} == set()
    assert all(v.startswith(k) for k, v in keys.items())


def test_a_pseudo_entry_keeps_the_english_specs_in_the_english_order():
    en = catalog("en")
    key = next(k for k, v in en.items() if ":," in v and len(placeholders(v)) >= 2)
    names = list(dict.fromkeys(n for _, n, _, _ in string.Formatter().parse(en[key]) if n is not None))
    fields = {n: 1234567 for n in names}
    shown = text(PSEUDO, key, **fields)
    assert shown.startswith(key + "(") and shown.endswith(")")
    assert [part.split("=")[0] for part in shown[len(key) + 1:-1].split(", ")] == names
    assert "1,234,567" in shown  # the {n:,} spec applied, as in English


def test_nested_messages_and_lists_read_as_keys():
    inner = Msg("list.and")  # a field-less entry is its bare key
    assert say(PSEUDO, inner) == "list.and"
    assert say(PSEUDO, Items((inner, inner, inner))) == "[list.and + list.and + list.and]"


def test_the_pseudo_language_is_never_offered_to_a_user():
    from app.urlstate import parse_choice

    assert PSEUDO not in LANGS
    value, problem = parse_choice(PSEUDO, "en", LANGS)
    assert value == "en" and problem
