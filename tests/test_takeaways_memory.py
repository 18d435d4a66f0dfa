"""KV memory's and Roofline's batching charts title their takeaway, worded from the result each chart shows:
every sentence both ways round (exact strings), and a title that follows the link's values on the page."""

import json
from dataclasses import replace

from sim.cost.arch import with_kv_heads, with_mla
from sim.cost.capacity import DtypeRow
from sim.cost.memory import GiB, KvGrid, MemoryConfig, MiB, VariantCurves
from sim.cost.presets import load_presets
from sim.cost.roofline import Hardware, RooflineConfig, SweepPoint, decode_intensity_limit, decode_step, what_helps
from sim.msg import Msg
from sim.words import say
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
    assert grid_takeaway(GRID, CFG, 57 * GiB, "Llama 3.1 8B") == (
        "Llama 3.1 8B, FP16 cache: everything shown fits, up to 2 requests of 2,048 tokens (4 GiB) in the 57 GiB "
        "left for KV")
    assert grid_takeaway(GRID, CFG, 3 * GiB, "Llama 3.1 8B") == (
        "Llama 3.1 8B, FP16 cache: at 32,768 tokens not even 1 request fits: it needs 4 GiB, more than the 3 GiB "
        "left for KV")
    mixed = KvGrid((1, 64), (1024, 32768), ((GiB // 8, 4 * GiB), (8 * GiB, 256 * GiB)))
    assert grid_takeaway(mixed, CFG, 57 * GiB, "Llama 3.1 8B") == (
        "Llama 3.1 8B, FP16 cache: at 32,768 tokens up to 14 requests fit in the 57 GiB left for KV, so batch 16 "
        "(64 GiB) does not fit")
    assert grid_takeaway(mixed, replace(CFG, batch=4, kv_dtype="int4"), 57 * GiB, "a&lt;b") == (
        "a&lt;b, INT4 cache: at 32,768 tokens up to 53 requests fit in the 57 GiB left for KV, so batch 4 "
        "(4.25 GiB) fits")  # INT4 + a 4-byte scale and zero per 128 values: 0.53125 B a value, 1.0625 GiB a request
    assert grid_takeaway(GRID, CFG, GiB // 2, "Llama 3.1 8B") == (
        "Llama 3.1 8B, FP16 cache: nothing shown fits: even 1 request of 1,024 tokens needs 1 GiB, more than the "
        "512 MiB left for KV")
    assert grid_takeaway(GRID, CFG, -GiB, "Llama 3.1 8B") == (
        "Llama 3.1 8B, FP16 cache: the weights leave no room for KV on this GPU, so no batch × context shown fits")


def test_grid_caption_draws_the_line_only_when_it_is_there_and_bends_with_windows():
    linear = "Each cell is batch × context of one model. The cache is linear in both batch and context: doubling "
    assert grid_caption(GRID, CFG, 3 * GiB) == linear + (
        "either doubles it. Left of and below the orange line the cache fits in the 3 GiB left next to the weights.")
    assert grid_caption(GRID, CFG, 8 * GiB) == linear + (
        "either doubles it. Every cell fits in the 8 GiB left for KV (the largest needs 4 GiB), so there is no "
        "orange line.")
    assert grid_caption(GRID, CFG, 512 * MiB) == linear + (
        "either doubles it. No cell fits in the 512 MiB left for KV (the smallest needs 1 GiB), so there is no "
        "orange line.")
    assert grid_caption(GRID, CFG, 0).endswith(
        "No cell fits: the weights alone leave no room for KV, so there is no orange line.")
    long = KvGrid((1,), (1024, 8192), ((GiB, 2 * GiB),))
    assert grid_caption(long, MemoryConfig(P["mistral-7b-v0.1"]), 3 * GiB).startswith(
        "Each cell is batch × context of one model. The cache is linear in batch; in context it grows linearly up "
        "to the window W = 4,096, then stops growing: every layer keeps only its last W tokens.")
    assert grid_caption(long, MemoryConfig(P["gemma-2-9b"]), 3 * GiB).startswith(
        "Each cell is batch × context of one model. The cache is linear in batch; in context it grows linearly up "
        "to the window W = 4,096, then only the 21 global layers' share keeps growing.")
    assert "linear in both" in grid_caption(KvGrid((1,), (1024, 4096), ((GiB, 2 * GiB),)),
                                            MemoryConfig(P["mistral-7b-v0.1"]), 3 * GiB)  # never past the window


def _curves(name_to_arch) -> VariantCurves:
    return VariantCurves((1024,), CFG.batch, name_to_arch, {}, {})


def test_variants_takeaway_names_the_smallest_kind_against_mha():
    mha, mqa = with_kv_heads(LLAMA, 32), with_kv_heads(LLAMA, 1)
    assert variants_takeaway(_curves({"MHA": mha, "GQA": LLAMA, "MQA": mqa}), CFG, "Llama 3.1 8B") == (
        "Llama 3.1 8B at 32,768 tokens, batch 16: MQA needs the smallest cache, 8 GiB; MHA's 256 GiB is 32× as much")
    # MLA with DeepSeek-V2's ratios keeps (4 + 1/2)·d_h per layer, against MHA's 2·32·d_h: 14.2×, shown whole from 10× up
    assert variants_takeaway(_curves({"MHA": mha, "MLA": with_mla(LLAMA)}), replace(CFG, batch=1), "x") == (
        "x at 32,768 tokens, batch 1: MLA needs the smallest cache, 1.125 GiB; MHA's 16 GiB is 14× as much")
    assert variants_takeaway(_curves({"MHA": mha, "GQA": mqa, "MQA": mqa}), CFG, "x") == (
        "x at 32,768 tokens, batch 16: GQA and MQA tie for the smallest cache, 8 GiB; MHA's 256 GiB is 32× as much")
    assert variants_takeaway(_curves({"MHA": mha, "MQA": mha}), CFG, "x") == (  # as a one-head model would be
        "x at 32,768 tokens, batch 16: no attention kind shrinks the cache below MHA's 256 GiB")


def test_variant_notes_come_from_the_architectures_drawn():
    assert mla_note(_curves({"MLA": with_mla(LLAMA)}), LLAMA) == (
        "This model is not MLA, so it is shown here with DeepSeek-V2's ratios: d_c = 4·d_h = 512, d_R = d_h/2 = 64.")
    assert mla_note(_curves({"MLA": P["deepseek-v2-lite"]}), P["deepseek-v2-lite"]) == (
        "This model is MLA itself, with its own d_c = 512 and d_R = 64.")
    assert mla_note(_curves({"MHA": LLAMA}), LLAMA) == (
        "MLA is left out for this model: a latent of 4·d_h would be out of the preset bounds.")
    windowed = {k: P[k] for k in ("llama-3.1-8b", "mistral-7b-v0.1", "gemma-2-9b", "gemma-3-27b")}
    assert windowed_presets_note(windowed) == (
        "Among the presets: Mistral 7B v0.1: every layer, W = 4,096; Gemma 2 9B alternates 1:1 (W = 4,096); "
        "Gemma 3 27B uses 5 local to 1 global (W = 1,024).")
    assert windowed_presets_note({"llama-3.1-8b": LLAMA}) == "No preset here has sliding-window layers."


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
    assert dtypes_takeaway(ROWS, "fp16", 32768) == (
        "FP16 fits 14 requests at 32,768 tokens; the smallest KV dtype, INT2, fits 101 (7.2× as many)")
    assert dtypes_takeaway(ROWS, "int2", 32768) == (
        "INT2, the smallest KV dtype, fits 101 requests at 32,768 tokens, vs 14 with FP16")
    assert dtypes_takeaway((_row("fp16", 100, 1), _row("int2", 14, 11)), "fp16", 4096) == (
        "FP16 fits 1 request at 4,096 tokens; the smallest KV dtype, INT2, fits 11 (11× as many)")
    assert dtypes_takeaway((_row("fp16", 100, 0), _row("int2", 14, 3)), "fp16", 4096) == (
        "No request of 4,096 tokens fits with FP16; the smallest KV dtype, INT2, fits 3")
    assert dtypes_takeaway((_row("fp16", 100, 2), _row("int2", 90, 2)), "fp16", 4096) == (
        "FP16 fits 2 requests at 4,096 tokens, as many as the smallest KV dtype, INT2")
    assert dtypes_takeaway((_row("fp16", 100, 0), _row("int2", 14, 0)), "fp16", 4096) == (
        "Not one request of 4,096 tokens fits with any KV dtype, not even INT2")


def _pt(batch: int, context: int, intensity: float, tokens_per_s: float = 1.0) -> SweepPoint:
    return SweepPoint(batch, context, intensity, 1.0, tokens_per_s, "")


def test_intensity_takeaway_says_where_the_ridge_is_reached():
    rows = [_pt(1, 512, 1.0), _pt(64, 512, 120.0), _pt(4096, 512, 300.0),
            _pt(1, 8192, 1.0), _pt(64, 8192, 20.0), _pt(4096, 8192, 25.0)]
    assert intensity_takeaway(rows, 295.0) == (
        "Decode reaches the ridge of 295 FLOP/B at context 512 by batch 4,096, but at context 8,192 not at any "
        "batch up to 4,096")
    assert intensity_takeaway(rows, 20.0) == (
        "Decode reaches the ridge of 20 FLOP/B at every context shown: context 512 by batch 64; context 8,192 by "
        "batch 64")
    assert intensity_takeaway(rows, 591.0) == (
        "Decode stays below the ridge of 591 FLOP/B at every batch up to 4,096 and every context shown: at most "
        "300 FLOP/B (context 512, batch 4,096)")
    three = rows + [_pt(1, 131072, 1.0), _pt(4096, 131072, 2.0)]
    assert intensity_takeaway(three, 100.0).endswith("but at contexts 8,192 and 131,072 not at any batch up to 4,096")


def test_tokens_takeaway_compares_the_largest_batch_with_batch_one():
    assert tokens_takeaway([_pt(1, 4096, 0, 23.5), _pt(4096, 4096, 0, 2395.0)], 4096) == (
        "At context 4,096, batch 4,096 decodes only 102× the tokens/s of batch 1 (2,395 vs 23.5 tokens/s) for "
        "4,096× the requests")
    assert tokens_takeaway([_pt(1, 128, 0, 100.0), _pt(8, 128, 0, 700.0), _pt(2, 512, 0, 1.0)], 128) == (
        "At context 128, batch 8 decodes 7.0× the tokens/s of batch 1 (700 vs 100 tokens/s): nearly in proportion "
        "to its 8.0× the requests")
    assert tokens_takeaway([_pt(1, 128, 0, 100.0), _pt(4096, 128, 0, 105.0)], 128) == (
        "At context 128, batch 4,096 decodes barely more tokens/s than batch 1 (105 vs 100 tokens/s)")


def test_batching_caption_flips_at_the_ridge():
    cfg = RooflineConfig(LLAMA, 1, 4096)
    limit = decode_intensity_limit(cfg)
    assert 31.6 < limit < 31.8  # FLOPs ÷ (KV + activation bytes) of one request
    big = decode_step(replace(cfg, batch=4096))
    assert big.intensity < limit  # the weights still count at batch 4,096
    said = ("Each request added to a decode batch reuses the weights already read — but brings its own KV cache, "
            "read in full every step. So at context 4,096 the intensity can never pass 31.7 FLOP/B, one request's "
            "FLOPs over its own bytes, however large the batch: ")
    assert batching_caption(cfg, Hardware("GPU", 295e12, 1e12)) == said + (
        "9.3× below the ridge of 295 FLOP/B, so at this context the step never becomes compute-bound.")
    assert batching_caption(cfg, Hardware("GPU", 20e12, 1e12)) == said + (
        "above the ridge of 20 FLOP/B, so at this context the step is compute-bound from batch 51 on.")
    assert batching_caption(cfg, Hardware("GPU", 31.6e12, 1e12)) == said + (
        "above the ridge of 31.6 FLOP/B, so at this context the step would become compute-bound only past batch "
        "4,096, beyond this sweep.")


def _titles(at) -> list[str]:
    """Each chart's title as one line (set_headline wraps it at spaces with <br>)."""
    return [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]


def test_kv_memory_titles_follow_the_link():
    at = run_page("kv_memory", {"tab": "dtypes"})
    assert not at.exception
    assert _titles(at)[1] == (
        "FP16 fits 14 requests at 32,768 tokens; the smallest KV dtype, INT2, fits 101 (7.2× as many)")
    at = run_page("kv_memory", {"tab": "dtypes", "ctx": "4096", "kv": "int2"})
    # 57.04 GiB left for KV ÷ 72 MiB (INT2) and ÷ 512 MiB (FP16) a 4,096-token request
    assert _titles(at)[1] == "INT2, the smallest KV dtype, fits 811 requests at 4,096 tokens, vs 114 with FP16"
    at = run_page("kv_memory", {"tab": "grid"})
    assert _titles(at)[1] == (
        "Llama 3.1 8B, FP16 cache: at 32,768 tokens up to 14 requests fit in the 57.04 GiB left for KV, so batch 16 "
        "(64 GiB) does not fit")
    at = run_page("kv_memory", {"tab": "grid", "batch": "4"})
    assert _titles(at)[1].endswith("so batch 4 (16 GiB) fits")


def test_roofline_batching_titles_follow_the_link():
    at = run_page("roofline", {"tab": "batching"}, timeout=120)
    assert not at.exception
    assert _titles(at) == [
        "Decode reaches the ridge of 295 FLOP/B at context 512 by batch 512, but at contexts 4,096, 8,192 and "
        "131,072 not at any batch up to 4,096",
        "At context 4,096, batch 4,096 decodes only 102× the tokens/s of batch 1 (2,395 vs 23.5 tokens/s) for "
        "4,096× the requests"]
    assert any(c.value.endswith("2.7× below the ridge of 295 FLOP/B, so at this context the step never becomes "
                                "compute-bound.") for c in at.caption)
    at = run_page("roofline", {"tab": "batching", "context": "512"}, timeout=120)
    assert _titles(at)[0] == (
        "Decode reaches the ridge of 295 FLOP/B at context 512 by batch 512, but at contexts 8,192 and 131,072 not "
        "at any batch up to 4,096")
    assert _titles(at)[1].startswith("At context 512, batch 4,096 decodes only ")
    assert any(c.value.endswith("is compute-bound from batch 494 on.") for c in at.caption)
