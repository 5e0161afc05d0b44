"""Materialization on Spark: the project's `INSERT INTO TABLE` vs hand-written foreachBatch jobs.

Every job reads the same generator (Spark's `rate-micro-batch`: a fixed number of rows per
micro-batch) of rows `(k bigint, idcaller integer, duration integer, ts timestamp)`, where `k` is
unique within a batch and repeats every `KEYS` rows, and writes each micro-batch from
`foreachBatch`. Throughput is rows written divided by the wall time of a fixed number of
micro-batches after a warm-up batch.

Project: a CPL script materializing into a table of a data store, translated by the deployer: the
Materialize node writes each batch exactly once (ledger entry in the same transaction / MULTI-EXEC),
by binary COPY (append) or a staged COPY + `INSERT ... ON CONFLICT` (upsert) on Postgres, and by one
server-side script per chunk inside MULTI/EXEC on Redis.

Baselines, what a competent user writes by hand in `foreachBatch` (Arrow-enabled `toPandas`):

- Postgres append: `DataFrame.to_sql(if_exists="append")` through a SQLAlchemy engine (psycopg 3;
  SQLAlchemy 2 batches the executemany into multi-row INSERTs, "insertmanyvalues").
- Postgres upsert: SQLAlchemy Core `insert(...).on_conflict_do_update(...)` executed with the
  batch's records as an executemany, in one transaction.
- Redis, as the issue names it: redis-py `HSET key mapping` per row, no pipeline (one round trip
  per row).
- Redis, pipelined: the same commands in a non-transactional pipeline flushed every 10,000 rows,
  which is what a careful user writes.

None of the baselines is exactly-once: a replayed batch is written twice (append) or again.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_workloads import timed_batches

from cpl.compiler import compile_script
from deployer.spark.datastores.materialize import materialize_writer
from deployer.spark.handlers import spark_graph
from deployer.spark.run.interrupt import interruptible
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, named
from operators import graph as g
from stores.bindings import StoreBindings
from stores.urls import parse_store_url

# A baseline's toPandas that the end of a measurement interrupts (its query stopped mid-batch)
# warns with the JVM's whole stack trace before raising; the interruption itself is expected and
# handled (`interruptible`), and a real Arrow failure still raises: only the warning goes.
warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization", category=UserWarning)

KEYS = 200_000
FIELDS = "k bigint, idcaller integer, duration integer, ts timestamp"

Writer = Callable[[DataFrame, int], None]


def script(store_type: str, keyed: bool) -> str:
    pk = " PRIMARY KEY" if keyed else ""
    table = "upsert_p" if keyed else "append_p"
    return f"""
CREATE STREAMSCHEMA calls WITH {FIELDS};
CREATE DATASTORE st TYPE {store_type};
CREATE TABLE {table} (k bigint{pk}, idcaller integer, duration integer, ts timestamp) IN st;
INSERT INTO TABLE {table} SELECT k, idcaller, duration, ts FROM calls;
"""


def source(spark: SparkSession, rows_per_batch: int) -> DataFrame:
    df = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .load()
    )
    v = F.col("value")
    return df.select(
        (v % KEYS).alias("k"),
        (v % 1000).cast("int").alias("idcaller"),
        (v % 600).cast("int").alias("duration"),
        F.timestamp_millis(v).alias("ts"),
        F.format_string("%020d", v).alias(SEQ),
    )


def project(
    store_type: str, url: str, keyed: bool
) -> Callable[[SparkSession, int], tuple[DataFrame, Writer]]:
    graph = compile_script(script(store_type, keyed)).graph
    config = StoreBindings({"st": parse_store_url(url)}, {"st": g.DataStore("st", store_type)})
    node = next(n for n in graph.nodes if isinstance(n, g.Materialize))

    def build(spark: SparkSession, rows: int) -> tuple[DataFrame, Writer]:
        src = graph.sources()[0]
        df = source(spark, rows)
        sources = {
            src.stream: df.select(*[F.col(f.name).alias(col_name(i)) for i, f in enumerate(src.schema)], SEQ)
        }
        sg = spark_graph(graph, sources, config, deployment=f"bench-{time.monotonic_ns()}")
        frame = named(sg.port(node.inputs[0]), node.input_schema)
        return frame, materialize_writer(sg, node)

    return build


def _plain(spark: SparkSession, rows: int) -> DataFrame:
    return source(spark, rows).drop(SEQ)


def hand_pg_append(url: str) -> Callable[[SparkSession, int], tuple[DataFrame, Writer]]:
    """`to_sql(if_exists="append")` through SQLAlchemy, per micro-batch."""
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))

    def write(df: DataFrame, batch_id: int) -> None:
        df.toPandas().to_sql("append_b", engine, if_exists="append", index=False)

    return lambda spark, rows: (_plain(spark, rows), write)


def hand_pg_upsert(url: str) -> Callable[[SparkSession, int], tuple[DataFrame, Writer]]:
    """SQLAlchemy Core `on_conflict_do_update` with the batch's records, in one transaction."""
    import sqlalchemy as sa
    from sqlalchemy.dialects.postgresql import insert

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    md = sa.MetaData()
    t = sa.Table(
        "upsert_b",
        md,
        sa.Column("k", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("idcaller", sa.Integer),
        sa.Column("duration", sa.Integer),
        sa.Column("ts", sa.DateTime(timezone=True)),
    )
    md.create_all(engine)
    ins = insert(t)
    stmt = ins.on_conflict_do_update(
        index_elements=["k"], set_={c: ins.excluded[c] for c in ("idcaller", "duration", "ts")}
    )

    def write(df: DataFrame, batch_id: int) -> None:
        records = df.toPandas().to_dict("records")
        with engine.begin() as conn:
            conn.execute(stmt, records)

    return lambda spark, rows: (_plain(spark, rows), write)


def hand_redis(url: str, pipelined: bool) -> Callable[[SparkSession, int], tuple[DataFrame, Writer]]:
    """redis-py HSET per row: one round trip each, or in a pipeline flushed every 10,000 rows."""
    import redis

    client = redis.Redis.from_url(url)

    def write(df: DataFrame, batch_id: int) -> None:
        pdf = df.toPandas()
        target: Any = client.pipeline(transaction=False) if pipelined else client
        for n, (k, idcaller, duration, ts) in enumerate(pdf.itertuples(index=False, name=None)):
            target.hset(
                f"upsert_b:{k}", mapping={"idcaller": idcaller, "duration": duration, "ts": ts.isoformat()}
            )
            if pipelined and n % 10_000 == 9_999:
                target.execute()
        if pipelined:
            target.execute()

    return lambda spark, rows: (_plain(spark, rows), write)


def measure(
    spark: SparkSession,
    build: Callable[[SparkSession, int], tuple[DataFrame, Writer]],
    rows: int,
    batches: int,
    checkpoint: str,
) -> dict[str, Any]:
    df, writer = build(spark, rows)
    q = (
        df.writeStream.foreachBatch(interruptible(writer))  # a quiet stop (spark_workloads.start)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    return timed_batches(q, batches)
