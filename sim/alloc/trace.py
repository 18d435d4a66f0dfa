"""A request trace a user brings: JSON Lines, one request per line, read as data only and checked field by field.

Each non-blank line is one JSON object:

    {"arrival": 0.25, "prompt": [1, 2, 3, ...], "output_len": 64}
    {"arrival": 0.30, "prompt_len": 700, "prefix_group": "sys-a", "prefix_len": 512, "output_len": 40}

    prompt       : the prompt's token ids (whole numbers 0 .. 2^31 - 1), or instead
    prompt_len   : its length, with optionally
      prefix_group : a name (text or whole number): requests of one group share their first tokens,
      prefix_len   : how many (0 .. prompt_len; needed with prefix_group). The shared and the private tokens are
                     drawn from a seed made of the group's name and the line's number, so the same file always
                     gives the same token ids.
    output_len   : tokens the request produces (1 ..)
    arrival      : seconds after the trace starts (optional, default 0; never less than the line before)
    id           : a label to show (optional, text or whole number)

Anything else is refused with the line number and the field, so a typo (`output_length`) is caught rather than
silently defaulted. Nothing in the file is evaluated: `json.loads` with NaN and Infinity refused, sizes bounded
before parsing. Output token ids are unknown (a trace gives their count), so they are stored as -1, which no
prompt token can equal: only prompt tokens can hit a prefix cache.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.alloc.block_pool import cdiv
from sim.alloc.workload import (
    FIRST_ID,
    MAX_MODEL_LEN,
    MAX_PREFIX_WORKLOAD_REQUESTS,
    MAX_TRACE_TOKENS,
    VOCAB_SIZE,
    Request,
    Trace,
    Workload,
)
from sim.msg import Msg
from sim.refusal import Refusal

MAX_TRACE_BYTES = 16 * 2**20  # a trace file (the command line)
MAX_PAGE_TRACE_BYTES = 2 * 2**20  # an uploaded or pasted trace (the page)
MAX_TRACE_REQUESTS = MAX_PREFIX_WORKLOAD_REQUESTS
MAX_LINE_BYTES = 1 * 2**20
MAX_TOKEN_ID = 2**31 - 1
MAX_ARRIVAL_S = 1e7
MAX_LABEL_CHARS = 64
FIELDS = ("arrival", "prompt", "prompt_len", "prefix_group", "prefix_len", "output_len", "id")
UNKNOWN_OUTPUT_ID = -1


class TraceError(Refusal):
    """A trace that cannot be used; `line` is 1-based (0: the file as a whole), `field` the offending key; `key`
    names the message serving.trace.<key>. Its message value puts the line and the field before that message
    (str(exc) is the English: what the command line prints; sim.words.why words it in either language)."""

    def __init__(self, line: int, field: str, key: str, /, **fields: object) -> None:
        self.line, self.field = line, field
        super().__init__(key, **fields)
        where = Msg("serving.trace.line", n=line) if line else Msg("serving.trace.file")
        message = Msg(f"serving.trace.{key}", **fields)
        self.msg = (Msg("serving.trace.at_field", where=where, field=field, message=message) if field
                    else Msg("serving.trace.at", where=where, message=message))


@dataclass(frozen=True, eq=False)
class TraceRequest:
    line: int  # 1-based line of the file
    arrival_s: float
    prompt: np.ndarray  # (P,) int32 token ids
    output_len: int
    group: str | None  # prefix_group, when the line gave lengths
    label: str

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)


@dataclass(frozen=True, eq=False)
class TraceFile:
    requests: tuple[TraceRequest, ...]
    num_bytes: int

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @property
    def prompt_len(self) -> np.ndarray:
        return np.array([r.prompt_len for r in self.requests], dtype=np.int64)

    @property
    def output_len(self) -> np.ndarray:
        return np.array([r.output_len for r in self.requests], dtype=np.int64)

    @property
    def arrival_s(self) -> np.ndarray:
        return np.array([r.arrival_s for r in self.requests], dtype=np.float64)

    @property
    def max_model_len(self) -> int:
        """The longest request: prompt + output (what one request alone must fit)."""
        return int((self.prompt_len + self.output_len).max())

    def to_prefix_trace(self) -> Trace:
        """The prefix cache's trace (sim.alloc.workload.Trace), outputs stored as UNKNOWN_OUTPUT_ID."""
        reqs = tuple(Request(r.prompt, np.full(r.output_len, UNKNOWN_OUTPUT_ID, dtype=np.int32), None, r.label,
                             (("prompt", r.prompt_len),)) for r in self.requests)
        return Trace(reqs, "uploaded trace")

    def to_workload(self) -> Workload:
        """The serving simulators' workload: arrivals in seconds (run it with tick_s = 1)."""
        o = self.output_len
        return Workload(self.arrival_s, self.prompt_len, o, o.copy(), max(2, self.max_model_len))

    def prompt_hashes(self, block_size: int) -> list[list[int]]:
        """Each request's full prompt blocks' hashes, chained to the parent (sim.alloc.prefix_cache)."""
        from sim.alloc.prefix_cache import block_hashes

        return [block_hashes(r.prompt, block_size) for r in self.requests]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"line": [r.line for r in self.requests], "request": [r.label for r in self.requests],
                             "arrival_s": self.arrival_s, "prompt_tokens": self.prompt_len,
                             "output_tokens": self.output_len,
                             "prefix_group": [r.group or "" for r in self.requests]})


