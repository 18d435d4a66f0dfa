"""Train the bundled tiny models from a fixed recipe (a step count, never a time budget).

    python -m sim.model.train --preset mha           # from scratch
    python -m sim.model.train --preset gqa           # uptrained from assets/models/mha.safetensors
    python -m sim.model.train --preset mqa           #   (K/V heads mean-pooled, as in the GQA paper)
    python -m sim.model.train --preset mha_copy      # mha fine-tuned with a copy/recall task mix (shipped)
    python -m sim.model.train --preset mha_repeat    # from scratch: repeated chunks first, then the text (not shipped)
    python -m sim.model.train --preset mha_letters   # mha in phases: letter repeats, then text with copies (not shipped)
    python -m sim.model.train --preset mha --score-only   # only measure a checkpoint's full-cache copy scores
    python -m sim.model.train --preset mha_copy_gpu --device cuda   # copy recipes sized for a GPU (not shipped;
                                                      #   also mha_copy_gpu_scratch, mha_copy_gpu_repeat)

GQA and MQA start from the MHA checkpoint: each group's K and V projection heads are averaged
into one head, then the whole model trains on for a shorter run. Same seed, same weights
(on the same torch build and thread count).

mha_copy starts from mha and trains on with `copy_mix` of the sequences built as a copy task (a passage,
filler text, the passage again) or a recall task (fact lines "KEY: Zorvath 4172.", filler, one key's line
again). mha_repeat is mha's architecture from scratch in two phases: first nothing but random byte chunks each
repeated at once (`copy_warmup` steps: only copying predicts the repeats, and a copying circuit forms after a
long plateau), then the text with copy tasks mixed in and some rows still repeated chunks (`repeat_mix`).
mha_letters trains in phases (sim/model/curriculum.py), each a mix of row kinds. The "Shrink the cache" checks
need a model that can quote text from hundreds of bytes back; no recipe so far yields one (the presets' comments
record each outcome), and the page says so. None of these is a preset of transformer.py (load with
`load_model(checkpoint_path("mha_copy"))`). Every checkpoint's report (assets/models/<preset>.json) records its
full-cache quote and fact scores, which the page shows.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import string
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from sim.model.curriculum import Phase, RowKind, train_phases
from sim.model.transformer import PRESETS, Llama, checkpoint_path, load_model, save_checkpoint
from sim.refusal import Misuse

CORPUS = Path(__file__).resolve().parents[2] / "assets" / "corpus" / "shakespeare.txt"
VAL_CHUNK = 32 * 1024
VAL_EVERY = 10


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    preset: str
    steps: int
    init_from: str | None = None
    batch_size: int = 16
    # (first step, sequence length): short sequences first (cheap), the full context last so
    # every RoPE position up to max_seq_len is trained.
    seq_schedule: tuple[tuple[int, int], ...] = ((0, 256), (0, 1024))
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 1337
    copy_mix: float = 0.0  # fraction of the training sequences built as a copy/recall task (copy_sequence)
    arch: str | None = None  # the transformer.PRESETS architecture; None: the preset's own name
    # First `copy_warmup` steps: nothing but random byte chunks each repeated at once (repeat_chunks), at
    # `copy_warmup_len` positions and batch `copy_warmup_batch`, at a constant lr; the text's schedule starts after.
    copy_warmup: int = 0
    copy_warmup_len: int = 96
    copy_warmup_batch: int = 32
    copy_warmup_lr: float = 1e-3
    repeat_mix: float = 0.0  # after the warm-up, this fraction of the rows stays repeated chunks (keeps the circuit)
    # Set: the run is these phases instead (sim.model.curriculum; steps must be their sum), and the fields above
    # from batch_size to repeat_mix are unused.
    phases: tuple[Phase, ...] = ()

    def __post_init__(self) -> None:
        if self.phases and self.steps != sum(ph.steps for ph in self.phases):
            raise Misuse(f"{self.preset}: steps={self.steps} but the phases add up to "
                         f"{sum(ph.steps for ph in self.phases)}")


STEPS_COPY_WARMUP = 2000

TRAIN_PRESETS = {
    "mha": TrainConfig(preset="mha", steps=4000, seq_schedule=((0, 256), (3200, 1024))),
    # uptraining stays at the full context: the MHA checkpoint already knows every position
    "gqa": TrainConfig(preset="gqa", steps=600, init_from="mha", lr=1e-3, min_lr=1e-4, warmup=50, seq_schedule=((0, 1024),)),
    "mqa": TrainConfig(preset="mqa", steps=600, init_from="mha", lr=1e-3, min_lr=1e-4, warmup=50, seq_schedule=((0, 1024),)),
    # The shipped copy model: mha fine-tuned 700 steps with copy_mix 0.5. It did not learn to copy: full-cache
    # quote 7/128 bytes, fact 3/50 (mha: 6/128, 0/50); 750 steps at 512 then 1,024, lr 2e-3, copy_mix 0.75 did no
    # better (7/128, 0/50). From-scratch runs with copy_mix alone (1,500 steps, also with random-byte passages,
    # also after 300 steps of repeats at 64 positions) neither: 6-7/128, 0-1/50.
    "mha_copy": TrainConfig(preset="mha_copy", steps=700, init_from="mha", arch="mha", lr=1e-3, min_lr=1e-4,
                            warmup=30, seq_schedule=((0, 1024),), copy_mix=0.5),
    # Two phases from scratch, not shipped (it copies no better and its text loss is worse). Phase 1, nothing but
    # random chunks of 8-24 bytes each repeated at once, no weight decay, does form a copying circuit: the loss on
    # the repeats sits near chance (ln 256 = 5.55) for ~1,400 steps, then falls to 3.08 nats/byte at 1,500, 0.48
    # at 1,700, 0.08 at 2,000. The text phase loses it again. With this preset (1,200 text steps at lr 1e-3,
    # copy_mix 0.3, a quarter of the rows still repeated chunks): val loss 1.536, quote 7/128, fact 0/50, and a
    # corpus passage of 80 bytes repeated right after itself is continued 17/144 bytes (gap 0), 2/144 after 300
    # bytes. With 2,000 text steps at lr 2e-3 and copy_mix 0.5 alone: val loss 1.349, quote 7/128, fact 2/50,
    # 22/144 at gap 0. What is left to try: a longer text phase at a lower rate that keeps the repeats, and
    # repeats of text spans (not only random bytes) so the circuit learns to fire on text.
    "mha_repeat": TrainConfig(preset="mha_repeat", steps=STEPS_COPY_WARMUP + 1200, arch="mha", lr=1e-3, min_lr=1e-4,
                              warmup=50, weight_decay=0.0, copy_mix=0.3, repeat_mix=0.25,
                              copy_warmup=STEPS_COPY_WARMUP,
                              seq_schedule=((0, 256), (STEPS_COPY_WARMUP + 600, 1024))),
    # Phases (sim.model.curriculum) from mha, not shipped: repeats over 8 letters make the circuit match several
    # bytes, and it does: on such repeats 0.946 of the copy-only bytes right (teacher-forced), with a text loss
    # better than mha's (val 1.2883). It still does not copy text: an 80-byte held-out span repeated at once is
    # continued 0.576 right, what the text alone predicts (0.56); full-cache quote 7/128, fact 1/50. Trained on
    # from here with text_chunks rows (a quarter of the bytes copies of earlier spans), the letter circuit was gone
    # within 250 steps (0.108) and text copying had not come (0.564); from mha with those rows alone, 0.564 after
    # 500 steps. Both stopped there. Bridging letters and text (600 steps at 512 of far repeats over 8, 27 and 64
    # symbols with up to 400 between, text_chunks and text; then 400 at 1,024): far letter copies rose to 0.719
    # right at step 500 and faded in the second phase (0.116); text 0.578; quote 7/128, fact 1/50 (val 1.316).
    # The same from mha: text 0.569, quote 7/128, fact 0/50. A circuit that copies letters does not carry to text.
    "mha_letters": TrainConfig(preset="mha_letters", steps=2500, init_from="mha", arch="mha", phases=(
        Phase(steps=1500, seq_len=256, batch=16, lr=1e-3, mix=(RowKind(kind="repeat", p=0.4), RowKind(kind="repeat", p=0.3, alphabet=8, lo=16, hi=48),
                                    RowKind(kind="text", p=0.3)), warmup=30),
        Phase(steps=1000, seq_len=1024, batch=4, lr=1e-3, mix=(RowKind(kind="text", p=0.4), RowKind(kind="text_repeat", p=0.3, lo=24, hi=160),
                                    RowKind(kind="copy", p=0.2), RowKind(kind="repeat", p=0.1, alphabet=8, lo=16, hi=48)),
              cosine=True, min_lr=1e-4))),
}

# Sized for a GPU (--device cuda; benchmarks/device_session.sh runs up to three side by side): 9,000 steps of
# 32 rows of 1,024 bytes, 295 M bytes, as many as 72,000 of mha's steps (at the 1.2 s a 4-row step takes on one
# of these CPU cores, about a day each). Rows: cipher_chunks (copies only copying predicts, with the text's
# recurrences), text_chunks (the same on the text itself, against its prior), copy (the quote and fact tasks the
# checks set) and text.
# Tried on these cores first (one core a run, 256 positions, batch 16, lr 1e-3; stopped when flat): from mha,
# text_chunks 0.5 + text_repeat 0.3 + text 0.2 for 2,500 steps: t0 0.563 -> 0.576, what the text alone predicts;
# the same from scratch, 2,000 steps: t0 0.535. With cipher_chunks 0.4 + text_chunks 0.3 + text 0.3 from mha: c0
# 0.020 -> 0.146 by step 2,000 and 0.143 at 2,500 (guessing the row's commonest byte so far scores 0.151 on
# such rows: no copies; a copy scores near 1), t0 0.571; from scratch, c0 0.128 at step 750. No copying circuit
# formed in those budgets.
GPU_COPY_MIX = (RowKind(kind="cipher_chunks", p=0.3, lo=12, hi=64), RowKind(kind="text_chunks", p=0.3, lo=12, hi=64),
                RowKind(kind="copy", p=0.1), RowKind(kind="text", p=0.3))


def _gpu_copy(name: str, init_from: str | None, warm: tuple[Phase, ...] = ()) -> TrainConfig:
    body = (Phase(steps=8000 - sum(ph.steps for ph in warm), seq_len=1024, batch=32, lr=1e-3, mix=GPU_COPY_MIX, warmup=100),
            Phase(steps=1000, seq_len=1024, batch=32, lr=1e-3, mix=GPU_COPY_MIX, cosine=True, min_lr=1e-4))
    phases = warm + body
    return TrainConfig(preset=name, steps=sum(ph.steps for ph in phases), init_from=init_from, arch="mha", phases=phases)


TRAIN_PRESETS |= {
    "mha_copy_gpu": _gpu_copy("mha_copy_gpu", "mha"),  # from the text model
    "mha_copy_gpu_scratch": _gpu_copy("mha_copy_gpu_scratch", None),  # copying and text learnt together
    # random repeats first, at 256 positions: the one-byte copying circuit forms there in ~1,500 steps
    "mha_copy_gpu_repeat": _gpu_copy("mha_copy_gpu_repeat", None, (Phase(
        steps=1500, seq_len=256, batch=128, lr=1e-3, mix=(RowKind(kind="repeat", p=0.5), RowKind(kind="repeat", p=0.5, alphabet=8, lo=16, hi=48)), warmup=30),)),
}


def load_corpus(path: Path = CORPUS) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation): the text cut into 32 KiB chunks, every 10th chunk held out, so the
    validation text is unseen but spread over every play and genre (tragedy, comedy, history)."""
    data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8).long()
    chunks = data.split(VAL_CHUNK)
    val = [c for i, c in enumerate(chunks) if i % VAL_EVERY == VAL_EVERY - 1]
    train = [c for i, c in enumerate(chunks) if i % VAL_EVERY != VAL_EVERY - 1]
    return torch.cat(train), torch.cat(val)


