"""Spark sources for `cep run --engine spark`: directories of JSON-lines files, and synthetic events.

Sources parse records with the same converter as the local engine (`deployer.connectors.records`),
inside `mapInArrow`, so both engines accept, convert and reject exactly the same records with the
same reasons. (Redis streams: deployer.spark.redis_source.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from deployer.connectors.files import file_dir
from deployer.connectors.records import convert_record
from deployer.spark.columns import col_name, struct_of
from deployer.spark.graph import SEQ
from operators import graph as g
from operators.datatypes import Schema

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
