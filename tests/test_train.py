"""The training recipe: schedules, the MHA -> GQA/MQA mean-pooling, and that a few steps learn."""

import json

import pytest
import torch

from sim.model.train import CORPUS, TRAIN_PRESETS, TrainConfig, load_corpus, lr_at, mean_pool_kv, seq_len_at
from sim.model.transformer import Llama, ModelConfig, checkpoint_path
from tests.conftest import random_model


def test_schedules():
    tc = TRAIN_PRESETS["mha"]
    assert [seq_len_at(tc, s) for s in (0, 3199, 3200, tc.steps - 1)] == [256, 256, 1024, 1024]
    assert lr_at(tc, 0) == tc.lr / tc.warmup
    assert abs(lr_at(tc, tc.warmup) - tc.lr) < 1e-12
    assert abs(lr_at(tc, tc.steps) - tc.min_lr) < 1e-12
    # every preset ends at the full trained context
    for tc in TRAIN_PRESETS.values():
        assert seq_len_at(tc, tc.steps - 1) == ModelConfig().max_seq_len


def test_corpus_split():
    train, val = load_corpus()
    # 67 chunks of 32 KiB (the last one short): chunks 9, 19, …, 59 are validation
    assert len(train) + len(val) == 2_165_599 and len(val) == 6 * 32 * 1024
    assert train.max() < 128  # ASCII
    text = bytes(val[:32 * 1024].tolist())
    assert text in CORPUS.read_bytes()[9 * 32 * 1024:10 * 32 * 1024 + 1]


def test_mean_pooling_is_exact_when_group_heads_agree():
    """If the heads of each group already share K/V weights, pooling changes nothing."""
    mha = random_model(4)
    sd = mha.state_dict()
    for name in list(sd):
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            w = sd[name].view(2, 2, 32, 128)
            w[:, 1] = w[:, 0]  # heads (0,1) and (2,3) identical
    mha.load_state_dict(sd)
    gqa = mean_pool_kv(mha, 2).eval()
    assert gqa.cfg.n_kv_heads == 2
    ids = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(gqa(ids), mha(ids), rtol=1e-5, atol=1e-5)


def test_pooled_weights_are_group_means():
    mha = random_model(4)
    mqa = mean_pool_kv(mha, 1)
    k_mha = mha.model.layers[2].self_attn.k_proj.weight.view(4, 32, 128)
    torch.testing.assert_close(mqa.model.layers[2].self_attn.k_proj.weight, k_mha.mean(0))


def test_a_few_steps_lower_the_loss(monkeypatch):
    from sim.model import train as tr

    tc = TrainConfig(preset="mqa", steps=12, batch_size=4, seq_schedule=((0, 64),), warmup=2, lr=3e-3)
    # the closing validation pass runs on 8 windows, not the whole split (192 windows of 1,024 tokens, most of
    # this test's time): nothing here asserts on the validation loss
    evaluate = tr.evaluate
    monkeypatch.setattr(tr, "evaluate", lambda model, val, seq_len: evaluate(model, val, seq_len, max_windows=8))
    torch.manual_seed(0)
    model, report = tr.train(tc, log=lambda *_: None)
    assert isinstance(model, Llama)
    hist = report["history"]
    assert hist[-1]["loss"] < hist[0]["loss"]


def test_copy_sequences_repeat_what_came_before():
    import random

    from sim.model.train import copy_sequence

    train, _ = load_corpus()
    rng = random.Random(0)
    for _ in range(40):
        seq = copy_sequence(train, 513, rng)
        assert seq.shape == (513,) and seq.dtype == torch.long
        text = bytes(seq.tolist())
        # some span of 16 bytes occurs twice (the passage or the fact line)
        assert any(text.count(text[i : i + 16]) >= 2 for i in range(0, 513 - 16))


def test_the_shipped_copy_preset_fine_tunes_mha_at_the_full_context():
    tc = TRAIN_PRESETS["mha_copy"]
    assert (tc.init_from, tc.arch, tc.copy_mix > 0, tc.copy_warmup) == ("mha", "mha", True, 0)
    shipped = json.loads(checkpoint_path("mha_copy").with_suffix(".json").read_text())["train_config"]
    assert shipped["steps"] == tc.steps and shipped["copy_mix"] == tc.copy_mix and shipped["lr"] == tc.lr


def test_the_repeat_preset_starts_with_repeated_chunks_then_the_text_at_the_full_context():
    tc = TRAIN_PRESETS["mha_repeat"]
    assert (tc.init_from, tc.arch, tc.weight_decay) == (None, "mha", 0.0)  # from scratch: the circuit forms there
    assert tc.copy_warmup > 0 and tc.copy_mix > 0 and tc.repeat_mix > 0
    assert seq_len_at(tc, tc.steps - 1) == 1024  # the quote check reaches ~800 bytes back
    # the warm-up's constant rate, then the text's own warm-up from nearly zero and its cosine to min_lr
    assert lr_at(tc, tc.warmup) == lr_at(tc, tc.copy_warmup - 1) == tc.copy_warmup_lr
    assert lr_at(tc, tc.copy_warmup) == tc.lr / tc.warmup
    assert lr_at(tc, tc.steps - 1) == pytest.approx(tc.min_lr, rel=1e-4)
    assert all(t.repeat_mix == t.copy_warmup == 0 for name, t in TRAIN_PRESETS.items() if name != "mha_repeat")


