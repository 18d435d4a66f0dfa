"""The KV quantization page's words (moved here from sim/model/): chart titles, each stating the chart's takeaway in one sentence, worded from
the very numbers the chart draws, so that it flips when the comparison does. Numpy and pandas only."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.model.quant import fp8_backend
from sim.model.quant_bytes import ScaleView, bytes_per_value, context_curves
from sim.model.quant_cache import FP8_KINDS, FULL, SCHEME_KINDS, CacheScheme, scheme_bytes
from sim.model.quant_channels import OUTLIER_RATIO, ChannelStats, OutlierCase
from sim.model.quant_errors import PositionErrors, exact_prefix
from sim.model.quant_generation import FreeRun
from sim.model.quant_setup import ALL_KINDS, QuantSetup
from sim.model.transformer import ModelConfig
from sim.readout import Metric, times
from sim.words import text

if TYPE_CHECKING:
    from sim.model.real_probe import KVChannels



def scheme_label(key: str, residual: int, lang: str = "en") -> str:
    """A scheme's name in `lang` ("KIVI: K per-channel, V per-token, residual R=128"); "fp16": full precision."""
    return text(lang, f"quant.scheme.{key}", R=f"{residual}")


def short_label(key: str, residual: int, lang: str = "en") -> str:
    """A scheme's short name in `lang` ("KIVI (R=128)", "per-token (naive)"), as charts and tables show it."""
    return text(lang, f"quant.short.{key}", R=f"{residual}")


def scheme_title(key: str, bits: int, residual: int, lang: str = "en") -> str:
    """The label with the integer width in front ("INT4 KIVI: ..."); FP8 and full precision say theirs."""
    label = scheme_label(key, residual, lang)
    return f"INT{bits} {label}" if key in SCHEME_KINDS else label


def label_of(s: CacheScheme, lang: str = "en") -> str:
    return scheme_label(s.key, s.residual, lang)


def title_of(s: CacheScheme, lang: str = "en") -> str:
    return scheme_title(s.key, s.bits, s.residual, lang)


def short_of(s: CacheScheme, lang: str = "en") -> str:
    return short_label(s.key, s.residual, lang)


def metric_name(metric: str, lang: str = "en") -> str:
    """'KL', 'Δ loss', 'top-1 agreement' in `lang`."""
    return text(lang, f"quant.metric.{metric}")


def _metric_text(metric: str, x: float, lang: str = "en") -> str:
    if metric == "kl":
        return text(lang, "quant.s.kl_value", x=f"{x:.2e}")
    if metric == "agreement":
        return f"{x:.2%}"
    return text(lang, "quant.s.dl_value", x=f"{x:+.5f}")


# --- error by token position --------------------------------------------------------------------------


def position_takeaway(kivi: PositionErrors, naive: PositionErrors, metric: str, lang: str = "en") -> str:
    """The error-by-position chart's title: KIVI against naive per-token at one bit width, on the chart's
    metric averaged over every position it draws, worded by which of the two is better."""
    k, n, bits, T = kivi.mean_of(metric), naive.mean_of(metric), kivi.bits, kivi.num_positions
    f = dict(bits=f"{bits}", T=f"{T:,}")

    def say(key: str, **more: str) -> str:
        return text(lang, f"quant.t.pos.{key}", **f, **more)

    if metric == "agreement":
        ks, ns = f"{k:.2%}", f"{n:.2%}"
        if k > n:
            return say("agree_more", k=ks, n=ns)
        if k < n:
            return say("agree_less", k=ks, n=ns)
        return say("agree_same", k=ks)
    if metric == "delta_loss":
        ks, ns = f"{k:+.5f}", f"{n:+.5f}"
        if k < n:
            return say("dl_kivi", k=ks, n=ns)
        if k > n:
            return say("dl_naive", k=ks, n=ns)
        return say("dl_same", k=ks, n=ns)
    ks, ns = f"{k:.2e}", f"{n:.2e}"
    if k == n:
        return say("kl_same", k=ks)
    if k == 0:
        return say("kl_kivi_zero", n=ns)
    if n == 0:
        return say("kl_naive_zero", k=ks)
    if k < n:
        return say("kl_below", k=ks, n=ns, x=times(n / k))
    return say("kl_above", k=ks, n=ns, x=times(k / n))


