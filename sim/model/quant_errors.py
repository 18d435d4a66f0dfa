"""Teacher-forced error of each KV quantization scheme, position by position, on held-out text.

Windows of held-out text (the last 10% of the corpus, never trained on) are run through the real
tiny model once with a full-precision cache and once per scheme (sim/model/quant_forward.py, one
pass equal to the token-by-token cache); at every position the next-token distributions are
compared: loss change, top-1 agreement and KL(full ‖ quantized). The bits × scheme table and the
sentences the page states are built here from those results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from sim.i18n import text
from sim.model.quant import fp8_backend
from sim.model.quant_cache import FP8_KINDS, FULL, CacheScheme, scheme_bytes, scheme_label, short_label
from sim.model.quant_forward import teacher_forced_logits
from sim.model.transformer import Llama
from sim.readout import Metric

MAX_WINDOWS = 16


# --- held-out text -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalConfig:
    num_windows: int = 4
    window_len: int = 512  # tokens fed; each predicts the next one

    def check(self, max_seq_len: int) -> None:
        if not 1 <= self.num_windows <= MAX_WINDOWS:
            raise ValueError(f"num_windows must be in 1..{MAX_WINDOWS}, got {self.num_windows}")
        if not 16 <= self.window_len <= max_seq_len:
            raise ValueError(f"window_len must be in 16..{max_seq_len} (the trained context), got {self.window_len}")


def heldout_windows(cfg: EvalConfig) -> torch.Tensor:
    """(W, T + 1) byte ids from the validation split, evenly spaced, the same every time."""
    from sim.model.train import load_corpus

    _, val = load_corpus()
    span = cfg.window_len + 1
    last = len(val) - span
    if last < 0:
        raise ValueError(f"the validation split has {len(val)} bytes, fewer than one window of {span}")
    starts = [round(i * last / max(1, cfg.num_windows - 1)) if cfg.num_windows > 1 else 0
              for i in range(cfg.num_windows)]
    return torch.stack([val[s : s + span] for s in starts])


@dataclass(frozen=True)
class PositionErrors:
    """One scheme against full precision, per position (mean over windows) and overall."""

    key: str
    label: str
    short: str
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

    def short_in(self, lang: str) -> str:
        """The scheme's short name in `lang` (self.short is the English one)."""
        return self.short if lang == "en" else short_label(self.key, self.residual, lang)

    def label_in(self, lang: str) -> str:
        return self.label if lang == "en" else scheme_label(self.key, self.residual, lang)

    def loss_text(self, lang: str = "en") -> str:
        """'1.2345 (Δ loss +0.00012 ± 0.00003 nats/byte)': the quantized perplexity and its loss change."""
        se = "" if math.isnan(self.delta_loss_se) else f" ± {self.delta_loss_se:.5f}"  # NaN: one window
        return text(lang, "quant.s.loss_text", ppl=f"{self.ppl_q:.4f}", dl=f"{self.mean_delta_loss:+.5f}", se=se)

    def kl_by_quarter(self) -> list[float]:
        return [float(part.mean()) for part in np.array_split(self.kl, 4)]

    def binned(self, width: int, lang: str = "en"):
        """Rows (position bin start, mean Δloss, agreement, KL) for a chart (the scheme named in `lang`)."""
        import pandas as pd

        n = self.num_positions
        starts = list(range(0, n, width))
        return pd.DataFrame({
            "position": [s + min(width, n - s) / 2 - 0.5 for s in starts],
            "delta_loss": [float(self.delta_loss[s : s + width].mean()) for s in starts],
            "agreement": [float(self.agreement[s : s + width].mean()) for s in starts],
            "kl": [float(self.kl[s : s + width].mean()) for s in starts],
            "scheme": self.short_in(lang),
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
                    ref_logits: torch.Tensor | None = None) -> PositionErrors:
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
    nbytes = scheme_bytes(scheme, T, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim)["total"]
    return PositionErrors(scheme.key, scheme.label, scheme.short, scheme.bits, (m["loss_q"] - m["loss_ref"]).mean(0).numpy(),
                          m["agree"].mean(0).numpy(), m["kl"].mean(0).numpy(), float(m["loss_ref"].mean()),
                          float(m["loss_q"].mean()), nbytes / T, (m["loss_q"] - m["loss_ref"]).mean(1).numpy(),
                          scheme.residual)


def reference_logits(model: Llama, windows: torch.Tensor) -> torch.Tensor:
    device = model.device
    ids = windows[:, :-1].to(device)
    return torch.cat([teacher_forced_logits(model, ids[sl]) for sl in _window_batches(ids.shape[0], ids.shape[1])])


def results_frame(results: Sequence[PositionErrors], fp16_bytes_per_token: float, lang: str = "en"):
    """The bits × scheme table: one row per result, its format (INT4, FP8 e4m3) and its bytes against FP16
    (`label`: the scheme's name in `lang`)."""
    import pandas as pd

    return pd.DataFrame([{
        "scheme": r.key, "format": f"FP8 {r.key.split('_')[1]}" if r.key in FP8_KINDS else f"INT{r.bits}",
        "label": r.label_in(lang), "bits": r.bits, "delta_loss": r.mean_delta_loss, "delta_loss_se": r.delta_loss_se,
        "ppl_ref": r.ppl_ref, "ppl_q": r.ppl_q, "top1_agreement": r.mean_agreement, "kl": r.mean_kl,
        "kl_first_quarter": r.kl_by_quarter()[0], "kl_last_quarter": r.kl_by_quarter()[-1],
        "bytes_per_token": r.bytes_per_token, "vs_fp16": r.bytes_per_token / fp16_bytes_per_token,
    } for r in results])


def metric_grid(results: Mapping[tuple[str, int], PositionErrors], metric: str, kinds: Sequence[str],
                bit_widths: Sequence[int], lang: str = "en"):
    """One row per scheme (its short label in `lang`), one column per bit width ("4 bits"): the mean of
    `metric`, NaN where that scheme was not measured at that width (FP8 is 8 bits only)."""
    import pandas as pd

    short = {kind: r.short_in(lang) for (kind, _), r in results.items()}
    col = {b: text(lang, "quant.s.n_bits", n=f"{b}") for b in bit_widths}
    grid = pd.DataFrame(index=[short[k] for k in kinds if k in short], columns=list(col.values()), dtype=float)
    for (kind, b), r in results.items():
        grid.loc[short[kind], col[b]] = r.mean_of(metric)
    return grid


def binned_frame(key_to_result: Mapping[str, PositionErrors], width: int, lang: str = "en"):
    """Every scheme's errors in bins of `width` positions, one frame (column `key`: the scheme's kind)."""
    import pandas as pd

    return pd.concat([r.binned(width, lang).assign(key=k) for k, r in key_to_result.items()])


def grid_caption(num_tokens: int, lang: str = "en") -> str:
    """Under the bits × scheme heatmap: what FP8 means here (real torch float8 or emulated)."""
    fp8 = text(lang, "quant.s.fp8_torch" if fp8_backend("e4m3") == "torch" else "quant.s.fp8_emulated")
    return text(lang, "quant.s.grid_caption", fp8=fp8, n=f"{num_tokens}")


def headline_metrics(kivi: PositionErrors, naive: PositionErrors, cfg, residual: int, lang: str = "en"
                     ) -> list[Metric]:
    """Bytes per token and perplexity, then KL and top-1 agreement, of KIVI and naive per-token at one
    bit width (cfg: the tiny model's ModelConfig)."""
    bits, S = kivi.bits, kivi.num_positions
    fp16 = scheme_bytes(FULL, 1, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim)["total"]

    def m(key: str, **fields: object) -> str:
        return text(lang, f"quant.m.{key}", **fields)

    b = f"{bits}"
    return [
        Metric(m("fp16_bytes"), f"{fp16:,.0f}",
               help=m("fp16_bytes_help", L=f"{cfg.n_layers}", H=f"{cfg.n_kv_heads}", D=f"{cfg.head_dim}")),
        Metric(m("kivi_bytes", bits=b), f"{kivi.bytes_per_token:,.1f}",
               m("of_fp16", share=f"{kivi.bytes_per_token / fp16:.1%}"),
               m("kivi_bytes_help", S=f"{S}", R=f"{residual}")),
        Metric(m("naive_bytes", bits=b), f"{naive.bytes_per_token:,.1f}",
               m("of_fp16", share=f"{naive.bytes_per_token / fp16:.1%}")),
        Metric(m("ppl"), f"{kivi.ppl_ref:.4f}", help=m("ppl_help")),
        Metric(m("kivi_kl", bits=b), f"{kivi.mean_kl:.2e}", help=m("kl_help")),
        Metric(m("kivi_agree", bits=b), f"{kivi.mean_agreement:.2%}", help=m("agree_help")),
        Metric(m("naive_kl", bits=b), f"{naive.mean_kl:.2e}"),
        Metric(m("naive_agree", bits=b), f"{naive.mean_agreement:.2%}"),
    ]


def perplexity_sentence(kivi: PositionErrors, naive: PositionErrors, lang: str = "en") -> str:
    """Markdown: full-precision perplexity, then KIVI's and naive per-token's with their loss change."""
    return text(lang, "quant.s.perplexity", ref=f"{kivi.ppl_ref:.4f}", kivi=kivi.loss_text(lang),
                naive=naive.loss_text(lang))


def position_caption(kivi: PositionErrors, naive: PositionErrors, num_windows: int, residual: int,
                     lang: str = "en", metric: str = "kl", log: bool = False) -> str:
    """What the error-by-position chart shows, with the first- and last-quarter KL of both schemes; `metric` and
    `log` are what the chart draws (the last sentence says what KIVI's exact start looks like on it)."""
    k, n = kivi.kl_by_quarter(), naive.kl_by_quarter()
    return text(lang, "quant.s.position_caption", w=f"{num_windows}", T=f"{kivi.num_positions}",
                n0=f"{n[0]:.2e}", n1=f"{n[-1]:.2e}", k0=f"{k[0]:.2e}", k1=f"{k[-1]:.2e}") \
        + exact_prefix_sentence(kivi, residual, lang, curve=("log" if log else "linear") if metric == "kl" else None)


def exact_prefix(kivi: PositionErrors) -> int:
    """How many positions from the start KIVI's KL is exactly 0 (only full-precision keys and values read)."""
    nonzero = np.flatnonzero(kivi.kl != 0)
    return int(nonzero[0]) if len(nonzero) else kivi.num_positions


def exact_prefix_sentence(kivi: PositionErrors, residual: int, lang: str = "en", curve: str | None = "linear") -> str:
    """Where KIVI is exact, from its measured KL (the caption's last sentence), and what that does to a KL curve
    drawn on a "linear" or "log" scale (a log scale has no 0); curve=None: the chart shows another metric."""
    n, T = exact_prefix(kivi), kivi.num_positions
    if n == T:
        return text(lang, "quant.s.exact_all", T=f"{T:,}", R=f"{residual}")
    if n == 0:
        return text(lang, "quant.s.exact_none")
    key = {"linear": "quant.s.exact_first", "log": "quant.s.exact_first_log", None: "quant.s.exact_first_plain"}[curve]
    return text(lang, key, n=f"{n:,}", R=f"{residual}")

