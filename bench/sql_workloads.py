"""Database workloads on Spark against a throwaway PostgreSQL: ReadSQL enrichment and UpdateSQL.

Project: a CPL script with `ON SQL` (ReadSQL), translated by the deployer (one LATERAL query per
Arrow batch through the store layer). Baselines, hand-written in PySpark:

- naive: `mapInPandas` issuing one parameterised SELECT per event on one connection per task —
  what a user writes first;
- batched: `mapInArrow` issuing one `= ANY(%s)` query per Arrow batch and joining the rows back in
  Python — what a careful user writes.

UpdateSQL (`UPDATE balances SET amount = amount - ? WHERE idcaller = ?` per event, with the
affected-row count as output) against the naive job (one autocommitted UPDATE per event), a
batched one (executemany per Arrow batch in one transaction, no exactly-once ledger; its partitions'
statements run side by side, in no order) and an ordered one (the same, with the micro-batch's
statements in event order in one transaction, as the project runs them: the difference left is
the ledger).

All read the same generator and write to the `noop` sink.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_workloads import generator

from cpl.compiler import compile_script
from deployer.spark.handlers import spark_graph
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, named
from operators.graph import DataStore
from stores.bindings import StoreBindings
from stores.sql.describe import bindings_describer
from stores.urls import parse_store_url

# Spark's Python workers cannot import bench/'s modules: what they run travels by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

READSQL = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, ts timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, fee FROM plans WHERE idcaller = ?' RETURNS (idplan integer, fee double);
INSERT INTO priced SELECT idcaller, duration * p.fee AS amount, p.idplan AS idplan FROM cdr1 ON SQL plan_of, p, idcaller, idplan, fee;
"""

OUT = T.StructType(
    [
        T.StructField("idcaller", T.IntegerType()),
        T.StructField("amount", T.DoubleType()),
        T.StructField("idplan", T.IntegerType()),
    ]
)


