"""Input events for the differential fuzzer: JSON lines for a source stream's schema, with the
shapes that have split the engines before — NULLs, equal timestamps (and events at the largest
time so far, the watermark), events out of order within and beyond the WATERMARK (late), events
exactly on window boundaries, a tail of events that a WHERE is likely to drop, malformed records
— split over several files so that Spark's micro-batches cut the input at different points, or
spread over more files than one task of a file source reads, so that Spark reads a micro-batch in
several partitions side by side.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from fuzz_exprs import Draw
from hypothesis import strategies as st

from deployer.spark.streams.file_source import FILES_PER_PARTITION

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Seconds between an event and the one before it: ties, steps of a quarter second to a minute (the
# fuzzer's TIME windows are multiples of a quarter second: events on boundaries are common), out of
# order by a little (within most WATERMARKs) and by a lot (late); now and then an hour or a day
# (JUMPS), so that windows of an hour or a day close too.
STEPS = [0, 0, 0.25, 0.5, 1, 1.5, 2, 5, 5, 10, 10, 20, 30, 60, -0.5, -1, -3, -10, -45]
JUMPS = [3600, 86400]


def iso(ts: datetime) -> str:
    text = ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{ts.microsecond:06d}".rstrip("0") if ts.microsecond else "") + "Z"


def value(draw: Draw, kind: str, scale: int | None, precision: int | None) -> Any:
    """A JSON value for a field of `kind` (NULL about one time in eight)."""
    if draw(st.integers(0, 7)) == 0:
        return None
    if kind == "integer":
        return draw(st.sampled_from([0, 1, 2, 3, 4, -1, 5, 7, 10, 100, 2147483647, -2147483648]))
    if kind == "bigint":
        return draw(st.sampled_from([0, 1, 2, -3, 1000, 2**40, 9223372036854775807, -9223372036854775808]))
    if kind == "double":
        return draw(st.sampled_from([0.0, 1.5, -2.25, 0.1, 3.0, 1e15, -0.5, 2.5, 100.125]))
    if kind == "decimal":
        s = scale or 0
        digits = (precision or 10) - s
        top = Decimal(10) ** min(digits, 6) - 1
        choices = [Decimal(0), Decimal(1), Decimal("-1.5"), Decimal("0.01"), Decimal("2.5"), top, -top]
        d: Decimal = draw(st.sampled_from(choices))
        return DecimalText(d.quantize(Decimal(1).scaleb(-s)))
    if kind in ("varchar", "char"):
        return draw(st.sampled_from(["", "a", "b", "ab", "A", "é", "%", "_", " a ", "10", "x'y"]))
    if kind == "boolean":
        return draw(st.booleans())
    raise ValueError(f"no values for {kind}")


class DecimalText(str):
    """A decimal written as a JSON number with exactly its digits (not through a float)."""


def _json(record: dict[str, Any]) -> str:
    parts = []
    for k, v in record.items():
        text = str(v) if isinstance(v, DecimalText) else json.dumps(v, ensure_ascii=False)
        parts.append(f"{json.dumps(k)}: {text}")
    return "{" + ", ".join(parts) + "}"


def _malformed(draw: Draw, record: dict[str, Any], fields: Sequence[tuple[str, str]]) -> str:
    """A record the source must dead-letter (stage input), never stop on."""
    form = draw(st.integers(0, 3))
    if form == 0:
        return "{not json"
    name, kind = draw(st.sampled_from(list(fields)))
    bad = dict(record)
    if form == 1:
        bad.pop(name, None)  # a missing field
    else:
        bad[name] = {"integer": "abc", "bigint": "1.5", "double": "x", "boolean": "maybe"}.get(kind, [1, 2])
    return _json(bad)


def records(
    draw: Draw,
    fields: Sequence[tuple[str, str, int | None, int | None]],
    ts_field: str | None,
    size: int,
    null_keys: bool = False,
) -> list[str]:
    """`size` JSON lines for fields (name, kind, precision, scale); `ts_field` is the event time."""
    plain = [(n, k) for n, k, _, _ in fields if n != ts_field]
    offset = draw(st.sampled_from([0, 5, 10]))
    # a tail of events whose key is NULL: most WHEREs drop them, and they still move event time
    tail = draw(st.integers(0, 2)) if draw(st.booleans()) else 0
    if null_keys:  # a case aimed at a failure path: a NULL key (a table row's) is among them
        tail = max(tail, 1)
    lines = []
    top = offset  # the largest event time so far: the stream's watermark with WATERMARK 0
    for i in range(size):
        record: dict[str, Any] = {}
        for name, kind, precision, scale in fields:
            if name == ts_field:
                step = draw(st.sampled_from(STEPS)) if i else 0
                if i and draw(st.integers(0, 29)) == 0:
                    step = draw(st.sampled_from(JUMPS))
                offset += step
                if i and draw(st.integers(0, 11)) == 0:
                    # at the watermark (not late), where Spark's late rows are those at or behind
                    # it: a join dropped it, a pattern's match it completed failed the query
                    # (tests/spark/test_ties_at_the_watermark.py)
                    offset = top
                top = max(top, offset)
                record[name] = iso(T0 + timedelta(seconds=offset))
            else:
                record[name] = value(draw, kind, scale, precision)
        if i >= size - tail and "k" in record:
            record["k"] = None
        if draw(st.integers(0, 24)) == 0:
            lines.append(_malformed(draw, record, plain or [(ts_field or "k", "timestamp")]))
        else:
            lines.append(_json(record))
    return lines


# Files a source's input is spread over when they must fill several partitions of one micro-batch.
MANY_FILES = 2 * FILES_PER_PARTITION + 1


def split(draw: Draw, lines: list[str]) -> list[list[str]]:
    """The lines cut into 1 to 4 files (a file may be empty), in order."""
    if not lines:
        return [[]]
    cuts = sorted(draw(st.lists(st.integers(0, len(lines)), max_size=3)))
    out, start = [], 0
    for c in [*cuts, len(lines)]:
        out.append(lines[start:c])
        start = c
    return out


def spread(files: list[list[str]]) -> list[list[str]]:
    """A source's files' lines spread evenly over MANY_FILES files, in order, most of them empty, so
    that a micro-batch of them is three partitions (a source with no file keeps none)."""
    lines = [line for f in files for line in f]
    if not files:
        return files
    out: list[list[str]] = [[] for _ in range(MANY_FILES)]
    for i, line in enumerate(lines):
        out[i * MANY_FILES // len(lines)].append(line)
    return out
