"""The KV memory page's sentences and metrics, worked out by hand from the presets."""

import pandas as pd

from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import load_gpus
from sim.cost.memory import MemoryConfig, kv_memory
from sim.cost.presets import load_presets
from sim.model.measure import CacheMeasurement
from sim.words import text
from sim.words.catalog import PSEUDO
from sim.words.cost import (
    arrow_safe,
    beyond_trained_context,
    config_read,
    dtypes_caption,
    gpu_label,
    kv_metrics,
    replicated_heads_note,
    shape_caption,
)

P = load_presets()
G = load_gpus()


def metrics_of(cfg, gpu):
    return {m.label: m for m in kv_metrics(kv_memory(cfg), capacity(cfg, gpu), gpu)}


def keys_of(cfg, gpu):
    """The same metrics in the keys pseudo-language: which message each label, delta and help chose."""
    return {m.label: m for m in kv_metrics(kv_memory(cfg), capacity(cfg, gpu), gpu, PSEUDO)}


def test_gpu_label_counts_several():
    assert gpu_label(GpuConfig(G["l4"])) == "NVIDIA L4 24GB"
    assert gpu_label(GpuConfig(G["l4"], num_gpus=2)) == "2 × NVIDIA L4 24GB"


def test_llama_8b_metrics_at_seed_001s_point():
    """16 requests of 32,768 tokens: 128 KiB per token (2·32·8·128·2 B), 64 GiB in all, 14 requests fit."""
    m = metrics_of(MemoryConfig(P["llama-3.1-8b"], batch=16, context=32768), GpuConfig(G["h100-sxm"]))
    assert list(m) == ["Per token", "Per request", "All requests", "Room for KV", "Max requests", "Max context"]
    assert (m["Per token"].value, m["Per token"].help) == ("128 KiB", "131,072 B, all layers")
    assert (m["Per request"].value, m["Per request"].help) == ("4 GiB", "4,294,967,296 B")
    assert m["All requests"].value == "64 GiB"
    assert m["Room for KV"].help.startswith("NVIDIA H100 SXM 80GB: ") and " × 0.9 − weights " in m["Room for KV"].help
    assert (m["Max requests"].value, m["Max requests"].delta) == ("14", "at S = 32,768")
    assert m["Max context"].delta == "at B = 16"
    assert keys_of(MemoryConfig(P["llama-3.1-8b"], batch=16, context=32768),
                   GpuConfig(G["h100-sxm"]))["kvmem.r.m.max_context"].help == "kvmem.r.m.limit_memory"
    assert m["Per token"].delta is None and m["Room for KV"].delta is None


def test_sliding_windows_average_the_per_token_bytes():
    """Mistral 7B v0.1 keeps 4,096 tokens in each of 32 layers: 32 · 4,096 · 4,096 B = 512 MiB per request,
    so 10,000 tokens average 53,687.09 B = 52.43 KiB each."""
    m = metrics_of(MemoryConfig(P["mistral-7b-v0.1"], batch=1, context=10_000), GpuConfig(G["h100-sxm"]))
    assert m["Per request"].value == "512 MiB"
    assert keys_of(MemoryConfig(P["mistral-7b-v0.1"], batch=1, context=10_000),
                   GpuConfig(G["h100-sxm"]))["kvmem.r.m.per_token"].help == (
        "kvmem.r.m.per_token_help(b=131,072, windows=kvmem.r.m.windows(s=10,000, avg=52.43 KiB))")


def test_no_room_and_the_models_own_limit():
    tiny_gpu = GpuConfig(G["l4"], weight_dtype="fp32")  # 70B in FP32 on 24 GB: the weights alone do not fit
    assert metrics_of(MemoryConfig(P["llama-3.1-70b"]), tiny_gpu)["Room for KV"].value == "none"
    m = metrics_of(MemoryConfig(P["llama-3.1-8b"], batch=1, context=1000), GpuConfig(G["h100-sxm"]))
    k = keys_of(MemoryConfig(P["llama-3.1-8b"], batch=1, context=1000), GpuConfig(G["h100-sxm"]))["kvmem.r.m.max_context"]
    assert (m["Max context"].value, k.help) == ("131,072", "kvmem.r.m.limit_model")