# --- bits × scheme -----------------------------------------------------------------------------------


def heatmap_takeaway(grid, metric: str, lang: str = "en") -> str:
    """The bits × scheme heatmap's title: at the lowest bit width where two or more schemes were measured,
    the best and the worst of them on `metric` (metric_grid's table: schemes down, '4 bits' across)."""
    name = metric_name(metric, lang)
    higher_better = metric == "agreement"
    for col in reversed(list(grid.columns)):
        vals = grid[col].dropna()
        if len(vals) >= 2:
            break
    else:
        return text(lang, "quant.t.grid.none", name=name)
    width = col
    best = vals.idxmax() if higher_better else vals.idxmin()
    worst = vals.idxmin() if higher_better else vals.idxmax()
    b, w = float(vals[best]), float(vals[worst])
    f = dict(width=width, name=name, best=best, worst=worst, b=_metric_text(metric, b, lang),
             w=_metric_text(metric, w, lang))
    if b == w:
        return text(lang, "quant.t.grid.same", **f)
    if metric == "kl" and b > 0:
        return text(lang, "quant.t.grid.kl", x=times(w / b), **f)
    return text(lang, "quant.t.grid.higher" if higher_better else "quant.t.grid.lower", **f)


# --- bytes --------------------------------------------------------------------------------------------


def context_takeaway(curves: Mapping[str, tuple[str, Sequence[int], Sequence[float]]], key: str = "kivi",
                     lang: str = "en") -> str:
    """The bytes-vs-context chart's title: how one scheme's average bytes per token move from the shortest
    context drawn to the longest, and its share of FP16's at the longest (sim.model.quant_bytes.bytes_curves)."""
    label, xs, ys = curves[key]
    fp16 = curves["fp16"][2][-1]
    a, b = ys[0], ys[-1]
    f = dict(label=label[:1].upper() + label[1:], a=f"{a:,.1f}", b=f"{b:,.1f}", first=f"{xs[0]:,}",
             last=f"{xs[-1]:,}", share=f"{b / fp16:.1%}", fp16=f"{fp16:,.0f}")
    f["first"] = text(lang, "quant.s.token_one" if xs[0] == 1 else "quant.s.tokens", n=f["first"])
    if b < a:
        return text(lang, "quant.t.ctx.falls", **f)
    if b > a:
        return text(lang, "quant.t.ctx.rises", **f)
    return text(lang, "quant.t.ctx.stays", **f)


# --- keys vs values, channel by channel ------------------------------------------------------------------


def _top_channel(arr: np.ndarray) -> tuple[int, float]:
    """(T, D): the channel that most often holds a token's largest |value|, and the share of tokens it does."""
    top = np.argmax(arr, axis=-1)
    counts = np.bincount(top, minlength=arr.shape[-1])
    ch = int(np.argmax(counts))
    return ch, float(counts[ch] / len(top))


def heatmaps_takeaway(k_abs: np.ndarray, v_abs: np.ndarray, layer: int, head: int, lang: str = "en") -> str:
    """The |K| and |V| heatmaps' title: how consistently one channel holds a token's largest value, K against V."""
    (ck, sk), (cv, sv) = _top_channel(k_abs), _top_channel(v_abs)
    f = dict(layer=f"{layer}", head=f"{head}", T=f"{k_abs.shape[0]:,}", ck=f"{ck}", cv=f"{cv}", sk=f"{sk:.0%}",
             sv=f"{sv:.0%}")
    if sk > sv:
        return text(lang, "quant.t.maps.k", **f)
    if sv > sk:
        return text(lang, "quant.t.maps.v", **f)
    return text(lang, "quant.t.maps.same", **f)


