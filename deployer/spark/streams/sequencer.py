"""Event time on Spark as the reference executor has it: late events decided in arrival order, the
others released in event-time order, whatever the micro-batches.

The language (docs/language.md, "Semantics of the stateful operators") judges an event late against
its stream's watermark *on arrival*: the largest event time of the stream's earlier events less
WATERMARK. Spark only knows a watermark per micro-batch, so what it drops depends on where the
batches are cut. So every stream with event time passes through this stage first, a stateful
operator with one key per stream (its state: the largest event time so far, and the events held),
but a stream alone with WATERMARK 0 read from files, which holds nothing back: its file source
marks its late events itself (deployer.spark.streams.lateness says why):

- each micro-batch's events, in arrival order (`__seq`), are compared with the largest event time
  before each of them: an event behind it by more than WATERMARK is late, and leaves here marked with
  its reason (deployer.spark.streams.sources makes it a dead letter, stage `late`, as the reference does);
- the others are held until the stream's watermark reaches them, then released in event-time order
  (ties in arrival order), so every operator downstream gets its events in the reference executor's
  order, micro-batch after micro-batch, and never one behind Spark's own watermark (which is declared
  on the stream before this stage, and so counts every event the stream delivers, whatever the
  operators downstream drop: docs/architecture.md, decision 10);
- at the end of a bounded input (`--until-idle`), the source's end-of-input row
  (deployer.spark.streams.file_source) releases what is still held, as the reference executor does when its
  input ends. A later run on the same checkpoint goes on with the stream: its events come after.

That is a stream alone. Streams that meet in a merge (a Union) must also be released in one order,
by event time across the streams: deployer.spark.streams.merge_sequencer sequences them together, with this
module's rules for each stream's late events and the merge's watermark for what it releases.

With WATERMARK 0 (the default) a stream alone holds nothing: an event that is not late is not
behind any earlier one. The stage is one Python call per micro-batch and stream, on Arrow batches
packed into a few rows (deployer.spark.streams.arrow_batches), like the TUPLE window's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.spark.streams.arrow_batches import coalesced, packed, unpacked
from deployer.spark.streams.lateness import LATE, LATE_TS, NONE, lateness, micros
from deployer.spark.streams.parsed_rows import END, SEQ
from deployer.spark.translate.columns import col_name

if TYPE_CHECKING:
    import pandas as pd

LATE_N = "__late_n"  # a count of late events, in a row of its own (spool.Spool.late)
KEY = "__stream"
PACKED = T.StructType([T.StructField(KEY, T.LongType()), T.StructField("__events", T.BinaryType())])
TAG = "__tag"  # which stream of a merge a packed row holds (deployer.spark.streams.merge_sequencer)
TAGGED = T.StructType([*PACKED.fields, T.StructField(TAG, T.LongType())])
PACK_ROWS = 100_000
ALL = np.iinfo(np.int64).max  # as a release limit: release everything


class Sequencer(StatefulProcessor):
    """One key: a stream. State: the largest event time so far and the events held (an Arrow IPC
    blob). See the module docstring."""

    def __init__(
        self, stream: str, ts_column: str, delay_us: int, input_columns: list[str], inclusive: bool = True
    ) -> None:
        self.stream = stream
        self.inclusive = inclusive
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
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        blobs: list[bytes] = []
        for frame in rows:
            frame.columns = self.input_columns
            blobs.extend(frame["__events"].tolist())
        events, ended = arrivals(blobs)
        stored = self.state.get()
        latest = NONE if stored is None or stored[0] is None else int(stored[0])
        held = unpacked([stored[1]]) if stored is not None and stored[1] is not None else None
        late, reasons, latest = lateness(events, self.ts, latest, self.delay, self.stream)
        held = joined(held, events.filter(pa.array(~late)))
        # A stream alone releases the events its watermark has reached, those at it included: one
        # that comes later at the same time goes after them anyway (arrival order). A merge's may not
        # (deployer.spark.streams.merge_sequencer): another stream's event at that time may go first; nor one
        # that meets itself in a merge: a later event's copy from the first input goes first.
        limit = ALL if ended else latest - self.delay if latest != NONE else NONE
        released, held = release(held, self.ts, limit, inclusive=self.inclusive)
        self.state.update((None if latest == NONE else latest, blob(held) if held.num_rows else None))
        out = marked(released, events.filter(pa.array(late)), reasons, self.ts)
        if out.num_rows:
            yield pd.DataFrame({KEY: [0], "__events": [blob(out)]})

    def close(self) -> None:
        pass


def joined(held: pa.Table | None, on_time: pa.Table) -> pa.Table:
    """The events held before, then those of this micro-batch that are not late: arrival order."""
    return on_time if held is None else pa.concat_tables([held, on_time.cast(held.schema)]).combine_chunks()


def release(held: pa.Table, ts_column: str, limit: int, inclusive: bool) -> tuple[pa.Table, pa.Table]:
    """(the events of `held` before `limit` (or at it, `inclusive`), in event-time order, the others).
    `held` is in arrival order, so a stable sort by event time gives (event time, arrival)."""
    ts = micros(held, ts_column)
    now = ts <= limit if inclusive else ts < limit
    released = held.filter(pa.array(now))
    order = np.argsort(ts[now], kind="stable")
    if len(order) > 1 and bool((order[1:] < order[:-1]).any()):  # a copy only when out of order
        released = released.take(pa.array(order))
    return released, held.filter(pa.array(~now))


def marked(released: pa.Table, late: pa.Table, reasons: list[str], ts_column: str) -> pa.Table:
    """The released events, then the late ones with their reason and their event time moved to
    `__late_ts` (Spark refuses a stage's row older than its watermark)."""
    n = released.num_rows
    released = released.append_column(LATE, pa.nulls(n, pa.string()))
    released = released.append_column(LATE_TS, pa.nulls(n, released.schema.field(ts_column).type))
    if not late.num_rows:
        return released
    kept_ts = late.column(ts_column)
    late = late.set_column(
        late.schema.get_field_index(ts_column), ts_column, pa.nulls(late.num_rows, kept_ts.type)
    )
    late = late.append_column(LATE, pa.array(reasons, pa.string())).append_column(LATE_TS, kept_ts)
    return pa.concat_tables([released, late.cast(released.schema)])


def arrivals(blobs: list[bytes]) -> tuple[pa.Table, bool]:
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


def blob(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def out_schema(events: DataFrame, ts: str) -> T.StructType:
    """What a Sequencer releases of `events`: its columns but `__end`, then `__late` and `__late_ts`."""
    return T.StructType(
        [
            *[f for f in events.schema.fields if f.name != END],
            T.StructField(LATE, T.StringType()),
            T.StructField(LATE_TS, events.schema[ts].dataType),
        ]
    )


def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The events of a Sequencer's packed output rows."""
    for batch in batches:
        for events in batch.column("__events").to_pylist():
            yield from pa.ipc.open_stream(events).read_all().to_batches()


def packer(tag: int | None = None) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow: a stream's rows packed into a few rows of key 0 (`PACKED`), tagged with `tag`
    (`TAGGED`) when given."""

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in coalesced(batches, PACK_ROWS):
            keyed = batch.append_column(KEY, pa.array(np.zeros(batch.num_rows, dtype=np.int64)))
            rows = packed(keyed, KEY)
            yield (
                rows if tag is None else rows.append_column(TAG, pa.array([tag] * rows.num_rows, pa.int64()))
            )

    return pack


def unpacked_rows(rows: DataFrame, released: T.StructType) -> DataFrame:
    """The Sequencer's own `rows` (`sequencer_rows`) unpacked into `released`, the `out_schema` of
    its events: their columns but `__end`, plus `__late` and `__late_ts`, released in order or
    marked late. The event-time column keeps the watermark's metadata, so the stateful operators
    downstream see the stream's watermark."""
    return rows.mapInArrow(unpack, released)


def sequencer_rows(
    events: DataFrame,
    stream: str,
    ts_index: int,
    delay_ms: int,
    self_merged: bool = False,
    timers: bool = False,
) -> DataFrame:
    """The Sequencer's own output rows (`PACKED`: a micro-batch's released and late events, as
    `unpacked_rows` unpacks them), for a stage that unpacks them itself (deployer.spark.streams.spool's
    late events). A stream that meets itself in a merge (`self_merged`,
    operators.analysis.self_merged_sources) is released strictly below its watermark: a later event
    at that time has a copy that goes before the released ones' second copies in the merge.
    `timers`: its operator in Spark's event-time mode, which an earlier layout's checkpoint keeps
    (deployer.spark.run.layout.sequencer_timers); the Sequencer sets no timer (it releases on its own
    largest event time), and without the mode Spark loads, lists and commits no timer state in each
    micro-batch."""
    ts = col_name(ts_index)
    processor = Sequencer(stream, ts, delay_ms * 1000, PACKED.names, inclusive=not self_merged)
    return (
        events.mapInArrow(packer(), PACKED)
        .groupBy(F.col(KEY))
        .transformWithStateInPandas(
            statefulProcessor=processor,
            outputStructType=PACKED,
            outputMode="Append",
            timeMode="EventTime" if timers else "None",
        )
    )
