"""A source's parsed rows, as the Python stage that parses its records makes them (a file source's
reader, deployer.spark.streams.file_source; a trigger's, trigger_source; a Redis stream's parsing
`mapInArrow`, redis_source): their columns, their Arrow batches, and the dead letters among them
spooled by that stage as it parses them (`spooling`), for the query that writes them
(deployer.spark.streams.sources `reader_spool` says where and which).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from deployer.connectors.records import converted
from deployer.spark.streams.lateness import LATE, LATE_TS
from deployer.spark.streams.task_spool import EVENT, spool_failed, task_of, writes_for
from deployer.spark.translate.columns import struct_of
from operators.datatypes import Schema

SEQ = "__seq"
REASON = "__reason"
RAW = "__raw"
ORIGIN = "__origin"
END = "__end"
# The SEQ of a merged stream's placeholder row: no event's (those are digits). It moves the stream's
# watermark on Spark and goes no further (deployer.spark.streams.merge_sequencer, file_source).
PLACEHOLDER = "~placeholder"
_SPOOLED = "spooled"  # the reader's option that carries `reader_spool`'s spec


def parsed_schema(schema: Schema, ts_index: int | None = None) -> T.StructType:
    """The rows of the source: the event's fields (`_0`, `_1`, ...), its arrival position, and, for a
    record that was rejected, the reason, its text and where it came from; `__end` marks the
    end-of-input row. A stream whose late events are marked here (`ts_index`: its event time's
    field) has `LATE` and `LATE_TS` too, as the Sequencer's output has (deployer.spark.streams.lateness)."""
    fields = struct_of(schema).fields
    late = (
        []
        if ts_index is None
        else [T.StructField(LATE, T.StringType()), T.StructField(LATE_TS, fields[ts_index].dataType)]
    )
    return T.StructType(
        [
            *fields,
            T.StructField(SEQ, T.StringType()),
            T.StructField(REASON, T.StringType()),
            T.StructField(RAW, T.StringType()),
            T.StructField(ORIGIN, T.StringType()),
            T.StructField(END, T.BooleanType()),
            *late,
        ]
    )


def spooling(batches: Iterator[pa.RecordBatch], spooled: dict[str, Any] | None) -> Iterator[pa.RecordBatch]:
    """A source's parsed `batches`, their dead letters spooled on the way (`spool_rejects`) when
    the stage that parses them is given `spooled` (sources.reader_spool)."""
    for k, rows in enumerate(batches):
        if spooled is not None:
            spool_rejects(rows, spooled, k)
        yield rows


def spool_rejects(rows: pa.RecordBatch, spooled: dict[str, Any], k: int) -> None:
    """Spool the dead letters among a source's parsed `rows` (`k`: their place in the task's
    batches) in the task that parses them (a file source's or a trigger's reader, a Redis stream's
    parsing stage; `spooled`: sources.reader_spool), as sources.rejects says them: the records
    that did not convert and the events without event time (`input-<stream>`), and the late events
    when a file source's reader marks them (`late-<stream>`), for the query that writes them. The
    rows go on whole: the plan counts the records read and drops these. A `mapInArrow` after the
    parse spooled them before: a Python stage more per micro-batch."""
    ts, late = spooled["ts"], spooled["late"]
    if late is not None and LATE in rows.schema.names and writes_for(late[1]):
        is_late = pc.is_valid(rows.column(LATE))
        if pc.any(is_late).as_py():
            batch_id, part = task_of()
            given = [rows.column(LATE_TS if v == ts else v) for v in spooled["values"]]
            event = pa.StructArray.from_arrays(given, names=spooled["values"])
            folder = Path(late[0]) / batch_id
            spool_failed(
                folder, rows.append_column(EVENT, event), is_late, LATE, spooled["late_fixed"], part, k
            )
    rejected = pc.is_valid(rows.column(REASON))
    untimed = pa.array(np.zeros(rows.num_rows, dtype=bool))
    if ts is not None:
        ended = pc.fill_null(rows.column(END), False)
        untimed = pc.and_(pc.and_(pc.invert(rejected), pc.invert(ended)), pc.is_null(rows.column(ts)))
        if LATE in rows.schema.names:  # a late event marked here has its event time in LATE_TS
            untimed = pc.and_(untimed, pc.is_null(rows.column(LATE)))
    failed = pc.or_(rejected, untimed)
    if not pc.any(failed).as_py() or not writes_for(spooled["input"][1]):
        return
    text, number = pa.scalar(None, pa.string()), pa.scalar(None, pa.int64())
    columns = {  # as sources.rejects says them
        _REJECTED: pc.if_else(rejected, rows.column(REASON), pc.if_else(untimed, spooled["untimed"], text)),
        "stage": pc.if_else(rejected, "input", spooled["op"]),
        "record": pc.if_else(rejected, rows.column(RAW), text),
        "source": pc.if_else(rejected, rows.column(ORIGIN), text),
        "node": pc.if_else(untimed, spooled["node"], text),
        "line": pc.if_else(untimed, pa.scalar(spooled["line"], pa.int64()), number),
        EVENT: pa.StructArray.from_arrays(
            [rows.column(v) for v in spooled["values"]], names=spooled["values"], mask=pc.invert(untimed)
        ),
        SEQ: rows.column(SEQ),
    }
    dead = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
    per_row = ["stage", "record", "source", "node", "line"]
    batch_id, part = task_of()
    folder = Path(spooled["input"][0]) / batch_id
    spool_failed(folder, dead, failed, _REJECTED, spooled["fixed"], part, k, per_row)