def bars_takeaway(k_mean: np.ndarray, v_mean: np.ndarray, lang: str = "en") -> str:
    """The channel bars' title: K's and V's largest channel over their median channel (what the bars draw)."""
    rk, rv = float(k_mean.max() / np.median(k_mean)), float(v_mean.max() / np.median(v_mean))
    ck, cv = int(np.argmax(k_mean)), int(np.argmax(v_mean))
    f = dict(ck=f"{ck}", cv=f"{cv}", rk=f"{rk:,.1f}", rv=f"{rv:,.1f}")
    if round(rk, 1) > round(rv, 1):
        return text(lang, "quant.t.bars.k", **f)
    if round(rv, 1) > round(rk, 1):
        return text(lang, "quant.t.bars.v", **f)
    return text(lang, "quant.t.bars.same", **f)


def outlier_takeaway(cases, channel: int, factor: float, bits: int, lang: str = "en") -> str:
    """The injected-outlier chart's title: the ordinary channels' error with the outlier in, per-channel
    against per-token K (sim.model.quant_channels.outlier_demo's cases)."""
    inj = {x.axis: x.rel_error_other for x in cases if x.case == "injected"}
    c, t = inj["channel"], inj["token"]
    f = dict(ch=f"{channel}", factor=f"{factor:g}", bits=f"{bits}", c=f"{c:.1%}", t=f"{t:.1%}")
    if round(c, 3) < round(t, 3):
        tail = text(lang, "quant.t.outlier.more", x=times(t / c)) if c > 0 else ""
        return text(lang, "quant.t.outlier.channel", tail=tail, **f)
    if round(t, 3) < round(c, 3):
        tail = text(lang, "quant.t.outlier.more", x=times(c / t)) if t > 0 else ""
        return text(lang, "quant.t.outlier.token", tail=tail, **f)
    return text(lang, "quant.t.outlier.same", **f)


# --- the measured errors (sim.model.quant_errors) -------------------------------------------------------


def errors_short(r: PositionErrors, lang: str = "en") -> str:
    """The scheme's short name in `lang`."""
    return short_label(r.key, r.residual, lang)


def errors_label(r: PositionErrors, lang: str = "en") -> str:
    return scheme_label(r.key, r.residual, lang)


def loss_text(r: PositionErrors, lang: str = "en") -> str:
    """'1.2345 (Δ loss +0.00012 ± 0.00003 nats/byte)': the quantized perplexity and its loss change."""
    se = "" if math.isnan(r.delta_loss_se) else f" ± {r.delta_loss_se:.5f}"  # NaN: one window
    return text(lang, "quant.s.loss_text", ppl=f"{r.ppl_q:.4f}", dl=f"{r.mean_delta_loss:+.5f}", se=se)


def results_frame(results: Sequence[PositionErrors], fp16_bytes_per_token: float, lang: str = "en"):
    """The bits × scheme table: one row per result, its format (INT4, FP8 e4m3) and its bytes against FP16
    (`label`: the scheme's name in `lang`)."""
    import pandas as pd

    return pd.DataFrame([{
        "scheme": r.key, "format": f"FP8 {r.key.split('_')[1]}" if r.key in FP8_KINDS else f"INT{r.bits}",
        "label": errors_label(r, lang), "bits": r.bits, "delta_loss": r.mean_delta_loss, "delta_loss_se": r.delta_loss_se,
        "ppl_ref": r.ppl_ref, "ppl_q": r.ppl_q, "top1_agreement": r.mean_agreement, "kl": r.mean_kl,
        "kl_first_quarter": r.kl_by_quarter()[0], "kl_last_quarter": r.kl_by_quarter()[-1],
        "bytes_per_token": r.bytes_per_token, "vs_fp16": r.bytes_per_token / fp16_bytes_per_token,
    } for r in results])


