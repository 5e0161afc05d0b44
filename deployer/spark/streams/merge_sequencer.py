"""The Sequencer of streams that meet in a merge: their events released in one event-time order.

The language merges a Union's inputs by event time, then input, then arrival, and the merge's
watermark is the least of its inputs' (docs/language.md, "Merges"). A Sequencer per stream
(deployer.spark.streams.sequencer) releases each stream on its own watermark; when a micro-batch holds more
of one stream than of another (its files arrived earlier, or `--max-files-per-trigger` cut them
differently), the merge would get the first stream's later events before the other's earlier ones,
in an earlier micro-batch. So the streams that meet in a merge (operators.analysis.merged_sources)
are sequenced together. Each stream keeps one stateful stage of its own, as a stream alone does, but
the stage reads the events of every stream of the merge (one packed, tagged stream, the same input
for all of them: one shuffle of the sources, which the stages share where the query may reuse it,
deployer.spark.run.starting `reuses_exchanges`; where not, each stage reads and shuffles the
sources again: n streams, n reads), and keeps, beside its own
stream's largest event time and held events, every other stream's largest event time and whether
it ended:

- its own stream's late events are decided on arrival by its own WATERMARK, as a stream alone's;
- its events are released only below the merge's watermark, the least of the watermarks of the
  streams that have not ended (largest event time - WATERMARK), and not before each of those streams
  has had an event (one that has none yet may still bring the earliest); strictly below it, as an
  event of another stream that comes later may be at that time and go first (input order);
- a stream ends with its end-of-input row (deployer.spark.streams.file_source), and goes on if events come
  after it (a later run on the same checkpoint): when all have ended, everything is released;
- a stream that ended without a single event does not hold the merge's watermark back (the
  language's rule at the end of the input), but Spark's would stay at 0 for it: Spark takes the
  least of its streams' watermarks, counting one that never saw a row as 0, so no TIME window after
  the merge would ever fire. So when all have ended, such a stream's stage releases one
  **placeholder** row (`PLACEHOLDER` as its `__seq`, NULLs but its event time): its event time puts
  the stream's watermark at the merge's, and it is dropped right after Spark's watermark is declared
  on it (deployer.spark.streams.sources), before any operator sees it;
- Spark keeps each stream's watermark in the driver's memory only: a query started again counts a
  stream that releases nothing as 0, and one that releases a few events as at their largest, so a
  stream silent since the last run would hold the merge back. So a stream that has had events
  releases a placeholder row with every micro-batch its stage runs, no earlier than any event it
  released and earlier than any it holds (its largest event time, or just below the merge's
  watermark while it holds events).

So every stream of a merge releases, micro-batch after micro-batch, only events that come before any
event any of them releases later, and a Union downstream (which sorts each micro-batch by event time,
then input and arrival) takes them in the reference's merged order. A query that reads one of the
streams alone sees the same events, later.

Spark's watermark (when the script declares one: deployer.spark.run.watermarks.declares_watermarks) is
declared after this stage, on what it releases (deployer.spark.streams.sources): a
query that reads one of the streams alone must see that stream's watermark, not the merge's (its
TIME windows fire at the end as far as that stream's watermark goes), and a watermark declared
before the stage would be in every query that reads any stream of the merge. Declared after, it is
the stream's largest released event time - WATERMARK, which the next micro-batch's events never fall
behind: they come at or after the merge's watermark, which the released events are below. Every
released event counts, whatever the statements after the merge drop: an observation right on the
watermark keeps Spark's optimizer from pushing their filters below it (deployer.spark.streams.sources).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.spark.streams.arrow_batches import unpacked
from deployer.spark.streams.parsed_rows import END, placeholder_batch
from deployer.spark.streams.sequencer import (
    ALL,
    KEY,
    NONE,
    PACKED,
    TAG,
    TAGGED,
    arrivals,
    blob,
    joined,
    lateness,
    marked,
    out_schema,
    packer,
    release,
)
from deployer.spark.translate.columns import col_name

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Merged:
    """One stream of a merge: its name, its events (`_0.._n`, `__seq`, `__end`; no watermark
    declared), the position of its event-time column and its WATERMARK."""

    stream: str
    events: DataFrame
    ts_index: int
    delay_ms: int


class MergeSequencer(StatefulProcessor):
    """One key for the merge; the stream `own` (an index into the merge's streams) is the one it
    releases. State: every stream's largest event time and whether it ended, and `own`'s held events
    (an Arrow IPC blob). See the module docstring."""

    def __init__(
        self, streams: list[str], ts_columns: list[str], delays_us: list[int], own: int, released: pa.Schema
    ) -> None:
        self.streams = streams
        self.released = released  # what the stage releases: its stream's columns, `__late`, `__late_ts`
        self.ts = ts_columns
        self.delays = delays_us
        self.own = own
        self.state_schema = T.StructType(
            [
                T.StructField("max", T.ArrayType(T.LongType())),
                T.StructField("ended", T.ArrayType(T.BooleanType())),
                T.StructField("held", T.BinaryType()),
            ]
        )

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("merge", self.state_schema)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        blobs: dict[int, list[bytes]] = {}
        for frame in rows:
            frame.columns = TAGGED.names
            for tag, events in zip(frame[TAG].tolist(), frame["__events"].tolist(), strict=True):
                blobs.setdefault(int(tag), []).append(events)
        stored = self.state.get()
        n, own = len(self.streams), self.own
        maxes = [int(m) for m in stored[0]] if stored is not None else [NONE] * n
        ended = [bool(e) for e in stored[1]] if stored is not None else [False] * n
        held = unpacked([stored[2]]) if stored is not None and stored[2] is not None else None
        for t in (t for t in blobs if t != own):
            maxes[t], ended[t] = _watched(blobs[t], self.ts[t], maxes[t], ended[t])
        late_events: pa.Table | None = None
        reasons: list[str] = []
        if own in blobs:
            events, end = arrivals(blobs[own])
            late, reasons, maxes[own] = lateness(
                events, self.ts[own], maxes[own], self.delays[own], self.streams[own]
            )
            ended[own] = end or (ended[own] and not events.num_rows)
            held = joined(held, events.filter(pa.array(~late)))
            late_events = events.filter(pa.array(late))
        if held is None:
            self.state.update((maxes, ended, None))
            yield from self._placeholder(maxes, ended, maxes[own])
            return
        limit = _limit(maxes, ended, self.delays)
        released, held = release(held, self.ts[own], limit, inclusive=False)
        self.state.update((maxes, ended, blob(held) if held.num_rows else None))
        out = marked(
            released, released.slice(0, 0) if late_events is None else late_events, reasons, self.ts[own]
        )
        if out.num_rows:
            yield pd.DataFrame({KEY: [0], "__events": [blob(out)]})
        # what it released is below the merge's watermark, and at most its largest event time
        yield from self._placeholder(maxes, ended, NONE if limit == NONE else min(maxes[own], limit - 1))

    def _placeholder(self, maxes: list[int], ended: list[bool], released: int) -> Iterator[pd.DataFrame]:
        """The placeholder row of the stream: at `released`, at least the largest event time it has
        released (all micro-batches), when it has released one, so that Spark's watermark for the
        stream, which Spark keeps in memory only, counts what it released before a query's start too;
        else, once every stream has ended and some had events, at the merge's watermark plus the
        stream's WATERMARK, so that Spark's watermark for the stream is the merge's (the module
        docstring)."""
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        own = self.own
        if maxes[own] != NONE:
            if released == NONE:
                return
            ts = released
        elif not all(ended):
            return
        else:
            merge = [m - d for m, d in zip(maxes, self.delays, strict=True) if m != NONE]
            if not merge:
                return
            ts = min(merge) + self.delays[own]
        row = placeholder_batch(self.released, self.ts[own], ts)
        yield pd.DataFrame({KEY: [0], "__events": [blob(pa.Table.from_batches([row]))]})

    def close(self) -> None:
        pass


def _watched(blobs: list[bytes], ts_column: str, latest: int, ended: bool) -> tuple[int, bool]:
    """Another stream of the merge in this micro-batch: (its largest event time, whether it has
    ended). An event after its end-of-input row means it goes on (a later run)."""
    tables = [pa.ipc.open_stream(b).read_all() for b in blobs]
    end = False
    for table in tables:
        is_end = pc.fill_null(table.column(END), False)
        end |= bool(pc.any(is_end).as_py())
        ts = table.column(ts_column).filter(pc.invert(is_end)).drop_null()
        if len(ts):
            latest = max(latest, int(pc.max(ts.cast(pa.int64())).as_py()))
            ended = False
    return latest, ended or end


def _limit(maxes: list[int], ended: list[bool], delays: list[int]) -> int:
    """The merge's watermark: the least of its live streams' (NONE while one of them has had no
    event; ALL when all have ended)."""
    live = [(m, d) for m, e, d in zip(maxes, ended, delays, strict=True) if not e]
    if not live:
        return ALL
    if any(m == NONE for m, _ in live):
        return NONE
    return min(m - d for m, d in live)


def sequenced_jointly(streams: Sequence[Merged]) -> list[tuple[DataFrame, T.StructType]]:
    """The streams of one merge through their Sequencers: for each, in order, its Sequencer's own
    rows, as `sequencer.sequencer_rows` gives them for a stream alone, and what they release
    (`sequencer.out_schema`: its columns but `__end`, plus `__late` and `__late_ts`, which
    `sequencer.unpacked_rows` unpacks them into), released in the merge's order. No watermark: the
    caller declares it on what is released."""
    tagged = [s.events.mapInArrow(packer(k), TAGGED) for k, s in enumerate(streams)]
    # One DataFrame for every stage's input: Spark plans it once and reuses its shuffle.
    merged = reduce(DataFrame.union, tagged)
    names = [s.stream for s in streams]
    columns = [col_name(s.ts_index) for s in streams]
    delays = [s.delay_ms * 1000 for s in streams]
    out = []
    for k, s in enumerate(streams):
        released = out_schema(s.events, columns[k])
        processor = MergeSequencer(names, columns, delays, k, to_arrow_schema(released, timezone="UTC"))
        held = merged.groupBy(F.col(KEY)).transformWithStateInPandas(
            statefulProcessor=processor, outputStructType=PACKED, outputMode="Append", timeMode="None"
        )
        out.append((held, released))
    return out