_REJECTED = "__rejected"  # `spool_rejects`' reason a row is a dead letter


def arrow_schema(schema: Schema) -> pa.Schema:
    """`parsed_schema` as Arrow's, for the batches a reader yields."""
    out = parsed_schema(schema)
    return pa.schema([pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in out.fields])


def end_batch(arrow: pa.Schema) -> pa.RecordBatch:
    """The end-of-input row alone, which tells the Sequencer that the stream is over (file_source's
    module docstring)."""
    rows = RowsBuilder(arrow)
    rows.end()
    return rows.batch()


def placeholder_batch(arrow: pa.Schema, ts_column: str, ts: int) -> pa.RecordBatch:
    """A stream's placeholder row alone, of the schema `arrow`: its event time `ts` (µs), `PLACEHOLDER`
    as its SEQ, END set where the schema has it (a source's row: it is no record read), NULLs else.
    A source places it (file_source), and a merge's Sequencer releases it (merge_sequencer)."""
    given = {END: True, ts_column: ts, SEQ: PLACEHOLDER}
    return pa.RecordBatch.from_arrays(
        [pa.array([given.get(f.name)], type=f.type) for f in arrow], schema=arrow
    )


class RowsBuilder:
    """The columns of a batch of parsed rows (`parsed_schema`'s, as `arrow`), built a record at a
    time: by `records_batch` and by a Redis stream's parsing stage (redis_source)."""

    def __init__(self, arrow: pa.Schema) -> None:
        self.arrow = arrow
        self.width = arrow.get_field_index(SEQ)  # the event's values, then SEQ, REASON, RAW, ORIGIN, END
        self.end_at = arrow.get_field_index(END)
        self.cols: list[list[Any]] = [[] for _ in arrow]

    def record(self, values: Sequence[Any], seq: str, reason: str | None, text: str, origin: str) -> None:
        """A record converted to `values`, or rejected for `reason` (then its text and origin kept)."""
        for i, v in enumerate(values):
            self.cols[i].append(v)
        tail = (seq, reason, text if reason else None, origin if reason else None, None)
        for i, v in enumerate(tail, start=self.width):
            self.cols[i].append(v)

    def end(self) -> None:
        """The end-of-input row: END true, every other column NULL."""
        for i, c in enumerate(self.cols):
            c.append(True if i == self.end_at else None)

    def batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(self.cols, self.arrow, strict=True)], schema=self.arrow
        )


def records_batch(records: Iterator[Any], position: int, schema: Schema, arrow: pa.Schema) -> pa.RecordBatch:
    """The rows of one file (or of one trigger's ticks, deployer.spark.streams.trigger_source): each
    record converted, or rejected with its reason; `position` orders them after earlier batches."""
    rows = RowsBuilder(arrow)
    for n, rec in enumerate(records):
        values, reason = converted(rec, schema)
        rows.record(values, f"{position:012d}\x00{n:012d}", reason, rec.text, rec.source)  # file, then record
    return rows.batch()


def spool_options(spooled: dict[str, Any] | None) -> dict[str, str]:
    """A reader's option for `spooled` (sources.reader_spool), none without it; `spool_option`
    reads it back."""
    return {} if spooled is None else {_SPOOLED: json.dumps(spooled)}


def spool_option(options: Mapping[str, str]) -> dict[str, Any] | None:
    """What `spool_options` gave a reader: where and for which query it spools, or None."""
    return json.loads(options[_SPOOLED]) if _SPOOLED in options else None