def metric_grid(results: Mapping[tuple[str, int], PositionErrors], metric: str, kinds: Sequence[str],
                bit_widths: Sequence[int], lang: str = "en"):
    """One row per scheme (its short label in `lang`), one column per bit width ("4 bits"): the mean of
    `metric`, NaN where that scheme was not measured at that width (FP8 is 8 bits only)."""
    import pandas as pd

    short = {kind: errors_short(r, lang) for (kind, _), r in results.items()}
    col = {b: text(lang, "quant.s.n_bits", n=f"{b}") for b in bit_widths}
    grid = pd.DataFrame(index=[short[k] for k in kinds if k in short], columns=list(col.values()), dtype=float)
    for (kind, b), r in results.items():
        grid.loc[short[kind], col[b]] = r.mean_of(metric)
    return grid


def binned_frame(key_to_result: Mapping[str, PositionErrors], width: int, lang: str = "en"):
    """Every scheme's errors in bins of `width` positions, one frame (column `key`: the scheme's kind)."""
    import pandas as pd

    return pd.concat([r.binned(width).assign(scheme=errors_short(r, lang), key=k) for k, r in key_to_result.items()])


def grid_caption(num_tokens: int, lang: str = "en") -> str:
    """Under the bits × scheme heatmap: what FP8 means here (real torch float8 or emulated)."""
    fp8 = text(lang, "quant.s.fp8_torch" if fp8_backend("e4m3") == "torch" else "quant.s.fp8_emulated")
    return text(lang, "quant.s.grid_caption", fp8=fp8, n=f"{num_tokens}")


def headline_metrics(kivi: PositionErrors, naive: PositionErrors, cfg, residual: int, lang: str = "en"
                     ) -> list[Metric]:
    """Bytes per token and perplexity, then KL and top-1 agreement, of KIVI and naive per-token at one
    bit width (cfg: the tiny model's ModelConfig)."""
    bits, S = kivi.bits, kivi.num_positions
    fp16 = scheme_bytes(FULL, num_tokens=1, n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim)["total"]

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
    return text(lang, "quant.s.perplexity", ref=f"{kivi.ppl_ref:.4f}", kivi=loss_text(kivi, lang),
                naive=loss_text(naive, lang))


def position_caption(kivi: PositionErrors, naive: PositionErrors, num_windows: int, residual: int,
                     lang: str = "en", metric: str = "kl", log: bool = False) -> str:
    """What the error-by-position chart shows, with the first- and last-quarter KL of both schemes; `metric` and
    `log` are what the chart draws (the last sentence says what KIVI's exact start looks like on it)."""
    k, n = kivi.kl_by_quarter(), naive.kl_by_quarter()
    return text(lang, "quant.s.position_caption", w=f"{num_windows}", T=f"{kivi.num_positions}",
                n0=f"{n[0]:.2e}", n1=f"{n[-1]:.2e}", k0=f"{k[0]:.2e}", k1=f"{k[-1]:.2e}") \
        + exact_prefix_sentence(kivi, residual, lang, curve=("log" if log else "linear") if metric == "kl" else None)


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


# --- the page's setting (sim.model.quant_setup) ----------------------------------------------------------


def short_names(setup: QuantSetup, lang: str = "en") -> dict[str, str]:
    """kind -> its short name in `lang` at this setting's R (what the charts call each scheme)."""
    return {kind: short_label(kind, setup.residual, lang) for kind in ALL_KINDS}


def jobs_sentence(setup: QuantSetup, what: str, num_runs: int, lang: str = "en") -> str:
    return text(lang, "quant.s.jobs", what=what, n=f"{num_runs}", w=f"{setup.eval.num_windows}",
                T=f"{setup.eval.window_len}")

