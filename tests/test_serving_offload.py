"""Offload tiers under the prefix cache (sim/serving/tiers.py, the engine's `offload`, sim/serving/offload.py):
which block hashes sit in which tier after each request, worked out by hand; the loads' bytes and seconds; the
break-even position; no tiers = the GPU-only engine exactly; the sentences both ways."""

from dataclasses import replace

import numpy as np
import pytest

from sim.alloc.prefix_cache import block_hashes
from sim.alloc.workload import workload_from_lengths
from sim.msg import Msg
from sim.refusal import Misuse
from sim.serving.comparison import DeploymentConfig
from sim.serving.config import EngineConfig
from sim.serving.engine import simulate_engine
from sim.serving.offload import OffloadSetup, run_offload
from sim.serving.shared_prefix import SharedPrefixConfig, make_shared_prefix
from sim.serving.step_cost import LinearCost, extend_work
from sim.serving.tiers import OffloadConfig, TierCache, breakeven_position, recompute_seconds
from sim.words import engine_readouts as er
from sim.words.catalog import PSEUDO

BS = 4
GROUP_IDS = {g: np.arange(8, dtype=np.int32) + 100 * (i + 1) for i, g in enumerate("ABC")}
NAMES = {h: f"{g}{j}" for g, ids in GROUP_IDS.items() for j, h in enumerate(block_hashes(ids, BS))}
KVB = 7_875_000_000  # bytes per token: 8 tokens = 63 GB, 1.0 s over PCIe 5 (63 GB/s), 9.0 s over NVMe (7 GB/s)


def serial_run(groups: str, cpu_tokens: int = 8, disk_tokens: int = 8):
    """One request per group letter, 10 s apart (each done in one pass of 1 s plus its loads): prompt = the group's
    8 tokens (2 full blocks of 4) + 1 own token, 1 output token. GPU: 3 blocks, so each request takes all of them."""
    prompts = [np.concatenate([GROUP_IDS[g], [7000 + i]]) for i, g in enumerate(groups)]
    n = len(groups)
    wl = workload_from_lengths([9] * n, [1] * n, arrival=[10 * i for i in range(n)], max_model_len=10)
    cfg = EngineConfig(max_num_seqs=4, capacity_tokens=12, block_size=BS, watermark=0.0, max_num_batched_tokens=32, enable_chunked_prefill=True, enable_prefix_caching=True)
    off = OffloadConfig(cpu_tokens=cpu_tokens, disk_tokens=disk_tokens) if cpu_tokens or disk_tokens else None
    return simulate_engine(wl, cfg, LinearCost(1.0), prompt_hashes=[block_hashes(p, BS) for p in prompts],
                           kv_bytes_per_token=KVB, record=True, check=True, offload=off)


def named(view):
    return (sorted(NAMES[h] for h in view.gpu_hashes), [[NAMES[h] for h in t] for t in view.tier_hashes])