def test_warnings_name_the_numbers():
    arch = P["llama-3.1-8b"]
    assert beyond_trained_context(MemoryConfig(arch, context=131_072), arch.name) is None
    assert beyond_trained_context(MemoryConfig(arch, context=200_000), "`x`", PSEUDO) == (
        "kvmem.r.beyond(s=200,000, name=`x`, trained=131,072)")
    assert replicated_heads_note(arch, GpuConfig(G["h100-sxm"], num_gpus=8)) is None
    assert replicated_heads_note(arch, GpuConfig(G["h100-sxm"], num_gpus=16), PSEUDO) == (
        "kvmem.r.replicated(gpus=16, heads=8)")
    assert replicated_heads_note(P["deepseek-v3"], GpuConfig(G["h100-sxm"], num_gpus=64)) is None  # MLA: one latent


def test_shape_sentences():
    arch = P["llama-3.1-8b"]
    assert shape_caption(arch, arch.name, PSEUDO) == \
        "kvmem.r.shape(name=Llama 3.1 8B, attention=GQA, heads=32, kv=8, d=128, layers=kvmem.r.layers.all_full(n=32))"
    assert config_read(arch, "`mine`", PSEUDO) == (
        "kvmem.r.config_read(name=`mine`, attention=GQA, n=32, kv=8, d=128, layers=kvmem.r.layers.all_full(n=32))")


def test_dtypes_caption_states_int8_with_its_group_scales():
    """(8·g + 8·4) / (16·g): g = 128 -> 1,056 / 2,048 = 0.515625; g = 32 -> 288 / 512 = 0.5625."""
    assert dtypes_caption(128, PSEUDO) == "kvmem.r.dtypes_caption(g=128, ratio=0.5156)"
    assert dtypes_caption(32, PSEUDO) == "kvmem.r.dtypes_caption(g=32, ratio=0.5625)"


def test_arrow_safe_turns_only_huge_integer_columns_into_text():
    df = pd.DataFrame({"small": [1, 2], "huge": pd.Series([5, 1 << 70], dtype=object), "name": ["a", "b"]})
    out = arrow_safe(df)
    assert out["huge"].tolist() == ["5", f"{1 << 70:,}"]
    assert out["small"].tolist() == [1, 2] and out["name"].tolist() == ["a", "b"]
    assert df["huge"].tolist() == [5, 1 << 70]  # the input is left alone


def measurement(**over) -> CacheMeasurement:
    base = dict(model_name="tiny-mqa", weights="trained checkpoint", device="cpu", dtype="fp32", batch=2, context=50,
                tensor_shape=(2, 1, 50, 32), num_tensors=8, measured_bytes=102_400, reserved_bytes=102_400,
                opcount_bytes=102_400, calculator_bytes=102_400, cuda_allocated_delta=None, cuda_expected=None)
    return CacheMeasurement(**(base | over))


def test_measurement_sentences():
    """8 tensors of 2·1·50·32 fp32 values = 8 · 12,800 B = 102,400 B = 100 KiB."""
    r = measurement()
    assert r.agree and not r.allocator_rounds_up
    from sim.words.cost import measured_agreement, measured_caption

    assert measured_agreement(r, PSEUDO) == "kvmem.r.meas.agree(b=102,400, readable=100 KiB)"
    assert measured_caption(r, PSEUDO) == (
        "kvmem.r.meas.caption(device=cpu, dtype=FP32, p=4, shape=(2, 1, 50, 32), weights=trained checkpoint)")
    gpu = measurement(device="cuda:0", dtype="bf16", measured_bytes=51_200, opcount_bytes=51_200,
                      calculator_bytes=51_200, cuda_allocated_delta=8 * 6656, cuda_expected=8 * 6656)
    assert gpu.agree and gpu.allocator_rounds_up  # 6,400 B per tensor rounds up to 13 · 512 = 6,656 B
    assert "dtype=BF16, p=2," in measured_caption(gpu, PSEUDO)
    assert not measurement(calculator_bytes=1).agree