def made_up_fact(rng: random.Random) -> str:
    """A name no corpus contains and a number, e.g. "Zorvath 4172." (what a recall task must copy)."""
    name = "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3)))
    name += rng.choice("nrstlkx")
    return f"{name.capitalize()} {rng.randint(1000, 9999)}."


def made_up_key(rng: random.Random) -> str:
    return "KEY" if rng.random() < 0.3 else "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(3, 6)))


def copy_sequence(data: torch.Tensor, length: int, rng: random.Random) -> torch.Tensor:
    """`length` bytes that can only be predicted well by copying from far back: half the time
    [text][passage][filler][the passage again][text], else [text][1-3 fact lines "KEY: Name 1234."]
    [filler][one of those lines again][text]. Passages and filler are random spans of `data`."""

    def span(n: int) -> bytes:
        start = rng.randrange(0, len(data) - n - 1)
        return bytes(data[start : start + n].tolist())

    lead = span(rng.randint(0, 64))
    if rng.random() < 0.5:
        first = span(rng.randint(24, min(256, length // 3)))
        again = first
    else:
        lines = {made_up_key(rng): made_up_fact(rng) for _ in range(rng.randint(1, 3))}
        first = b"".join(f"\n{k}: {v}\n".encode() for k, v in lines.items())
        key = rng.choice(sorted(lines))
        again = f"\n{key}: {lines[key]}\n".encode()
    room = length - len(lead) - len(first) - len(again)
    gap = rng.randint(0, max(0, room))
    out = lead + first + span(gap) + again
    out += span(max(0, length - len(out)))
    return torch.tensor(list(out[:length]), dtype=torch.long)


def repeat_chunks(length: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """`length` random bytes made of chunks of 8-24 bytes, each written twice in a row, and a mask of the
    positions only copying can predict (the second copy's bytes after its first, which could be any chunk)."""
    ids: list[int] = []
    copied: list[bool] = []
    while len(ids) < length:
        chunk = [rng.randrange(256) for _ in range(rng.randint(8, 24))]
        ids += chunk + chunk
        copied += [False] * (len(chunk) + 1) + [True] * (len(chunk) - 1)
    return torch.tensor(ids[:length]), torch.tensor(copied[:length])


def seq_len_at(tc: TrainConfig, step: int) -> int:
    return [s for start, s in tc.seq_schedule if step >= start][-1]


def lr_at(tc: TrainConfig, step: int) -> float:
    if step < tc.copy_warmup:
        return tc.copy_warmup_lr * min(1.0, (step + 1) / tc.warmup)
    step -= tc.copy_warmup
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    frac = (step - tc.warmup) / max(1, tc.steps - tc.copy_warmup - tc.warmup)
    return tc.min_lr + 0.5 * (tc.lr - tc.min_lr) * (1 + math.cos(math.pi * frac))


@torch.no_grad()
def evaluate(model: Llama, val: torch.Tensor, seq_len: int, *, max_windows: int | None = None) -> float:
    """Mean next-byte cross-entropy (nats/byte) over non-overlapping windows of the val split."""
    was_training = model.training
    model.eval()
    n = (len(val) - 1) // seq_len
    if max_windows:
        n = min(n, max_windows)
    total, count = 0.0, 0
    for i in range(0, n, 8):
        idx = [val[j * seq_len : j * seq_len + seq_len + 1] for j in range(i, min(n, i + 8))]
        batch = torch.stack(idx).to(next(model.parameters()).device)  # (b, seq_len + 1)
        logits = model(batch[:, :-1], attn_impl="sdpa")
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="sum")
        total += loss.item()
        count += batch[:, 1:].numel()
    model.train(was_training)
    return total / count


def mean_pool_kv(mha: Llama, n_kv_heads: int) -> Llama:
    """GQA/MQA from MHA: average the K and V projection heads of each group."""
    cfg = replace(mha.cfg, name=f"kv{n_kv_heads}", n_kv_heads=n_kv_heads)
    model = Llama(cfg)
    src = mha.state_dict()
    dst = {}
    G, D = mha.cfg.n_heads // n_kv_heads, cfg.head_dim
    for k, v in src.items():
        if k.endswith(("k_proj.weight", "v_proj.weight")):
            v = v.view(n_kv_heads, G, D, cfg.d_model).mean(1).reshape(n_kv_heads * D, cfg.d_model)
        dst[k] = v.clone()
    model.load_state_dict(dst)
    return model


def train(tc: TrainConfig, log=print, device: str | torch.device = "cpu") -> tuple[Llama, dict]:
    """Train the preset on `device` (the batches are drawn on the CPU, so a recipe's data is the same on any
    device; its weights agree only to rounding); the model comes back on the CPU, ready to save."""
    torch.manual_seed(tc.seed)
    cfg = replace(PRESETS[tc.arch or tc.preset], name=tc.preset)
    train_data, val_data = load_corpus()
    if tc.init_from:
        model = mean_pool_kv(load_model(tc.init_from).train().requires_grad_(True), cfg.n_kv_heads)
        model = model.requires_grad_(True)
    else:
        model = Llama(cfg)
        for name, p in model.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    p.data.mul_(1 / math.sqrt(2 * cfg.n_layers))
    model = model.train().to(device)
    model.cfg = cfg  # the pooled model carries the preset's name
    if tc.phases:
        t0 = time.perf_counter()
        history = train_phases(model, tc.phases, train_data=train_data, val_data=val_data, seed=tc.seed, evaluate=evaluate, log=log)
        report = _report(tc, model, val_data, time.perf_counter() - t0, history)  # validated on the device
        return model.cpu(), report
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=tc.lr, betas=(0.9, 0.95),
    )
    gen = torch.Generator().manual_seed(tc.seed)
    t0 = time.perf_counter()
    history = []
    chunk_rng = random.Random(tc.seed)
    for step in range(tc.steps):
        copied = None
        if step < tc.copy_warmup:
            T, B = tc.copy_warmup_len, tc.copy_warmup_batch
            rows = [repeat_chunks(T + 1, chunk_rng) for _ in range(B)]
            batch = torch.stack([ids for ids, _ in rows])  # (B, T+1)
            copied = torch.stack([mask for _, mask in rows])[:, 1:].to(device)  # (B, T): what only copying predicts
        else:
            T = seq_len_at(tc, step)
            B = max(1, tc.batch_size * 256 // T)  # the same tokens per step at every length
            starts = torch.randint(0, len(train_data) - T - 1, (B,), generator=gen)
            batch = torch.stack([train_data[s : s + T + 1] for s in starts.tolist()])  # (B, T+1)
        if tc.repeat_mix and copied is None:  # drawn only then: the other presets' random streams stay as they were
            for row in (torch.rand(B, generator=gen) < tc.repeat_mix).nonzero().flatten().tolist():
                batch[row] = repeat_chunks(T + 1, chunk_rng)[0]
        if tc.copy_mix and copied is None:  # drawn only then: the other presets' random streams stay as they were
            rows = (torch.rand(B, generator=gen) < tc.copy_mix).nonzero().flatten().tolist()
            rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
            for row in rows:
                batch[row] = copy_sequence(train_data, T + 1, rng)
        for g in opt.param_groups:
            g["lr"] = lr_at(tc, step)
        batch = batch.to(device, non_blocking=True)
        logits = model(batch[:, :-1], attn_impl="sdpa")
        per_byte = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="none")
        loss = per_byte.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        opt.step()
        if step % 100 == 0 or step == tc.steps - 1:
            elapsed = time.perf_counter() - t0
            entry = {"step": step, "loss": round(loss.item(), 4), "elapsed_s": round(elapsed, 1)}
            if copied is not None:  # the loss on the repeats: ln 256 = 5.55 until the copying circuit forms
                entry["copy_loss"] = round(per_byte.view(B, T)[copied].mean().item(), 4)
            log(f"step {step:5d}  T={T:4d}  loss {loss.item():.3f}  lr {lr_at(tc, step):.2e}  {elapsed:7.1f}s"
                + (f"  copy {entry['copy_loss']:.3f}" if copied is not None else ""))
            history.append(entry)
    report = _report(tc, model, val_data, time.perf_counter() - t0, history)  # validated on the device
    return model.cpu(), report


def _report(tc: TrainConfig, model: Llama, val_data: torch.Tensor, train_s: float, history: list[dict]) -> dict:
    model.eval()
    val = evaluate(model, val_data, model.cfg.max_seq_len)
    return {
        "preset": tc.preset,
        "train_config": asdict(tc),
        "val_loss_nats_per_byte": round(val, 4),
        "val_seq_len": model.cfg.max_seq_len,
        "train_seconds": round(train_s, 1),
        "device": str(next(model.parameters()).device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "num_params": model.num_params(),
        "history": history,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(TRAIN_PRESETS), required=True)
    ap.add_argument("--steps", type=int, help="override the preset's step count (for quick trials)")
    ap.add_argument("--out", type=Path, help="where to write the checkpoint (default: assets/models/<preset>)")
    ap.add_argument("--device", default="cpu",
                    help="cpu (default: what the shipped checkpoints were trained on), cuda, or auto (cuda when "
                         "there is one); the batches are the same on any device, the weights agree to rounding")
    ap.add_argument("--score-only", action="store_true",
                    help="train nothing: measure the shipped checkpoint's full-cache quote and fact scores and "
                         "write them into its report (assets/models/<preset>.json)")
    args = ap.parse_args()
    if args.score_only:
        write_full_cache_scores(args.out or checkpoint_path(args.preset))
        return
    tc = TRAIN_PRESETS[args.preset]
    if args.steps:
        tc = replace(tc, steps=args.steps)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: this torch ({torch.__version__}) sees no CUDA device")
    model, report = train(tc, device=device)
    out = args.out or checkpoint_path(tc.preset)
    save_checkpoint(model, out, {"val_loss_nats_per_byte": str(report["val_loss_nats_per_byte"])})
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"val loss {report['val_loss_nats_per_byte']:.4f} nats/byte; wrote {out}")
    write_full_cache_scores(out)


def write_full_cache_scores(path: Path) -> dict:
    """Can the checkpoint copy? Its full-cache exact-quote and multi-turn scores (sim.model.shrink_checks,
    seed 0), measured as the app loads it and written into its report, where the page reads them."""
    from sim.model.shrink_checks import full_cache_scores

    scores = full_cache_scores(load_model(path))
    report_path = path.with_suffix(".json")
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    report["full_cache_scores"] = scores
    report_path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"full-cache scores: {scores}; wrote {report_path}")
    return scores


if __name__ == "__main__":
    main()