def test_tiers_after_each_request_worked_by_hand():
    # Host and disk hold 2 blocks each. Free queue starts 0 1 2; a finished request's blocks go back last first.
    run = serial_run("ABABCA")
    got = [named(v) for v in run.steps]
    assert len(got) == 6  # one pass per request
    # r0 A: takes 0 1 2, caches A0->0 A1->1; queue after: 2 1 0
    assert got[0] == (["A0", "A1"], [[], []])
    # r1 B: misses everywhere; takes 2 (no hash), 1 (evicts A1), 0 (evicts A0): host A1 A0 (oldest first)
    assert got[1] == (["B0", "B1"], [["A1", "A0"], []])
    # r2 A: GPU misses A0; the host has A0 A1 -> both loaded, touched (host A0 A1); it takes 0, 1 (evicts B1),
    # 2 (evicts B0): B1 in pushes A0 down to disk, B0 in pushes A1 down: host B1 B0, disk A0 A1
    assert got[2] == (["A0", "A1"], [["B1", "B0"], ["A0", "A1"]])
    # r3 B: the host has B0 B1 -> loaded (host B0 B1); it evicts A1 then A0: A1 in pushes B0 to disk, which drops
    # A0; A0 in pushes B1 to disk, which drops A1
    assert got[3] == (["B0", "B1"], [["A1", "A0"], ["B0", "B1"]])
    # r4 C: misses; evicts B1, B0: B1 pushes A1 to disk (drops B0), B0 pushes A0 down (drops B1)
    assert got[4] == (["C0", "C1"], [["B1", "B0"], ["A1", "A0"]])
    # r5 A: the GPU and host miss, the disk has A0 A1 -> loaded from disk (disk A0 A1); evicting C1, C0 pushes
    # B1 then B0 down, dropping A0 then A1
    assert got[5] == (["A0", "A1"], [["C1", "C0"], ["B1", "B0"]])
    assert [v.events[0] for v in run.steps if v.events and v.events[0].key == "serving.ev.loaded"] == [
        Msg("serving.ev.loaded", r=r, n=2, parts=[Msg("serving.ev.from_tier", n=2, tier=Msg(f"serving.tier.{tier}"))])
        for r, tier in ((2, "host"), (3, "host"), (5, "disk"))]
    # tokens: r2, r3 found 8 each in the host, r5 8 on disk; none on the GPU (every hit block was evicted first)
    assert run.tier_hit_tokens == (0, 16, 8) and run.prefix_hit_tokens == 24
    assert run.load_bytes == (16 * KVB, 8 * KVB)
    assert run.load_seconds == (2.0, 9.0)
    # each pass is 1 s; r2 and r3 wait 1 s more for their loads, r5 9 s: the loads sit on the critical path
    np.testing.assert_array_equal(run.result.ttft_s, [1.0, 1.0, 2.0, 2.0, 1.0, 10.0])
    # written down: host A1 A0 | B1 B0 | A1 A0 | B1 B0 | C1 C0 = 10 blocks; disk A0 A1 | B0 B1 | A1 A0 | B1 B0 = 8
    assert run.offload_written_bytes == (10 * BS * KVB, 8 * BS * KVB)


def test_without_lower_tiers_the_same_workload_only_recomputes():
    run = serial_run("ABABCA", 0, 0)
    assert run.prefix_hit_tokens == 0 and run.tier_hit_tokens == (0, 0, 0)
    np.testing.assert_array_equal(run.result.ttft_s, np.ones(6))


def test_a_disk_without_a_host_tier_takes_the_gpu_evictions_directly():
    run = serial_run("ABA", 0, 8)
    assert named(run.steps[1]) == (["B0", "B1"], [[], ["A1", "A0"]])
    assert run.tier_hit_tokens == (0, 0, 8) and run.load_seconds == (0.0, 9.0)


def test_tier_lru_demotes_then_drops():
    t = TierCache(OffloadConfig(cpu_tokens=8, disk_tokens=4), 4)  # host 2 blocks, disk 1
    for h in (1, 2, 3):
        t.evicted_from_gpu(h)
    assert t.contents() == ((2, 3), (1,))
    t.evicted_from_gpu(2)  # already in the host: only touched
    assert t.contents() == ((3, 2), (1,)) and t.blocks_written == [3, 1]
    t.evicted_from_gpu(4)  # 3 goes down, 1 is dropped
    assert t.contents() == ((2, 4), (3,)) and t.blocks_dropped == 1
    assert t.find([2, 4, 3, 9, 2]) == [1, 1, 2]  # stops at the first miss


