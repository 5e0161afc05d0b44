"""The hand-written side of bench/small_run: what a competent engineer writes in plain PySpark for the
same two small runs, in a process of its own (a fresh JVM, as a user's run).

    python bench/hand_small_run.py daily IN_DIR PLANS_DB OUT_DB CHECKPOINT
    python bench/hand_small_run.py stateless IN_DIR OUT_DIR CHECKPOINT

`daily`: examples/daily_bill.cpl by hand. The two CDR streams are unioned, calls under 10 s dropped,
each call priced with its caller's plan (one batched SQLite query per Arrow batch, in mapInArrow),
and each caller's daily total and call count upserted into OUT_DB's `daily_bill` in foreachBatch.
`stateless`: the union, filter and map, each micro-batch written as JSON lines by foreachBatch.

Both run once over the files there (trigger availableNow). The daily job's windows fire in the
micro-batch without data that Spark runs after the last one, the watermark having moved (Spark
4.3, `noDataMicroBatches` on by default): it writes the bills `cep run` writes, which bench/small_run
checks every round. The session is built by the project's `spark_session`, the one piece of the
project imported: both sides have the same session settings (master, shuffle partitions, RocksDB
state store, UTC, a bounded run's JVM options and class archive; this job never writes that archive,
which bench/small_run has `cep run` make first).
The phases bench/small_run breaks a run into are written, as JSON, to the file named by
$SMALL_RUN_TIMINGS, as bench/small_run_probe records them of `cep run`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

CDR = "idcaller int, idreceiver int, duration int, timestamp timestamp"
PRICED = "idcaller int, amount decimal(17,2), idplan int, timestamp timestamp"
# One query per Arrow batch, whatever its number of callers: json_each turns the list into rows.
PLANS = "SELECT idcaller, idplan, fee FROM plans WHERE idcaller IN (SELECT value FROM json_each(?))"
UPSERT = (
    "INSERT INTO daily_bill (idcaller, day, total, calls) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (idcaller, day) DO UPDATE SET total = excluded.total, calls = excluded.calls"
)


def session(timings: dict[str, Any]) -> SparkSession:
    """The project's session, as `cep run --until-idle` builds it (bounded: the same JVM options)."""
    from deployer.spark.run.session import spark_session

    begin = time.time()
    spark = spark_session(None, "hand-small-run", bounded=True)
    timings["session"] = [[begin, time.time()]]
    return spark


def cdrs(spark: SparkSession, inbox: Path) -> DataFrame:
    """Both streams' JSON lines, unioned."""
    streams = [spark.readStream.schema(CDR).json(str(inbox / s)) for s in ("cdr1", "cdr2")]
    return streams[0].unionByName(streams[1])


def costs(spark: SparkSession, inbox: Path) -> DataFrame:
    """The script's `costs`: calls of 10 s or more, each with its cost."""
    d = F.col("duration")
    return cdrs(spark, inbox).where(d >= 10).select("idcaller", (d * 10 + 10).alias("cost"), "timestamp")


