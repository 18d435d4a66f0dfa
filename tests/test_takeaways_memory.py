"""KV memory's and Roofline's batching charts title their takeaway, worded from the result each chart shows:
every sentence both ways round (exact strings), and a title that follows the link's values on the page."""

import json
from dataclasses import replace

from sim.cost.arch import with_kv_heads, with_mla
from sim.cost.capacity import DtypeRow
from sim.cost.memory import GiB, KvGrid, MemoryConfig, MiB, VariantCurves
from sim.cost.presets import load_presets
from sim.cost.roofline import Hardware, RooflineConfig, SweepPoint, decode_intensity_limit, decode_step, what_helps
from sim.msg import Items, Msg
from sim.words import say, text
from sim.words.catalog import PSEUDO
from sim.words.cost import (
    dtypes_takeaway,
    grid_caption,
    grid_takeaway,
    mla_note,
    variants_takeaway,
    windowed_presets_note,
)
from sim.words.roofline import (
    batching_caption,
    intensity_takeaway,
    tokens_takeaway,
)
from tests.conftest import run_page

P = load_presets()
LLAMA = P["llama-3.1-8b"]  # 128 KiB of FP16 KV per token: 4 GiB per 32,768-token request
CFG = MemoryConfig(LLAMA, batch=16, context=32768)
GRID = KvGrid((1, 2), (1024, 2048), ((1 * GiB, 2 * GiB), (2 * GiB, 4 * GiB)))