def test_zero_capacity_tiers_are_the_gpu_only_engine_exactly():
    sp = make_shared_prefix(SharedPrefixConfig(120, 12, 512, 64, 16, 40.0, seed=3))
    hashes = sp.hashes(16)
    cost = DeploymentConfig().cost()
    cfg = EngineConfig(max_num_seqs=32, capacity_tokens=6_000, block_size=16, watermark=0.01, max_num_batched_tokens=2048, enable_prefix_caching=True)
    ref = simulate_engine(sp.workload, cfg, cost, prompt_hashes=hashes)
    got = simulate_engine(sp.workload, cfg, cost, prompt_hashes=hashes, offload=OffloadConfig(), check=True)
    assert ref.prefix_hit_tokens > 0
    np.testing.assert_array_equal(got.result.first_token_s, ref.result.first_token_s)
    assert got.tier_hit_tokens == (ref.prefix_hit_tokens, 0, 0)


def test_tiers_conserve_tokens_and_only_add_hits():
    sp = make_shared_prefix(SharedPrefixConfig(150, 30, 512, 64, 16, 80.0, seed=1))
    hashes = sp.hashes(16)
    cost = DeploymentConfig().cost()
    cfg = EngineConfig(max_num_seqs=32, capacity_tokens=4_000, block_size=16, watermark=0.01, max_num_batched_tokens=2048, enable_prefix_caching=True)
    ref = simulate_engine(sp.workload, cfg, cost, prompt_hashes=hashes)
    run = simulate_engine(sp.workload, cfg, cost, prompt_hashes=hashes, check=True,
                          offload=OffloadConfig(cpu_tokens=8_000, disk_tokens=16_000))
    g, h, d = run.tier_hit_tokens
    assert h > 0 and d > 0
    assert g + h + d == run.prefix_hit_tokens <= int(sp.workload.prompt_len.sum())
    assert run.prefix_hit_tokens > ref.prefix_hit_tokens
    kvb = cost.kv_bytes_per_token
    assert run.load_bytes == (h * kvb, d * kvb)
    assert run.load_seconds == pytest.approx((h * kvb / 63e9, d * kvb / 7e9))


def test_breakeven_position_by_hand():
    # load a block of 4: 4 × 63,000 B / 63 GB/s = 4 µs; recompute block j (tokens 4j..4j+3): 4 × 0.5 µs + 11 ns ×
    # (4j + 4) keys read = 2 µs + 44 ns (j + 1) > 4 µs from j + 1 > 45.45: j = 45 (3.98 µs at j = 44, 4.024 at 45),
    # token 180
    cost = LinearCost(1.0, per_token_s=0.5e-6, per_kv_token_s=1.1e-8)
    assert recompute_seconds(cost, 4, 0) == pytest.approx(2.044e-6)
    assert breakeven_position(cost, 63_000, "pcie5", 4, 10_000) == 180
    assert breakeven_position(cost, 63_000, "pcie5", 4, 180) is None  # the last block starts at 176
    assert breakeven_position(cost, 63_000, "pcie5", 4, 184) == 180
    assert breakeven_position(cost, 6_300, "pcie5", 4, 10_000) == 0  # 0.4 µs: loading always wins


def test_roofline_recompute_is_flops_at_peak():
    cost = DeploymentConfig().cost()
    # 16 prompt tokens at position 0 of Llama 3.1 8B: ~2 × 7.5e9 weights FLOPs each, lm_head skipped
    s = recompute_seconds(cost, 16, 0)
    assert s == pytest.approx(float(cost.flops(extend_work(16, 0, cost.window, logits_rows=0))) / cost.hw.peak_flops)
    assert recompute_seconds(cost, 16, 8192) > s  # later blocks attend to more keys