def test_engine_takeaway_worded_both_ways():
    from dataclasses import replace

    from sim.cost.kv_engine import KVEngineConfig, engine_allocation
    from sim.words.cost import engine_caption, engine_takeaway, groups_caption

    cfg = MemoryConfig(P["gpt-oss-20b"], context=32768)
    kv, alloc = kv_memory(cfg), engine_allocation(cfg, KVEngineConfig())
    # 1,010,171,904 / 808,452,096 = 1.25; the sliding layers reserve 521 blocks instead of 128 tokens
    assert engine_takeaway(kv, alloc, "gpt-oss-20b", PSEUDO) == (
        "kvmem.r.eng.more(head=kvmem.r.eng.head(name=gpt-oss-20b, s=32,768), vllm=vLLM v0.24.0, e=963.4 MiB, times=1.25×, "
        "f=771 MiB, label=kvmem.r.group.sliding(w=128), gap=192.4 MiB)")
    exact = MemoryConfig(P["llama-3.1-8b"], context=32768)  # 32,768 tokens = 2,048 whole blocks
    assert engine_takeaway(kv_memory(exact), engine_allocation(exact), "Llama 3.1 8B", PSEUDO) == (
        "kvmem.r.eng.exact(head=kvmem.r.eng.head(name=Llama 3.1 8B, s=32,768), vllm=vLLM v0.24.0, f=4 GiB)")
    fewer = replace(alloc, block_bytes=alloc.block_bytes // 2)  # a cheaper engine, to word the other way
    assert engine_takeaway(kv, fewer, "x", PSEUDO).startswith(
        "kvmem.r.eng.less(head=kvmem.r.eng.head(name=x, s=32,768), vllm=vLLM v0.24.0, e=481.7 MiB, f=771 MiB, "
        "label=kvmem.r.group.full,")
    assert engine_caption(kv, alloc, PSEUDO).startswith(
        "kvmem.r.ecap.hybrid(n=2, slots=12, page=32,768, bs=16, block=393,216, parts=kvmem.r.ecap.part(n=1, "
        "spec=kvmem.r.spec.full, groups=kvmem.r.ecap.groups.one, blocks=kvmem.r.n.block.other(n=2,048)) + "
        "kvmem.r.ecap.part(n=1, spec=kvmem.r.spec.sliding, groups=kvmem.r.ecap.groups.one, "
        "blocks=kvmem.r.n.block.other(n=521)), blocks=2,569)kvmem.r.ecap.local(spec=kvmem.r.spec.sliding, tokens=8,319, "
        "w=128,")
    assert groups_caption(kv, PSEUDO) == (
        "kvmem.r.gcap.top(s=32,768, label=kvmem.r.group.full, share=99.6%, per=771 MiB)"
        "kvmem.r.gcap.fixed(parts=kvmem.r.gcap.part(label=kvmem.r.group.sliding(w=128), b=3 MiB))")
    assert groups_caption(kv_memory(exact), PSEUDO) == "kvmem.r.gcap.one(per=4 GiB, s=32,768)"


def test_engine_metrics_count_both_ways():
    from sim.cost.kv_engine import engine_allocation
    from sim.words.cost import engine_metrics

    cfg = MemoryConfig(P["gpt-oss-20b"], context=32768)
    m = {x.label: x for x in engine_metrics(kv_memory(cfg), engine_allocation(cfg), 40 * (1 << 30))}
    # 42,949,672,960 // 808,452,096 = 53; (42,949,672,960 // 393,216) // 2,569 = 109,226 // 2,569 = 42
    assert (m["Max requests (formula)"].value, m["Max requests (vLLM blocks)"].value) == ("53", "42")
    assert m["Max requests (vLLM blocks)"].delta == "42.52× concurrency"
    assert m["vLLM reserves, per request"].delta == "1.25× the formula"


def test_measurement_table_counts_are_message_values_worded_in_either_language():
    from sim.cost.memory import measurement_rows
    from sim.msg import Msg
    from sim.words.cost import measurement_frame

    r = measurement()
    assert [row["Count"] for row in measurement_rows(r)] == [
        Msg("kvmem.r.meas.measured", n=8), Msg("kvf.meas.formula", layers=4, h=1, d=32, p=4, b=2, s=50),
        Msg("kvmem.r.meas.calculator")]
    assert measurement_frame(r, PSEUDO).iloc[:, 0].tolist()[:2] == [
        "kvmem.r.meas.measured(n=8)", "kvf.meas.formula(layers=4, h=1, d=32, p=4, b=2, s=50)"]
    ko = measurement_frame(r, "ko")
    assert ko.iloc[:, 0].tolist()[:2] == [text("ko", "kvmem.r.meas.measured", n=8),
                                          text("ko", "kvf.meas.formula", layers=4, h=1, d=32, p=4, b=2, s=50)]
    assert ko.iloc[:, 1].tolist() == [102_400] * 3
