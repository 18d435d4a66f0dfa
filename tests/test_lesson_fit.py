"""Examples that can exist: every roofline default says where it runs, counted by the lab's own memory functions
(sim/cost/capacity.py): Llama 3.1 70B in BF16 (141 GB) takes two 80 GiB H100s, not one; the batch at which decode
turns compute-bound says how many GPUs it needs; the Lesson's batch chart draws what one 8-GPU server holds solid
and the rest dotted. In both languages."""

import json
from dataclasses import replace

from sim.cost.capacity import GpuConfig, capacity
from sim.cost.gpus import load_gpus
from sim.cost.memory import MemoryConfig, request_bytes, weight_bytes
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, hardware, memory_bound_until
from sim.cost.roofline_fit import UTILIZATION, fit, max_batch_on
from sim.words import text
from sim.words.catalog import PSEUDO
from sim.words.fit import fit_sentence, turn_fits
from tests.conftest import run_in_app

H100 = load_gpus()["h100-sxm"]
P = load_presets()


def holds(arch, batch, context, num_gpus) -> bool:
    return capacity(MemoryConfig(arch, batch=batch, context=context), GpuConfig(H100, num_gpus, UTILIZATION)).fits


def test_70b_in_bf16_takes_two_h100s_and_8b_one():
    seventy = P["llama-3.1-70b"]
    f = fit(RooflineConfig(seventy, 1, 4096), H100)
    assert f.weight_bytes == weight_bytes(seventy, "bf16") > 140e9
    assert f.kv_bytes == request_bytes(MemoryConfig(seventy, 1, 4096))
    assert not holds(seventy, 1, 4096, 1) and holds(seventy, 1, 4096, 2) and f.num_gpus == 2
    assert f.need_bytes > f.usable_per_gpu == int(H100.memory_bytes * UTILIZATION)
    assert fit(RooflineConfig(P["llama-3.1-8b"], 1, 4096), H100).num_gpus == 1
    assert fit(RooflineConfig(seventy, 4096, 131072), H100).num_gpus is None  # 176 TB: no count of GPUs
    en, ko = fit_sentence(f, "Llama 3.1 70B"), fit_sentence(f, "Llama 3.1 70B", "ko")
    assert fit_sentence(f, "Llama 3.1 70B", PSEUDO) == (
        'roofline.fit.many(model=Llama 3.1 70B, gpu=NVIDIA H100 SXM 80GB, w=141.1 GB, '
        'kv=1.342 GB, need=142.4 GB, usable=77.31 GB, util=90%, n=2)')
    assert "It takes 2 of them" in en and "2장이 필요하고" in ko
    assert fit_sentence(fit(RooflineConfig(P["llama-3.1-8b"], 1, 4096), H100), "8B", PSEUDO) == (
        'roofline.fit.one(model=8B, gpu=NVIDIA H100 SXM 80GB, w=16.06 GB, kv=536.9 MB, '
        'need=16.6 GB, usable=77.31 GB, util=90%)')


def test_the_batch_that_turns_compute_bound_says_what_it_takes():
    seventy, hw = P["llama-3.1-70b"], hardware(H100)
    cfg = RooflineConfig(seventy, 1, 4096)
    turns = {S: memory_bound_until(replace(cfg, context=S), hw) for S in (512, 4096)}
    b = turns[512]
    assert b is not None and turns[4096] is None
    n = next(k for k in range(1, 65) if holds(seventy, b, 512, k))
    assert n == 3 and not holds(seventy, b, 512, 2)
    assert turn_fits(turns, cfg, H100) == (f"at 512 tokens batch {b:,} needs 224 GB (weights and {b:,} caches): "
                                           f"{n} × NVIDIA H100 SXM 80GB")
    assert turn_fits(turns, cfg, H100, "ko").endswith(f"NVIDIA H100 SXM 80GB {n}장")
    # one 8-GPU server: the most requests beside the weights, exactly
    per_request = request_bytes(MemoryConfig(seventy, 1, 512))
    usable = int(8 * H100.memory_bytes * UTILIZATION)
    assert max_batch_on(replace(cfg, context=512), H100, 8) == (usable - weight_bytes(seventy, "bf16")) // per_request


def test_the_roofline_page_says_where_its_default_runs():
    at = run_in_app("roofline", {"tab": "batching"})
    assert not at.exception
    assert any(c.value == fit_sentence(fit(RooflineConfig(P["llama-3.1-70b"], 1, 4096), H100), "Llama 3.1 70B") for c in at.caption)
    assert any(m.value.startswith(text("en", "roofline.fit.turn_head", parts=turn_fits({512: 494}, RooflineConfig(P["llama-3.1-70b"], 1, 4096), H100)).removesuffix(".")) for m in at.markdown)
    ko = run_in_app("roofline", {"tab": "batching", "lang": "ko"})
    assert any(c.value.startswith("어디서 도는가: Llama 3.1 70B") for c in ko.caption)
    small = run_in_app("roofline", {"model": "llama-3.1-8b"})
    assert any(c.value == fit_sentence(fit(RooflineConfig(P["llama-3.1-8b"], 1, 4096), H100), "Llama 3.1 8B")
               for c in small.caption)


def test_the_lesson_states_the_deployment_and_draws_what_fits_solid():
    at = run_in_app("lesson", {"step": "7"})
    assert any(c.value == fit_sentence(fit(RooflineConfig(P["llama-3.1-70b"], 1, 4096), H100), "Llama 3.1 70B") for c in at.caption)
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert title.replace("<br>", " ").startswith("Llama 3.1 70B on 2 × NVIDIA H100 SXM 80GB, batch 1")
    at = run_in_app("lesson", {"step": "8"})
    claim = next(m.value for m in at.markdown if m.value.startswith("#### "))
    assert turn_fits({512: 494}, RooflineConfig(P["llama-3.1-70b"], 1, 4096), H100) in claim
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    dotted = {tr["name"]: tr["x"] for tr in fig["data"] if tr.get("line", {}).get("dash") == "dot" and "x" in tr}
    top = max_batch_on(RooflineConfig(P["llama-3.1-70b"], 1, 4096), H100, 8)
    assert dotted["context 4,096: does not fit"][1] > top >= dotted["context 4,096: does not fit"][0]