def test_repeated_chunks_mark_exactly_what_only_copying_predicts():
    import random

    from sim.model.train import repeat_chunks

    ids, copied = repeat_chunks(200, random.Random(3))
    assert ids.shape == copied.shape == (200,) and copied.dtype == torch.bool
    runs, p = [], 0  # each run of marked positions: the second copy of a chunk of n bytes, after its first byte
    while p < 200:
        if copied[p]:
            end = p
            while end < 200 and copied[end]:
                end += 1
            runs.append((p, end))
            p = end
        else:
            p += 1
    assert len(runs) >= 200 // 48
    for start, end in runs:
        q = start - 1  # the first byte of the second copy: unmarked (any chunk could start there)
        n = end - q if end < 200 else next(n for n in range(end - q, 25) if ids[q - n : q].tolist()[: end - q]
                                           == ids[q:end].tolist())
        assert 8 <= n <= 24 and not copied[q]
        assert ids[q - n : q - n + (end - q)].tolist() == ids[q:end].tolist()  # the same bytes, n back
        assert not copied[q - n : q].any()  # the first copy is unmarked: nothing before predicts it


def test_a_loaded_model_put_back_into_training_learns_in_every_projection():
    """load_model applies the fast paths, whose fused copies are detached: trained like that, only the embedding
    and the norms would get a gradient. .train() puts the reference modules back, and the logits stay the same."""
    from sim.model.fast import FastAttention, has_fast_paths
    from sim.model.transformer import Attention, load_model

    model = load_model("mha")
    ids = torch.randint(0, 256, (2, 33), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        fast_logits = model(ids[:, :-1])
    assert has_fast_paths(model) and type(model.model.layers[0].self_attn) is FastAttention
    model.train().requires_grad_(True)
    assert not has_fast_paths(model) and type(model.model.layers[0].self_attn) is Attention
    assert "wqkv_t" not in vars(model.model.layers[0].self_attn) and "weight_t" not in vars(model.lm_head)
    logits = model(ids[:, :-1])
    assert torch.equal(logits.detach(), fast_logits)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()).backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert no_grad == []
    # eval() alone leaves the fast paths in place (the app's models stay on them)
    assert has_fast_paths(load_model("mha").eval())


def test_the_phase_preset_starts_from_mha_and_ends_at_the_full_context():
    tc = TRAIN_PRESETS["mha_letters"]
    assert tc.init_from == "mha" and tc.steps == sum(ph.steps for ph in tc.phases) == 2500
    assert tc.phases[-1].seq_len == 1024 and tc.phases[-1].cosine  # the quote check reaches ~800 bytes back
    kinds = {k.kind for ph in tc.phases for k in ph.mix}
    assert {"repeat", "text", "text_repeat", "copy"} <= kinds
    assert any(k.alphabet == 8 for k in tc.phases[0].mix)  # the letters: a one-byte key is ambiguous there


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_few_steps_on_the_gpu_come_back_on_the_cpu(monkeypatch):
    from sim.model import train as tr

    evaluate = tr.evaluate
    monkeypatch.setattr(tr, "evaluate", lambda model, val, seq_len: evaluate(model, val, seq_len, max_windows=8))
    tc = TrainConfig(preset="mqa", steps=12, batch_size=4, seq_schedule=((0, 64),), warmup=2, lr=3e-3)
    model, report = tr.train(tc, log=lambda *_: None, device="cuda")
    assert next(model.parameters()).device.type == "cpu" and report["device"].startswith("cuda")
    assert report["history"][-1]["loss"] < report["history"][0]["loss"]


def test_asking_for_a_gpu_where_there_is_none_is_refused_in_words(monkeypatch, capsys):
    from sim.model import train as tr

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("sys.argv", ["train", "--preset", "mqa", "--device", "cuda"])
    with pytest.raises(SystemExit) as exc:
        tr.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--device cuda: this torch" in err and "sees no CUDA device" in err, err


def test_the_gpu_copy_recipes_run_every_phase(monkeypatch):
    """Each GPU-sized recipe, cut to one step of two short rows a phase, trains through all its phases here."""
    from dataclasses import replace

    from sim.model import curriculum
    from sim.model import train as tr

    evaluate = tr.evaluate
    monkeypatch.setattr(tr, "evaluate", lambda model, val, seq_len, max_windows=None: evaluate(model, val, 64, max_windows=2))
    monkeypatch.setattr(curriculum, "copy_probe", lambda model, val: {})
    for name in ("mha_copy_gpu", "mha_copy_gpu_scratch", "mha_copy_gpu_repeat"):
        tc = TRAIN_PRESETS[name]
        assert tc.phases[-1].seq_len == 1024 and tc.steps >= 9000 and tc.phases[-1].cosine
        short = tuple(replace(ph, steps=1, batch=2, seq_len=64) for ph in tc.phases)
        model, report = tr.train(replace(tc, steps=len(short), phases=short), log=lambda *_: None)
        assert [h["phase"] for h in report["history"]] == list(range(len(short)))[:1] + [len(short) - 1], name
        assert next(model.parameters()).device.type == "cpu"
