"""Words before their meaning: every step links the glossary's words it uses, at the step where the class first
meets them, to entries at the foot of the page (English and Korean); and after the last step a recap lists the
twelve findings, each the very claim its step shows at the same settings (computed again, not typed in)."""

import re

import pytest

from sim.i18n import text
from sim.lesson.steps import GLOSSARY, RECAP, STEPS
from sim.words import say
from tests.conftest import run_in_app
from tests.test_i18n import rendered_text

# What a glossary word looks like in the steps' English text (lower case).
SPELLED = {"token": r"\btokens?\b", "kv_cache": r"\bcache\b", "flop": r"\bflop", "qkv": r"\bquery|\bkeys?\b",
           "causal_mask": r"\bcausal", "prefill": r"\bprefill", "decode": r"\bdecod", "bf16": r"\bbf16",
           "int2": r"\bint[248]\b|\bfp8\b", "arithmetic_intensity": r"intensity|flop/b|flops per byte",
           "ridge": r"\bridge\b", "memory_bound": r"memory-bound", "compute_bound": r"compute-bound",
           "batch": r"\bbatch", "mha": r"\bmha\b", "gqa": r"\bgqa\b", "mqa": r"\bmqa\b", "mla": r"\bmla\b",
           "block": r"\bblocks?\b", "speculative": r"\bdraft", "prefix_cache": r"\bprefix"}
PARAMS = {"n": "64", "ctx": "16384", "model": "llama-3.1-70b", "kv": "fp8", "alpha": "0.7", "k": "3",
          "workload": "chat", "t": "5"}


def lesson(params):
    return run_in_app("lesson", params, timeout=300)


def step_text(at) -> str:
    """What the step itself says: its header, idea, claim, captions, widgets and charts, without the page's
    intro, the navigation and the glossary at the foot (the same on every step)."""
    skip = {text("en", "lesson.intro")}
    return " ".join(s for s in rendered_text(at) if s not in skip and not s.startswith('<span id="g-')).lower()


@pytest.fixture(scope="module")
def pages():
    return {k: lesson({"step": str(k)}) for k in range(1, len(STEPS) + 1)}


def test_every_word_is_linked_where_the_class_first_meets_it(pages):
    assert set(GLOSSARY) == set(SPELLED)
    first_use = {}
    for k, at in pages.items():
        said = step_text(at)
        for w, pattern in SPELLED.items():
            if w not in first_use and re.search(pattern, said):
                first_use[w] = k
    assert set(first_use) == set(GLOSSARY)  # every word is used somewhere
    first_link = {w: next(k for k, s in enumerate(STEPS, start=1) if w in s.terms) for w in GLOSSARY}
    late = {w: (first_use[w], first_link[w]) for w in GLOSSARY if first_link[w] > first_use[w]}
    assert late == {}, f"used at step (first), linked only from step (second): {late}"


@pytest.mark.parametrize("k", [1, 7, 9])
def test_a_steps_links_land_on_glossary_entries(pages, k):
    at = pages[k]
    caption = next(c.value for c in at.caption if "#g-" in c.value)
    targets = re.findall(r"\]\(#(g-[a-z0-9-]+)\)", caption)
    assert targets and len(targets) == len(STEPS[k - 1].terms)
    entries = [m.value for m in at.markdown if m.value.startswith('<span id="g-')]
    assert len(entries) == len(GLOSSARY)
    ids = [re.match(r'<span id="(g-[a-z0-9-]+)">', e).group(1) for e in entries]
    assert set(targets) <= set(ids)


def test_the_glossary_in_korean():
    at = lesson({"step": "9", "lang": "ko"})
    caption = next(c.value for c in at.caption if "#g-" in c.value)
    assert "이 단계의 용어:" in caption and "[MHA](#g-mha)" in caption
    assert any(m.value.startswith('<span id="g-token"></span>**토큰** — ') for m in at.markdown)


def test_the_recap_lists_each_steps_own_claim_at_the_same_settings():
    recap = lesson({"step": str(RECAP), **PARAMS})
    assert not recap.exception
    assert recap.header[0].value == "Recap: the twelve findings"
    (listing,) = [m.value for m in recap.markdown if m.value.startswith("1. **")]
    lines = listing.split("\n")
    assert len(lines) == len(STEPS)
    for k, (step, line) in enumerate(zip(STEPS, lines, strict=True), start=1):
        at = lesson({"step": str(k), **PARAMS})
        claim = next(m.value[5:] for m in at.markdown if m.value.startswith("#### "))
        assert line == f"{k}. **{say('en', step.title)}.** {claim}", (k, line, claim)
    # Next on the last step opens the recap; the recap has no Next
    last = lesson({"step": str(len(STEPS))})
    next(b for b in last.button if b.key == "next_top").click().run()
    assert last.query_params["step"] == str(RECAP)
    assert next(b for b in last.button if b.key == "next_top").disabled
