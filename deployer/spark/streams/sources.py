"""Spark sources for `cep run --engine spark`: directories of event files, and synthetic events.

A file source (deployer.spark.streams.file_source) reads its files in arrival order and converts records
with the local engine's converter (deployer.connectors.records), so both engines accept, convert and
reject the same records with the same reasons; Redis streams: deployer.spark.streams.redis_source. Every
source's rows split here into events and dead letters (`split`); the streams with event time then
pass the Sequencer (`sequence`), which decides late events in arrival order and releases the others
in event-time order: a stream alone declares its watermark first (deployer.spark.streams.sequencer), the
streams that meet in a merge pass it together and declare theirs on what it releases
(deployer.spark.streams.merge_sequencer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.connectors.files import file_dir
from deployer.spark.metrics import INPUT_METRIC, LATE_METRIC, RELEASED_METRIC
from deployer.spark.streams import file_source as files
from deployer.spark.streams.merge_sequencer import Merged, sequenced_jointly
from deployer.spark.streams.parsed_rows import END, ORIGIN, PLACEHOLDER, RAW, REASON, SEQ
from deployer.spark.streams.sequencer import LATE, LATE_N, LATE_TS, out_schema, sequencer_rows, unpacked_rows
from deployer.spark.translate.columns import col_name, struct_of
from operators import graph as g

# Name prefixes of the observed metrics counting, per stream, the records read (`cep_in:<stream>`)
# and the late events (`cep_late:<stream>`); deployer.spark.run.progress sums them.


class SourceError(ValueError):
    pass


def file_source(
    spark: SparkSession, uri: str, node: g.Source, log: Path, max_files: int | None = None
) -> tuple[DataFrame, DataFrame]:
    """A directory of event files → `split`'s (events, dead letters); `log` is the source's arrival
    log (file_source)."""
    return split(file_parsed(spark, uri, node, log, max_files), node)


def file_parsed(
    spark: SparkSession,
    uri: str,
    node: g.Source,
    log: Path,
    max_files: int | None = None,
    sequenced: bool = False,
    spool: Any = None,
    merged: Sequence[Path] | None = None,
    unmarked: bool = False,
) -> DataFrame:
    """A directory of event files → its parsed rows (`parsed_rows.parsed_schema`), for `split`;
    `sequenced`: its late events marked by the source, with its WATERMARK, for a stream alone that
    passes no Sequencer (`sequence`'s `in_source`); `spool`: the deployment's spool, whose `input-<stream>` label it
    has, its reader's tasks spool its rejected records (`reader_spool`); `merged`: for a `sequenced`
    stream in a merge, the arrival logs of the merge's other streams, or of its partners
    (deployer.spark.run.coupled), `unmarked` when one of those is a stream that places no
    end-of-input row (file_source; a stream a Sequencer holds gets `merged` too)."""
    directory = file_dir(uri)
    if directory is None:
        raise SourceError(f"unsupported source URI {uri!r}; the Spark engine reads file:DIR or generator:")
    if not directory.is_dir():
        raise SourceError(f"source directory {directory} does not exist")
    spark.dataSource.register(files.FileStreamDataSource)
    reader = spark.readStream.format(files.NAME)
    marks = (_event_time(node)[0], node.stream, _event_time(node)[1] * 1000) if sequenced else None
    spooled = None if spool is None else reader_spool(node, spool, sequenced)
    held_ts = None if node.event_time is None else _event_time(node)[0]
    given = files.options(
        directory, str(directory), log, node.schema, max_files, marks, spooled, merged, unmarked, held_ts
    )
    for key, value in given.items():
        reader = reader.option(key, value)
    return reader.load()


def split(parsed: DataFrame, node: g.Source) -> tuple[DataFrame, DataFrame]:
    """A source's parsed rows (`parsed_rows.parsed_schema`) → (events, dead letters).

    The records read are counted as the local engine counts them (deployer.spark.run.progress sums the
    observation). Records that did not convert are dead letters of stage `input`; with event time,
    so are events without it (stage `Source`, as the reference executor's Source dead-letters them).
    The events of a stream with event time, with its end-of-input row, are for `sequence`."""
    parsed = counted(parsed, node)
    return events_of(parsed, node), rejects(parsed, node)


def counted(parsed: DataFrame, node: g.Source) -> DataFrame:
    """A source's parsed rows, the records read counted (`split`)."""
    is_end = F.coalesce(F.col(END), F.lit(False))
    return parsed.observe(f"{INPUT_METRIC}{node.stream}", F.count(F.when(~is_end, F.lit(1))).alias("rows"))


def events_of(parsed: DataFrame, node: g.Source) -> DataFrame:
    """`split`'s events of a source's parsed rows (a micro-batch of them too)."""
    is_end = F.coalesce(F.col(END), F.lit(False))
    values = _values(node)
    rejected = F.col(REASON).isNotNull()
    if node.event_time is None:
        return parsed.filter(~rejected & ~is_end).select(*values, SEQ)
    ts = F.col(col_name(node.schema.position(node.event_time)))
    if _marked_by_source(parsed):  # its late events (their event time moved) go on to `sequence`
        return parsed.filter(~rejected & (ts.isNotNull() | F.col(LATE).isNotNull())).select(
            *values, SEQ, LATE, LATE_TS
        )
    return parsed.filter(~rejected & (ts.isNotNull() | is_end)).select(*values, SEQ, END)


def _marked_by_source(parsed: DataFrame) -> bool:
    """Whether a source's parsed rows have their late events marked (`file_parsed`'s `sequenced`)."""
    return LATE in parsed.columns


def _untimed(parsed: DataFrame, node: g.Source, rejected: Column, is_end: Column) -> Column:
    """The rows of events without event time (dead letters of stage `Source`); not a late event
    whose source marked it, which has its event time in `LATE_TS`."""
    assert node.event_time is not None
    untimed = ~rejected & ~is_end & F.col(col_name(node.schema.position(node.event_time))).isNull()
    return untimed & F.col(LATE).isNull() if _marked_by_source(parsed) else untimed


def rejects(parsed: DataFrame, node: g.Source) -> DataFrame:
    """`split`'s dead letters of a source's parsed rows (a micro-batch of them too)."""
    is_end = F.coalesce(F.col(END), F.lit(False))
    values = _values(node)
    rejected = F.col(REASON).isNotNull()
    bad = parsed.filter(rejected).select(
        F.lit("input").alias("stage"),
        F.col(REASON).alias("reason"),
        F.col(RAW).alias("record"),
        F.col(ORIGIN).alias("source"),
    )
    if node.event_time is None:
        return bad
    untimed = parsed.filter(_untimed(parsed, node, rejected, is_end)).select(
        *_dead_event(node, f"event time field '{node.event_time}' is NULL", F.struct(*values))
    )
    # one filter of the rows, not two: a micro-batch's rows are read once for both
    return bad.unionByName(untimed, allowMissingColumns=True)


def reader_spool(node: g.Source, spool: Any, sequenced: bool) -> dict[str, Any]:
    """What the stage that parses a source's records (a file source's reader, a Redis stream's
    parser, a trigger's reader) needs to spool the stream's dead letters as its tasks parse them
    (parsed_rows.spool_rejects): where each goes and which query writes it, and what they say (as
    `rejects` says them).
    `sequenced`: a file source's reader marks the stream's late events, spooled if `spool` has them."""
    late = f"late-{node.stream}"
    where = {"stage": "late", "stream": node.stream, "node": node.id, "line": node.line}
    return {
        "input": [str(spool.root / f"input-{node.stream}"), spool.owner.get(f"input-{node.stream}")],
        "late": [str(spool.root / late), spool.owner.get(late)]
        if sequenced and late in spool.labels
        else None,
        "fixed": {"stream": node.stream},
        "late_fixed": where,
        "ts": None if node.event_time is None else col_name(_event_time(node)[0]),
        "untimed": f"event time field '{node.event_time}' is NULL",
        "op": node.op,
        "node": node.id,
        "line": node.line,
        "values": _values(node),
    }


def sequence(
    streams: Mapping[str, tuple[g.Source, DataFrame]],
    merges: Sequence[tuple[str, ...]],
    self_merged: Set[str] = frozenset(),
    marked: dict[str, tuple[DataFrame, bool]] | None = None,
    spool: Any = None,
    timers: bool = False,
    in_source: Set[str] = frozenset(),
    watermarks: bool = True,
    placed: Set[str] = frozenset(),
) -> dict[str, DataFrame]:
    """The streams with event time (stream → its node and `split`'s events) through the Sequencer: per
    stream, its events in order (its late events are split off per micro-batch by the dead-letters
    query, from `marked`: deployer.spark.run.failures). The streams of each of `merges` pass it
    together; the others alone, those of `self_merged` (streams that meet themselves in a merge)
    released strictly below their watermark. `marked`, if given, gets per stream the Sequencer's
    output before it splits (released and late rows: `released` splits a micro-batch of it) and
    whether it was merged. `spool`, if given, writes the late events of the streams among its labels
    (`late-<stream>`) from the tasks that unpack its Sequencer's rows (`_released`). `timers`: a
    stream alone's Sequencer in Spark's event-time mode, as an earlier layout's checkpoint has it.
    `in_source`: streams whose file source marked their late events (deployer.spark.run.held): no
    Sequencer; their late events are counted after their watermark and dropped there (if `spool` has
    their label, the source spooled them); `placed`: those in a merge, whose placeholder rows are
    dropped there too (file_source). `watermarks`: Spark's watermark declared on each stream
    (deployer.spark.run.watermarks.declares_watermarks): before a stream's Sequencer, but after it for
    those of a merge and of `self_merged`, which release strictly below the watermark."""
    out: dict[str, DataFrame] = {}
    marked = {} if marked is None else marked
    together = {s for merge in merges for s in merge}
    for stream, (node, timed) in streams.items():
        if stream in together:
            continue
        if stream in in_source:  # its late events marked by its source, and spooled with its rejects
            marked[stream] = (_marked(node, _watermarked(node, timed, watermarks)), stream in placed)
            out[stream] = released_events(node, marked[stream][0], merged=stream in placed)
            continue
        out[stream] = _sequenced_alone(node, timed, stream in self_merged, timers, watermarks, marked, spool)
    for merge in merges:
        nodes = [streams[s][0] for s in merge]
        merged = [Merged(n.stream, streams[s][1], *_event_time(n)) for s, n in zip(merge, nodes, strict=True)]
        for s, node, (rows, released) in zip(merge, nodes, sequenced_jointly(merged), strict=True):
            marked[s] = (_marked(node, unpacked_rows(rows, released)), True)
            events = _released(node, rows, released, marked[s][0], spool)
            out[s] = _placed(node, _on_release(node, events, watermarks))
    return out


def _sequenced_alone(
    node: g.Source,
    timed: DataFrame,
    self_merged: bool,
    timers: bool,
    watermarks: bool,
    marked: dict[str, tuple[DataFrame, bool]],
    spool: Any,
) -> DataFrame:
    """`sequence` of a stream alone (in no merge): its events through a Sequencer of its own, which
    puts its output before the split in `marked`."""
    index, delay = _event_time(node)
    # Declared before the Sequencer: the stream's watermark counts every event it delivers. But one
    # that meets itself in a merge is released strictly below its watermark, so an event at it came
    # out batches later, at Spark's watermark, where Spark's join took it as late (fuzzer seed 1824;
    # a join now takes an event at the watermark, deployer.spark.translate.join, but not one on a
    # checkpoint of the layout before); declared on what the Sequencer releases, as a merge's (an
    # earlier layout's Sequencer with timers needs it before).
    after = self_merged and not timers
    timed = _watermarked(node, timed, watermarks and not after)
    rows = sequencer_rows(timed, node.stream, index, delay, self_merged, timers)
    released = out_schema(timed, col_name(index))
    marked[node.stream] = (_marked(node, unpacked_rows(rows, released)), False)
    events = _released(node, rows, released, marked[node.stream][0], spool)
    return _on_release(node, events, watermarks) if after and watermarks else events


def _on_release(node: g.Source, events: DataFrame, watermarks: bool) -> DataFrame:
    """The events a Sequencer releases strictly below the stream's watermark (a merge's, or a stream
    that meets itself in one), with the stream's watermark declared on them if `watermarks`
    (deployer.spark.streams.merge_sequencer says why), and observed right there.

    The watermark must see every event the stream releases, as the reference's merge counts every
    event of its inputs (docs/language.md, "Merges"). Spark's optimizer pushes a filter that does not
    read the event-time column below a watermark (PushPredicateThroughNonJoin), through the Union,
    Maps and join after the merge: the split of the events that an aggregate's GROUP BY key, a Map or
    a WHERE fails on went there (as would a WHERE that does not count what it drops,
    CEP_COUNT_FILTERED=0), and Spark's watermark for the stream left those events out; when they were
    all of its events, it stayed at 0 and no TIME window after the merge fired (found by the
    differential fuzzer, seed 39106). An observation is a node it pushes no filter through: one right
    on the watermark keeps every later filter above it."""
    events = _watermarked(node, events, watermarks)
    return events.observe(f"{RELEASED_METRIC}{node.stream}", F.count(F.lit(1)).alias("rows"))


def _watermarked(node: g.Source, events: DataFrame, declared: bool = True) -> DataFrame:
    """`events` with the stream's watermark declared on its event time (its WATERMARK), if
    `declared`."""
    if not declared:
        return events
    index, delay = _event_time(node)
    return events.withWatermark(col_name(index), f"{delay} milliseconds")


def _event_time(node: g.Source) -> tuple[int, int]:
    """The position of a stream's event-time field and its WATERMARK in milliseconds."""
    assert node.event_time is not None
    return node.schema.position(node.event_time), node.watermark_ms or 0


def _marked(node: g.Source, ordered: DataFrame) -> DataFrame:
    """A Sequencer's output, its late events counted."""
    is_late = F.col(LATE).isNotNull()
    return ordered.observe(f"{LATE_METRIC}{node.stream}", F.count(F.when(is_late, F.lit(1))).alias("rows"))


def released(node: g.Source, marked: DataFrame, merged: bool) -> tuple[DataFrame, DataFrame]:
    """A Sequencer's output (`sequence`'s `marked`; a micro-batch of it too) → (the events it
    released, its late events as dead letters); `merged`: it passed the Sequencer with other streams,
    whose placeholder rows are no events (`_placed`)."""
    event = _late_event(node)
    late = marked.filter(F.col(LATE).isNotNull()).select(*_dead_event(node, F.col(LATE), event, stage="late"))
    return released_events(node, marked, merged), late


def _released(
    node: g.Source, rows: DataFrame, released: T.StructType, marked: DataFrame, spool: Any
) -> DataFrame:
    """`released_events` of a stream (not yet placed), from its Sequencer's own `rows` (`released`:
    what they unpack into) or its output (`marked`); when `spool` has the stream's label, its late
    events are written by the tasks that unpack `rows` (deployer.spark.streams.spool.Spool.late),
    which count them too."""
    label = f"late-{node.stream}"
    if spool is None or label not in spool.labels:
        return released_events(node, marked, merged=False)
    ts, _ = _event_time(node)
    where = {"stage": "late", "stream": node.stream, "node": node.id, "line": node.line}
    events_only = T.StructType([f for f in released.fields if f.name not in (LATE, LATE_TS)])
    events = spool.late(label, rows, events_only, col_name(ts), where)
    counted = events.observe(f"{LATE_METRIC}{node.stream}", F.sum(F.col(LATE_N)).alias("rows"))
    return counted.filter(F.col(LATE_N).isNull()).select(*_values(node), SEQ)


def _late_event(node: g.Source) -> Column:
    """A late event as its dead letter shows it: its values, its event time from `LATE_TS`."""
    index, _ = _event_time(node)
    return F.struct(
        *[F.col(LATE_TS).alias(v) if i == index else F.col(v) for i, v in enumerate(_values(node))]
    )


def _values(node: g.Source) -> list[str]:
    """The names of the source's value columns, in its schema's order."""
    return [col_name(i) for i in range(len(node.schema))]


def released_events(node: g.Source, marked: DataFrame, merged: bool) -> DataFrame:
    """`released`'s events only."""
    events = marked.filter(F.col(LATE).isNull()).select(*_values(node), SEQ)
    return _placed(node, events) if merged else events


def _placed(node: g.Source, events: DataFrame) -> DataFrame:
    """A merged stream's events without its placeholder row, which moves its watermark and goes no
    further. (Its condition reads the event time, which keeps it above the watermark.)"""
    ts = F.col(col_name(_event_time(node)[0]))
    return events.filter((F.col(SEQ) != F.lit(PLACEHOLDER)) | ts.isNull())


def _dead_event(
    node: g.Source, reason: str | Column, event: Column, stage: str | None = None
) -> list[Column]:
    """The columns of a dead event of `node` (deployer.spark.streams.dead_letters.dead_letter_frame)."""
    return [
        F.lit(stage or node.op).alias("stage"),
        (F.lit(reason) if isinstance(reason, str) else reason).alias("reason"),
        F.lit(node.id).alias("node"),
        F.lit(node.line).alias("line"),
        event.alias("event"),
    ]


def generator_source(spark: SparkSession, uri: str, node: g.Source, watermark: bool = True) -> DataFrame:
    """`generator:ROWS_PER_SECOND` — synthetic CDR-like events from Spark's rate source, for benchmarks.

    Integer fields cycle through value modulo small primes, timestamps follow the rate source's own
    clock, strings are the value's text: enough to exercise filters, maps and aggregates. With
    `watermark`, the stream's watermark is declared on its event time.
    """
    rate = uri.partition(":")[2] or "1000000"
    df = spark.readStream.format("rate").option("rowsPerSecond", int(rate)).load()
    cols = []
    primes = [1009, 997, 3607, 101, 7]
    schema = node.schema
    for i, f in enumerate(schema):
        v = F.col("value")
        k = f.type.kind
        if k in ("integer", "bigint"):
            c = (v % primes[i % len(primes)]).cast("long")
        elif k in ("double", "decimal"):
            c = (v % 1000) / 10.0
        elif k == "timestamp":
            c = F.col("timestamp")
        elif k == "boolean":
            c = (v % 2) == 0
        else:
            c = v.cast("string")
        cols.append(c.cast(struct_of(schema).fields[i].dataType).alias(col_name(i)))
    out = df.select(*cols, F.format_string("%020d", F.col("value")).alias(SEQ))
    if node.event_time is None:
        return out
    # In order by construction (the rate source's clock): its watermark, without a Sequencer.
    return _watermarked(node, out, watermark)
