"""Database workloads on Spark against a throwaway PostgreSQL: ReadSQL enrichment.

Project: a CPL script with `ON SQL` (ReadSQL), translated by the deployer (one LATERAL query per
Arrow batch through the store layer). Baselines, hand-written in PySpark:

- naive: `mapInPandas` issuing one parameterised SELECT per event on one connection per task —
  what a user writes first;
- batched: `mapInArrow` issuing one `= ANY(%s)` query per Arrow batch and joining the rows back in
  Python — what a careful user writes.

All three read the same generator and write to the `noop` sink.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_workloads import generator

from cpl.compiler import compile_script
from deployer.spark_expr import col_name
from deployer.spark_plan import SEQ, SparkGraph, named
from operators.graph import DataStore
from stores.urls import parse_store_url

READSQL = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, ts timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, fee FROM plans WHERE idcaller = ?' RETURNS (idplan integer, fee double);
INSERT INTO priced SELECT idcaller, duration * p.fee AS amount, p.idplan AS idplan FROM cdr1 ON SQL plan_of, p, idcaller, idplan, fee;
"""

OUT = T.StructType(
    [T.StructField("idcaller", T.IntegerType()), T.StructField("amount", T.DoubleType()), T.StructField("idplan", T.IntegerType())]
)


def load_plans(url: str, callers: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS plans")
        conn.execute("CREATE TABLE plans (idcaller integer PRIMARY KEY, idplan integer NOT NULL, fee double precision NOT NULL)")
        with conn.cursor().copy("COPY plans (idcaller, idplan, fee) FROM STDIN") as copy:
            for c in range(callers):
                copy.write_row((c, 1 + c % 4, 0.5 + (c % 150) / 100))
        conn.execute("ANALYZE plans")


def project_readsql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    graph = compile_script(READSQL).graph
    config = ({"crm": parse_store_url(url)}, {"crm": DataStore("crm", "postgresql")})

    def build(spark: SparkSession, rows: int) -> DataFrame:
        src = graph.sources()[0]
        df = _cdr(spark, rows)
        sources = {src.stream: df.select(*[F.col(f.name).alias(col_name(i)) for i, f in enumerate(src.schema)], SEQ)}
        sg = SparkGraph(graph, sources, config)
        return named(sg.port(graph.streams["priced"]), graph.stream_schema("priced"))

    return build


def _cdr(spark: SparkSession, rows: int) -> DataFrame:
    """The generator with callers spread over the whole 100,000-row plans table."""
    return generator(spark, rows).withColumn("idcaller", (F.col(SEQ).cast("long") * 7919 % 100_000).cast("int"))


def naive_readsql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    def per_partition(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for pdf in frames:
                out = []
                for idcaller, duration in zip(pdf["idcaller"], pdf["duration"], strict=True):
                    row = conn.execute("SELECT idplan, fee FROM plans WHERE idcaller = %s", (int(idcaller),)).fetchone()
                    if row is not None:
                        out.append((int(idcaller), float(duration) * row[1], row[0]))
                yield pd.DataFrame(out, columns=["idcaller", "amount", "idplan"])

    def build(spark: SparkSession, rows: int) -> DataFrame:
        return _cdr(spark, rows).select("idcaller", "duration").mapInPandas(per_partition, OUT)

    return build


def batched_readsql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for b in batches:
                ids = b.column("idcaller").to_pylist()
                found = dict(
                    (r[0], (r[1], r[2]))
                    for r in conn.execute("SELECT idcaller, idplan, fee FROM plans WHERE idcaller = ANY(%s)", (list(set(ids)),))
                )
                out: dict[str, list[Any]] = {"idcaller": [], "amount": [], "idplan": []}
                for i, d in zip(ids, b.column("duration").to_pylist(), strict=True):
                    hit = found.get(i)
                    if hit is not None:
                        out["idcaller"].append(i)
                        out["amount"].append(d * hit[1])
                        out["idplan"].append(hit[0])
                yield pa.RecordBatch.from_pydict(out, schema=pa.schema([("idcaller", pa.int32()), ("amount", pa.float64()), ("idplan", pa.int32())]))

    def build(spark: SparkSession, rows: int) -> DataFrame:
        return _cdr(spark, rows).select("idcaller", "duration").mapInArrow(per_partition, OUT)

    return build