def pricer(plans_db: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow: each call with its caller's plan and amount (cost * fee, exact decimal(17, 2));
    calls of callers without a plan are dropped, as the script's ON SQL drops them."""

    def price(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        conn = sqlite3.connect(plans_db)
        try:
            for b in batches:
                if b.num_rows == 0:
                    continue
                ids = pc.unique(b.column("idcaller")).to_pylist()
                found = conn.execute(PLANS, (json.dumps(ids),)).fetchall()
                known = pa.array([r[0] for r in found], pa.int32())
                at = pc.index_in(b.column("idcaller"), value_set=known)
                keep = pc.is_valid(at)
                b, at = b.filter(keep), at.filter(keep)
                idplan = pa.array([r[1] for r in found], pa.int32()).take(at)
                fee = pa.array([Decimal(r[2]) for r in found], pa.decimal128(6, 2)).take(at)
                cost = pc.cast(b.column("cost"), pa.decimal128(10, 0))
                amount = pc.cast(pc.multiply(cost, fee), pa.decimal128(17, 2))
                yield pa.RecordBatch.from_arrays(
                    [b.column("idcaller"), amount, idplan, b.column("timestamp")],
                    names=["idcaller", "amount", "idplan", "timestamp"],
                )
        finally:
            conn.close()

    return price


def upserter(out_db: str) -> Callable[[DataFrame, int], None]:
    """foreachBatch: the batch's bills upserted in one transaction (idempotent on replay)."""

    def write(df: DataFrame, batch_id: int) -> None:
        rows = df.collect()
        if not rows:
            return
        conn = sqlite3.connect(out_db)
        try:
            with conn:
                conn.executemany(UPSERT, [(r.idcaller, r.day, str(r.total), r.calls) for r in rows])
        finally:
            conn.close()

    return write


def daily(spark: SparkSession, argv: list[str]) -> list[StreamingQuery]:
    """examples/daily_bill.cpl by hand; returns its started query."""
    inbox, plans_db, out_db, checkpoint = Path(argv[0]), argv[1], argv[2], argv[3]
    conn = sqlite3.connect(out_db)
    with conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS daily_bill (idcaller INTEGER NOT NULL, day TEXT NOT NULL,"
            " total TEXT, calls INTEGER, PRIMARY KEY (idcaller, day))"
        )
    conn.close()
    priced = costs(spark, inbox).mapInArrow(pricer(plans_db), PRICED)
    bills = (
        priced.withWatermark("timestamp", "1 minute")
        .groupBy(F.window("timestamp", "1 day"), "idcaller")
        .agg(F.sum("amount").cast("decimal(12,2)").alias("total"), F.count("*").alias("calls"))
        # the day as text in the session's time zone (UTC): collect() would give local time
        .select(
            "idcaller", F.date_format("window.start", "yyyy-MM-dd HH:mm:ss").alias("day"), "total", "calls"
        )
    )
    w = bills.writeStream.foreachBatch(upserter(out_db)).option("checkpointLocation", checkpoint)
    return [w.trigger(availableNow=True).start()]


def stateless(spark: SparkSession, argv: list[str]) -> list[StreamingQuery]:
    """The union, filter and map; each micro-batch's rows written as JSON lines into a directory of
    its own (replaced on replay)."""
    inbox, out_dir, checkpoint = Path(argv[0]), argv[1], argv[2]

    def write(df: DataFrame, batch_id: int) -> None:
        df.write.mode("overwrite").json(f"{out_dir}/batch-{batch_id:08d}")

    w = costs(spark, inbox).writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
    return [w.trigger(availableNow=True).start()]


JOBS: dict[str, Callable[[SparkSession, list[str]], list[StreamingQuery]]] = {
    "daily": daily,
    "stateless": stateless,
}


def progress(q: StreamingQuery) -> dict[str, Any]:
    """A finished query's micro-batches, as bench/small_run reads them."""
    batches = [
        {"batchId": p["batchId"], "numInputRows": p["numInputRows"], "durationMs": dict(p["durationMs"])}
        for p in q.recentProgress
    ]
    return {"name": q.name or "hand", "batches": batches}


def main() -> None:
    job, argv = JOBS[sys.argv[1]], sys.argv[2:]
    timings: dict[str, Any] = {}
    try:
        spark = session(timings)
        begin = time.time()
        queries = job(spark, argv)
        timings["build"] = [[begin, time.time()]]
        for q in queries:
            q.awaitTermination()
        timings["done"] = time.time()
        timings["queries"] = [progress(q) for q in queries]
        spark.stop()
        timings["stopped"] = time.time()
    finally:
        timings["exit"] = time.time()
        Path(os.environ["SMALL_RUN_TIMINGS"]).write_text(json.dumps(timings))


if __name__ == "__main__":
    main()
