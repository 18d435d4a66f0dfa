"""The Prefix caching page's real-model runs in words (moved here from sim/model/prefix_run.py): the branch run's
summary, metrics, title and table, and what a one-token change does to the cached K and V, in either language
(catalog area prefix_caching.json)."""

from __future__ import annotations

from collections.abc import Sequence

from sim.alloc.byte_tokens import from_bytes, show_byte
from sim.model.prefix_run import BranchRun, KVChange
from sim.readout import Metric
from sim.words import text


def branch_summary(run: BranchRun, same_within: float = 0.02, lang: str = "en") -> str:
    """What the run shows, worded from its own numbers (Markdown): each comparison says which way it went
    and by how much; a gap in shares within `same_within` is 'about the same', and a decode-time gap is
    called timing noise only when it is within the repeats' spread."""
    tok, tim = run.token_saved_share, run.prefill_saved_share
    shares = dict(tok=f"{100 * tok:.0f}", tim=f"{100 * tim:.0f}", gap=f"{100 * abs(tok - tim):.0f}")
    out = [text(lang, "prefix.run.removes", **shares)]
    if tim < tok - same_within:
        out.append(text(lang, "prefix.run.trails", passes=f"{run.num_branches + 1}", n=f"{run.num_branches}",
                        **shares))
    elif tim > tok + same_within:
        out.append(text(lang, "prefix.run.exceeds", **shares))
    else:
        out.append(text(lang, "prefix.run.about_same", within=f"{100 * same_within:.0f}"))
    decode = decode_sentence(run, lang)
    return " ".join(out + ([decode] if decode else []))


def decode_sentence(run: BranchRun, lang: str = "en") -> str | None:
    """Decode time branched against from scratch, which way and by how much, against the repeats' spread
    (None with no decode step)."""
    steps = run.num_branches * (run.num_new - 1)
    if steps <= 0:
        return None
    a, b = 1e3 * run.branch_decode_s, 1e3 * run.scratch_decode_s
    same = text(lang, "prefix.run.same_steps", n=f"{run.num_branches}", steps=f"{run.num_new - 1}")
    if f"{a:.0f}" == f"{b:.0f}":
        return text(lang, "prefix.run.decode_equal", same=same, a=f"{a:.0f}")
    way = text(lang, "prefix.run.way_branched" if a > b else "prefix.run.way_scratch")
    lead = text(lang, "prefix.run.decode_lead", same=same, a=f"{a:.0f}", b=f"{b:.0f}", diff=f"{abs(a - b):.0f}",
                share=f"{abs(a - b) / min(a, b):.0%}", way=way)
    spread = run.decode_spread_s
    if spread is None:
        return text(lang, "prefix.run.decode_one", lead=lead)
    s_ms = 1e3 * spread
    if abs(a - b) <= s_ms:
        return text(lang, "prefix.run.decode_noise", lead=lead, spread=f"{s_ms:.0f}")
    return text(lang, "prefix.run.decode_real", lead=lead, spread=f"{s_ms:.0f}")


def branch_report(run: BranchRun, lang: str = "en") -> str:
    """branch_summary(), and what one decode step costs in prefill tokens when there was one (Markdown)."""
    ratio = run.decode_step_in_prefill_tokens
    if ratio is None:
        return branch_summary(run, lang=lang)
    return branch_summary(run, lang=lang) + text(lang, "prefix.run.decode_cost", ratio=f"{ratio:.0f}")


def branch_metrics(run: BranchRun, lang: str = "en") -> list[Metric]:
    def w(key: str, **fields: str) -> str:
        return text(lang, f"prefix.run.m.{key}", **fields)

    return [
        Metric(w("scratch"), f"{1e3 * run.scratch_prefill_total_s:.1f} ms",
               help=w("passes", tokens=f"{run.scratch_prefill_tokens:,}", n=f"{run.num_branches}")),
        Metric(w("cached"), f"{1e3 * run.branch_prefill_s:.1f} ms",
               help=w("passes", tokens=f"{run.branch_prefill_tokens:,}", n=f"{run.num_branches + 1}")),
        Metric(w("saved"), f"{100 * run.prefill_saved_share:.0f}%",
               help=w("saved_help", share=f"{100 * run.token_saved_share:.0f}")),
        Metric(w("identical"), w("yes") if run.tokens_identical else w("no"), help=w("identical_help")),
        Metric(w("logit"), f"{run.max_abs_logit_diff:.1e}", help=w("logit_help")),
    ]


def mismatch_warning(run: BranchRun, lang: str = "en") -> str | None:
    """Why the tokens can differ, when they did (None when every branch matched)."""
    if run.tokens_identical:
        return None
    return text(lang, "prefix.run.mismatch", dtype=run.dtype)


def branch_chart_title(run: BranchRun, lang: str = "en") -> str:
    """The prefill chart's title: total prefill time both ways, which is shorter and by how much."""
    a, b = 1e3 * run.branch_prefill_s, 1e3 * run.scratch_prefill_total_s
    where = text(lang, f"prefix.run.where.{'other' if run.num_branches != 1 else 'one'}",
                 n=f"{run.num_branches}", prefix=f"{len(run.prefix_ids):,}", device=run.device,
                 dtype=run.dtype)
    if f"{a:.1f}" == f"{b:.1f}":
        return text(lang, "prefix.run.title.same", a=f"{a:.1f}", where=where)
    if a < b:
        return text(lang, "prefix.run.title.less", a=f"{a:.1f}", b=f"{b:.1f}", share=f"{1 - a / b:.0%}",
                    where=where)
    return text(lang, "prefix.run.title.more", a=f"{a:.1f}", b=f"{b:.1f}", share=f"{a / b - 1:.0%}", where=where)