def test_offload_study_sentences_follow_its_numbers():
    # 40 prefixes of 1,024 tokens: 41k tokens against 20k GPU slots and a 10k-slot host, so some go to disk
    setup = OffloadSetup(DeploymentConfig(kv_limit_tokens=20_000), SharedPrefixConfig(200, 40, 1024, 128, 32, 60.0),
                         OffloadConfig(10_000, "pcie5", 1_000_000, "nvme"))
    st = run_offload(setup)
    f = st.to_frame()
    assert list(f["tiers"]) == ["GPU only", "GPU + host", "GPU + host + disk"]
    assert f.loc[0, "host_hit_pct"] == 0 and f.loc[2, "disk_hit_pct"] > 0
    host, disk = er.offload_verdicts(st)
    full = st.runs[2]
    for text, i in ((host, 0), (disk, 1)):
        won = full.load_seconds[i] < full.load_recompute_seconds[i]
        assert ("tier won here" in text) == won and ("tier lost here" in text) == (not won)
    # an NVMe drive (7 GB/s) against an H100 on an 8B model: 16 tokens × 128 KiB = 2 MiB in 300 µs, slower than the
    # ~226 µs of recomputing a first block, and these prompts are too short for attention to change that
    assert st.breakeven == (0, None)
    assert ("serving.s.e.per_never(" in er.offload_verdicts(st, lang=PSEUDO)[1]
            and "serving.s.e.per_always(" in er.offload_verdicts(st, lang=PSEUDO)[0])


def test_offload_sentences_both_ways():
    assert er.offload_takeaway([0.72, 0.06, 0.07], [71.9, 72.1, 72.1], [0, 11.5, 13.4], lang=PSEUDO) == (
        'serving.s.e.offload(hits=serving.s.e.off_up(a=72%, b=86%), '
        'ttft=serving.s.e.cut(a=0.72 s, b=0.07 s))')
    assert er.offload_takeaway([0.5, 0.6, 0.7], [50, 50, 50], [0, 0.1, 0.2], lang=PSEUDO) == (
        'serving.s.e.offload(hits=serving.s.e.off_same(b=50%), ttft=serving.s.e.raised(a=0.50 s, '
        'b=0.70 s))')
    assert er.tier_verdict("host", "PCIe 5.0 x16", 95_120, 0.198, 1.395, 0, 33.3, 225.9, 16, "Llama 3.1 8B", lang=PSEUDO) == (
        'serving.s.e.tier_won(tier=serving.tier.host, tokens=95,120, link=PCIe 5.0 x16, '
        'load=0.198, rec=1.395, more=7.0×) serving.s.e.per_always(bs=16, us=33.3, '
        'link=PCIe 5.0 x16, us0=225.9, model=Llama 3.1 8B)')
    assert er.tier_verdict("disk", "NVMe", 16_384, 0.307, 0.240, 12_288, 299.6, 225.9, 16, "M", lang=PSEUDO) == (
        'serving.s.e.tier_lost(tier=serving.tier.disk, tokens=16,384, link=NVMe, load=0.307, '
        'rec=0.240) serving.s.e.per_from(bs=16, us=299.6, link=NVMe, us0=225.9, model=M, '
        'at=12,288)')
    assert er.tier_verdict("disk", "NVMe", 0, 0.0, 0.0, None, 299.6, 225.9, 16, "M", lang=PSEUDO) == (
        'serving.s.e.tier_none(tier=serving.tier.disk) serving.s.e.per_never(bs=16, us=299.6, '
        'link=NVMe, model=M, us0=225.9)')


def test_offload_refusals():
    with pytest.raises(Misuse, match="host tier must hold 0..268,435,456 token slots, got -1"):
        OffloadConfig(cpu_tokens=-1)
    with pytest.raises(Misuse, match="unknown link 'usb'"):
        OffloadConfig(disk_link="usb")
    wl = workload_from_lengths([9], [1], max_model_len=10)
    with pytest.raises(Misuse, match="turn prefix caching on"):
        simulate_engine(wl, EngineConfig(max_num_seqs=4, capacity_tokens=12, block_size=4, watermark=0.0, max_num_batched_tokens=32), LinearCost(1.0), offload=OffloadConfig(8))
    with pytest.raises(Misuse, match="max_num_seqs must be 1..1,024"):
        replace(OffloadSetup(), max_num_seqs=0)
