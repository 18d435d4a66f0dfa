"""Every KV-size figure seeds 000, 001, 002 and 004 state, recomputed with the KV memory calculator."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.arch import ArchPreset, attention_variants, with_mla
from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import GpuPreset
from sim.cost.memory import MemoryConfig, fmt_both, fmt_bytes, fmt_decimal, kv_memory, token_layer_bytes, weight_bytes
from sim.cost.vllm_rules import version_label
from sim.words import text


def _claim(seed: str, statement: str, original: str, claimed: str, computed: str, verdict: Verdict, why: str,
           value: int | None = None) -> Claim:
    """In the order the seed is read: what it says, in English and in its own words; then ours."""
    return Claim(statement, seed, claimed, computed, verdict, why, original, value)


def _share_of_gpu(nbytes: int, gpu: GpuPreset, lang: str = "en") -> str:
    """'more than an L4's 24 GiB' or '67% of an L4's 24 GiB', from the numbers."""
    short = gpu.name.removeprefix("NVIDIA ").split(" ")[0]
    held = text(lang, "kvmem.c.held", gpu=short, mem=fmt_bytes(gpu.memory_bytes))
    if lang == "en":  # English puts an article before the GPU's name: 'an L4', 'a T4'
        held = f"{'an' if short[:1] in 'AEFHILMNORSX' else 'a'} {held}"
    if nbytes > gpu.memory_bytes:
        return text(lang, "kvmem.c.more_than", held=held)
    return text(lang, "kvmem.c.share_of", share=f"{nbytes / gpu.memory_bytes:.0%}", held=held)


def seed_claims(presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset], lang: str = "en") -> tuple[Claim, ...]:
    """Every KV-size figure seeds 000, 001, 002 and 004 state, recomputed with this module. The statement is the
    English translation in every language; what the seed claims, what we compute and why are worded in `lang`."""

    def say(key: str, **fields: object) -> str:
        return text(lang, f"kvmem.c.{key}", **fields)

    l70, l8, l7 = presets["llama-3.1-70b"], presets["llama-3.1-8b"], presets["llama-2-7b"]
    falcon, ds3 = presets["falcon-7b"], presets["deepseek-v3"]
    h100 = gpus["h100-sxm"]

    def kv(arch, context, batch=1, dtype="fp16", **kw) -> int:
        return kv_memory(MemoryConfig(arch, batch=batch, context=context, kv_dtype=dtype, **kw)).total_bytes

    def per_token(arch, dtype="fp16") -> int:
        return kv_memory(MemoryConfig(arch, context=1, kv_dtype=dtype)).bytes_per_token

    t70, t8, t7 = per_token(l70), per_token(l8), per_token(l7)
    c = []
    c.append(_claim(
        "000", "Total bytes = 2 (K, V) × layers × KV heads × sequence length × head dim × bytes per element",
        "총 바이트는 2(K·V) × 층 수 × KV 헤드 수 × 시퀀스 길이 × 헤드 차원 × 원소당 바이트",
        say("formula.claimed"), say("formula.computed"), Verdict.RIGHT, say("formula.why")))
    b = kv(l70, 4000)
    c.append(_claim(
        "000", "Llama 3 70B in half precision: about 2.5 GB of cache at a 4,000-token context",
        "Llama 3 70B를 반정밀도로 쓰면 4,000 토큰 문맥에 약 2.5GB", "≈ 2.5 GB", fmt_both(b), Verdict.WRONG,
        say("l70_4k.why", per=fmt_bytes(t70), b=fmt_decimal(b), tokens=f"{round(2.5e9 / t70, -2):,.0f}",
            fp32=fmt_decimal(kv(l70, 4000, dtype="fp32"))), b))
    b = kv(l70, 32000)
    c.append(_claim(
        "000", "… and about 20 GB per user at 32,000 tokens",
        "32,000 토큰이면 사용자당 무려 20GB", "≈ 20 GB", fmt_both(b), Verdict.WRONG,
        say("l70_32k.why", b=fmt_decimal(b)), b))
    b = kv(l70, 131072)
    over_20gb = -(-20 * 10**9 // t70)
    c.append(_claim(
        "000", "The cache reaches tens of GB per user",
        "캐시 자체가 사용자당 수십 GB에 이르는", say("tens.claimed"), say("tens.computed", b=fmt_both(b)),
        Verdict.AMBIGUOUS, say("tens.why", n=f"{over_20gb:,}"), b))

    b = per_token(l8)
    c.append(_claim(
        "001", "8B model (32 layers, 8 KV heads, head dim 128, FP16): 2×32×8×128×2 = 131,072 B = 128 KiB per token",
        "2 \\times 32 \\times 8 \\times 128 \\times 2 = 131{,}072 \\ \\text{바이트} = 128 \\ \\text{KiB}", "128 KiB", fmt_both(b), Verdict.RIGHT,
        say("l8_token.why"), b))
    b = kv(l8, 32768)
    c.append(_claim(
        "001", "A 32k context takes 4 GiB per request", "문맥 32k를 열면 요청 하나당 4 GiB", "4 GiB", fmt_both(b), Verdict.RIGHT,
        say("l8_32k.why"), b))
    b = kv(l8, 32768, batch=16)
    c.append(_claim(
        "001", "16 concurrent requests take 64 GiB", "동시 요청 16건이면 64 GiB", "64 GiB", fmt_both(b), Verdict.RIGHT,
        "4 GiB × 16.", b))
    w = weight_bytes(l8, "fp16")
    cap_full = capacity(MemoryConfig(l8, batch=16, context=32768), GpuConfig(h100, utilization=1.0, weight_dtype="fp16"))
    cap_09 = capacity(MemoryConfig(l8, batch=16, context=32768), GpuConfig(h100, utilization=0.9, weight_dtype="fp16"))
    c.append(_claim(
        "001", "Add 16 GiB of FP16 weights and an 80 GiB GPU is exactly full",
        "FP16 가중치 16 GiB를 더하면 80 GiB짜리 GPU가 정확히 꽉 찬다", "64 + 16 = 80 GiB",
        say("full.computed", w=fmt_both(w), total=fmt_bytes(w + b)), Verdict.CLOSE,
        say("full.why", at09=cap_09.max_requests, at10=cap_full.max_requests, vllm=version_label()), w + b))
    int8_grouped = kv(l8, 32768, batch=16, dtype="int8")
    fp8 = kv(l8, 32768, batch=16, dtype="fp8")
    g_fp16 = GpuConfig(h100, utilization=1.0, weight_dtype="fp16")
    r16 = capacity(MemoryConfig(l8, context=32768), g_fp16).max_requests
    r8 = capacity(MemoryConfig(l8, context=32768, kv_dtype="fp8"), g_fp16).max_requests
    r8g = capacity(MemoryConfig(l8, context=32768, kv_dtype="int8"), g_fp16).max_requests
    c.append(_claim(
        "001", "Switch the KV cache to INT8: 32 GiB freed at once, and twice the concurrent requests",
        "KV 캐시를 INT8로 바꾸면 그 자리에서 32 GiB가 비고 동시 요청을 두 배로", say("int8.claimed"),
        say("int8.computed", fp8=fmt_bytes(fp8), freed=fmt_bytes(b - fp8), r8=r8, r16=r16,
            int8=fmt_bytes(int8_grouped), r8g=r8g), Verdict.RIGHT, say("int8.why"), fp8))

    c.append(_claim(
        "002", "bytes_per_token_per_layer = 2 * d_head * dtype_size",
        "bytes_per_token_per_layer = 2 * d_head * dtype_size",
        "2 × d_head × dtype_size", say("name.computed"), Verdict.AMBIGUOUS, say("name.why")))
    b = token_layer_bytes(l7)
    c.append(_claim(
        "002", "7B model (32 layers, 32 heads, d_head 128, fp16): per token per layer = 2·128·2 = 512 bytes",
        "per token per layer = 2 * 128 * 2 = 512 bytes", "512 B", fmt_both(b), Verdict.WRONG,
        say("l7_layer.why"), b))
    c.append(_claim(
        "002", "… per token (32 layers) = 16 KB", "per token (32 layers) = 16 KB", "16 KB", fmt_both(t7), Verdict.WRONG,
        say("l7_token.why"), t7))
    b = kv(l7, 32768)
    c.append(_claim(
        "002", "… per 32K context = 512 MB", "per 32K context = 512 MB", "512 MB", fmt_both(b), Verdict.WRONG,
        say("l7_32k.why", b=fmt_bytes(b), share=_share_of_gpu(b, gpus["l4"], lang)), b))
    b = token_layer_bytes(l70)
    c.append(_claim(
        "002", "Llama 3 70B (80 layers, GQA with 8 KV heads, d_head 128): per token per layer = 2·8·128·2 = 4,096 B",
        "per token per layer = 2 * 8 * 128 * 2 = 4096 bytes (4 KB)", "4,096 B", fmt_both(b), Verdict.RIGHT,
        say("l70_layer.why"), b))
    b = kv(l70, 32768)
    c.append(_claim(
        "002", "… per 32K context = 10.4 GB", "per 32K context = 10.4 GB", "10.4 GB", fmt_both(b), Verdict.CLOSE,
        say("l70_32k_002.why", b=fmt_decimal(b), b32000=fmt_decimal(kv(l70, 32000))), b))
    b = kv(l70, 131072)
    a100 = gpus["a100-40gb"]
    c.append(_claim(
        "002", "So Llama 3 70B at 128K context takes a large part of a 40 GB A100 at batch size 1, with KV cache alone",
        "배치 크기(batch size) 1에서도 40 GB짜리 A100의 상당 부분을 KV 캐시만으로 차지", say("a100.claimed"),
        say("a100.computed", b=fmt_both(b), share=f"{b / a100.memory_bytes:.0%}"), Verdict.UNDERSTATED,
        say("a100.why", w=fmt_decimal(weight_bytes(l70, "bf16"))), b))
    mha70 = attention_variants(l70)["MHA"]
    b = kv(mha70, 32768)
    c.append(_claim(
        "002", "With standard 64-head MHA it would need 32 GB (at 32K)", "64 헤드짜리 표준 다중 헤드 어텐션(Multi-Head Attention; MHA)이었다면 32 GB가 필요",
        "32 GB", fmt_both(b), Verdict.WRONG,
        say("mha70.why", b=fmt_bytes(b)), b))
    mla70 = with_mla(l70)
    b = kv(mla70, 32768)
    c.append(_claim(
        "002", "MLA compresses it further", "잠재(Multi-head Latent) 어텐션(MLA)은 이를 더 압축",
        say("mla.claimed"), say("mla.computed", b=fmt_both(b), ds3=fmt_bytes(kv(ds3, 32768))), Verdict.RIGHT,
        say("mla.why", x=f"{kv(l70, 32768) / b:.1f}"), b))

    mha_falcon = attention_variants(falcon)["MHA"]
    b, m = per_token(falcon), per_token(mha_falcon)
    c.append(_claim(
        "004", "MQA: K and V get one head each, shared by every query head; the cache shrinks by 1/h",
        "KV Cache 용량이 기존 대비 $\\frac{1}{h}$만큼 감소", "−1/h",
        say("mqa.computed", b=fmt_bytes(b), m=fmt_bytes(m)), Verdict.AMBIGUOUS, say("mqa.why"), b))
    mha8 = attention_variants(l8)["MHA"]
    c.append(_claim(
        "004", "GQA: groups of query heads share one K/V head; much smaller cache, close to MHA quality",
        "KV Cache 용량을 크게 줄이면서도", say("gqa.claimed"),
        say("gqa.computed", b=fmt_bytes(t8), m=fmt_bytes(per_token(mha8))), Verdict.RIGHT, say("gqa.why"), t8))
    return tuple(c)
