"""The golden examples: a few sentences per language pinned whole, as a reader sees them (issue 35).

The other tests pin which message a function chose and with which numbers (the "keys" pseudo-language,
sim.words.catalog.PSEUDO), so a copy edit in assets/i18n/ breaks none of them; it updates these, and only these.
Each test names the file whose asserts it was moved from."""

from types import SimpleNamespace

import numpy as np

from sim.alloc import prefix_sweeps as ps
from sim.lesson import quiz
from sim.model import prefix_run as pr
from sim.model import speculative as spm
from sim.serving import speculative as sps
from sim.words import lesson as lesson_words
from sim.words import prefix as ro
from sim.words import prefix_run as prw
from sim.words import say, serving_claims
from sim.words.spec_run import spec_cost_summary

# --- from tests/test_prefix_readouts.py ----------------------------------------------------------

def test_prefix_readouts_golden():
    both = {"fixed_first": ps.LayoutRun(SimpleNamespace(hit_rate=0.861), ""),
            "variable_first": ps.LayoutRun(SimpleNamespace(hit_rate=0.0), "")}
    assert ro.layout_sentence("rag", both) == (
        "**RAG: documents + question**: with the repeated content first, **86.1%** of prompt tokens are served from "
        "the cache; moving what changes to the top drops it to **0.0%** — every block after the first difference "
        "has a new hash.")
    k = np.array([[0, 0, 0.5, 0], [0, 0, 1, 1], [0, 0, 1, 2]])
    v = np.array([[0, 0, 0.1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    kc = pr.KVChange(ids=[65, 66, 67, 68], changed_ids=[65, 66, 99, 68], position=2, k_diff=k, v_diff=v, k_scale=np.ones(3))
    assert prw.kv_chart_title(kc) == ("Changing byte 2 (C → c): positions 0–1 stay exactly unchanged in all 3 layers; of the 2 "
                                      "positions from 2 on, layer 0 changes 1 and layers 1–2 change all 2")
    assert say("ko", ps.demo_prompt_problem([1] * 401, 400)) == \
        "프롬프트 A가 401바이트다. 2..400바이트여야 한다(바이트 하나가 토큰 하나)."


# --- from tests/test_lesson.py -------------------------------------------------------------------

def test_lesson_golden():
    assert lesson_words.share_claim(0.98, 0.2, 30.0, 7.5) == (
        "Paged blocks keep 98.0% of the memory they claim for real tokens, against 20.0% when each request reserves "
        "its maximum length, so the number of requests running at once averages 30.0 instead of 7.5.")
    assert say("en", quiz.kib_per_token("llama-3.1-8b", "bf16").reveal()) == (
        "The answer is 128 KiB. 2 (K and V) × 32 layers × 8 K/V heads × 128 values × 2 B = 131,072 B = 128 KiB per token.")
    assert lesson_words.growing_title(4096, 29 * 4096, 1, lang="ko") == "캐시는 토큰마다 4 KiB씩 자란다: 단계 1 뒤 116 KiB"


# --- from tests/test_serving_speculative.py ------------------------------------------------------

def test_serving_speculative_golden():
    run = spm.SpecRun(k=4, prompt_ids=[1], new_ids=[5, 6], target_ids=[5, 6], accepted=[4], spec_s=0.1, target_s=0.16, draft_step_s=0.0055, target_step_s=0.01, verify_s=0.011, target_layers=4, draft_layers=2)
    assert spec_cost_summary(run) == (
        "A draft with 2 of the target's 4 layers costs c = 0.55 of a target step, close to the layer ratio 0.50. "
        "The 5-token verify pass costs 1.10 one-token steps: about one, as the formula assumes. Speculation paid off "
        "here (1.60×); it pays most when the target is large and memory-bound, as in the curves above.")


# --- from tests/test_serving_claims.py -----------------------------------------------------------

def test_serving_claims_golden():
    model = serving_claims.draft_model_claim(sps.spec_timing("llama-3.1-70b", "llama-3.1-8b", "h100-sxm"))
    assert model.why == ("Within the range for α of 0.8–0.9 with a draft 9× cheaper (c = 0.115); below 2× at α = 0.6; "
                         "4× is not reached even at α = 0.9 (3.21×).")


# --- from tests/test_kv_readouts.py --------------------------------------------------------------

def test_kv_readouts_golden():
    from sim.cost.kv_engine import KVEngineConfig, engine_allocation
    from sim.cost.memory import MemoryConfig, kv_memory
    from sim.cost.presets import load_presets
    from sim.words.cost import engine_takeaway, measurement_frame
    from tests.test_kv_readouts import measurement

    cfg = MemoryConfig(load_presets()["gpt-oss-20b"], context=32768)
    assert engine_takeaway(kv_memory(cfg), engine_allocation(cfg, KVEngineConfig()), "gpt-oss-20b") == (
        "gpt-oss-20b at 32,768 tokens: vLLM v0.24.0 reserves 963.4 MiB per request, 1.25× the formula's 771 MiB; the sliding "
        "window W = 128 layers take most of the 192.4 MiB extra")
    assert measurement_frame(measurement(), "ko").iloc[:, 0].tolist()[:2] == [
        "잰 값: 채운 K·V 텐서 8개에 걸친 numel × element_size",
        "공식 2·L·H_kv·d_h·p·B·S = 2·4·1·32·4·2·50 (sim/cost/opcount.py)"]


# --- from tests/test_shrink_cache.py -------------------------------------------------------------

def test_shrink_cache_golden():
    from sim.cost.shrink import CopyAbility, Score
    from sim.words.shrink_table import copy_ability_sentence, verdict

    blur = Score("INT4 KIVI", "INT4 KIVI", "blur", 0.39, 1.0, 0.9, 1.0)
    evict = Score("H2O @ 50%", "H2O @ 50%", "discard", 0.5, 1.0, 0.2, 1.0)
    window = Score("window @ 12.5%", "window @ 12.5%", "discard", 0.125, 1.0, 0.0, 1.0)
    assert verdict([blur, evict, window], 0.95) == (
        "Discarding hurt the exact quote more than blurring at about equal bytes, as the lecture says (the full cache "
        "quotes 95.0%): INT4 KIVI (39% of the bytes) quotes 90.0%, the best discarding cache near its bytes (H2O @ "
        "50%, 50%) 20.0%.")
    shipped = CopyAbility("Shipped", 6, 128, 0, 50)
    trained = CopyAbility.from_report("Copier", {"exact_quote": {"num_prefix": 64, "max_bytes": 128},
                                                 "multi_turn": {"num_prefix": 25, "max_bytes": 50}})
    assert copy_ability_sentence([shipped, trained]) == (
        "With the full cache, Shipped quotes 6 of 128 (5%) bytes of the passages and recalls 0 of 50 (0%) bytes of "
        "the facts; Copier quotes 64 of 128 (50%) bytes of the passages and recalls 25 of 50 (50%) bytes of the "
        "facts: only Copier copies at least half of both, so the checks run on it by default (Shipped cannot copy "
        "from that far back).")


# --- from tests/test_quant_results.py ------------------------------------------------------------

def test_quant_results_golden():
    from sim.words.quant_claims import seed_claims
    from tests.test_quant_results import table

    t = table(kivi_8=1e-8, token_8=1e-5, fp8_e4m3_8=1e-4, kivi_4=1e-6, token_4=1e-2, kivi_2=1e-5, token_2=0.3,
              token_res_4=1e-3, token_first_4=1e-1)
    by = {c.statement.split(":")[0]: c for c in seed_claims(t, 4).claims}
    assert by["INT8"].why == "Holds on the tiny model: both keep at least 99% of the top-1 predictions"
    assert by["Recent tokens stored coarsely hurt more than old tokens stored coarsely"].why == (
        "Holds: KL 100× higher with the recent tokens quantized")


# --- from tests/test_attention_readouts.py -------------------------------------------------------

def test_attention_readouts_golden():
    from sim.attention.measure import KernelTiming
    from sim.attention.timing import SweepResult, TimingResult
    from sim.words.attention import flex_note
    from sim.words.kernel_claims import kernel_claims
    from tests.test_attention_readouts import fake_result

    r = fake_result(128)
    failed = TimingResult(r.shape, "cpu", 2, (*r.rows, KernelTiming("flex", "timed out", "took over 1 s")), "a test")
    assert flex_note(failed) == (False, "FlexAttention did not give a timing: timed out — took over 1 s. The other "
                                        "kernels are unaffected.")
    measured = kernel_claims(SweepResult((fake_result(128), fake_result(4096)), 1e12), "fastest block")
    speed = next(c for c in measured if "24×" in c.statement)
    assert speed.computed.endswith("Measured on this page at N = 4,096 on cpu: FLASH is 4.0× faster than eager "
                                   "(fastest block).")


# --- from tests/test_i18n_roofline_kernels.py ----------------------------------------------------

def test_i18n_roofline_kernels_golden():
    from sim.cost.gpus import load_gpus
    from sim.cost.presets import load_presets
    from sim.cost.roofline import RooflineConfig, decode_step, hardware, prefill_step
    from sim.words.roofline import bytes_takeaway, roofline_takeaway

    cfg, h100 = RooflineConfig(load_presets()["llama-3.1-70b"], 1, 4096), hardware(load_gpus()["h100-sxm"])
    dec, pre = decode_step(cfg), prefill_step(cfg)
    assert roofline_takeaway(dec, pre, h100) == (
        "Decode at 1.05 FLOP/B is memory-bound, 281× below the ridge of 295 FLOP/B; prefill at 2,508 FLOP/B is "
        "compute-bound, 8.5× above the ridge")
    assert roofline_takeaway(dec, pre, h100, "ko") == (
        "균형점 295 FLOP/B 기준: 디코딩은 1.05 FLOP/B로 균형점보다 281× 낮아 메모리 한계, 프리필은 2,508 FLOP/B로 "
        "균형점보다 8.5× 높아 연산 한계")
    assert bytes_takeaway(dec, "ko") == (
        "디코딩은 스텝마다 가중치 141.1 GB, KV 캐시 1.342 GB를 읽는다 — 전체 바이트 중 가중치가 99%")


# --- from tests/test_page_decode_cost.py ---------------------------------------------------------

def test_page_decode_cost_golden():
    from sim.words import text

    assert text("en", "decode.same_all", k="64") == "Identical tokens: all 64 tokens from naive and cached decoding match."
    assert text("en", "decode.too_long", n="300", max="256") == "The prompt is 300 bytes; the limit is 256. Shorten it."


# --- from tests/test_prefix_sections.py ----------------------------------------------------------

def test_prefix_sections_golden():
    from sim.alloc.prefix_cache import HitTotals
    from sim.words import prefix_claims

    agent = HitTotals(num_prompt_tokens=1000, num_hit_tokens=800, num_decode_steps=50, num_evictions=0,
                      num_requests_with_hit=9)
    assert prefix_claims.agent_finding(agent, 4) == ("simulated agent loop: 80.0% hit, prefill 5.00× less, throughput ≈ "
                                                     "3.00× (decode step = 4 prefill tokens)")
    run = SimpleNamespace(num_branches=2, prefix_ids=[0] * 50, prefill_saved_share=0.4, token_saved_share=0.45,
                          tokens_identical=True)
    assert prefix_claims.branch_finding(run) == (
        "2 branches on a prefix of 50 bytes: prefill time −40% (tokens −45%), tokens identical")


# --- from tests/test_real_model_pages.py ---------------------------------------------------------

def test_real_model_pages_golden():
    from sim.words.shrink import recorded_verdict
    from tests.test_real_model_pages import _table

    assert recorded_verdict(_table(quote_window=46, quote_kivi=40))[0] == (
        "On the real model the quote is mixed: discarding hurt it more in 1 of 2 pairings")
    rows = _table()
    rows[0]["quote_prefix"] = 10  # the full cache itself quotes 21%
    assert recorded_verdict(rows)[0] == (
        "The full cache quotes only 21% on this model, so the quote cannot separate the caches")


# --- from tests/test_real_pages.py ---------------------------------------------------------------

def test_real_pages_golden():
    from sim.model.real_prefix import RealPrefixRun
    from sim.work.conditions import Conditions

    run = RealPrefixRun(name="m", block_size=16, prompts=((1, 2),), hit_tokens=(0,), shared_tokens=2, scratch_s=(0.2,), cached_s=(0.1,), max_abs_logit_diff=0.0, same_next_tokens=True, repeats=3, device="cpu",
                        conditions=Conditions(1_000_000.0, 1.0, 3.5, 2), first_text="x")
    assert say("en", run.measured(1_000_000.0 + 600)) == (
        "Measured at 13:46:40 UTC (10 min ago: the server keeps the result of identical settings), each request from "
        "scratch and from the cache in turn so both saw the same load; but the load average went 1.0 → 3.5 on 2 "
        "cores: more work was waiting than there are cores, so the times say as much about the machine's other work "
        "as about the model. The share saved (both ways slowed alike) means more than the milliseconds; run it again "
        "when the machine is quieter.")