def test_grid_takeaway_says_up_to_which_batch_the_context_fits():
    assert grid_takeaway(GRID, CFG, 57 * GiB, "Llama 3.1 8B", lang=PSEUDO) == (
        "kvmem.r.grid.everything(head=kvmem.r.grid.head(name=Llama 3.1 8B, dtype=FP16), "
        "n=kvmem.r.n.request.other(n=2), s=2,048, need=4 GiB, room=kvmem.r.grid.room(room=57 GiB))")
    assert grid_takeaway(GRID, CFG, 3 * GiB, "Llama 3.1 8B", lang=PSEUDO) == (
        "kvmem.r.grid.not_one(head=kvmem.r.grid.head(name=Llama 3.1 8B, dtype=FP16), s=32,768, need=4 GiB, "
        "room=kvmem.r.grid.room(room=3 GiB))")
    mixed = KvGrid((1, 64), (1024, 32768), ((GiB // 8, 4 * GiB), (8 * GiB, 256 * GiB)))
    assert grid_takeaway(mixed, CFG, 57 * GiB, "Llama 3.1 8B", lang=PSEUDO) == (
        "kvmem.r.grid.not_fits(head=kvmem.r.grid.head(name=Llama 3.1 8B, dtype=FP16), s=32,768, "
        "n=kvmem.r.n.request.other(n=14), room=kvmem.r.grid.room(room=57 GiB), b=16, need=64 GiB)")
    # INT4 + a 4-byte scale and zero per 128 values: 0.53125 B a value, 1.0625 GiB a request
    assert grid_takeaway(mixed, replace(CFG, batch=4, kv_dtype="int4"), 57 * GiB, "a&lt;b", lang=PSEUDO) == (
        "kvmem.r.grid.fits(head=kvmem.r.grid.head(name=a&lt;b, dtype=INT4), s=32,768, "
        "n=kvmem.r.n.request.other(n=53), room=kvmem.r.grid.room(room=57 GiB), b=4, need=4.25 GiB)")
    assert grid_takeaway(GRID, CFG, GiB // 2, "Llama 3.1 8B", lang=PSEUDO) == (
        "kvmem.r.grid.nothing(head=kvmem.r.grid.head(name=Llama 3.1 8B, dtype=FP16), n=kvmem.r.n.request.one(n=1), "
        "s=1,024, need=1 GiB, room=kvmem.r.grid.room(room=512 MiB))")
    assert grid_takeaway(GRID, CFG, -GiB, "Llama 3.1 8B", lang=PSEUDO) == (
        "kvmem.r.grid.no_room(head=kvmem.r.grid.head(name=Llama 3.1 8B, dtype=FP16))")


def test_grid_caption_draws_the_line_only_when_it_is_there_and_bends_with_windows():
    assert grid_caption(GRID, CFG, 3 * GiB, lang=PSEUDO) == (
        "kvmem.r.gridcap.all(growth=kvmem.r.gridcap.linear, line=kvmem.r.gridcap.line(room=3 GiB))")
    assert grid_caption(GRID, CFG, 8 * GiB, lang=PSEUDO) == (
        "kvmem.r.gridcap.all(growth=kvmem.r.gridcap.linear, line=kvmem.r.gridcap.all_fit(room=8 GiB, need=4 GiB))")
    assert grid_caption(GRID, CFG, 512 * MiB, lang=PSEUDO) == (
        "kvmem.r.gridcap.all(growth=kvmem.r.gridcap.linear, line=kvmem.r.gridcap.none_fit(room=512 MiB, need=1 GiB))")
    assert grid_caption(GRID, CFG, 0, lang=PSEUDO) == (
        "kvmem.r.gridcap.all(growth=kvmem.r.gridcap.linear, line=kvmem.r.gridcap.no_room)")
    long = KvGrid((1,), (1024, 8192), ((GiB, 2 * GiB),))
    assert grid_caption(long, MemoryConfig(P["mistral-7b-v0.1"]), 3 * GiB, lang=PSEUDO) == (
        "kvmem.r.gridcap.all(growth=kvmem.r.gridcap.windowed(w=4,096, after=kvmem.r.gridcap.after_all), "
        "line=kvmem.r.gridcap.all_fit(room=3 GiB, need=2 GiB))")
    assert grid_caption(long, MemoryConfig(P["gemma-2-9b"]), 3 * GiB, lang=PSEUDO) == (
        "kvmem.r.gridcap.all(growth=kvmem.r.gridcap.windowed(w=4,096, after=kvmem.r.gridcap.after_global(n=21)), "
        "line=kvmem.r.gridcap.all_fit(room=3 GiB, need=2 GiB))")
    assert "linear in both" in grid_caption(KvGrid((1,), (1024, 4096), ((GiB, 2 * GiB),)),
                                            MemoryConfig(P["mistral-7b-v0.1"]), 3 * GiB)  # never past the window


def _curves(name_to_arch) -> VariantCurves:
    return VariantCurves((1024,), CFG.batch, name_to_arch, {}, {})


def test_variants_takeaway_names_the_smallest_kind_against_mha():
    mha, mqa = with_kv_heads(LLAMA, 32), with_kv_heads(LLAMA, 1)
    assert variants_takeaway(_curves({"MHA": mha, "GQA": LLAMA, "MQA": mqa}), CFG, "Llama 3.1 8B",
                             lang=PSEUDO) == (
        "kvmem.r.var.least(head=kvmem.r.var.head(name=Llama 3.1 8B, s=32,768, b=16), who=kvmem.r.var.one(kind=MQA), "
        "least=8 GiB, mha=256 GiB, times=32×)")
    # MLA with DeepSeek-V2's ratios keeps (4 + 1/2)·d_h per layer, against MHA's 2·32·d_h: 14.2×, shown whole from 10× up
    assert variants_takeaway(_curves({"MHA": mha, "MLA": with_mla(LLAMA)}), replace(CFG, batch=1), "x",
                             lang=PSEUDO) == (
        "kvmem.r.var.least(head=kvmem.r.var.head(name=x, s=32,768, b=1), who=kvmem.r.var.one(kind=MLA), least=1.125 "
        "GiB, mha=16 GiB, times=14×)")
    assert variants_takeaway(_curves({"MHA": mha, "GQA": mqa, "MQA": mqa}), CFG, "x", lang=PSEUDO) == (
        "kvmem.r.var.least(head=kvmem.r.var.head(name=x, s=32,768, b=16), "
        "who=kvmem.r.var.tie(kinds=GQAkvmem.r.var.andMQA), least=8 GiB, mha=256 GiB, times=32×)")
    # as a one-head model would be
    assert variants_takeaway(_curves({"MHA": mha, "MQA": mha}), CFG, "x", lang=PSEUDO) == (
        "kvmem.r.var.mha_least(head=kvmem.r.var.head(name=x, s=32,768, b=16), mha=256 GiB)")


def test_variant_notes_come_from_the_architectures_drawn():
    assert mla_note(_curves({"MLA": with_mla(LLAMA)}), LLAMA, lang=PSEUDO) == "kvmem.r.mla.borrowed(dc=512, dr=64)"
    assert mla_note(_curves({"MLA": P["deepseek-v2-lite"]}), P["deepseek-v2-lite"], lang=PSEUDO) == (
        "kvmem.r.mla.own(dc=512, dr=64)")
    assert mla_note(_curves({"MHA": LLAMA}), LLAMA, lang=PSEUDO) == "kvmem.r.mla.none"
    windowed = {k: P[k] for k in ("llama-3.1-8b", "mistral-7b-v0.1", "gemma-2-9b", "gemma-3-27b")}
    assert windowed_presets_note(windowed, lang=PSEUDO) == (
        "kvmem.r.win.among(items=kvmem.r.win.every(name=Mistral 7B v0.1, w=4,096); kvmem.r.win.mix(name=Gemma 2 9B, "
        "mix=kvmem.r.win.alternates(local=1, glob=1), w=4,096); kvmem.r.win.mix(name=Gemma 3 27B, "
        "mix=kvmem.r.win.uses(local=5, glob=1), w=1,024))")
    assert windowed_presets_note({"llama-3.1-8b": LLAMA}, lang=PSEUDO) == "kvmem.r.win.none"


def test_the_batch_lever_names_the_batch_it_computes():
    hw = Hardware("GPU", 1e15, 3e12)
    assert what_helps(RooflineConfig(LLAMA, 16, 4096), hw)[-1].name == Msg("roofline.lever.batch", k=8, n=128)
    assert say("en", what_helps(RooflineConfig(LLAMA, 16, 4096), hw)[-1].name) == "batch ×8 (128)"
    assert say("en", what_helps(RooflineConfig(LLAMA, 1024, 4096), hw)[-1].name) == "batch ×4 (4,096)"  # capped at 4,096
    assert what_helps(RooflineConfig(LLAMA, 4096, 4096), hw)[-1].name.key != "roofline.lever.batch"  # nothing bigger to try


def _row(name: str, per_request: int, fits: int) -> DtypeRow:
    return DtypeRow(name, 0, per_request, 0, fits, per_request / 100)


ROWS = (_row("fp16", 100, 14), _row("int8", 52, 27), _row("int2", 14, 101))


def test_dtypes_takeaway_compares_the_chosen_dtype_with_the_smallest():
    assert dtypes_takeaway(ROWS, "fp16", 32768, lang=PSEUDO) == (
        "kvmem.r.dt.fewer(mine=FP16, n=kvmem.r.n.request.other(n=14), s=32,768, least=INT2, most=101, times=7.2×)")
    assert dtypes_takeaway(ROWS, "int2", 32768, lang=PSEUDO) == (
        "kvmem.r.dt.is_least(mine=INT2, n=kvmem.r.n.request.other(n=101), s=32,768, fp16=14)")
    assert dtypes_takeaway((_row("fp16", 100, 1), _row("int2", 14, 11)), "fp16", 4096, lang=PSEUDO) == (
        "kvmem.r.dt.fewer(mine=FP16, n=kvmem.r.n.request.one(n=1), s=4,096, least=INT2, most=11, times=11×)")
    assert dtypes_takeaway((_row("fp16", 100, 0), _row("int2", 14, 3)), "fp16", 4096, lang=PSEUDO) == (
        "kvmem.r.dt.none_mine(s=4,096, mine=FP16, least=INT2, most=3)")
    assert dtypes_takeaway((_row("fp16", 100, 2), _row("int2", 90, 2)), "fp16", 4096, lang=PSEUDO) == (
        "kvmem.r.dt.as_many(mine=FP16, n=kvmem.r.n.request.other(n=2), s=4,096, least=INT2)")
    assert dtypes_takeaway((_row("fp16", 100, 0), _row("int2", 14, 0)), "fp16", 4096, lang=PSEUDO) == (
        "kvmem.r.dt.none_any(s=4,096, least=INT2)")


def _pt(batch: int, context: int, intensity: float, tokens_per_s: float = 1.0) -> SweepPoint:
    return SweepPoint(batch, context, intensity, 1.0, tokens_per_s, "")


def test_intensity_takeaway_says_where_the_ridge_is_reached():
    rows = [_pt(1, 512, 1.0), _pt(64, 512, 120.0), _pt(4096, 512, 300.0),
            _pt(1, 8192, 1.0), _pt(64, 8192, 20.0), _pt(4096, 8192, 25.0)]
    assert intensity_takeaway(rows, 295.0, lang=PSEUDO) == (
        "roofline.s.reach.some_one(ridge=295, reached=roofline.s.reach.item(S=512, b=4,096), never=8,192, top=4,096)")
    assert intensity_takeaway(rows, 20.0, lang=PSEUDO) == (
        "roofline.s.reach.all(ridge=20, reached=roofline.s.reach.item(S=512, "
        "b=64)roofline.s.reach.seproofline.s.reach.item(S=8,192, b=64))")
    assert intensity_takeaway(rows, 591.0, lang=PSEUDO) == (
        "roofline.s.reach.none(ridge=591, top=4,096, peak=300, pc=512, pb=4,096)")
    three = rows + [_pt(1, 131072, 1.0), _pt(4096, 131072, 2.0)]
    assert intensity_takeaway(three, 100.0, lang=PSEUDO) == (
        "roofline.s.reach.some_many(ridge=100, reached=roofline.s.reach.item(S=512, b=64), never=[8,192 + 131,072], "
        "top=4,096)")


def test_tokens_takeaway_compares_the_largest_batch_with_batch_one():
    assert tokens_takeaway([_pt(1, 4096, 0, 23.5), _pt(4096, 4096, 0, 2395.0)], 4096, lang=PSEUDO) == (
        "roofline.s.tok.only(S=4,096, B=4,096, gain=102×, lo=1, both=roofline.s.tok.both(hi=2,395, lo=23.5), "
        "more=4,096×)")
    assert tokens_takeaway([_pt(1, 128, 0, 100.0), _pt(8, 128, 0, 700.0), _pt(2, 512, 0, 1.0)], 128,
                           lang=PSEUDO) == (
        "roofline.s.tok.proportional(S=128, B=8, gain=7.0×, lo=1, both=roofline.s.tok.both(hi=700, lo=100), "
        "more=8.0×)")
    assert tokens_takeaway([_pt(1, 128, 0, 100.0), _pt(4096, 128, 0, 105.0)], 128, lang=PSEUDO) == (
        "roofline.s.tok.barely(S=128, B=4,096, lo=1, both=roofline.s.tok.both(hi=105, lo=100))")


def test_batching_caption_flips_at_the_ridge():
    cfg = RooflineConfig(LLAMA, 1, 4096)
    limit = decode_intensity_limit(cfg)
    assert 31.6 < limit < 31.8  # FLOPs ÷ (KV + activation bytes) of one request
    big = decode_step(replace(cfg, batch=4096))
    assert big.intensity < limit  # the weights still count at batch 4,096
    assert batching_caption(cfg, Hardware("GPU", 295e12, 1e12), lang=PSEUDO) == (
        "roofline.s.batch.said(S=4,096, limit=31.7)roofline.s.batch.below(x=9.3×, ridge=295)")
    assert batching_caption(cfg, Hardware("GPU", 20e12, 1e12), lang=PSEUDO) == (
        "roofline.s.batch.said(S=4,096, limit=31.7)roofline.s.batch.from(ridge=20, turn=51)")
    assert batching_caption(cfg, Hardware("GPU", 31.6e12, 1e12), lang=PSEUDO) == (
        "roofline.s.batch.said(S=4,096, limit=31.7)roofline.s.batch.beyond(ridge=31.6, max=4,096)")


def _titles(at) -> list[str]:
    """Each chart's title as one line (set_headline wraps it at spaces with <br>)."""
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_kv_memory_titles_follow_the_link():
    at = run_page("kv_memory", {"tab": "dtypes"})
    assert not at.exception
    assert _titles(at)[1] == say("en", Msg("kvmem.r.dt.fewer", mine="FP16", n=Msg("kvmem.r.n.request.other", n="14"),
                                           s="32,768", least="INT2", most="101", times="7.2×"))
    at = run_page("kv_memory", {"tab": "dtypes", "ctx": "4096", "kv": "int2"})
    # 57.04 GiB left for KV ÷ 72 MiB (INT2) and ÷ 512 MiB (FP16) a 4,096-token request
    assert _titles(at)[1] == say("en", Msg("kvmem.r.dt.is_least", mine="INT2",
                                           n=Msg("kvmem.r.n.request.other", n="811"), s="4,096", fp16="114"))
    at = run_page("kv_memory", {"tab": "grid"})
    assert _titles(at)[1] == say("en", Msg(
        "kvmem.r.grid.not_fits", head=Msg("kvmem.r.grid.head", name="Llama 3.1 8B", dtype="FP16"), s="32,768",
        n=Msg("kvmem.r.n.request.other", n="14"), room=Msg("kvmem.r.grid.room", room="57.04 GiB"), b="16",
        need="64 GiB"))
    at = run_page("kv_memory", {"tab": "grid", "batch": "4"})
    assert _titles(at)[1].endswith("so batch 4 (16 GiB) fits")


def test_roofline_batching_titles_follow_the_link():
    at = run_page("roofline", {"tab": "batching"}, timeout=120)
    assert not at.exception
    assert _titles(at) == [
        say("en", Msg("roofline.s.reach.some_many", ridge="295", reached=Msg("roofline.s.reach.item", S="512", b="512"),
                      never=Items(("4,096", "8,192", "131,072")), top="4,096")),
        say("en", Msg("roofline.s.tok.only", S="4,096", B="4,096", gain="102×", lo="1",
                      both=Msg("roofline.s.tok.both", hi="2,395", lo="23.5"), more="4,096×"))]
    assert any(c.value.endswith(text("en", "roofline.s.batch.below", x="2.7×", ridge="295")) for c in at.caption)
    at = run_page("roofline", {"tab": "batching", "context": "512"}, timeout=120)
    assert _titles(at)[0] == say("en", Msg(
        "roofline.s.reach.some_many", ridge="295", reached=Msg("roofline.s.reach.item", S="512", b="512"),
        never=Items(("8,192", "131,072")), top="4,096"))
    # the same message at context 512 (its words up to the first field this test does not fix)
    lead = text("en", "roofline.s.tok.only", S="512", B="4,096", gain="\0", lo="\0", both="\0", more="\0")
    assert _titles(at)[1].startswith(lead.split("\0")[0])
    assert any(c.value.endswith(text("en", "roofline.s.batch.from", ridge="295", turn="494")) for c in at.caption)