def standard_error_caption(setup: QuantSetup, kivi: PositionErrors | None = None, lang: str = "en") -> str:
    """What ± means, and (given KIVI's result) how noisy its Δ loss came out over the windows."""
    fields = dict(w=f"{setup.eval.num_windows}", why=text(lang, "quant.s.se_why"))
    if kivi is None:
        return text(lang, "quant.s.se_plain", **fields)
    mean, se = kivi.mean_delta_loss, kivi.delta_loss_se
    if se != se:  # NaN: one window
        return text(lang, "quant.s.se_one_window", **fields)
    fields.update(mean=f"{mean:+.5f}", se=f"{se:.5f}")
    if se >= abs(mean):
        return text(lang, "quant.s.se_unsettled", **fields)
    return text(lang, "quant.s.se_share", share=f"{se / abs(mean):.0%}", **fields)

def blank_cells_note(setup: QuantSetup, lang: str = "en") -> str:
    """Why the bits × scheme table has blanks when only KIVI and naive are measured at every width."""
    return text(lang, "quant.s.blank_cells", bits=f"{setup.bits}")


def free_sentence(num_new: int, lang: str = "en") -> str:
    return text(lang, "quant.s.free_job", n=f"{num_new}")


# --- keys against values, channel by channel (sim.model.quant_channels) -----------------------------------


def outlier_sentence(stats: ChannelStats, lang: str = "en") -> str:
    """Markdown: whether any K channel reaches OUTLIER_RATIO × its head's median channel, with the ratios."""
    k_ratio, v_ratio = stats.outlier_ratio("k"), stats.outlier_ratio("v")
    strong = float(k_ratio.max()) >= OUTLIER_RATIO
    said = text(lang, "quant.s.outliers", answer=text(lang, "quant.s.yes" if strong else "quant.s.weak_only"),
                k=f"{k_ratio.mean():.1f}", kmax=f"{k_ratio.max():.1f}", v=f"{v_ratio.mean():.1f}",
                vmax=f"{v_ratio.max():.1f}")
    return said + ("" if strong else text(lang, "quant.s.outliers_none", x=f"{OUTLIER_RATIO:g}"))


def channels_caption(num_tokens: int, lang: str = "en") -> str:
    return text(lang, "quant.s.channels_caption", n=f"{num_tokens}")


def outlier_caption(cases: list[OutlierCase], layer: int, head: int, channel: int, factor: float, bits: int,
                    chunk: int, channel_group: int, lang: str = "en") -> str:
    """What outlier_demo did and what the injected outlier costs each axis."""
    inj = {x.axis: x for x in cases if x.case == "injected"}
    t, c = inj["token"].rel_error_other, inj["channel"].rel_error_other
    shown_t, shown_c = round(t * 100), round(c * 100)  # the percents the sentence shows
    link = text(lang, "quant.s.outlier_link_more" if shown_t > shown_c else
                "quant.s.outlier_link_less" if shown_t < shown_c else "quant.s.outlier_link_same")
    return text(lang, "quant.s.outlier_caption", layer=f"{layer}", head=f"{head}", ch=f"{channel}",
                factor=f"{factor:g}", bits=f"{bits}", g=f"{channel_group}", link=link, t=f"{t:.0%}", c=f"{c:.0%}",
                G=f"{chunk}", st=f"{inj['token'].rel_error_scores:.0%}", sc=f"{inj['channel'].rel_error_scores:.0%}")


# --- free-running generation (sim.model.quant_generation) ---------------------------------------------------


def free_run_metrics(run: FreeRun, lang: str = "en") -> list[Metric]:
    first = run.first_difference
    return [Metric(text(lang, "quant.m.first_diff"), text(lang, "quant.s.none") if first is None else f"{first}",
                   help=text(lang, "quant.m.first_diff_help")),
            Metric(text(lang, "quant.m.same_before"),
                   text(lang, "quant.s.n_of", n=f"{run.num_same}", total=f"{len(run.ref_ids)}")),
            Metric(text(lang, "quant.m.cache_after"), f"{run.used_bytes:,} B",
                   text(lang, "quant.m.of_fp16", share=f"{run.bytes_vs_fp16:.1%}"))]


