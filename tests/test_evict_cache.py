"""Token-eviction caches: each policy's kept set on hand-made attention patterns (exact indices), the full
cache's logits exactly at a budget that evicts nothing, the budget held through a 200-token decode with
only kept tokens attended, and the byte accounting worked out by hand."""

import pytest
import torch

from sim.model.evict_cache import (
    EVICT_POLICIES,
    SHRINK_METHODS,
    EvictingKVCache,
    budget_for,
    h2o_rows,
    make_shrunk_cache,
    shrunk_bytes,
    sinks_rows,
    snapkv_votes,
    window_rows,
)
from sim.model.generate import decode_loop
from sim.model.kvcache import ContiguousKVCache, KVCache
from sim.model.quant_cache import QuantizedKVCache
from sim.model.transformer import ModelConfig
from sim.words.shrink import bytes_what

# one layer, 4 query heads sharing 2 K/V heads (G = 2), head_dim 4: small enough to plant every weight
TINY = ModelConfig(name="tiny", n_layers=1, d_model=16, n_heads=4, n_kv_heads=2, d_ff=32, max_seq_len=64)


def kv_rows(start: int, T: int, n_kv_heads: int = 2, D: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """K/V for positions start.. whose every value names the position and head (k = pos + 100·head, v = -k)."""
    pos = torch.arange(start, start + T, dtype=torch.float32)[None, None, :, None]  # (1, 1, T, 1)
    head = torch.arange(n_kv_heads, dtype=torch.float32)[None, :, None, None]  # (1, Hkv, 1, 1)
    k = (pos + 100 * head).expand(1, n_kv_heads, T, D).clone()  # (1, Hkv, T, D)
    return k, -k


def positions_in(k: torch.Tensor) -> list[list[int]]:
    """The positions a returned (1, Hkv, S, D) K holds, per head (undoing kv_rows' encoding)."""
    return [[int(x) - 100 * h for x in k[0, h, :, 0]] for h in range(k.shape[1])]


def step(cache: KVCache, start: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of a one-layer cache, as the model drives it: begin, write layer 0, end."""
    cache.begin_step(start, k.shape[2], batch_size=k.shape[0])
    k_all, v_all = cache.write(0, k, v)
    cache.end_step()
    return k_all, v_all


def kept(cache: EvictingKVCache, layer: int = 0) -> list[list[int]]:
    return cache.kept_positions(layer)[0].tolist()


# --- the pure rules ------------------------------------------------------------------------------


def test_window_and_sinks_rules():
    assert window_rows(20, 8) == [12, 13, 14, 15, 16, 17, 18, 19]
    assert window_rows(5, 8) == [0, 1, 2, 3, 4]
    assert sinks_rows(20, 8, 4) == [0, 1, 2, 3, 16, 17, 18, 19]
    assert sinks_rows(8, 8, 4) == list(range(8))


def test_h2o_rule_ties_go_to_the_earlier_token():
    scores = torch.tensor([[[0.1, 0.5, 0.1, 0.3, 0.1, 9.0, 9.0]]])  # (1, 1, 7), the last 2 are the window
    assert h2o_rows(scores, 5, 2).tolist() == [[[0, 1, 3, 5, 6]]]  # 0, 2, 4 tie at 0.1: 0 wins
    assert h2o_rows(scores, 4, 2).tolist() == [[[1, 3, 5, 6]]]
    assert h2o_rows(scores, 3, 0).tolist() == [[[1, 5, 6]]]  # no window: the heaviest three


# --- the caches driven by hand ---------------------------------------------------------------------


@pytest.mark.parametrize("prefill", [True, False])
def test_sinks_keeps_the_first_four_and_the_last_four_of_twenty(prefill):
    cache = EvictingKVCache(TINY, policy="sinks", budget=8, sinks=4)
    if prefill:
        k_all, _ = step(cache, 0, *kv_rows(0, 20))
        assert positions_in(k_all) == [list(range(20))] * 2  # the prompt attends to itself in full
    else:
        for p in range(20):
            step(cache, p, *kv_rows(p, 1))
    assert kept(cache) == [[0, 1, 2, 3, 16, 17, 18, 19]] * 2
    assert cache.num_tokens == 20 and cache.kept_tokens == 8


def test_window_attends_to_what_it_kept_plus_the_new_token():
    cache = EvictingKVCache(TINY, policy="window", budget=5)
    k_all, v_all = step(cache, 0, *kv_rows(0, 3))
    assert positions_in(k_all) == [[0, 1, 2]] * 2
    for p in range(3, 12):
        k_all, v_all = step(cache, p, *kv_rows(p, 1))
        assert positions_in(k_all) == [list(range(max(0, p - 5), p + 1))] * 2  # the 5 kept + the new one
        assert torch.equal(v_all, -k_all)
    assert kept(cache) == [[7, 8, 9, 10, 11]] * 2


def h2o_prefill_probs() -> torch.Tensor:
    """(1, 4, 10, 10): query heads 0,1 share K/V head 0; 2,3 share head 1. Planted on query 0 of each head
    (the cache sums over queries, so where in the prompt a weight sits does not matter)."""
    p = torch.zeros(1, 4, 10, 10)
    # K/V head 0: position 2 is heavy only once its two query heads are summed (0.3 + 0.3)
    p[0, 0, 0, 1], p[0, 0, 0, 2], p[0, 1, 0, 2] = 0.4, 0.3, 0.3
    p[0, 1, 0, 4], p[0, 0, 0, 5], p[0, 1, 0, 7], p[0, 0, 0, 8] = 0.5, 0.45, 0.35, 0.42
    p[0, 0, 5, 9] = 0.9  # the recent window is kept whatever it scores
    # K/V head 1: 3 and 5 tie at 0.2 for the last place; the earlier wins
    p[0, 2, 0, 0], p[0, 3, 0, 3], p[0, 2, 0, 5], p[0, 3, 0, 6], p[0, 2, 0, 7] = 0.7, 0.2, 0.2, 0.6, 0.5
    return p


def test_h2o_keeps_the_planted_heavy_hitters_per_kv_head():
    cache = EvictingKVCache(TINY, policy="h2o", budget=6, recent=2)
    k_all, _ = step(cache, 0, *kv_rows(0, 10))
    assert positions_in(k_all) == [list(range(10))] * 2  # the whole prompt is attended before any cut
    cache.observe(0, h2o_prefill_probs())
    assert kept(cache) == [[1, 2, 4, 5, 8, 9], [0, 3, 6, 7, 8, 9]]
    assert torch.allclose(cache.scores[0][0, 0, :6], torch.tensor([0.4, 0.6, 0.5, 0.45, 0.42, 0.9]))
    # one decode step: position 10 attends to the 6 kept + itself; 0.3 more on position 1 lifts it past
    # 8 (0.42), which has just left the window of 2 and is now the lightest candidate in head 0
    k_all, _ = step(cache, 10, *kv_rows(10, 1))
    assert positions_in(k_all) == [[1, 2, 4, 5, 8, 9, 10], [0, 3, 6, 7, 8, 9, 10]]
    probs = torch.zeros(1, 4, 1, 7)
    probs[0, 0, 0, 0] = 0.3  # query head 0 -> row 0 = position 1
    cache.observe(0, probs)
    assert kept(cache) == [[1, 2, 4, 5, 9, 10], [0, 3, 6, 7, 9, 10]]
    assert torch.allclose(cache.scores[0][0, 0, :4], torch.tensor([0.7, 0.6, 0.5, 0.45]))


def snapkv_prompt_probs() -> torch.Tensor:
    """(1, 4, 30, 30): the last 4 queries (26..29) are the observation window."""
    p = torch.zeros(1, 4, 30, 30)
    # K/V head 0 (query heads 0, 1): 0.5 on 10, 0.2 + 0.2 on 20 (two window queries of head 1)
    p[0, 0, 27, 10], p[0, 1, 26, 20], p[0, 1, 29, 20] = 0.5, 0.2, 0.2
    p[0, 0, 5, 0] = 1.0  # a query outside the window: no vote
    p[0, 0, 28, 28] = 0.9  # the window's own positions are kept, not voted on
    # K/V head 1 (query heads 2, 3): 0.3 + 0.3 on 1, 0.25 on 24, 0.1 on 5
    p[0, 2, 29, 1], p[0, 3, 28, 1], p[0, 3, 26, 24], p[0, 2, 27, 5] = 0.3, 0.3, 0.25, 0.1
    return p


def test_snapkv_votes_are_pooled_over_seven_positions():
    votes = snapkv_votes(snapkv_prompt_probs(), n_kv_heads=2, window=4)  # (1, 2, 26)
    head0 = [0.0] * 26
    for j in range(7, 14):
        head0[j] = 0.5
    for j in range(17, 24):
        head0[j] = 0.4
    head1 = [0.6] * 5 + [0.1] * 4 + [0.0] * 12 + [0.25] * 5  # 1 -> 0..4, 5 -> 5..8 (2..4 stay 0.6), 24 -> 21..25
    assert torch.allclose(votes[0], torch.tensor([head0, head1]))


def test_snapkv_keeps_what_the_observation_window_attends_to_after_pooling():
    cache = EvictingKVCache(TINY, policy="snapkv", budget=18, obs_window=4)
    k_all, _ = step(cache, 0, *kv_rows(0, 30))
    assert positions_in(k_all) == [list(range(30))] * 2
    cache.observe(0, snapkv_prompt_probs())
    window = [26, 27, 28, 29]
    assert kept(cache) == [[*range(7, 14), *range(17, 24), *window], [*range(0, 9), *range(21, 26), *window]]
    assert cache.pinned == [14]
    # generated tokens slide through the 4 places the voted positions leave; those stay
    for p in (30, 31, 32):
        k_all, _ = step(cache, p, *kv_rows(p, 1))
        cache.observe(0, torch.zeros(1, 4, 1, 19))  # after the prompt SnapKV reads no weights
    assert kept(cache) == [[*range(7, 14), *range(17, 24), 29, 30, 31, 32],
                           [*range(0, 9), *range(21, 26), 29, 30, 31, 32]]


def test_snapkv_prompt_within_budget_keeps_all_then_slides_after_its_window():
    cache = EvictingKVCache(TINY, policy="snapkv", budget=8, obs_window=4)
    step(cache, 0, *kv_rows(0, 6))
    cache.observe(0, torch.full((1, 4, 6, 6), 1 / 6))
    assert kept(cache) == [list(range(6))] * 2 and cache.pinned == [2]
    for p in range(6, 12):
        step(cache, p, *kv_rows(p, 1))
    assert kept(cache) == [[0, 1, 6, 7, 8, 9, 10, 11]] * 2


def test_attention_policies_refuse_to_evict_blind():
    cache = EvictingKVCache(TINY, policy="h2o", budget=4)
    step(cache, 0, *kv_rows(0, 6))
    with pytest.raises(ValueError, match="attn_impl='eager'"):
        step(cache, 6, *kv_rows(6, 1))


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="more than 4 tokens, got 4"):
        EvictingKVCache(TINY, policy="sinks", budget=4)
    with pytest.raises(ValueError, match="policy must be one of"):
        EvictingKVCache(TINY, policy="lru", budget=4)
    with pytest.raises(ValueError, match=">= 1"):
        EvictingKVCache(TINY, policy="window", budget=0)
    with pytest.raises(ValueError, match="exceeds the model's context"):
        EvictingKVCache(TINY, policy="window", budget=4, max_seq_len=65)
    cache = EvictingKVCache(TINY, policy="window", budget=4)
    step(cache, 0, *kv_rows(0, 3))
    with pytest.raises(AssertionError):  # only the model's own loop writes a cache: skipping positions is a bug
        step(cache, 5, *kv_rows(5, 1))
    with pytest.raises(ValueError, match="method must be one of"):
        make_shrunk_cache(TINY, method="zip", budget_tokens=4, max_seq_len=16)


def test_every_policy_states_its_position_convention():
    from sim.words.shrink import position_convention

    said = {p: position_convention(p) for p in EVICT_POLICIES}
    assert all("original positions" in s for s in said.values())
    assert "re-indexes" in said["sinks"] and "1,024" in said["sinks"]


# --- the real model ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def one_thread():
    """The tiny model's matmuls gain nothing from threads, and on a 2-core box shared with another busy
    process torch's spinning threads made these decodes 20x slower: one thread, restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def seeded_prompt(n: int, seed: int = 0) -> list[int]:
    letters = list(b"abcdefghijklmnopqrstuvwxyz ,.")
    g = torch.Generator().manual_seed(seed)
    return [letters[i] for i in torch.randint(len(letters), (n,), generator=g).tolist()]


@pytest.mark.parametrize("preset", ["mha", "gqa"])
def test_a_budget_that_evicts_nothing_gives_the_full_cache_exactly(shipped_models, preset):
    model = shipped_models[preset]
    ids, num_new = seeded_prompt(20), 64
    n = len(ids) + num_new - 1  # positions written
    full = list(decode_loop(model, ids, num_new, cache=ContiguousKVCache(model.cfg, batch_size=1, max_seq_len=n), keep_logits=True))
    for policy in EVICT_POLICIES:
        cache = make_shrunk_cache(model.cfg, method=policy, budget_tokens=n, max_seq_len=n)
        got = list(decode_loop(model, ids, num_new, cache=cache, keep_logits=True))
        assert [r.token for r in got] == [r.token for r in full], policy
        assert all(torch.equal(a.logits, b.logits) for a, b in zip(got, full, strict=True)), policy
        assert cache.kept_tokens == n


class Spy(KVCache):
    """Forwards to an evicting cache and checks every write: what comes back is exactly the K/V of the
    positions it kept before the step plus the new ones, never more than budget + new rows."""

    def __init__(self, cache: EvictingKVCache) -> None:
        self.cache = cache
        self.written = [{} for _ in cache.k]  # layer -> {position: (k, v) of shape (B, Hkv, D)}
        self.max_rows = 0
        self.start = 0
        self.attention_observer = cache.attention_observer

    def begin_step(self, start_pos, num_new_tokens, *, batch_size):
        self.cache.begin_step(start_pos, num_new_tokens, batch_size=batch_size)
        self.start = start_pos

    def write(self, layer, k, v):
        start_pos = self.start
        before = self.cache.kept_positions(layer)  # (1, Hkv, n)
        T = k.shape[2]
        for t in range(T):
            self.written[layer][start_pos + t] = (k[:, :, t].clone(), v[:, :, t].clone())
        k_all, v_all = self.cache.write(layer, k, v)
        budget = self.cache.budget
        assert before.shape[-1] <= budget and k_all.shape[2] == before.shape[-1] + T <= budget + T
        self.max_rows = max(self.max_rows, k_all.shape[2] - T)
        new = torch.arange(start_pos, start_pos + T).expand(*before.shape[:2], T)
        attended = torch.cat([before, new], dim=-1)
        for h in range(k_all.shape[1]):
            rows = attended[0, h].tolist()
            assert rows == sorted(set(rows))
            assert torch.equal(k_all[0, h], torch.stack([self.written[layer][p][0][0, h] for p in rows]))
            assert torch.equal(v_all[0, h], torch.stack([self.written[layer][p][1][0, h] for p in rows]))
        return k_all, v_all

    def end_step(self):
        self.cache.end_step()

    @property
    def num_tokens(self):
        return self.cache.num_tokens

    def used_bytes(self):
        return self.cache.used_bytes()


@pytest.mark.parametrize("policy", EVICT_POLICIES)
def test_a_200_token_decode_never_holds_more_than_the_budget(shipped_models, policy):
    model = shipped_models["gqa"]
    ids, num_new, budget = seeded_prompt(40, seed=1), 200, 24
    cache = make_shrunk_cache(model.cfg, method=policy, budget_tokens=budget, max_seq_len=len(ids) + num_new - 1)
    spy = Spy(cache)
    for rec in decode_loop(model, ids, num_new, cache=spy):
        assert max(cache.rows) <= budget
        assert cache.kept_tokens == min(budget, cache.num_tokens) == min(budget, rec.kv_len)
        account = shrunk_bytes(model.cfg, method=policy, budget_tokens=budget, num_tokens=cache.num_tokens, value_bytes=4)  # fp32 on the CPU
        assert cache.used_bytes() == account.total_bytes
    assert cache.num_tokens == len(ids) + num_new - 1
    assert spy.max_rows == budget


def test_the_attention_policies_need_eager_attention_on_the_model(shipped_models):
    model = shipped_models["mha"]
    for policy in ("h2o", "snapkv"):
        with pytest.raises(ValueError, match="attn_impl='eager'"):
            list(decode_loop(model, seeded_prompt(8), 3, cache=make_shrunk_cache(model.cfg, method=policy, budget_tokens=4, max_seq_len=10), attn_impl="sdpa"))


def test_make_shrunk_cache_builds_every_method(shipped_models):
    model = shipped_models["mha"]
    cfg = model.cfg
    assert isinstance(make_shrunk_cache(cfg, method="full", budget_tokens=None, max_seq_len=32), ContiguousKVCache)
    key_bits_res = {"fp8": ("fp8_e4m3", 8, 0), "int8": ("token", 8, 0), "kivi4": ("kivi", 4, 128),
                    "kivi2": ("kivi", 2, 128)}
    for method, (key, bits, residual) in key_bits_res.items():
        cache = make_shrunk_cache(cfg, method=method, budget_tokens=7, max_seq_len=32)
        assert isinstance(cache, QuantizedKVCache)
        assert (cache.scheme.key, cache.scheme.bits, cache.scheme.residual) == (key, bits, residual)
    for policy in EVICT_POLICIES:
        cache = make_shrunk_cache(cfg, method=policy, budget_tokens=7, max_seq_len=32, sinks=2)
        assert (cache.policy, cache.budget, cache.sinks) == (policy, 7, 2)
    ids = seeded_prompt(6)
    for method in SHRINK_METHODS:  # every one plugs into the decode loop as it is
        assert len(list(decode_loop(model, ids, 4, cache=make_shrunk_cache(cfg, method=method, budget_tokens=5, max_seq_len=9)))) == 4


# --- bytes ---------------------------------------------------------------------------------------------
# the bundled model: 4 layers, 4 K/V heads, head_dim 32 -> the full FP16 cache is 2·4·4·32·2 = 2,048 B a token

CFG = ModelConfig()


def test_budget_for_rounds_half_up_and_keeps_one():
    assert budget_for(0.25, 100) == 25
    assert budget_for(0.5, 7) == 4
    assert budget_for(0.01, 10) == 1
    assert budget_for(1.0, 83) == 83
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        budget_for(0.0, 10)


@pytest.mark.parametrize(("method", "budget", "kept", "kv", "extra"), [
    ("full", None, 100, 204_800, 0),
    ("window", 25, 25, 51_200, 0),  # 2·4·4·32·2 B · 25
    ("sinks", 200, 100, 204_800, 0),  # a budget past the sequence keeps it all
    ("h2o", 25, 25, 51_200, 1_600 + 1_600),  # fp32 score + int32 position: 4 layers · 4 heads · 25 · 4 B each
    ("snapkv", 25, 25, 51_200, 1_600),  # positions only
    ("fp8", 25, 100, 102_400, 0),  # 1 byte a value, no scales
    ("int8", 25, 100, 102_400, 6_400 + 6_400),  # one fp16 scale + zero per token per head (group = head_dim 32)
    ("kivi4", 25, 100, 204_800, 0),  # 100 tokens < the residual of 128: all still full precision
])
def test_byte_accounting_at_100_tokens(method, budget, kept, kv, extra):
    a = shrunk_bytes(CFG, method=method, budget_tokens=budget, num_tokens=100)
    assert (a.kept_tokens, a.kv_bytes, a.extra_bytes, a.total_bytes) == (kept, kv, extra, kv + extra)
    assert a.full_bytes == 204_800
    assert a.fraction_of_full == (kv + extra) / 204_800


def test_kivi_bytes_at_512_tokens():
    # per head per layer: K per-channel, all 512 quantized: 512·32·4/8 = 8,192 B codes, 32 channels · 16 groups
    # of fp16 scale + zero = 2,048 B; V per-token, 384 quantized: 6,144 B codes + 384 · 4 B = 1,536 B, and the
    # last 128 in fp16: 8,192 B. Times 16 heads·layers.
    a = shrunk_bytes(CFG, method="kivi4", budget_tokens=None, num_tokens=512)
    assert (a.kv_bytes, a.extra_bytes) == (16 * (8_192 + 6_144 + 8_192), 16 * (2_048 + 1_536))
    assert a.fraction_of_full == 417_792 / 1_048_576


def test_value_bytes_change_the_cache_but_not_the_fp16_reference():
    a = shrunk_bytes(CFG, method="window", budget_tokens=25, num_tokens=100, value_bytes=4)
    assert (a.kv_bytes, a.full_bytes, a.fraction_of_full) == (102_400, 204_800, 0.5)


def test_the_sentence_is_made_of_the_numbers():
    assert bytes_what(shrunk_bytes(CFG, method="h2o", budget_tokens=25, num_tokens=100)) == (
        "H2O (heavy hitters + window) keeps 25 of 100 tokens: 51,200 B of K/V + 1,600 B of accumulated scores "
        "+ 1,600 B of kept positions = 54,400 B, 26.6% of the full FP16 cache (204,800 B).")
    assert bytes_what(shrunk_bytes(CFG, method="window", budget_tokens=25, num_tokens=100)) == (
        "A sliding window keeps 25 of 100 tokens: 51,200 B of K/V, 25.0% of the full FP16 cache (204,800 B).")
    assert bytes_what(shrunk_bytes(CFG, method="fp8", budget_tokens=None, num_tokens=100)) == (
        "FP8 e4m3 (scale 1.0) keeps all 100 tokens, quantized: 102,400 B of K/V, 50.0% of the full FP16 cache (204,800 B).")
    with pytest.raises(ValueError, match="needs a budget"):
        shrunk_bytes(CFG, method="window", budget_tokens=None, num_tokens=100)