def branch_frame(run: BranchRun, continuations: Sequence[str], lang: str = "en"):
    """One row per branch: its continuation as typed, both ways' new text, and whether they match."""
    import pandas as pd

    col = {c: text(lang, f"prefix.run.col.{c}") for c in ("branch", "continuation", "branched", "scratch", "same")}
    return pd.DataFrame([{col["branch"]: b + 1, col["continuation"]: continuations[b],
                          col["branched"]: from_bytes(run.branch_tokens[b]),
                          col["scratch"]: from_bytes(run.scratch_tokens[b]),
                          col["same"]: run.branch_tokens[b] == run.scratch_tokens[b]}
                         for b in range(run.num_branches)])


def kv_chart_title(kc: KVChange, show=show_byte, lang: str = "en") -> str:
    """The K/V chart's title: what stays exactly unchanged and what changes, layer by layer. show: a byte
    as a label (the page passes one that escapes it for plotly)."""
    k = kc.position
    return kv_takeaway(kc.changed_counts(), k, len(kc.ids), kc.num_changed_before(),
                       show(kc.ids[k]), show(kc.changed_ids[k]), lang)


def kv_summary(kc: KVChange, lang: str = "en") -> str:
    """What changed where, layer by layer (Markdown)."""
    return kv_change_text(kc.changed_counts(), kc.position, len(kc.ids), kc.num_changed_before(),
                          lang)[0]


def kv_finding(kc: KVChange, lang: str = "en") -> str:
    """The seeds table's words for this view."""
    return kv_change_text(kc.changed_counts(), kc.position, len(kc.ids), kc.num_changed_before(),
                          lang)[1]


def _deep_text(counts: Sequence[int], after: int, lang: str = "en") -> str:
    """What layers 1.. change: 'change all 80' / 'change 60–80' ('' with one layer)."""
    deeper = list(counts[1:])
    if not deeper:
        return ""
    last = len(counts) - 1
    layers = text(lang, "prefix.kv.layer1") if last == 1 else text(lang, "prefix.kv.layers", last=f"{last}")
    one = "one" if last == 1 else "other"
    if min(deeper) == max(deeper):
        kind = "all" if min(deeper) == after else "n"
        return text(lang, f"prefix.kv.deep.{kind}.{one}", layers=layers, n=f"{min(deeper)}")
    return text(lang, f"prefix.kv.deep.range.{one}", layers=layers, lo=f"{min(deeper)}", hi=f"{max(deeper)}")


def _before_text(pos: int, num_changed_before: int, num_layers: int, lang: str = "en") -> str:
    if pos == 0:
        return text(lang, "prefix.kv.before.none")
    if num_changed_before == 0:
        who = text(lang, "prefix.kv.before.pos0") if pos == 1 else text(lang, "prefix.kv.before.positions",
                                                                        last=f"{pos - 1}")
        return text(lang, "prefix.kv.before.same", who=who, layers=f"{num_layers}")
    return text(lang, "prefix.kv.before.changed", n=f"{num_changed_before}", pos=f"{pos}")


def kv_takeaway(counts: Sequence[int], pos: int, num_positions: int, num_changed_before: int, before: str,
                after_label: str, lang: str = "en") -> str:
    """The K/V chart's title for `counts[layer]` positions changed after byte `pos` (before → after_label,
    already escaped for a chart) of a `num_positions`-byte prompt changed."""
    after = num_positions - pos
    deep = _deep_text(counts, after, lang)
    return text(lang, "prefix.kv.title", pos=f"{pos}", before=before, after_label=after_label,
                before_text=_before_text(pos, num_changed_before, len(counts), lang), after=f"{after}",
                zero=f"{counts[0]}", deep=text(lang, "prefix.kv.title_deep", deep=deep) if deep else "")


def kv_change_text(counts: Sequence[int], pos: int, num_positions: int,
                   num_changed_before: int = 0, lang: str = "en") -> tuple[str, str]:
    """(paragraph in Markdown, the seeds table's words) for `counts[layer]` positions whose K/V changed after
    byte `pos` of a `num_positions`-byte prompt changed, and `num_changed_before` positions before it changed."""
    after = num_positions - pos
    deeper = list(counts[1:])
    if pos == 0:
        first = text(lang, "prefix.kv.p.first_none")
    elif num_changed_before == 0:
        first = text(lang, "prefix.kv.p.first_same", pos=f"{pos}")
    else:
        first = text(lang, "prefix.kv.p.first_changed", n=f"{num_changed_before}", pos=f"{pos}")
    if counts[0] == 1:
        zero = text(lang, "prefix.kv.p.zero_one")
    else:
        zero = text(lang, "prefix.kv.p.zero", n=f"{counts[0]}")
    every = bool(deeper) and min(deeper) == after
    if deeper:
        layers = ", ".join(text(lang, "prefix.kv.p.layer_n", i=f"{i}", n=f"{n}") for i, n in enumerate(deeper, start=1))
        mixed = text(lang, f"prefix.kv.p.mixed.{'every' if every else 'some'}", layers=layers, after=f"{after}",
                     pos=f"{pos}")
    else:
        mixed = ""
    wrong = sum(1 for n in counts if n > 0)
    if every and counts[0] <= 1:
        end = text(lang, "prefix.kv.p.end_all")
    else:
        end = text(lang, "prefix.kv.p.end_n", wrong=f"{wrong}", layers=f"{len(counts)}")
    paragraph = f"{first} {zero}{mixed}{end}"
    deep_text = _deep_text(counts, after, lang)
    finding = text(lang, "prefix.kv.finding", pos=f"{pos}", zero=f"{counts[0]}",
                   deep=text(lang, "prefix.kv.finding_deep", deep=deep_text) if deep_text else "", after=f"{after}")
    return paragraph, finding