def text_heading(scheme: CacheScheme, lang: str = "en") -> str:
    """Markdown, bold: the quantized text's scheme, with its integer width where it has one."""
    return f"**{label_of(scheme, lang)}" + (f", INT{scheme.bits}**" if scheme.key in SCHEME_KINDS else "**")


def divergence_frame(schemes: Sequence[CacheScheme], key_to_first: dict[str, int | None], lang: str = "en"):
    """One row per scheme: where its greedy text first parts from full precision ("none": never)."""
    import pandas as pd

    none = text(lang, "quant.s.none")
    return pd.DataFrame([{text(lang, "quant.col.scheme"): title_of(s, lang),
                          text(lang, "quant.col.first_diff"): none if key_to_first[s.key] is None
                          else str(key_to_first[s.key])} for s in schemes])


# --- what each scheme's cache weighs (sim.model.quant_bytes) ------------------------------------------------


def named_bytes_rows(rows: Sequence[dict], schemes: Sequence[CacheScheme], lang: str = "en") -> list[dict]:
    """sim.model.quant_bytes.tiny_bytes_rows (FP16 first, then `schemes`) with each scheme's name in `lang`."""
    return [{**r, "label": label_of(s, lang), "short": short_of(s, lang)}
            for r, s in zip(rows, [FULL, *schemes], strict=True)]


def bytes_curves(cfg, key_to_scheme: Mapping[str, CacheScheme], lang: str = "en"
                 ) -> dict[str, tuple[str, list[int], list[float]]]:
    """key -> (short label in `lang`, contexts, average bytes per token): sim.model.quant_bytes.context_curves."""
    return {k: (short_of(s, lang), xs, ys) for k, (s, xs, ys) in context_curves(cfg, key_to_scheme).items()}


def bytes_takeaway(rows: Sequence[dict], num_tokens: int, bits: int, key: str = "kivi", lang: str = "en") -> str:
    """The bytes chart's title: the page's scheme (KIVI at the chosen width) against FP16, from
    `tiny_bytes_rows`, worded by whether it stores fewer bytes or more."""
    fp16 = next(r for r in rows if r["scheme"] == FULL.key)
    row = next(r for r in rows if r["scheme"] == key)
    fields = dict(n=f"{num_tokens:,}", bits=f"{bits}", name=row["short"],
                  per=text(lang, "quant.s.bytes_per", q=f"{row['bytes_per_token']:,.1f}",
                           fp16=f"{fp16['bytes_per_token']:,.0f}"))
    if row["total"] < fp16["total"]:
        return text(lang, "quant.s.bytes_less", share=f"{row['total'] / fp16['total']:.1%}", **fields)
    if row["total"] > fp16["total"]:
        return text(lang, "quant.s.bytes_more", x=f"{row['total'] / fp16['total']:,.2f}", **fields)
    return text(lang, "quant.s.bytes_same", **fields)


def tiny_bytes_caption(cfg: ModelConfig, variant: str, bits: int, residual: int, lang: str = "en") -> str:
    fields = dict(variant=variant.upper(), L=f"{cfg.n_layers}", H=f"{cfg.n_kv_heads}", D=f"{cfg.head_dim}",
                  bits=f"{bits}", R=f"{residual}")
    return text(lang, "quant.s.tiny_bytes_caption", **fields) \
        + text(lang, "quant.s.tiny_bytes_residual" if residual else "quant.s.tiny_bytes_no_residual", **fields) \
        + text(lang, "quant.s.tiny_bytes_tested")


