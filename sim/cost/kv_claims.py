"""Every KV-size figure seeds 000, 001, 002 and 004 state, recomputed with the KV memory calculator."""

from __future__ import annotations

from sim.claims import Claim, Verdict
from sim.cost.arch import ArchPreset, attention_variants, with_mla
from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import GpuPreset
from sim.cost.memory import MemoryConfig, fmt_both, fmt_bytes, fmt_decimal, kv_memory, token_layer_bytes, weight_bytes


def _claim(seed: str, statement: str, original: str, claimed: str, computed: str, verdict: Verdict, why: str,
           value: int | None = None) -> Claim:
    """In the order the seed is read: what it says, in English and in its own words; then ours."""
    return Claim(statement, seed, claimed, computed, verdict, why, original, value)


def _share_of_gpu(nbytes: int, gpu: GpuPreset) -> str:
    """'more than an L4's 24 GiB' or '67% of an L4's 24 GiB', from the numbers."""
    short = gpu.name.removeprefix("NVIDIA ").split(" ")[0]
    article = "an" if short[:1] in "AEFHILMNORSX" else "a"
    held = f"{article} {short}'s {fmt_bytes(gpu.memory_bytes)}"
    return f"more than {held}" if nbytes > gpu.memory_bytes else f"{nbytes / gpu.memory_bytes:.0%} of {held} for one request"


