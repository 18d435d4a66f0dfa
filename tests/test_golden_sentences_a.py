"""The golden examples: a few chart titles and captions rendered in full, in English and in Korean.

Every other test of these sentences (tests/test_takeaways_*.py, tests/test_chart_takeaways.py) pins which message
was chosen and with which numbers in the keys pseudo-language, so a copy edit in either catalog updates these
sentences, and only these. Each pair here is the same call worded in both languages: the numbers must read the same
in both, and the Korean must be the Korean catalog's own sentence, not a translation of the English one."""

from sim.attention.maps import CacheValidity
from sim.words import attention as kernels_words
from sim.words import engine_readouts as er
from sim.words import prefix as prefix_words
from sim.words import quant as qr
from sim.words import serving_readouts as ro
from sim.words.capacity import fit_takeaway
from sim.words.cost import grid_takeaway
from sim.words.decode import per_step_takeaway
from sim.words.maps import append_caption, append_takeaway
from sim.words.masks import mask_name, mask_takeaway
from tests.test_chart_takeaways import _capacity
from tests.test_takeaways_generation import CACHED, NAIVE, tril, validity
from tests.test_takeaways_memory import CFG, GRID, GiB
from tests.test_takeaways_quant_kernels import KIVI, timing
from tests.test_takeaways_quant_kernels import NAIVE as NAIVE_TOKEN


def test_quant_and_kernel_takeaways_in_both_languages():
    assert qr.position_takeaway(KIVI, NAIVE_TOKEN, "kl") == (
        "INT4 KIVI's KL averages 1.00e-03 nats per prediction over 4 positions, 20× below naive per-token's 2.00e-02")
    assert qr.position_takeaway(KIVI, NAIVE_TOKEN, "kl", lang="ko") == (
        "위치 4개에 걸쳐 INT4 KIVI의 예측당 평균 KL은 1.00e-03 nats로, 단순 토큰별의 2.00e-02보다 20× 낮다")
    assert kernels_words.timing_takeaway(timing(1024, 3.1, 1.0)) == (
        "FLASH ran 3.1× faster than eager at N = 1,024 on this CPU: 1 vs 3.1 ms per call (median); eager's peak "
        "memory, 4 MiB, was 4.0× FLASH's")
    assert kernels_words.timing_takeaway(timing(1024, 3.1, 1.0), lang="ko") == (
        "이 CPU의 N = 1,024에서 FLASH는 eager보다 3.1× 빨랐다: 호출당 1 대 3.1 ms (중앙값). eager의 최대 메모리 4 MiB는 "
        "FLASH의 4.0×였다")


def test_decode_and_mask_takeaways_in_both_languages():
    assert per_step_takeaway(NAIVE, CACHED) == (
        "At step 2, a naive step did 3.2× the FLOPs of a cached one: 162 kFLOP vs 51 kFLOP")  # 162/51 = 3.18
    assert mask_takeaway(tril(6), mask_name("causal", 2, 3)) == (
        "The causal mask lets 21 of 36 query–key pairs attend (58.3%): each query sees itself and every key "
        "before it, none after")


def test_append_words_in_korean_are_golden():
    """sim/words/maps.py: the Korean caption and title, the numbers from the CacheValidity they describe."""
    assert append_caption(validity(3, 0.0, 0.0), validity(3, 1.5, 0.25), lang="ko") == (
        "앞의 토큰 3개를 프리필한 뒤 4개 전체를 프리필하면, 인과 마스크가 있을 때 덧붙인 토큰은 앞선 어느 질의에도 보이지 "
        "않는다. 그래서 모든 층의 위치 0..2의 K와 V가 비트 단위로 똑같다. 캐시해 둔 K/V가 그대로 맞는 이유다. 마스크가 "
        "없으면 앞선 토큰마다 새 토큰을 보게 되어 K와 V가 최대 1.5까지 바뀌고, 캐시한 것을 모두 다시 계산해야 한다.")
    with_mask, without = CacheValidity(3, 0, 0, 0, [0.0, 0.0, 0.0]), CacheValidity(3, 0, 0, 0, [0.5, 3.214, 0.0])
    assert append_takeaway(with_mask, without, lang="ko") == (
        "토큰 하나를 덧붙여도 인과 마스크가 있으면 앞선 모든 위치의 로짓이 정확히 그대로다. 마스크가 없으면 앞선 위치 "
        "3곳 중 2곳의 로짓이 최대 3.21까지 바뀐다")


def test_kv_memory_takeaway_in_both_languages():
    assert grid_takeaway(GRID, CFG, 57 * GiB, "Llama 3.1 8B") == (
        "Llama 3.1 8B, FP16 cache: everything shown fits, up to 2 requests of 2,048 tokens (4 GiB) in the 57 GiB "
        "left for KV")
    assert grid_takeaway(GRID, CFG, 57 * GiB, "Llama 3.1 8B", lang="ko") == (
        "Llama 3.1 8B, FP16 캐시: 보이는 것이 모두 들어간다, 2,048토큰 요청 2개(4 GiB)까지 KV에 남은 57 GiB에 들어간다")


def test_serving_takeaway_in_both_languages():
    assert ro.latency_takeaway((53.55, 110.52), (6.23, 14.94)) == (
        "Continuous batching's end-to-end latency is 8.60× lower at p50 (6.23 s vs 53.55 s) and 7.40× lower at p99 "
        "(14.94 s vs 110.52 s)")
    assert ro.latency_takeaway((53.55, 110.52), (6.23, 14.94), lang="ko") == (
        "연속 배치의 종단 간 지연 시간: p50에서 8.60× 낮음(6.23 s 대 53.55 s), p99에서 7.40× 낮음(14.94 s 대 110.52 s)")


def test_prefix_takeaway_in_both_languages():
    assert prefix_words.change_takeaway(72, "7", "8", 16, 4, 9) == (
        "Byte 72 changed (7 → 8, block 4): blocks 0–3 of B stay hits (64 tokens), blocks 4–8 must be recomputed")
    assert prefix_words.change_takeaway(72, "7", "8", 16, 4, 9, lang="ko") == (
        "바이트 72 변경 (7 → 8, 블록 4): B의 블록 0–3 적중 유지(토큰 64개), 블록 4–8 다시 계산 필요")


def test_engine_takeaway_in_both_languages():
    assert er.chunk_takeaway(256, 6.64, 123.4, 2.135, 0.578) == (
        "Chunks of 256 tokens: p99 inter-token latency cut from 123.4 ms to 6.6 ms, median time to first token "
        "raised from 0.58 s to 2.13 s (vs whole prompts)")
    assert er.chunk_takeaway(256, 6.64, 123.4, 2.135, 0.578, lang="ko") == (
        "256토큰 청크: p99 토큰 간 지연 시간 123.4 ms에서 6.6 ms로 줄어듦, 첫 토큰까지 시간의 중앙값 0.58 s에서 2.13 s로 "
        "늘어남 (프롬프트 통째로 대비)")


def test_capacity_takeaway_in_both_languages():
    assert fit_takeaway(_capacity(16, 4), "H100 SXM") == (
        "Fits: 16 GiB of weights + 4 GiB of KV within the 72 GiB usable on H100 SXM, 52 GiB to spare")
    assert fit_takeaway(_capacity(16, 4), "H100 SXM", lang="ko") == (
        "들어간다: 가중치 16 GiB + KV 4 GiB가 H100 SXM에서 쓸 수 있는 72 GiB 안에 들고, 52 GiB가 남는다")