def _whole(line: int, field: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and (
            not math.isfinite(value) or value != int(value))):
        raise TraceError(line, field, "not_whole", lo=f"{lo:,}", hi=f"{hi:,}", got=_short(value))
    v = int(value)
    if not lo <= v <= hi:
        raise TraceError(line, field, "out_of_range", lo=f"{lo:,}", hi=f"{hi:,}", got=f"{v:,}")
    return v


def _label(line: int, field: str, value) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TraceError(line, field, "not_label", got=_short(value))
    label = str(value)
    if not 1 <= len(label) <= MAX_LABEL_CHARS:
        raise TraceError(line, field, "label_length", max=f"{MAX_LABEL_CHARS}", got=f"{len(label):,}")
    return label


def _short(value) -> str:
    shown = json.dumps(value) if not isinstance(value, str) else repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


class _BadConstant(ValueError):
    """NaN, Infinity or -Infinity in a line: JSON has no such numbers."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(name)  # caught below and refused as a TraceError


def _refuse_constant(name: str):
    raise _BadConstant(name)


def _seeded_ids(key: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    return rng.integers(FIRST_ID, VOCAB_SIZE, size=n).astype(np.int32)


def _parse_line(line: int, piece: str) -> dict:
    try:
        obj = json.loads(piece, parse_constant=_refuse_constant)
    except RecursionError:
        raise TraceError(line, "", "nested") from None
    except _BadConstant as exc:
        raise TraceError(line, "", "bad_constant", name=exc.name) from None
    except json.JSONDecodeError as exc:  # json's own words for what is wrong, and where
        raise TraceError(line, "", "bad_json_at", msg=exc.msg, col=f"{exc.colno}") from None
    except ValueError as exc:
        raise TraceError(line, "", "bad_json", msg=str(exc).split(":")[0]) from None
    if not isinstance(obj, dict):
        raise TraceError(line, "", "not_object", got=type(obj).__name__)
    for key in obj:
        if key not in FIELDS:
            raise TraceError(line, _short(key)[:40], "unknown_field", fields=", ".join(FIELDS))
    return obj


def parse_trace(data: bytes | str, max_bytes: int = MAX_TRACE_BYTES) -> TraceFile:
    """Check and read a JSONL trace; raises TraceError naming the line and the field (str(exc) in English,
    sim.words.why(exc, lang) in either language)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise TraceError(0, "", "too_big", n=f"{len(raw):,}", max=f"{max_bytes:,}")
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise TraceError(line, "", "not_utf8", at=f"{exc.start:,}") from None
    rows: list[tuple[int, dict]] = []
    # JSON Lines ends a line at "\n" only: str.splitlines() would also split inside a string at U+2028, U+0085 or
    # a form feed, all of which valid JSON may hold as they are (a trailing "\r" is JSON whitespace)
    for i, piece in enumerate(decoded.split("\n"), start=1):
        if not piece.strip():
            continue
        if len(piece.encode()) > MAX_LINE_BYTES:
            raise TraceError(i, "", "line_too_big", n=f"{len(piece.encode()):,}", max=f"{MAX_LINE_BYTES:,}")
        if len(rows) >= MAX_TRACE_REQUESTS:
            raise TraceError(i, "", "too_many", max=f"{MAX_TRACE_REQUESTS:,}")
        rows.append((i, _parse_line(i, piece)))
    if not rows:
        raise TraceError(0, "", "empty")
    # prefix groups: the longest shared part each group needs, so every member draws the same leading ids
    group_len: dict[str, int] = {}
    parsed = []
    last_arrival, total = 0.0, 0
    for line, obj in rows:
        if "output_len" not in obj:
            raise TraceError(line, "output_len", "no_output")
        out = _whole(line, "output_len", obj["output_len"], 1, MAX_MODEL_LEN - 1)
        arrival = obj.get("arrival", 0)
        if isinstance(arrival, bool) or not isinstance(arrival, int | float) or not 0 <= arrival <= MAX_ARRIVAL_S:
            raise TraceError(line, "arrival", "arrival_range", max=f"{MAX_ARRIVAL_S:g}", got=_short(arrival))
        arrival = float(arrival)
        if arrival < last_arrival:
            raise TraceError(line, "arrival", "arrival_order", a=f"{arrival:g}", last=f"{last_arrival:g}")
        last_arrival = arrival
        label = _label(line, "id", obj["id"]) if "id" in obj else f"line {line}"
        if "prompt" in obj:
            for key in ("prompt_len", "prefix_group", "prefix_len"):
                if key in obj:
                    raise TraceError(line, key, "both_prompts")
            ids = obj["prompt"]
            if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_MODEL_LEN - 1:
                n = Msg("serving.trace.n_ids", n=f"{len(ids):,}") if isinstance(ids, list) else _short(ids)
                raise TraceError(line, "prompt", "prompt_list", max=f"{MAX_MODEL_LEN - 1:,}", got=n)
            for j, t in enumerate(ids):
                if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= MAX_TOKEN_ID:
                    raise TraceError(line, "prompt", "token_id", j=f"{j:,}", max=f"{MAX_TOKEN_ID:,}", got=_short(t))
            p, group, shared = len(ids), None, 0
            prompt = np.array(ids, dtype=np.int32)
        elif "prompt_len" in obj:
            p = _whole(line, "prompt_len", obj["prompt_len"], 1, MAX_MODEL_LEN - 1)
            group, shared, prompt = None, 0, None
            if "prefix_group" in obj:
                group = _label(line, "prefix_group", obj["prefix_group"])
                if "prefix_len" not in obj:
                    raise TraceError(line, "prefix_len", "no_prefix_len")
                shared = _whole(line, "prefix_len", obj["prefix_len"], 0, p)
                group_len[group] = max(group_len.get(group, 0), shared)
            elif "prefix_len" in obj:
                raise TraceError(line, "prefix_len", "no_group")
        else:
            raise TraceError(line, "prompt", "no_prompt")
        if p + out > MAX_MODEL_LEN:
            raise TraceError(line, "output_len", "too_long", p=f"{p:,}", out=f"{out:,}", max=f"{MAX_MODEL_LEN:,}")
        total += p + out - 1
        if total > MAX_TRACE_TOKENS:
            raise TraceError(line, "", "too_many_tokens", n=f"{total:,}", max=f"{MAX_TRACE_TOKENS:,}")
        parsed.append((line, arrival, prompt, p, group, shared, out, label))
    shared_ids = {g: _seeded_ids(f"group:{g}", n) for g, n in group_len.items()}
    reqs = []
    for line, arrival, prompt, p, group, shared, out, label in parsed:
        if prompt is None:
            head = shared_ids[group][:shared] if group is not None else np.zeros(0, np.int32)
            prompt = np.concatenate([head, _seeded_ids(f"line:{line}", p - shared)])
        reqs.append(TraceRequest(line, arrival, prompt, out, group, label))
    return TraceFile(tuple(reqs), len(raw))


def read_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> TraceFile:
    """parse_trace on a file; a file that is missing, too big or not a regular file (a FIFO, a device, a
    directory: reading one could block for ever or never end) is a TraceError too (read no more than the limit).
    The file is opened without blocking and checked on the opened descriptor, so nothing can swap it in between."""
    shown = repr(str(path)[:80])
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise TraceError(0, "", "cannot_read", path=shown, why=f"{exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TraceError(0, "", "not_regular", path=shown)
        if info.st_size > max_bytes:
            raise TraceError(0, "", "too_big", n=f"{info.st_size:,}", max=f"{max_bytes:,}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise TraceError(0, "", "cannot_read", path=shown, why=f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return parse_trace(data, max_bytes)


def blocks_to_hold(tf: TraceFile, block_size: int) -> int:
    """Blocks that hold every request's stored tokens at once: a cache that never has to evict."""
    return sum(cdiv(r.prompt_len + r.output_len - 1, block_size) for r in tf.requests)


def write_trace(requests: list[dict]) -> str:
    """JSONL text for a list of request dicts (examples, tests)."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in requests)
