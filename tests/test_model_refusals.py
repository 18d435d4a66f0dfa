"""The refusals a user can cause in sim/model (a GGUF's or config.json's shape, KVLAB_DEVICE, the prompt and the new
tokens asked for, a quantized cache's residual window): each a Refusal with its key and numbers, worded in both
languages by the catalog (assets/i18n/*/model_refusals.json), never English on a Korean page."""

import pytest
import torch

from sim.model.config import ModelConfig
from sim.model.device import pick_device
from sim.model.generate import check_lengths, generate
from sim.model.quant_cache import make_scheme
from sim.refusal import Misuse, Refusal
from sim.words import catalog, placeholders, say
from tests.conftest import random_model, run_page, unescaped


def refusal(fn, *args, **kwargs) -> Refusal:
    with pytest.raises(Refusal) as info:
        fn(*args, **kwargs)
    return info.value


def both(exc: Refusal) -> tuple[str, str]:
    """The refusal in English and Korean; the Korean is its own entry, not the English again."""
    en, ko = say("en", exc.msg), say("ko", exc.msg)
    assert en == str(exc) and ko != en and any("\uac00" <= ch <= "\ud7a3" for ch in ko), (en, ko)
    return en, ko


def test_every_model_refusal_is_in_both_catalogs_with_the_same_fields():
    en = {k: v for k, v in catalog("en").items() if k.startswith("model.err.")}
    ko = {k: v for k, v in catalog("ko").items() if k.startswith("model.err.")}
    assert len(en) == 12 and set(en) == set(ko)
    for key in en:
        assert placeholders(en[key]) == placeholders(ko[key]), key


@pytest.mark.parametrize(("kwargs", "key", "fields", "shown"), [
    ({"n_kv_heads": 3}, "model.err.kv_heads_split", {"n_heads": 4, "n_kv_heads": 3}, ("n_heads=4", "n_kv_heads=3")),
    ({"d_model": 130}, "model.err.heads_split", {"d_model": 130, "n_heads": 4}, ("d_model=130", "n_heads=4")),
    ({"d_model": 12, "n_kv_heads": 4}, "model.err.odd_head_dim", {"head_dim": 3}, ("3",)),
    ({"max_seq_len": 0}, "model.err.not_positive", {"field": "max_seq_len", "got": "0"}, ("max_seq_len", "0")),
    ({"rope_theta": 0.5}, "model.err.rope_eps", {"rope_theta": "0.5", "norm_eps": "1e-05"}, ("0.5", "1e-05")),
])
def test_a_config_the_lab_cannot_build_is_refused_with_its_numbers(kwargs, key, fields, shown):
    # what a GGUF's metadata or a converted model's config.json can hold
    exc = refusal(ModelConfig, **kwargs)
    assert (exc.key, exc.fields) == (key, fields)
    for text in both(exc):
        assert all(s in text for s in shown), text


def test_unknown_config_fields_are_named():
    exc = refusal(ModelConfig.from_dict, {"d_model": 64, "n_expert": 8})
    assert (exc.key, exc.fields) == ("model.err.unknown_fields", {"fields": "'n_expert'"})
    assert all("'n_expert'" in text for text in both(exc))


def test_kvlab_device_naming_no_device_is_refused_in_either_language():
    exc = refusal(pick_device, {"KVLAB_DEVICE": "gpu-please"})
    assert exc.key == "model.err.unknown_device"
    assert (exc.fields["env"], exc.fields["want"]) == ("KVLAB_DEVICE", "gpu-please")
    en, ko = both(exc)
    assert en.startswith("KVLAB_DEVICE=gpu-please is not a device torch knows: ")
    assert ko.startswith("KVLAB_DEVICE=gpu-please: torch가 아는 장치가 아니다(")
    if not torch.cuda.is_available():
        exc = refusal(pick_device, {"KVLAB_DEVICE": "cuda:1"})
        assert (exc.key, exc.fields) == ("model.err.no_cuda", {"env": "KVLAB_DEVICE", "want": "cuda:1"})
        assert both(exc)[1] == "KVLAB_DEVICE=cuda:1: torch가 CUDA 장치를 찾지 못한다"


def test_a_korean_page_names_a_bad_kvlab_device_in_korean(monkeypatch):
    # the Attention kernels page picks the device first: the refusal is the page's error, worded in Korean
    monkeypatch.setenv("KVLAB_DEVICE", "gpu-please")
    at = run_page("attention_kernels", {"lang": "ko"}, timeout=120)
    assert not at.exception
    errors = [unescaped(e.value) for e in at.error]
    assert any(e.startswith("KVLAB_DEVICE=gpu-please: torch가 아는 장치가 아니다(") for e in errors), errors


def test_the_prompt_and_new_tokens_must_fit_the_trained_context():
    model = random_model()
    limit = model.cfg.max_seq_len
    exc = refusal(check_lengths, model, 10, limit - 8)
    assert (exc.key, exc.fields) == ("model.err.past_context",
                                     {"prompt": 10, "n": limit - 8, "limit": limit, "most": limit - 9})
    en, ko = both(exc)
    assert f"Ask for at most {limit - 9:,} new tokens." in en
    assert f"새 토큰은 최대 {limit - 9:,}개까지 요청하라." in ko and f"{limit:,}토큰" in ko
    check_lengths(model, 10, limit - 9)  # exactly fills the context: fine
    exc = refusal(generate, model, [], 4)
    assert exc.key == "model.err.empty_prompt" and "프롬프트가 비어 있다" in both(exc)[1]
    exc = refusal(generate, model, [65], 0)
    assert (exc.key, exc.fields) == ("model.err.no_new_tokens", {"n": 0})


def test_a_residual_window_off_the_key_groups_is_refused_with_the_fix():
    exc = refusal(make_scheme, "kivi", bits=4, chunk=32, residual=48)
    assert (exc.key, exc.fields) == ("model.err.residual_groups", {"R": 48, "name": "K", "G": 32, "fix": 32})
    en, ko = both(exc)
    assert "R=48 is not a multiple of K's group of 32 tokens" in en and "(try R = 32)" in en
    assert "잔여 창 R=48: K 그룹 32토큰의 배수가 아니다" in ko and "R = 32로 해 보라" in ko


def test_a_bug_is_a_misuse_not_a_refusal():
    # writing past a cache's positions is the lab's own mistake: English for the developer, never a Refusal
    from sim.model.kvcache import ContiguousKVCache

    cache = ContiguousKVCache(random_model().cfg, batch_size=1, max_seq_len=4)
    with pytest.raises(Misuse, match="cache holds 4 positions; asked to write 3..4"):
        cache.begin_step(3, 2, batch_size=1)
