"""The serving simulators' message values in words: what a scheduled row computed, what happened to blocks in a
step (sim.serving.scheduler's events), and the results tables' column names.

Every value here is a message (sim.msg.Msg or a Word such as sim.serving.scheduler.RowKind) or a column key the
simulators list with its message (sim.serving.result.PERCENTILE_COLUMNS); nothing is parsed back from English,
so Korean never depends on the English wording.
"""

from __future__ import annotations

from sim.msg import Msg, Word
from sim.words import catalog, say, text


def policy_name(lang: str, policy: str) -> str:
    """'Static batching', '정적 배치': a serving scheduler as a chart or a table names it."""
    return text(lang, f"serving.policy.{policy}")


def event_line(lang: str, event: Msg) -> str:
    """One thing that happened to blocks ('request 2 preempted (recompute): blocks [4, 5] freed') in `lang`; a
    field that is a list of phrases reads with commas, a list of block ids as the list it is."""
    fields = {}
    for k, v in event.fields.items():
        if isinstance(v, list) and v and isinstance(v[0], Msg):
            fields[k] = ", ".join(say(lang, x) for x in v)
        elif isinstance(v, Msg):
            fields[k] = say(lang, v)
        else:
            fields[k] = v
    return text(lang, event.key, **fields)


def column_name(lang: str, name: str) -> str:
    """A results table's column as the screen shows it: 'ttft_p50_s' -> 'TTFT p50 (s)', 'hit_rate_pct' ->
    'hit rate (%)'; a column the catalog does not name stays as it is (the CSV keeps the raw name)."""
    from sim.serving.result import PERCENTILE_COLUMNS

    if f"serving.col.{name}" in catalog(lang):
        return text(lang, f"serving.col.{name}")
    msg = PERCENTILE_COLUMNS.get(name)
    return say(lang, msg) if msg is not None else name


def cell(lang: str, value):
    """A results table's cell in `lang`: a message (the simulators give their text cells as messages, `cell_msgs`)
    worded; anything else (a number, a trace's own names) as it is. No text is looked up by its English."""
    return say(lang, value) if isinstance(value, (Msg, Word)) else value
