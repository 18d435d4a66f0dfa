"""The prefix-hit staircase's words, now in sim/words/engine.py: golden sentences in both languages, their numbers
computed from the PrefixHit they describe (vLLM's rule: ⌊(N − 1) / B⌋ · B tokens hit)."""

from __future__ import annotations

from sim.cost.kv_engine import KVEngineConfig
from sim.cost.memory import MemoryConfig
from sim.cost.prefix_hit import prefix_hit
from sim.cost.presets import load_presets
from sim.cost.vllm_rules import version_label
from sim.words.catalog import PSEUDO
from sim.words.engine import hit_advice, hit_metrics, staircase_title

P = load_presets()


def test_advice_golden_sentences_in_both_languages():
    hit = prefix_hit(MemoryConfig(P["llama-3.1-8b"]), KVEngineConfig(), 100)
    assert (hit.hit_tokens, hit.block_size, hit.next_step) == (96, 16, 113)  # ⌊99 / 16⌋ · 16; 7 · 16 + 1
    v = version_label()
    assert hit_advice(hit, lang=PSEUDO) == f"engine.hit.some(n=100, hit=96, rate=96.0%, re=4, bs=16, vllm={v}, next=113, more=13)"
    assert hit_advice(hit, "ko") == (f"100토큰 프롬프트를 두 번 보내면 96토큰을 캐시에서 가져오고(96.0%) 4토큰을 계산한다: "
                                     f"{v}에서 적중은 16토큰 블록 단위로 오므로, 다음 16토큰은 113토큰(13토큰 더)에서 적중한다.")


def test_a_hybrid_that_never_hits_says_why_in_both_languages():
    hit = prefix_hit(MemoryConfig(P["qwen3-next-80b-a3b"]), KVEngineConfig(), 300)
    assert hit.hit_tokens == 0 and hit.block_size == 544 and hit.state_aligned
    en, ko = hit_advice(hit, PSEUDO), hit_advice(hit, "ko")
    assert en.startswith("engine.hit.never(n=300, vllm=") and "min=545)" in en
    assert en.endswith(")engine.hit.aligned(bs=544, asked=16)")
    assert ko.startswith("300토큰 프롬프트를 두 번 보내도 적중은 0이다") and "545토큰" in ko


def test_metrics_and_title_carry_the_hit_numbers():
    hit = prefix_hit(MemoryConfig(P["qwen3-next-80b-a3b"]), KVEngineConfig(), 1200)
    assert hit.hit_tokens == 1088 == 2 * 544
    for lang in ("en", "ko"):
        ms = hit_metrics(hit, lang)
        assert "544" in ms[0].value and "545" in ms[1].value and "1,088" in ms[2].value
        assert ms[2].delta == "90.7%"  # 1,088 / 1,200
        assert "544" in staircase_title(hit, "Qwen3-Next", lang) and "90.7%" in staircase_title(hit, "Qwen3-Next", lang)
