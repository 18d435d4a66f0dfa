"""The KV memory page's engine tabs in words (moved here from sim/cost/prefix_hit.py and sim/cost/engine_log.py):
the prefix-hit advice sentence, metric row and chart title (also the `kv-prefix-hit` command's), and the engine
log's reconciliation table and summary."""

from __future__ import annotations

from sim.cost.engine_log import Reconciliation
from sim.cost.prefix_hit import PrefixHit
from sim.cost.vllm_rules import version_label
from sim.readout import Metric
from sim.words import text


def hit_advice(hit: PrefixHit, lang: str = "en") -> str:
    """One sentence: what this prompt gets, and the prompt length that would change it."""
    f = dict(n=f"{hit.prompt_len:,}", bs=f"{hit.block_size:,}", min=f"{hit.min_cacheable_prompt:,}",
             hit=f"{hit.hit_tokens:,}", rate=f"{hit.hit_rate:.1%}", re=f"{hit.recomputed_tokens:,}",
             next=f"{hit.next_step:,}", more=f"{hit.next_step - hit.prompt_len:,}",
             asked=f"{hit.requested_block_size:,}", vllm=version_label())
    why = text(lang, "engine.hit.aligned", **f) if hit.state_aligned else ""
    key = "engine.hit.never" if hit.hit_tokens == 0 else "engine.hit.some"
    return text(lang, key, **f) + why


def hit_metrics(hit: PrefixHit, lang: str = "en") -> list:
    """The tab's metric row: the engine's block size, the shortest prompt that hits, this prompt's hits."""
    def tokens(n: int) -> str:
        return text(lang, "engine.m.tokens", n=f"{n:,}")

    return [Metric(text(lang, "engine.m.block"), tokens(hit.block_size),
                   help=text(lang, "engine.m.block_help", vllm=version_label(), asked=f"{hit.requested_block_size:,}")),
            Metric(text(lang, "engine.m.min"), tokens(hit.min_cacheable_prompt)),
            Metric(text(lang, "engine.m.hit"), tokens(hit.hit_tokens), f"{hit.hit_rate:.1%}")]


def staircase_title(hit: PrefixHit, name: str, lang: str = "en") -> str:
    """The staircase's headline. name: the model's name, already escaped for the chart."""
    return text(lang, "engine.fig.title", name=name, bs=f"{hit.block_size:,}", vllm=version_label(),
                min=f"{hit.min_cacheable_prompt:,}", n=f"{hit.prompt_len:,}", rate=f"{hit.hit_rate:.1%}")


def _shown(value: float, unit: str) -> str:
    if unit == "GiB":
        return f"{value:,.2f} GiB"
    if unit == "x":
        return f"{value:,.2f}x"
    return f"{value:,.0f} {unit}" if abs(value - round(value)) < 1e-9 or abs(value) >= 100 else f"{value:,.1f} {unit}"


def reconciliation_frame(rec: Reconciliation, lang: str = "en"):
    """One row per figure the log states: what it says, what the lab derives, the residual, its kind, and how."""
    import pandas as pd

    def col(key: str) -> str:
        return text(lang, f"engine.log.col.{key}")

    rows = []
    for r in rec.rows:
        rel = f" ({r.relative:+.2%})" if r.relative is not None else ""
        rows.append({col("figure"): text(lang, f"engine.log.fig.{r.figure}"),
                     col("kind"): text(lang, f"engine.log.kind.{r.kind}"),
                     col("engine"): _shown(r.engine, r.unit), col("lab"): _shown(r.lab, r.unit),
                     col("residual"): _shown(r.residual, r.unit) + rel,
                     col("how"): text(lang, f"engine.log.how.{r.how}", **dict(r.fields))})
    return pd.DataFrame(rows)


def reconciliation_summary(rec: Reconciliation, model: str, dtype: str, gpu: str, lang: str = "en") -> str:
    """Under the table: what the log was read as and what the derivations assumed. model: already escaped."""
    return text(lang, "engine.log.summary", engine="SGLang" if rec.log.engine == "sglang" else "vLLM", model=model,
                dtype=dtype.upper(), len=f"{rec.max_model_len:,}", tp=f"{rec.tp:,}", gpu=gpu)
