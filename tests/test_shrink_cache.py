"""Shrink the cache: the verdict and the offload cost worded from their numbers, the lecture's table, and the
page's grid equal to a direct run of the same setup (reproducible), started only by its button."""

import pytest

from app.registry import PAGES
from sim.cost.memory import GiB
from sim.cost.shrink import LINKS, METHODS, Score, offload_cost
from sim.model.real_recorded import load_recorded
from sim.words import text as fill
from sim.words.catalog import PSEUDO
from sim.words.shrink import recorded_verdict
from sim.words.shrink_table import offload_sentence, verdict
from tests.conftest import run_in_app, unescaped


def _s(label, kind, frac, quote):
    return Score(label, label, kind, frac, 1.0, quote, 1.0)


def test_the_verdict_says_what_the_model_showed_either_way():
    blur, evict = _s("INT4 KIVI", "blur", 0.39, 0.9), _s("H2O @ 50%", "discard", 0.5, 0.2)
    assert verdict([blur, evict, _s("window @ 12.5%", "discard", 0.125, 0.0)], 0.95, PSEUDO) == (
        "shrink.v.sentence(head=shrink.v.as_lecture, full=95.0%, parts=shrink.v.pair(blur=INT4 KIVI, blur_bytes=39%, "
        "blur_quote=90.0%, best=H2O @ 50%, best_bytes=50%, best_quote=20.0%))")
    assert verdict([_s("INT2 KIVI", "blur", 0.2, 0.1), _s("sinks @ 25%", "discard", 0.25, 0.6)], 0.9, PSEUDO).startswith(
        "shrink.v.sentence(head=shrink.v.against, full=90.0%,")
    mixed = verdict([_s("a", "blur", 0.2, 0.1), _s("b", "blur", 0.5, 0.9), _s("c", "discard", 0.25, 0.5),
                     _s("d", "discard", 0.5, 0.3)], 1.0, PSEUDO)
    assert mixed.startswith("shrink.v.sentence(head=shrink.v.mixed(tally=shrink.v.tally(worse=1, better=1, same=0, "
                            "n=2)), full=100.0%,")
    assert verdict([_s("a", "blur", 0.5, 0.6), _s("b", "discard", 0.5, 0.6)], 0.9, PSEUDO).startswith(
        "shrink.v.sentence(head=shrink.v.neither, full=90.0%,")
    assert verdict([_s("a", "blur", 0.5, 0.047), _s("b", "discard", 0.5, 0.055)], 0.047, PSEUDO).startswith(
        "shrink.v.sentence(head=shrink.v.cannot(full=4.7%, tally=shrink.v.tally(worse=0, better=1, same=0, n=1)), "
        "full=4.7%,")
    assert verdict([evict], 1.0, PSEUDO) == "shrink.v.need_both"


def test_offload_costs_the_link_every_step():
    c = offload_cost(2 * GiB, "pcie5", 3.35e12)
    assert round(c.transfer_s * 1e3, 1) == 34.1 and round(c.hbm_s * 1e3, 2) == 0.64
    assert offload_sentence(c, PSEUDO).startswith(
        "shrink.s.offload_slower(bytes=2 GiB, link=PCIe 5.0 x16, link_bw=63 GB/s, ms=34.1, x=53.2, hbm_ms=0.64,")  # 3,350 ÷ 63
    assert offload_sentence(offload_cost(GiB, "c2c", 300e9), PSEUDO).startswith(  # an L4 reads slower than C2C
        "shrink.s.offload_free(")
    with pytest.raises(ValueError, match="link must be one of"):
        offload_cost(1, "carrier pigeon", 1e12)
    assert set(LINKS) == {"pcie4", "pcie5", "c2c", "nvme"}


def test_the_pages_method_names_are_the_caches_names():
    from sim.cost.shrink import EVICT_METHODS, QUANT_METHODS
    from sim.model.evict_cache import EVICT_POLICIES
    from sim.model.evict_cache import QUANT_METHODS as BUILT

    assert EVICT_METHODS == EVICT_POLICIES and QUANT_METHODS == tuple(BUILT)


def test_the_lectures_table_is_all_there_and_links_to_real_pages():
    from sim.words.shrink_table import method_en

    assert [method_en(m)[0] for m in METHODS] == ["GQA · MQA", "MLA (latent compression)", "Sliding window", "Token eviction",
                                         "Prefix caching", "CPU · disk offload"]
    slugs = {p.slug for p in PAGES}
    assert all(m.where in slugs or m.where == "" for m in METHODS)
    assert all(m.shrinks_ko and m.stacks_ko and all(method_en(m)) for m in METHODS)


