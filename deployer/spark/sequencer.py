"""Event time on Spark as the reference executor has it: late events decided in arrival order, the
others released in event-time order, whatever the micro-batches.

The language (docs/language.md, "Semantics of the stateful operators") judges an event late against
its stream's watermark *on arrival*: the largest event time of the stream's earlier events less
WATERMARK. Spark only knows a watermark per micro-batch, so what it drops depends on where the
batches are cut. So every stream with event time passes through this stage first, a stateful
operator with one key per stream (its state: the largest event time so far, and the events held):

- each micro-batch's events, in arrival order (`__seq`), are compared with the largest event time
  before each of them: an event behind it by more than WATERMARK is late, and leaves here marked with
  its reason (deployer.spark.sources makes it a dead letter, stage `late`, as the reference does);
- the others are held until the stream's watermark reaches them, then released in event-time order
  (ties in arrival order), so every operator downstream gets its events in the reference executor's
  order, micro-batch after micro-batch, and never one behind Spark's own watermark (which is declared
  on the stream before this stage, and so counts every event the stream delivers, whatever the
  operators downstream drop: docs/architecture.md, decision 10);
- at the end of a bounded input (`--until-idle`), the source's end-of-input row
  (deployer.spark.file_source) releases what is still held, as the reference executor does when its
  input ends. A later run on the same checkpoint goes on with the stream: its events come after.

With WATERMARK 0 (the default) nothing is ever held: an event that is not late is not behind any
earlier one. The stage is one Python call per micro-batch and stream, on Arrow batches packed into a
few rows (deployer.spark.arrow_batches), like the TUPLE window's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.spark.arrow_batches import coalesced, packed, unpacked
from deployer.spark.columns import col_name
from deployer.spark.file_source import END, SEQ
from operators.values import format_timestamp_iso, from_micros

LATE = "__late"  # the reason an event is late; NULL for the events released in order
LATE_TS = "__late_ts"  # a late event's event time (its event-time column is NULL: see `sequenced`)
_KEY = "__stream"
_PACKED = T.StructType([T.StructField(_KEY, T.LongType()), T.StructField("__events", T.BinaryType())])
PACK_ROWS = 100_000
_NONE = np.iinfo(np.int64).min  # no event time seen yet


def late_reason(ts: int, watermark: int, stream: str) -> str:
    """The reason a late event is dead-lettered, as the reference executor words it."""
    return (
        f"late: event time {format_timestamp_iso(from_micros(ts))} is behind the watermark "
        f"{format_timestamp_iso(from_micros(watermark))} of stream '{stream}'"
    )


class Sequencer(StatefulProcessor):
    """One key: a stream. State: the largest event time so far and the events held (an Arrow IPC
    blob). See the module docstring."""

    def __init__(self, stream: str, ts_column: str, delay_us: int, input_columns: list[str]) -> None:
        self.stream = stream
        self.ts = ts_column
        self.delay = delay_us
        self.input_columns = input_columns
        self.state_schema = T.StructType(
            [
                T.StructField("max", T.LongType()),
                T.StructField("held", T.BinaryType()),
            ]
        )

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("stream", self.state_schema)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        blobs: list[bytes] = []
        for frame in rows:
            frame.columns = self.input_columns
            blobs.extend(frame["__events"].tolist())
        events, ended = _arrivals(blobs)
        stored = self.state.get()
        latest = _NONE if stored is None or stored[0] is None else int(stored[0])
        held = unpacked([stored[1]]) if stored is not None and stored[1] is not None else None
        ts = _micros(events, self.ts)
        # the largest event time before each event, in arrival order
        before = np.concatenate([[latest], np.maximum.accumulate(np.maximum(ts, latest))[:-1]])[: len(ts)]
        late = (before != _NONE) & (ts < np.where(before == _NONE, ts, before) - self.delay)
        latest = max(latest, int(ts.max())) if len(ts) else latest
        held = self._held(held, events.filter(pa.array(~late)))
        held_ts = _micros(held, self.ts)
        now = np.ones(held.num_rows, dtype=bool)
        if not ended:
            now = held_ts <= (latest - self.delay if latest != _NONE else _NONE)
        # `held` is in arrival order (the events held before this batch came first): a stable sort by
        # event time gives (event time, arrival). With WATERMARK 0 the events are in order already.
        released = held.filter(pa.array(now))
        if self.delay:
            released = released.take(pa.array(np.argsort(held_ts[now], kind="stable")))
        held = held.filter(pa.array(~now))
        self.state.update((None if latest == _NONE else latest, _blob(held) if held.num_rows else None))
        reasons = [
            late_reason(int(t), int(b) - self.delay, self.stream)
            for t, b in zip(ts[late], before[late], strict=True)
        ]
        out = self._marked(released, events.filter(pa.array(late)), reasons)
        if out.num_rows:
            yield pd.DataFrame({_KEY: [0], "__events": [_blob(out)]})

    @staticmethod
    def _held(held: pa.Table | None, on_time: pa.Table) -> pa.Table:
        return (
            on_time if held is None else pa.concat_tables([held, on_time.cast(held.schema)]).combine_chunks()
        )

    def _marked(self, released: pa.Table, late: pa.Table, reasons: list[str]) -> pa.Table:
        """The released events, then the late ones with their reason and their event time moved to
        `__late_ts` (Spark refuses a stage's row older than its watermark)."""
        n = released.num_rows
        released = released.append_column(LATE, pa.nulls(n, pa.string()))
        released = released.append_column(LATE_TS, pa.nulls(n, released.schema.field(self.ts).type))
        if not late.num_rows:
            return released
        kept_ts = late.column(self.ts)
        late = late.set_column(
            late.schema.get_field_index(self.ts), self.ts, pa.nulls(late.num_rows, kept_ts.type)
        )
        late = late.append_column(LATE, pa.array(reasons, pa.string())).append_column(LATE_TS, kept_ts)
        return pa.concat_tables([released, late.cast(released.schema)])

    def close(self) -> None:
        pass


def _arrivals(blobs: list[bytes]) -> tuple[pa.Table, bool]:
    """A micro-batch's events of the stream in arrival order (`__seq`), and whether its end-of-input
    row is among them. Each blob holds consecutive events of one partition, in order: the blobs are
    put in the order of their first event, and only when their ranges overlap is every event sorted
    (a sort of the order keys, which are text, is most of the cost of this stage otherwise)."""
    tables = sorted(
        (t for t in (pa.ipc.open_stream(b).read_all() for b in blobs) if t.num_rows), key=_first_seq
    )
    whole = pa.concat_tables(tables).combine_chunks() if tables else None
    if whole is None:
        raise ValueError("the Sequencer got no rows")
    ends = pc.fill_null(whole.column(END), False)
    ended = bool(pc.any(ends).as_py())
    events = whole.filter(pc.invert(ends)).drop_columns([END])
    bounds = [(_first_seq(t), _last_seq(t)) for t in tables]
    overlapping = any(a[1] > b[0] for a, b in itertools.pairwise(bounds) if a[1] and b[0])
    if overlapping or not all(map(_in_order, tables)):
        events = events.sort_by(SEQ)
    return events, ended


def _first_seq(table: pa.Table) -> str:
    seqs = table.column(SEQ).drop_null()
    return str(seqs[0].as_py()) if len(seqs) else ""


def _last_seq(table: pa.Table) -> str:
    seqs = table.column(SEQ).drop_null()
    return str(seqs[len(seqs) - 1].as_py()) if len(seqs) else ""


def _in_order(table: pa.Table) -> bool:
    """Whether a blob's events are in arrival order (they are, as a partition reads them; checked,
    cheaply, to rely on it)."""
    seqs = table.column(SEQ).drop_null()
    if len(seqs) < 2:
        return True
    return bool(pc.all(pc.less_equal(seqs.slice(0, len(seqs) - 1), seqs.slice(1))).as_py())


def _micros(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _blob(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def sequenced(events: DataFrame, stream: str, ts_index: int, delay_ms: int) -> DataFrame:
    """`events` (a stream's events `_0.._n`, `__seq` and `__end`, its watermark declared on its
    event-time column) through the Sequencer: the same columns but `__end`, plus `__late` and
    `__late_ts`, released in order or marked late. The event-time column keeps the watermark's
    metadata, so the stateful operators downstream see the stream's watermark."""
    ts = col_name(ts_index)
    columns = [f for f in events.schema.fields if f.name != END]

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in coalesced(batches, PACK_ROWS):
            keyed = batch.append_column(_KEY, pa.array(np.zeros(batch.num_rows, dtype=np.int64)))
            yield packed(keyed, _KEY)

    processor = Sequencer(stream, ts, delay_ms * 1000, _PACKED.names)
    held = (
        events.mapInArrow(pack, _PACKED)
        .groupBy(F.col(_KEY))
        .transformWithStateInPandas(
            statefulProcessor=processor, outputStructType=_PACKED, outputMode="Append", timeMode="EventTime"
        )
    )
    out = T.StructType(
        [
            *columns,
            T.StructField(LATE, T.StringType()),
            T.StructField(LATE_TS, events.schema[ts].dataType),
        ]
    )

    def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for blob in batch.column("__events").to_pylist():
                yield from pa.ipc.open_stream(blob).read_all().to_batches()

    return held.mapInArrow(unpack, out)
