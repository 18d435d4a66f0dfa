"""Teacher-forced error of each KV quantization scheme, position by position, on held-out text.

Windows of held-out text (the last 10% of the corpus, never trained on) are run through the real
tiny model once with a full-precision cache and once per scheme (sim/model/quant_forward.py, one
pass equal to the token-by-token cache); at every position the next-token distributions are
compared: loss change, top-1 agreement and KL(full ‖ quantized). The bits × scheme table and the
sentences the page states are worded from those results by sim/words/quant.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from sim.model.quant_cache import CacheScheme, scheme_bytes
from sim.model.quant_forward import teacher_forced_logits
from sim.model.transformer import Llama
from sim.refusal import Misuse

MAX_WINDOWS = 16


# --- held-out text -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalConfig:
    num_windows: int = 4
    window_len: int = 512  # tokens fed; each predicts the next one

    def check(self, max_seq_len: int) -> None:
        if not 1 <= self.num_windows <= MAX_WINDOWS:
            raise Misuse(f"num_windows must be in 1..{MAX_WINDOWS}, got {self.num_windows}")
        if not 16 <= self.window_len <= max_seq_len:
            raise Misuse(f"window_len must be in 16..{max_seq_len} (the trained context), got {self.window_len}")


def heldout_windows(cfg: EvalConfig) -> torch.Tensor:
    """(W, T + 1) byte ids from the validation split, evenly spaced, the same every time."""
    from sim.model.train import load_corpus

    _, val = load_corpus()
    span = cfg.window_len + 1
    last = len(val) - span
    if last < 0:
        raise Misuse(f"the validation split has {len(val)} bytes, fewer than one window of {span}")
    starts = [round(i * last / max(1, cfg.num_windows - 1)) if cfg.num_windows > 1 else 0
              for i in range(cfg.num_windows)]
    return torch.stack([val[s : s + span] for s in starts])


@dataclass(frozen=True, kw_only=True)
class PositionErrors:
    """One scheme against full precision, per position (mean over windows) and overall."""

    key: str  # the scheme's kind (its names: sim/words/quant.py, from key and residual)
    bits: int
    delta_loss: np.ndarray  # (T,) nats per byte, quantized − full
    agreement: np.ndarray  # (T,) fraction of windows whose top-1 next byte matches
    kl: np.ndarray  # (T,) KL(full ‖ quantized), nats
    loss_ref: float  # mean over every position and window
    loss_q: float
    bytes_per_token: float  # this model, every layer, K and V, at the window length
    window_delta_loss: np.ndarray  # (W,) each window's mean Δ loss
    residual: int = 0  # the scheme's R (its names in another language need it)

    @property
    def num_positions(self) -> int:
        return len(self.kl)

    @property
    def ppl_ref(self) -> float:
        return math.exp(self.loss_ref)

    @property
    def ppl_q(self) -> float:
        return math.exp(self.loss_q)

    @property
    def mean_delta_loss(self) -> float:
        return self.loss_q - self.loss_ref

    @property
    def delta_loss_se(self) -> float:
        """Standard error of the mean Δ loss over the windows (NaN with one window)."""
        w = self.window_delta_loss
        return float(w.std(ddof=1) / math.sqrt(len(w))) if len(w) > 1 else float("nan")

    @property
    def mean_agreement(self) -> float:
        return float(self.agreement.mean())

    @property
    def mean_kl(self) -> float:
        return float(self.kl.mean())

    def mean_of(self, metric: str) -> float:
        """The mean of one of METRICS over every position and window."""
        return {"kl": self.mean_kl, "delta_loss": self.mean_delta_loss, "agreement": self.mean_agreement}[metric]

    def kl_by_quarter(self) -> list[float]:
        return [float(part.mean()) for part in np.array_split(self.kl, 4)]

    def binned(self, width: int):
        """Rows (position bin start, mean Δloss, agreement, KL) for a chart (sim.words.quant.binned_frame names
        the scheme)."""
        import pandas as pd

        n = self.num_positions
        starts = list(range(0, n, width))
        return pd.DataFrame({
            "position": [s + min(width, n - s) / 2 - 0.5 for s in starts],
            "delta_loss": [float(self.delta_loss[s : s + width].mean()) for s in starts],
            "agreement": [float(self.agreement[s : s + width].mean()) for s in starts],
            "kl": [float(self.kl[s : s + width].mean()) for s in starts],
        })


def compare_logits(ref: torch.Tensor, quant: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """(W, T, V) logits against the (W, T) next bytes: per-window, per-position loss, agreement, KL."""
    lp_ref, lp_q = F.log_softmax(ref.float(), -1), F.log_softmax(quant.float(), -1)
    loss_ref = -lp_ref.gather(-1, targets[..., None]).squeeze(-1)
    loss_q = -lp_q.gather(-1, targets[..., None]).squeeze(-1)
    kl = (lp_ref.exp() * (lp_ref - lp_q)).sum(-1).clamp(min=0)
    agree = (ref.argmax(-1) == quant.argmax(-1)).float()
    return {"loss_ref": loss_ref, "loss_q": loss_q, "kl": kl, "agree": agree}


def _window_batches(num_windows: int, T: int) -> list[slice]:
    """Windows per forward so that one (windows, heads, T, T) score tensor stays near 16 M values."""
    per = max(1, (1 << 22) // (T * T))
    return [slice(i, min(num_windows, i + per)) for i in range(0, num_windows, per)]


def evaluate_scheme(model: Llama, windows: torch.Tensor, scheme: CacheScheme,
                    *, ref_logits: torch.Tensor | None = None) -> PositionErrors:
    """windows (W, T + 1) -> PositionErrors against the full-precision logits."""
    device = model.device
    ids, targets = windows[:, :-1].to(device), windows[:, 1:].to(device)
    if ref_logits is None:
        ref_logits = reference_logits(model, windows)
    rows = []
    for sl in _window_batches(ids.shape[0], ids.shape[1]):
        ref = ref_logits[sl]
        q = ref if scheme.is_full else teacher_forced_logits(model, ids[sl], scheme)
        rows.append(compare_logits(ref, q, targets[sl]))
    m = {k: torch.cat([r[k] for r in rows]).cpu().double() for k in rows[0]}
    cfg = model.cfg
    T = ids.shape[1]
    nbytes = scheme_bytes(scheme, num_tokens=T, n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim)["total"]
    return PositionErrors(key=scheme.key, bits=scheme.bits, delta_loss=(m["loss_q"] - m["loss_ref"]).mean(0).numpy(),
                          agreement=m["agree"].mean(0).numpy(), kl=m["kl"].mean(0).numpy(), loss_ref=float(m["loss_ref"].mean()),
                          loss_q=float(m["loss_q"].mean()), bytes_per_token=nbytes / T, window_delta_loss=(m["loss_q"] - m["loss_ref"]).mean(1).numpy(),
                          residual=scheme.residual)


def reference_logits(model: Llama, windows: torch.Tensor) -> torch.Tensor:
    device = model.device
    ids = windows[:, :-1].to(device)
    return torch.cat([teacher_forced_logits(model, ids[sl]) for sl in _window_batches(ids.shape[0], ids.shape[1])])


def exact_prefix(kivi: PositionErrors) -> int:
    """How many positions from the start KIVI's KL is exactly 0 (only full-precision keys and values read)."""
    nonzero = np.flatnonzero(kivi.kl != 0)
    return int(nonzero[0]) if len(nonzero) else kivi.num_positions