def bytes_formula(cfg: ModelConfig, bits: int, kivi_bytes_per_token: float, num_tokens: int, lang: str = "en"
                  ) -> str:
    """LaTeX: bytes per token as 2·L·H_kv·d_h·p with the tiny model's numbers, p for FP16 and for KIVI."""
    L, Hkv, D = cfg.n_layers, cfg.n_kv_heads, cfg.head_dim
    per, at = text(lang, "quant.tex.bytes_per_token"), text(lang, "quant.tex.at_tokens", n=f"{num_tokens}")
    return (rf"\text{{{per}}} = 2 \cdot L \cdot H_{{kv}} \cdot d_h \cdot p = 2 \cdot {L}\cdot {Hkv} \cdot {D}"
            rf" \cdot p, \qquad p_{{\mathrm{{FP16}}}} = 2\,\mathrm{{B}},\quad p_{{\mathrm{{KIVI\,INT{bits}}}}} = "
            rf"{bytes_per_value(cfg, kivi_bytes_per_token):.4f}\,\mathrm{{B}}\ \text{{{at}}}")


def scale_metrics(view: ScaleView, bits: int, lang: str = "en") -> list[Metric]:
    """FP16 against the first scheme (KIVI at `bits`): requests that fit and the decode rate bound."""
    fp16, kivi = view.rows[0], view.rows[1]
    b = f"{bits}"
    return [Metric(text(lang, "quant.m.fp16_fit"), f"{fp16.max_requests:,}"),
            Metric(text(lang, "quant.m.kivi_fit", bits=b), f"{kivi.max_requests:,}",
                   text(lang, "quant.m.x_fp16", x=f"{view.requests_vs_fp16(1):.2f}")),
            Metric(text(lang, "quant.m.kivi_rate", bits=b), f"{kivi.tokens_per_s:,.0f}",
                   text(lang, "quant.m.x_fp16", x=f"{view.rate_vs_fp16(1):.2f}"))]


def scale_frame(view: ScaleView, lang: str = "en"):
    import pandas as pd

    return pd.DataFrame([{"scheme": title_of(r.scheme, lang), "bytes/token": r.bytes_per_token,
                          "per request": r.per_request_bytes / 2**30, "vs FP16": r.vs_fp16,
                          "max requests": r.max_requests, "decode step (ms)": r.step_seconds * 1e3,
                          "tokens/s bound": r.tokens_per_s} for r in view.rows])


def scale_caption(view: ScaleView, lang: str = "en") -> str:
    gpu = view.gpu
    return text(lang, "quant.s.scale_caption", model=view.arch.name, ctx=f"{view.context:,}", gpu=gpu.name,
                gib=f"{gpu.memory_gib:g}", util=f"{view.utilization:.2f}", tbs=f"{gpu.bandwidth_tb_s:g}")


def real_kv_sentence(kv: KVChannels, lang: str = "en") -> str:
    """What the real model's K and V channels show, and whether the seed's claim holds on them."""
    holds = text(lang, "real.kv.holds" if kv.claim_holds() else "real.kv.fails")
    return text(lang, "real.kv.sentence", n=f"{kv.num_tokens:,}", k_ratio=f"{kv.k_ratio.mean():.1f}",
                v_ratio=f"{kv.v_ratio.mean():.1f}", k_layers=f"{kv.num_large_layers('k')}",
                v_layers=f"{kv.num_large_layers('v')}", holds=holds)


def real_kivi_lines(kv: KVChannels, lang: str = "en") -> list[str]:
    """One line per bit width: KIVI's per-channel K error against per-token K's, and by how much one is lower."""
    lines = []
    for bits, (per_channel, per_token) in kv.bits_to_mse.items():
        lower = per_channel <= per_token
        ratio = max(per_channel, per_token) / max(min(per_channel, per_token), 1e-30)
        lines.append(text(lang, "real.kv.kivi", bits=f"{bits}", per_channel=f"{per_channel:.2e}",
                          per_token=f"{per_token:.2e}", which=text(lang, "real.kv.lower" if lower else "real.kv.higher"),
                          ratio=f"{ratio:.1f}"))
    return lines
