"""Spark sources and sinks for `cep run --engine spark`.

Sources parse records with the same converter as the local engine (`deployer.io.to_event`), inside
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from deployer.io import RecordError, _json_record, event_json, file_dir, json_value, to_event
from deployer.spark_expr import col_name, struct_of
from deployer.spark_plan import SEQ
from operators.types import Schema

RAW = "__raw"
REASON = "__reason"
ORIGIN = "__origin"


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


def _parser(schema: Schema, out: T.StructType) -> Any:
    arrow_types = [to_arrow_type(f.dataType, timezone="UTC") for f in out.fields]

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            lines = batch.column("value").to_pylist()
            paths = batch.column("path").to_pylist()
            starts = batch.column("start").to_pylist()
            cols: list[list[Any]] = [[] for _ in out.fields]
            width = len(schema)
            row_in_block: dict[tuple[str, int], int] = {}
            for text, path, start in zip(lines, paths, starts, strict=True):
                n = row_in_block.get((path, start), 0)
                row_in_block[(path, start)] = n + 1
                if text is None or not text.strip():
                    continue
                origin = f"{path} (block {start}, record {n + 1})"
                raw = _json_record(text, origin)
                values: tuple[Any, ...] = (None,) * width
                reason = raw.error
                if reason is None and raw.fields is not None:
                    try:
                        values = to_event(raw.fields, schema)
                    except RecordError as err:
                        reason = str(err)
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
    spark: SparkSession, uri: str, schema: Schema, max_files: int | None = None
) -> tuple[DataFrame, DataFrame]:
    """A directory of JSON-lines files → (typed events, rejected records with their reason)."""
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
    parsed = lines.mapInArrow(_parser(schema, out), out)
    good = parsed.filter(F.col(REASON).isNull()).select(*[col_name(i) for i in range(len(schema))], SEQ)
    bad = parsed.filter(F.col(REASON).isNotNull()).select(
        F.col(REASON).alias("reason"), F.col(RAW).alias("record"), F.col(ORIGIN).alias("source")
    )
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


def _json_lines(rows: list[Any], names: tuple[str, ...]) -> list[str]:
    return [event_json(names, tuple(r)) for r in rows]


def file_batch_writer(directory: Path, stream: str, names: tuple[str, ...]) -> Any:
    """foreachBatch: one JSON-lines file per micro-batch, replaced atomically on replay."""
    directory.mkdir(parents=True, exist_ok=True)

    def write(df: DataFrame, batch_id: int) -> None:
        target = directory / f"{stream}-batch-{batch_id:08d}.jsonl"
        tmp = directory / f".{target.name}.tmp"
        count = 0
        with tmp.open("w", encoding="utf-8") as f:
            for row in df.toLocalIterator():
                f.write(event_json(names, tuple(row)) + "\n")
                count += 1
        if count:
            os.replace(tmp, target)
        else:
            tmp.unlink()

    return write


def console_batch_writer(stream: str, names: tuple[str, ...], tag: bool) -> Any:
    def write(df: DataFrame, batch_id: int) -> None:
        for row in df.toLocalIterator():
            line = event_json(names, tuple(row))
            if tag:
                line = json.dumps({"$stream": stream})[:-1] + ", " + line[1:]
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return write


def dead_letter_writer(directory: Path | None, stage: str, extra: dict[str, Any]) -> Any:
    """foreachBatch for rejected records and failed events; the same JSON as the local engine's."""

    def write(df: DataFrame, batch_id: int) -> None:
        lines = []
        for row in df.toLocalIterator():
            doc: dict[str, Any] = {
                "stage": stage,
                **{k: json_value(v) for k, v in row.asDict().items() if v is not None},
                **extra,
            }
            lines.append(json.dumps(doc, ensure_ascii=False, default=str))
        if not lines:
            return
        if directory is None:
            sys.stderr.write("\n".join(lines) + "\n")
            return
        directory.mkdir(parents=True, exist_ok=True)
        name = f"dead-letter-{stage}-{extra.get('node', 'source')}-{batch_id:08d}.jsonl".replace(":", "_")
        tmp = directory / f".{name}.tmp"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.replace(tmp, directory / name)

    return write


def clear_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