def load_plans(url: str, callers: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS plans")
        conn.execute(
            "CREATE TABLE plans (idcaller integer PRIMARY KEY, idplan integer NOT NULL, fee double precision NOT NULL)"
        )
        with conn.cursor().copy("COPY plans (idcaller, idplan, fee) FROM STDIN") as copy:
            for c in range(callers):
                copy.write_row((c, 1 + c % 4, 0.5 + (c % 150) / 100))
        conn.execute("ANALYZE plans")


def project_readsql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    return _project(READSQL, "priced", url)


def _project(script: str, stream: str, url: str) -> Callable[[SparkSession, int], DataFrame]:
    """The project's translation of `script` on the generator, with `crm` bound to `url`."""
    config = StoreBindings({"crm": parse_store_url(url)}, {"crm": DataStore("crm", "postgresql")})
    # as `cep run` compiles it: the result types described by the store (cpl.describe), whose exact
    # types let the ReadSQL leave the fields no one reads on the JVM
    graph = compile_script(script, describe=bindings_describer(config)).graph

    def build(spark: SparkSession, rows: int) -> DataFrame:
        src = graph.sources()[0]
        df = _cdr(spark, rows)
        sources = {
            src.stream: df.select(*[F.col(f.name).alias(col_name(i)) for i, f in enumerate(src.schema)], SEQ)
        }
        # a fresh deployment name per run: an UpdateSQL's ledger must not find an earlier run's event ids
        sg = spark_graph(graph, sources, config, deployment=f"bench-{time.monotonic_ns()}")
        return named(sg.port(graph.streams[stream]), graph.stream_schema(stream))

    return build


def _cdr(spark: SparkSession, rows: int) -> DataFrame:
    """The generator with callers spread over the whole 100,000-row plans table."""
    return generator(spark, rows).withColumn(
        "idcaller", (F.col(SEQ).cast("long") * 7919 % 100_000).cast("int")
    )


def naive_readsql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    def per_partition(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for pdf in frames:
                out = []
                for idcaller, duration in zip(pdf["idcaller"], pdf["duration"], strict=True):
                    row = conn.execute(
                        "SELECT idplan, fee FROM plans WHERE idcaller = %s", (int(idcaller),)
                    ).fetchone()
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
                    for r in conn.execute(
                        "SELECT idcaller, idplan, fee FROM plans WHERE idcaller = ANY(%s)", (list(set(ids)),)
                    )
                )
                out: dict[str, list[Any]] = {"idcaller": [], "amount": [], "idplan": []}
                for i, d in zip(ids, b.column("duration").to_pylist(), strict=True):
                    hit = found.get(i)
                    if hit is not None:
                        out["idcaller"].append(i)
                        out["amount"].append(d * hit[1])
                        out["idplan"].append(hit[0])
                yield pa.RecordBatch.from_pydict(
                    out,
                    schema=pa.schema(
                        [("idcaller", pa.int32()), ("amount", pa.float64()), ("idplan", pa.int32())]
                    ),
                )

    def build(spark: SparkSession, rows: int) -> DataFrame:
        return _cdr(spark, rows).select("idcaller", "duration").mapInArrow(per_partition, OUT)

    return build


# ---- UpdateSQL ---------------------------------------------------------------------------------

UPDATESQL = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, ts timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE idcaller = ?';
INSERT INTO charged SELECT idcaller, duration, b.n AS n FROM cdr1 ON SQL charge, b, duration, idcaller, n;
"""

CHARGED = T.StructType(
    [
        T.StructField("idcaller", T.IntegerType()),
        T.StructField("duration", T.IntegerType()),
        T.StructField("n", T.LongType()),
    ]
)
_UPDATE = "UPDATE balances SET amount = amount - %s WHERE idcaller = %s"


def load_balances(url: str, callers: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS balances")
        conn.execute("CREATE TABLE balances (idcaller integer PRIMARY KEY, amount bigint NOT NULL)")
        with conn.cursor().copy("COPY balances (idcaller, amount) FROM STDIN") as copy:
            for c in range(callers):
                copy.write_row((c, 1_000_000))
        conn.execute("ANALYZE balances")


def project_updatesql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    return _project(UPDATESQL, "charged", url)


def naive_updatesql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    """One autocommitted UPDATE per event on one connection per task: what a user writes first."""

    def per_partition(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for pdf in frames:
                counts = []
                for idcaller, duration in zip(pdf["idcaller"], pdf["duration"], strict=True):
                    counts.append(conn.execute(_UPDATE, (int(duration), int(idcaller))).rowcount)
                yield pd.DataFrame({"idcaller": pdf["idcaller"], "duration": pdf["duration"], "n": counts})

    def build(spark: SparkSession, rows: int) -> DataFrame:
        return _cdr(spark, rows).select("idcaller", "duration").mapInPandas(per_partition, CHARGED)

    return build


def _charged(ids: list[Any], durations: list[Any]) -> pa.RecordBatch:
    """A hand-written UpdateSQL's output rows: each event charged once (rows of `CHARGED`)."""
    return pa.RecordBatch.from_pydict(
        {"idcaller": ids, "duration": durations, "n": [1] * len(ids)},
        schema=pa.schema([("idcaller", pa.int32()), ("duration", pa.int32()), ("n", pa.int64())]),
    )


def ordered_updatesql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    """`batched_updatesql` that keeps the events' order, as the project's UpdateSQL does
    (docs/language.md): the micro-batch in one partition, sorted by arrival (`__seq`), its UPDATEs
    by executemany in one transaction. Still not exactly-once: what this baseline leaves out of the
    project's work is the ledger."""

    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import psycopg

        whole = pa.Table.from_batches(list(batches))
        if whole.num_rows == 0:
            return
        whole = whole.sort_by(SEQ)
        ids = whole.column("idcaller").to_pylist()
        durations = whole.column("duration").to_pylist()
        with psycopg.connect(url) as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(_UPDATE, list(zip(durations, ids, strict=True)), returning=False)
        yield _charged(ids, durations)

    def build(spark: SparkSession, rows: int) -> DataFrame:
        ordered = _cdr(spark, rows).select("idcaller", "duration", SEQ).repartition(1)
        return ordered.mapInArrow(per_partition, CHARGED)

    return build


def batched_updatesql(url: str) -> Callable[[SparkSession, int], DataFrame]:
    """executemany of the batch's UPDATEs in one transaction per Arrow batch (psycopg pipelines it):
    what a careful user writes. Not exactly-once: a replayed batch charges twice."""

    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import psycopg

        with psycopg.connect(url) as conn:
            for b in batches:
                ids = b.column("idcaller").to_pylist()
                durations = b.column("duration").to_pylist()
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(_UPDATE, list(zip(durations, ids, strict=True)), returning=False)
                yield _charged(ids, durations)

    def build(spark: SparkSession, rows: int) -> DataFrame:
        return _cdr(spark, rows).select("idcaller", "duration").mapInArrow(per_partition, CHARGED)

    return build
