"""Spark sources and sinks for `cep run --engine spark`.

Sources parse records with the same converter as the local engine (`deployer.connectors.files.to_event`), inside
`mapInArrow`, so both engines accept, convert and reject exactly the same records with the same
reasons. Sinks write the same JSON lines as the local engine; a file sink writes one file per
micro-batch named by the batch id, so a replayed batch overwrites its own file instead of doubling
it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from deployer.connectors.files import convert_record, event_json, file_dir, json_value
from deployer.spark.expr import col_name, struct_of
from deployer.spark.plan import SEQ
from operators import graph as g
from operators.types import Schema
from stores.arrow import micros_value
from stores.arrow import rows as arrow_rows

RAW = "__raw"
REASON = "__reason"
ORIGIN = "__origin"
# Name prefix of the observed metric counting the records of a file source, `cep_in:<stream>`.
INPUT_METRIC = "cep_in:"


class SourceError(ValueError):
    pass


def _parsed_schema(schema: Schema) -> T.StructType:
    fields = list(struct_of(schema).fields)
    fields += [
        T.StructField(SEQ, T.StringType()),
        T.StructField(REASON, T.StringType()),
        T.StructField(RAW, T.StringType()),
        T.StructField(ORIGIN, T.StringType()),
    ]
    return T.StructType(fields)


def _origin(directory: Path, path: str, start: int, n: int) -> str:
    """Where a record came from, as the local engine says it: `DIR/FILE:LINE` with DIR as given.

    Spark reads a large file in blocks and numbers lines only within a block; a record of any
    block but the first is `FILE (block START, record N)`."""
    name = unquote(urlsplit(path).path).rsplit("/", 1)[-1] if path.startswith("file:") else path
    shown = str(directory / name)
    return f"{shown}:{n + 1}" if start == 0 else f"{shown} (block {start}, record {n + 1})"


def _parser(schema: Schema, out: T.StructType, directory: Path) -> Any:
    arrow_types = [to_arrow_type(f.dataType, timezone="UTC") for f in out.fields]

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Lines are numbered per file block, across Arrow batches: a block longer than one batch
        # (maxRecordsPerBatch) must not number its lines from 1 again, or two records would share
        # a position (and a __seq).
        row_in_block: dict[tuple[str, int], int] = {}
        width = len(schema)
        for batch in batches:
            lines = batch.column("value").to_pylist()
            paths = batch.column("path").to_pylist()
            starts = batch.column("start").to_pylist()
            cols: list[list[Any]] = [[] for _ in out.fields]
            for text, path, start in zip(lines, paths, starts, strict=True):
                n = row_in_block.get((path, start), 0)
                row_in_block[(path, start)] = n + 1
                if text is None or not text.strip():
                    continue
                origin = _origin(directory, path, start, n)
                values, reason = convert_record(text, origin, schema)
                for i, v in enumerate(values):
                    cols[i].append(v)
                # Sorts in arrival order: files by name, then position in the file.
                cols[width].append(f"{path}\x00{start:020d}\x00{n:012d}")
                cols[width + 1].append(reason)
                cols[width + 2].append(text if reason else None)
                cols[width + 3].append(origin if reason else None)
            arrays = [pa.array(c, type=t) for c, t in zip(cols, arrow_types, strict=True)]
            yield pa.RecordBatch.from_arrays(
                arrays,
                schema=pa.schema([pa.field(f.name, t) for f, t in zip(out.fields, arrow_types, strict=True)]),
            )

    return parse


def file_source(
    spark: SparkSession,
    uri: str,
    schema: Schema,
    max_files: int | None = None,
    node: g.Source | None = None,
) -> tuple[DataFrame, DataFrame]:
    """A directory of JSON-lines files → (typed events, rejected records with their reason).

    Given the graph's Source `node` with event time, events whose event time is NULL are split
    off too, as the reference executor's Source does (stage "Source", with the node, its line
    and the event), so that one query writes both kinds of dead letter of a source."""
    directory = file_dir(uri)
    if directory is None:
        raise SourceError(f"unsupported source URI {uri!r}; the Spark engine reads file:DIR or generator:")
    if not directory.is_dir():
        raise SourceError(f"source directory {directory} does not exist")
    reader = spark.readStream.format("text").option("pathGlobFilter", "[!_.]*.json*")
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    lines = reader.load(str(directory.resolve())).select(
        F.col("value"),
        F.col("_metadata.file_path").alias("path"),
        F.col("_metadata.file_block_start").alias("start"),
    )
    out = _parsed_schema(schema)
    parsed = lines.mapInArrow(_parser(schema, out, directory), out)
    # The records read, good and rejected, as the local engine counts them: the text source's own
    # numInputRows counts blank lines too, which are no records (deployer.spark.deployment sums this).
    name = node.stream if node is not None else str(directory)
    parsed = parsed.observe(f"{INPUT_METRIC}{name}", F.count(F.lit(1)).alias("rows"))
    values = [col_name(i) for i in range(len(schema))]
    rejected = F.col(REASON).isNotNull()
    good = parsed.filter(~rejected)
    if node is None or node.event_time is None:
        bad = parsed.filter(rejected).select(
            F.lit("input").alias("stage"),
            F.col(REASON).alias("reason"),
            F.col(RAW).alias("record"),
            F.col(ORIGIN).alias("source"),
        )
        return good.select(*values, SEQ), bad
    # One pass over the parsed records splits off both kinds of dead letter.
    ts = F.col(col_name(node.schema.position(node.event_time)))
    untimed = ~rejected & ts.isNull()
    bad = parsed.filter(rejected | ts.isNull()).select(
        F.when(rejected, F.lit("input")).otherwise(F.lit(node.op)).alias("stage"),
        F.when(rejected, F.col(REASON))
        .otherwise(F.lit(f"event time field '{node.event_time}' is NULL"))
        .alias("reason"),
        F.col(RAW).alias("record"),
        F.col(ORIGIN).alias("source"),
        F.when(untimed, F.lit(node.id)).alias("node"),
        F.when(untimed, F.lit(node.line)).alias("line"),
        F.when(untimed, F.struct(*values)).alias("event"),
    )
    good = good.filter(ts.isNotNull()).select(*values, SEQ)
    return good, bad


def generator_source(spark: SparkSession, uri: str, schema: Schema) -> DataFrame:
    """`generator:ROWS_PER_SECOND` — synthetic CDR-like events from Spark's rate source, for benchmarks.

    Integer fields cycle through value modulo small primes, timestamps follow the rate source's own
    clock, strings are the value's text: enough to exercise filters, maps and aggregates.
    """
    rate = uri.partition(":")[2] or "1000000"
    df = spark.readStream.format("rate").option("rowsPerSecond", int(rate)).load()
    cols = []
    primes = [1009, 997, 3607, 101, 7]
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
    return df.select(*cols, F.format_string("%020d", F.col("value")).alias(SEQ))


# ---- sinks -----------------------------------------------------------------------------------------------


def local_values(df: DataFrame) -> Iterator[tuple[Any, ...]]:
    """The rows of a batch as tuples of Python values, timestamps as aware UTC datetimes.

    Collected as Arrow (epoch microseconds, whatever the driver's time zone) and converted column
    by column (stores/arrow.py): ~10x faster than toLocalIterator's pickled Row objects, which
    made the driver the bottleneck of Materialize and of file sinks.
    """
    yield from arrow_rows(df.toArrow())


def ordered_values(df: DataFrame, width: int, order: list[str]) -> Iterator[tuple[Any, ...]]:
    """The stream's columns `_0.._{width-1}` of a batch, sorted as the reference executor emits
    them. The batch is cached first: a sort samples its input before it sorts, and the batch's
    plan (parsing, operators) would otherwise run twice."""
    if not order:
        yield from local_values(df.select(*[F.col(col_name(i)) for i in range(width)]))
        return
    df = df.persist()
    try:
        sorted_df = df.orderBy(*[F.col(c) for c in order])
        yield from local_values(sorted_df.select(*[F.col(col_name(i)) for i in range(width)]))
    finally:
        df.unpersist()


Counter = Callable[[int], None]


def file_batch_writer(
    directory: Path, stream: str, names: tuple[str, ...], order: list[str], counted: Counter | None = None
) -> Any:
    """foreachBatch: one JSON-lines file per micro-batch, replaced atomically on replay.

    The batch arrives with positional columns and is sorted by `order` (event time, then arrival)."""
    directory.mkdir(parents=True, exist_ok=True)

    def write(df: DataFrame, batch_id: int) -> None:
        target = directory / f"{stream}-batch-{batch_id:08d}.jsonl"
        tmp = directory / f".{target.name}.tmp"
        count = 0
        with tmp.open("w", encoding="utf-8") as f:
            for values in ordered_values(df, len(names), order):
                f.write(event_json(names, values) + "\n")
                count += 1
        if count:
            os.replace(tmp, target)
        else:
            tmp.unlink()
        if counted is not None:
            counted(count)

    return write


def console_batch_writer(
    stream: str, names: tuple[str, ...], tag: bool, order: list[str], counted: Counter | None = None
) -> Any:
    def write(df: DataFrame, batch_id: int) -> None:
        count = 0
        for values in ordered_values(df, len(names), order):
            line = event_json(names, values)
            if tag:
                line = json.dumps({"$stream": stream}, ensure_ascii=False)[:-1] + ", " + line[1:]
            sys.stdout.write(line + "\n")
            count += 1
        sys.stdout.flush()
        if counted is not None:
            counted(count)

    return write


# The key order of the local engine's dead letters (deployer.local.driver), so both write the same JSON.
_DEAD_KEYS = ("stage", "reason", "stream", "node", "line", "source", "record")


def _encoded(value: Column, t: T.DataType) -> Column:
    """One value as text tagged with its kind, exact, so that the writer can rebuild it: dead letters
    of different operators (different event types) then share one DataFrame schema and one query."""
    if isinstance(t, T.IntegerType | T.LongType | T.ShortType | T.ByteType):
        tag, text = "i", value.cast("string")
    elif isinstance(t, T.DoubleType | T.FloatType):
        tag, text = "f", value.cast("string")  # Java's text reads back as the same double
    elif isinstance(t, T.DecimalType):
        tag, text = "n", value.cast("string")
    elif isinstance(t, T.BooleanType):
        tag, text = "b", value.cast("string")
    elif isinstance(t, T.TimestampType):
        tag, text = "t", F.unix_micros(value).cast("string")
    else:
        tag, text = "s", value.cast("string")
    return F.concat(F.lit(tag), text)


def _decoded(x: str | None) -> Any:
    if x is None:
        return None
    tag, text = x[0], x[1:]
    if tag == "i":
        return int(text)
    if tag == "f":
        return float(text)
    if tag == "n":
        return Decimal(text)
    if tag == "b":
        return text == "true"
    if tag == "t":
        return micros_value(int(text))
    return text


def dead_letter_frame(df: DataFrame, fixed: dict[str, Any]) -> DataFrame:
    """A dead-letter DataFrame in the one shape every dead letter takes: stage, reason, stream,
    node, line, source, record and the event as tagged text (see `_encoded`). `fixed` fills what
    the rows do not carry."""
    cols: list[Column] = []
    for key in _DEAD_KEYS:
        given = F.col(key) if key in df.columns else None
        default = fixed.get(key)
        t = T.IntegerType() if key == "line" else T.StringType()
        col = F.lit(default).cast(t) if given is None else F.coalesce(given.cast(t), F.lit(default).cast(t))
        cols.append(col.alias(key))
    if "event" in df.columns:
        struct = df.schema["event"].dataType
        assert isinstance(struct, T.StructType)
        ev = F.col("event")
        items = [_encoded(ev.getField(f.name), f.dataType) for f in struct.fields]
        cols.append(F.when(ev.isNotNull(), F.array(*items)).alias("event"))
    else:
        cols.append(F.lit(None).cast(T.ArrayType(T.StringType())).alias("event"))
    return df.select(*cols)


def dead_letter_writer(
    directory: Path | None,
    name: str,
    fixed: dict[str, Any] | None = None,
    counted: Counter | None = None,
) -> Any:
    """foreachBatch for rejected records and failed events; the same JSON as the local engine's.

    A batch is a `dead_letter_frame`, or any DataFrame of `reason` and `event` (a struct of the
    event's values) and the other keys, which is made one with `fixed`."""

    def write(df: DataFrame, batch_id: int) -> None:
        if df.columns != [*_DEAD_KEYS, "event"] or isinstance(df.schema["event"].dataType, T.StructType):
            df = dead_letter_frame(df, fixed or {})
        lines = []
        for row in df.toLocalIterator():
            doc: dict[str, Any] = {}
            for key in _DEAD_KEYS:
                if row[key] is not None:
                    doc[key] = row[key]
            if row["event"] is not None:
                doc["event"] = [json_value(_decoded(x)) for x in row["event"]]
            lines.append(json.dumps(doc, ensure_ascii=False, default=str))
        if counted is not None:
            counted(len(lines))
        if not lines:
            return
        if directory is None:
            sys.stderr.write("\n".join(lines) + "\n")
            return
        directory.mkdir(parents=True, exist_ok=True)
        file = f"dead-letter-{name}-{batch_id:08d}.jsonl".replace(":", "_")
        tmp = directory / f".{file}.tmp"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, directory / file)

    return write


def clear_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