def test_the_page_waits_for_its_button_then_shows_the_direct_runs_numbers():
    params = {"model": "mha", "scope": "quarter", "long": "128", "trials": "1"}
    at = run_in_app("shrink_cache", params, timeout=600)
    assert not at.exception, [e.value for e in at.exception]
    # the tiny model's grid waits for its button; the recorded SmolLM2 grid's chart (the page's finding) and the
    # offload chart are drawn at once
    recorded = load_recorded() is not None
    assert [c.key for c in at.get("plotly_chart")] == ["shrink_real"] * recorded + ["shrink_offload"]
    assert any("press **Run the checks**" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Run the checks").click().run(timeout=600)
    assert not at.exception, [e.value for e in at.exception]
    shown = at.dataframe[0].value

    from app.runs.shrink_cache import load
    from sim.cost.shrink import ShrinkSetup
    from sim.model.shrink_run import run_shrink
    from sim.words.shrink import table_frame

    # a direct run of one discarding and one blurring cache (each row is its own run against the same full
    # cache): the page's rows for them are the same numbers, so reproducible for a seed
    direct = run_shrink(load("mha"), ShrinkSetup(methods=("h2o", "kivi2"), budgets=(0.25,), num_new=128, num_trials=1))
    mine = shown[shown["Method"].isin(table_frame(direct)["Method"])].reset_index(drop=True)
    assert len(mine) == 3 and mine.equals(table_frame(direct))
    assert len(shown) == 1 + 4 + 4 and shown["Method"][0] == "The full FP16 cache"
    assert shown[fill("en", "shrink.col.bytes")][0] == 100 and shown[fill("en", "shrink.col.long")][0] == 100
    said = [unescaped(m.value) for m in at.markdown if m.value.startswith("**")]
    if recorded:  # the recorded grid's verdict first, then the tiny model's
        assert said.pop(0) == f"**{recorded_verdict(load_recorded()['rows'])[1]}**"
    # the verdict is the one computed from the table the page shows (an evicting cache's label names its budget)
    scores = [Score(r["Method"], r["Method"], "discard" if " @ " in r["Method"] else "blur",
                    r["Bytes kept (% of FP16)"] / 100, r["Long generation: tokens equal (%)"] / 100,
                    r["Exact quote (% of bytes)"] / 100, r["Multi-turn fact (% of bytes)"] / 100)
              for r in shown.to_dict("records")[1:]]
    assert said == [f"**{verdict(scores, shown['Exact quote (% of bytes)'][0] / 100)}**"]
    assert len(at.get("plotly_chart")) == 2 + recorded


def test_offload_follows_its_controls_and_bad_links_are_named():
    at = run_in_app("shrink_cache", {"opct": "0", "scope": "everything"})
    assert not at.exception
    assert any(i.value == fill("en", "shrink.nothing_offloaded") for i in at.info)
    assert any("`everything` is not one of" in w.value for w in at.warning)
    at = run_in_app("shrink_cache", {"opct": "100", "octx": "32768", "omodel": "llama-3.1-8b", "ogpu": "h100-sxm"})
    text = " ".join(m.value for m in at.markdown)
    from sim.cost.gpus import load_gpus

    # Llama 3.1 8B at 32,768 tokens: 2·32·8·128·2 B · 32,768 = 4 GiB, all of it over PCIe 5.0, against an H100's HBM
    assert offload_sentence(offload_cost(4 * GiB, "pcie5", load_gpus()["h100-sxm"].bandwidth_bytes_per_s)) in text


def test_which_model_can_copy_is_worded_from_its_scores():
    from sim.cost.shrink import CopyAbility
    from sim.words.shrink_table import copy_ability_sentence

    shipped = CopyAbility("Shipped", 6, 128, 0, 50)
    trained = CopyAbility.from_report("Copier", {"exact_quote": {"num_prefix": 64, "max_bytes": 128},
                                                 "multi_turn": {"num_prefix": 25, "max_bytes": 50}})
    assert not shipped.copies and trained.copies  # exactly half of both is enough
    assert not CopyAbility("x", 64, 128, 24, 50).copies
    assert copy_ability_sentence([shipped, trained], PSEUDO) == (
        "shrink.s.abilities(each=shrink.s.ability(model=Shipped, quote=shrink.s.of_pct(n=6, most=128, pct=5%), "
        "fact=shrink.s.of_pct(n=0, most=50, pct=0%))shrink.v.sepshrink.s.ability(model=Copier, "
        "quote=shrink.s.of_pct(n=64, most=128, pct=50%), fact=shrink.s.of_pct(n=25, most=50, pct=50%)), "
        "tail=shrink.s.some_copy(able=Copier, unable=Shipped))")
    assert copy_ability_sentence([shipped], PSEUDO).endswith("tail=shrink.s.none_copies)")
    assert copy_ability_sentence([trained], PSEUDO).endswith("tail=shrink.s.all_copy)")
    assert copy_ability_sentence([], PSEUDO) == "shrink.s.no_scores"


def test_the_page_defaults_to_a_model_that_copies_and_says_what_each_scored():
    import json

    from app.registry import ROOT
    from app.runs.shrink_cache import MODELS, available_models, copy_abilities
    from sim.words.shrink_table import copy_ability_sentence

    models = available_models()
    reports = {k: json.loads((ROOT / "assets" / "models" / f"{k}.json").read_text()) for k in models}
    assert all("full_cache_scores" in r for r in reports.values())  # every shipped model's scores are recorded
    abilities = copy_abilities()
    assert [a.label for a in abilities] == [MODELS[k] for k in models]
    if any(a.copies for a in abilities):
        assert abilities[0].copies  # the default model is one that copies
    at = run_in_app("shrink_cache", {})
    assert not at.exception
    assert at.session_state["model"] == next(iter(models))
    assert copy_ability_sentence(abilities) in [unescaped(m.value) for m in at.markdown]