def seed_claims(presets: dict[str, ArchPreset], gpus: dict[str, GpuPreset]) -> tuple[Claim, ...]:
    """Every KV-size figure seeds 000, 001, 002 and 004 state, recomputed with this module."""
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
        "the formula", "the same formula (this page's)", Verdict.RIGHT,
        "Right, for one request; multiply by the number of concurrent requests for a server."))
    b = kv(l70, 4000)
    c.append(_claim(
        "000", "Llama 3 70B in half precision: about 2.5 GB of cache at a 4,000-token context",
        "Llama 3 70B를 반정밀도로 쓰면 4,000 토큰 문맥에 약 2.5GB", "≈ 2.5 GB", fmt_both(b), Verdict.WRONG,
        f"Twice too high: {fmt_bytes(t70)} per token (80 layers × 8 KV heads × 128 × 2 × 2 B) × 4,000 = "
        f"{fmt_decimal(b)}. 2.5 GB would take ~{round(2.5e9 / t70, -2):,.0f} tokens, or fp32 "
        f"({fmt_decimal(kv(l70, 4000, dtype='fp32'))}).", b))
    b = kv(l70, 32000)
    c.append(_claim(
        "000", "… and about 20 GB per user at 32,000 tokens",
        "32,000 토큰이면 사용자당 무려 20GB", "≈ 20 GB", fmt_both(b), Verdict.WRONG,
        f"Twice too high again: {fmt_decimal(b)}. Seed 002 gets ~10.4 GB for the same model and length.", b))
    b = kv(l70, 131072)
    over_20gb = -(-20 * 10**9 // t70)
    c.append(_claim(
        "000", "The cache reaches tens of GB per user",
        "캐시 자체가 사용자당 수십 GB에 이르는", "tens of GB", f"{fmt_both(b)} at 131,072 tokens", Verdict.AMBIGUOUS,
        f"Only for long contexts: Llama 3 70B passes 20 GB at {over_20gb:,} tokens; at 4k it is ~1.3 GB.", b))

    b = per_token(l8)
    c.append(_claim(
        "001", "8B model (32 layers, 8 KV heads, head dim 128, FP16): 2×32×8×128×2 = 131,072 B = 128 KiB per token",
        "2 \\times 32 \\times 8 \\times 128 \\times 2 = 131{,}072 \\ \\text{바이트} = 128 \\ \\text{KiB}", "128 KiB", fmt_both(b), Verdict.RIGHT,
        "Exactly the formula for Llama 3.1 8B's shape.", b))
    b = kv(l8, 32768)
    c.append(_claim(
        "001", "A 32k context takes 4 GiB per request", "문맥 32k를 열면 요청 하나당 4 GiB", "4 GiB", fmt_both(b), Verdict.RIGHT,
        "With 32k = 32,768 tokens: 131,072 B × 32,768 = 2^32 B.", b))
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
        f"weights {fmt_both(w)}; with 64 GiB of KV: {fmt_bytes(w + b)} of 80 GiB", Verdict.CLOSE,
        f"The weights are 16 GB, not 16 GiB (8.03 B params × 2 B), so ~1 GiB is left. But a server never gets "
        f"all 80 GiB: at vLLM's default utilization of 0.9 only {cap_09.max_requests} of the 16 requests fit "
        f"({cap_full.max_requests} at 1.0).", w + b))
    int8_grouped = kv(l8, 32768, batch=16, dtype="int8")
    fp8 = kv(l8, 32768, batch=16, dtype="fp8")
    g_fp16 = GpuConfig(h100, utilization=1.0, weight_dtype="fp16")
    r16 = capacity(MemoryConfig(l8, context=32768), g_fp16).max_requests
    r8 = capacity(MemoryConfig(l8, context=32768, kv_dtype="fp8"), g_fp16).max_requests
    r8g = capacity(MemoryConfig(l8, context=32768, kv_dtype="int8"), g_fp16).max_requests
    c.append(_claim(
        "001", "Switch the KV cache to INT8: 32 GiB freed at once, and twice the concurrent requests",
        "KV 캐시를 INT8로 바꾸면 그 자리에서 32 GiB가 비고 동시 요청을 두 배로", "−32 GiB, ×2 requests",
        f"8-bit, one scale per tensor: {fmt_bytes(fp8)} (frees {fmt_bytes(b - fp8)}), {r8} vs {r16} requests on "
        f"80 GiB; INT8 with a scale + zero point per 128 values: {fmt_bytes(int8_grouped)}, {r8g} requests", Verdict.RIGHT,
        "Right for a per-tensor scale (FP8, or INT8 as vLLM does it); per-group scales cost ~3% more and one request.",
        fp8))

    c.append(_claim(
        "002", "bytes_per_token_per_layer = 2 * d_head * dtype_size",
        "bytes_per_token_per_layer = 2 * d_head * dtype_size",
        "2 × d_head × dtype_size", "per token per layer = 2 × H_kv × d_head × dtype_size", Verdict.AMBIGUOUS,
        "The text says 'per head' but the name says per token per layer; the examples that follow then drop H_kv."))
    b = token_layer_bytes(l7)
    c.append(_claim(
        "002", "7B model (32 layers, 32 heads, d_head 128, fp16): per token per layer = 2·128·2 = 512 bytes",
        "per token per layer = 2 * 128 * 2 = 512 bytes", "512 B", fmt_both(b), Verdict.WRONG,
        "Omits the 32 heads: 512 B is one head's K and V. Per layer it is 2 × 32 × 128 × 2 = 16 KiB.", b))
    c.append(_claim(
        "002", "… per token (32 layers) = 16 KB", "per token (32 layers) = 16 KB", "16 KB", fmt_both(t7), Verdict.WRONG,
        "32× too small (the heads again): 16 KiB is one layer's share. Llama 2 7B stores 512 KiB per token.", t7))
    b = kv(l7, 32768)
    c.append(_claim(
        "002", "… per 32K context = 512 MB", "per 32K context = 512 MB", "512 MB", fmt_both(b), Verdict.WRONG,
        f"32× too small: a 32K context of a 32-head MHA 7B model is {fmt_bytes(b)}, "
        + _share_of_gpu(b, gpus["l4"]) + ".", b))
    b = token_layer_bytes(l70)
    c.append(_claim(
        "002", "Llama 3 70B (80 layers, GQA with 8 KV heads, d_head 128): per token per layer = 2·8·128·2 = 4,096 B",
        "per token per layer = 2 * 8 * 128 * 2 = 4096 bytes (4 KB)", "4,096 B", fmt_both(b), Verdict.RIGHT,
        "Right, and here the KV heads are counted.", b))
    b = kv(l70, 32768)
    c.append(_claim(
        "002", "… per 32K context = 10.4 GB", "per 32K context = 10.4 GB", "10.4 GB", fmt_both(b), Verdict.CLOSE,
        f"3% low: 32,768 tokens make {fmt_decimal(b)}, exactly 10 GiB ({fmt_decimal(kv(l70, 32000))} for 32,000).", b))
    b = kv(l70, 131072)
    a100 = gpus["a100-40gb"]
    c.append(_claim(
        "002", "So Llama 3 70B at 128K context takes a large part of a 40 GB A100 at batch size 1, with KV cache alone",
        "배치 크기(batch size) 1에서도 40 GB짜리 A100의 상당 부분을 KV 캐시만으로 차지", "a large part of 40 GB",
        f"{fmt_both(b)} = {b / a100.memory_bytes:.0%} of the A100 40GB", Verdict.UNDERSTATED,
        f"It is all of it — and the {fmt_decimal(weight_bytes(l70, 'bf16'))} of bf16 weights need at least two "
        "80 GB GPUs anyway.", b))
    mha70 = attention_variants(l70)["MHA"]
    b = kv(mha70, 32768)
    c.append(_claim(
        "002", "With standard 64-head MHA it would need 32 GB (at 32K)", "64 헤드짜리 표준 다중 헤드 어텐션(Multi-Head Attention; MHA)이었다면 32 GB가 필요",
        "32 GB", fmt_both(b), Verdict.WRONG,
        f"MHA keeps 64 K/V heads instead of 8: 8× the GQA cache, {fmt_bytes(b)}. 32 KiB is MHA's per-token, "
        "per-layer size; 32 GB matches nothing.", b))
    mla70 = with_mla(l70)
    b = kv(mla70, 32768)
    c.append(_claim(
        "002", "MLA compresses it further", "잠재(Multi-head Latent) 어텐션(MLA)은 이를 더 압축",
        "smaller than GQA",
        f"Llama 3 70B's shape with DeepSeek-V2's MLA sizes (512 + 64 per layer): {fmt_both(b)}; DeepSeek-V3 itself "
        f"(61 layers): {fmt_bytes(kv(ds3, 32768))} at 32K", Verdict.RIGHT,
        f"{kv(l70, 32768) / b:.1f}× below GQA: one 576-value latent per layer instead of 8 heads × 128 × 2.", b))

    mha_falcon = attention_variants(falcon)["MHA"]
    b, m = per_token(falcon), per_token(mha_falcon)
    c.append(_claim(
        "004", "MQA: K and V get one head each, shared by every query head; the cache shrinks by 1/h",
        "KV Cache 용량이 기존 대비 $\\frac{1}{h}$만큼 감소", "−1/h",
        f"Falcon 7B (h = 71): {fmt_bytes(b)} per token vs {fmt_bytes(m)} as MHA", Verdict.AMBIGUOUS,
        "'Decreases by 1/h' reads as losing 1/h of it; the cache becomes 1/h of MHA's (it loses (h−1)/h).", b))
    mha8 = attention_variants(l8)["MHA"]
    c.append(_claim(
        "004", "GQA: groups of query heads share one K/V head; much smaller cache, close to MHA quality",
        "KV Cache 용량을 크게 줄이면서도", "much smaller than MHA",
        f"Llama 3.1 8B (8 of 32 heads): {fmt_bytes(t8)} per token vs {fmt_bytes(per_token(mha8))} as MHA",
        Verdict.RIGHT, "The cache scales with H_kv: it is H_kv / H = 1/4 of MHA's here.", t8))
    return tuple(c)
