"""Which events are late, as the language decides it: in arrival order, against the largest event
time before each (docs/language.md, "Semantics of the stateful operators").

Two stages apply this rule: the Sequencer (deployer.spark.streams.sequencer), a stateful operator
that also holds events back and releases them in event-time order; and, for a stream alone read
from files with WATERMARK 0 or whose order shows nowhere (deployer.spark.run.held), the file source
itself (deployer.spark.streams.file_source, `marked` below). Such a stream holds nothing back (with
WATERMARK 0 an event that is not late is not behind any earlier one, so arrival order is event-time
order; with a delay, nothing after it depends on the order), and its only state is its largest
event time so far, which the source carries in its offsets: the Sequencer's shuffle, state store and Python stages are then
not needed at all (about half of a small stateless micro-batch: docs/architecture.md, "What a run
costs on Spark").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.values import format_timestamp_iso, from_micros

LATE = "__late"  # the reason an event is late; NULL for the events released in order
LATE_TS = "__late_ts"  # a late event's event time (its event-time column is NULL: Spark refuses a
# stage's row older than its watermark, and the event goes no further than its dead letter)
NONE = np.iinfo(np.int64).min  # no event time seen yet; as a release limit: release nothing


def late_reason(ts: int, watermark: int, stream: str) -> str:
    """The reason a late event is dead-lettered, as the reference executor words it."""
    return (
        f"late: event time {format_timestamp_iso(from_micros(ts))} is behind the watermark "
        f"{format_timestamp_iso(from_micros(watermark))} of stream '{stream}'"
    )


def lateness(
    events: pa.Table | pa.RecordBatch, ts_column: str, latest: int, delay: int, stream: str
) -> tuple[np.ndarray, list[str], int]:
    """Which of a stream's `events` (in arrival order) are late, the reason of each late one, and the
    stream's largest event time after them; `latest` is the largest before them (NONE: none yet).
    An event is late when it is behind the largest event time before it by more than `delay`."""
    ts = micros(events, ts_column)
    before = np.concatenate([[latest], np.maximum.accumulate(np.maximum(ts, latest))[:-1]])[: len(ts)]
    late = (before != NONE) & (ts < np.where(before == NONE, ts, before) - delay)
    reasons = [
        late_reason(int(t), int(b) - delay, stream) for t, b in zip(ts[late], before[late], strict=True)
    ]
    return late, reasons, max(latest, int(ts.max())) if len(ts) else latest


def micros(table: pa.Table | pa.RecordBatch, column: str) -> np.ndarray:
    return np.asarray(table.column(column).cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _events(batch: pa.RecordBatch, ts_column: str, reason: str) -> np.ndarray:
    """The rows of a file source's batch that are events with an event time (the others: records it
    rejected, with their `reason`, and events without event time, which are dead letters too)."""
    ok = pc.and_(pc.is_null(batch.column(reason)), pc.is_valid(batch.column(ts_column)))
    return np.flatnonzero(np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool))


def latest_after(batch: pa.RecordBatch, ts_column: str, reason: str, latest: int) -> int:
    """The stream's largest event time after a file source's `batch` of rows, `latest` before it."""
    rows = _events(batch, ts_column, reason)
    if not len(rows):
        return latest
    return max(latest, int(micros(batch.take(pa.array(rows)), ts_column).max()))


def marked(
    batch: pa.RecordBatch, ts_column: str, reason: str, latest: int, stream: str, delay: int = 0
) -> tuple[pa.RecordBatch, int]:
    """A file source's `batch` of rows with `LATE` and `LATE_TS` after its columns, as the
    Sequencer marks its late events (behind an earlier event by more than `delay`, its WATERMARK in
    µs); the stream's largest event time after it, `latest` before it. The other rows are passed as
    they are."""
    rows = _events(batch, ts_column, reason)
    events = batch.take(pa.array(rows, pa.int64()))
    late, reasons, latest = lateness(events, ts_column, latest, delay, stream)
    where = rows[late]
    column = batch.column(ts_column)
    is_late = np.zeros(batch.num_rows, dtype=bool)
    is_late[where] = True
    flags = pa.array(is_late)
    text: list[str | None] = [None] * batch.num_rows
    for row, why in zip(where.tolist(), reasons, strict=True):
        text[row] = why
    out = batch.set_column(
        batch.schema.get_field_index(ts_column),
        ts_column,
        pc.if_else(flags, pa.nulls(1, column.type)[0], column),
    )
    out = out.append_column(LATE, pa.array(text, pa.string()))
    late_ts = pc.if_else(flags, column, pa.nulls(1, column.type)[0])
    return out.append_column(LATE_TS, late_ts), latest
