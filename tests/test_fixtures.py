"""The fixtures hand out real, working, isolated servers (each assertion here can fail)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from servers import ServerHandle

# --------------------------------------------------------------------------------------------------
# PostgreSQL


@pytest.mark.postgres
def test_postgres_round_trip(pg_db: str) -> None:
    with psycopg.connect(pg_db) as conn:
        assert conn.info.server_version >= 130000  # pg_db relies on DROP DATABASE ... WITH (FORCE)
        conn.execute("CREATE TABLE item (id int PRIMARY KEY, name text NOT NULL, price numeric)")
        rows = [(1, "a'b", 1.5), (2, "ünï", None), (3, "x; DROP TABLE item", 3)]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO item VALUES (%s, %s, %s)", rows)
        got = conn.execute("SELECT id, name, price::float8 FROM item WHERE id >= %s ORDER BY id", (2,))
        assert got.fetchall() == [(2, "ünï", None), (3, "x; DROP TABLE item", 3.0)]


@pytest.mark.postgres
@pytest.mark.parametrize("run", ["first", "second"])
def test_pg_db_is_fresh_per_test(pg_db: str, postgres_url: str, run: str) -> None:
    # Whichever run comes second would see the other's table if databases were shared.
    with psycopg.connect(pg_db, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None and name[0].startswith("t_")
        assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'marker'").fetchone() == (0,)
        conn.execute("CREATE TABLE marker (run text)")
        conn.execute("INSERT INTO marker VALUES (%s)", (run,))
    # Earlier tests' databases have been dropped: only this test's t_ database is left.
    with psycopg.connect(postgres_url) as admin:
        left = admin.execute(r"SELECT datname FROM pg_database WHERE datname LIKE 't\_%'").fetchall()
    assert left == [(name[0],)]


@pytest.mark.postgres
def test_local_postgres_survives_a_crash_restart(postgres_server: ServerHandle, pg_db: str) -> None:
    if not postgres_server.restartable:
        pytest.skip(
            f"restart needs a server started from binaries, this run got Postgres via {postgres_server.how}"
        )
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE ledger (k int)")
        conn.execute("INSERT INTO ledger VALUES (42)")  # acknowledged commit
    postgres_server.restart()  # pg_ctl stop -m immediate, then start on the same port
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT k FROM ledger").fetchall() == [(42,)]


# --------------------------------------------------------------------------------------------------
# Redis


@pytest.mark.redis
@pytest.mark.parametrize("run", ["first", "second"])
def test_redis_round_trip_and_isolation(redis_db: str, run: str) -> None:
    with redis.Redis.from_url(redis_db, decode_responses=True) as r:
        assert r.dbsize() == 0  # the second run would see the first run's keys otherwise
        assert r.hset("ev:1", mapping={"sym": "ACME", "px": "10.5", "run": run}) == 3
        assert r.hgetall("ev:1") == {"sym": "ACME", "px": "10.5", "run": run}
        pipe = r.pipeline(transaction=True)  # MULTI/EXEC, as the effect ledger will use
        pipe.hset("ev:2", "sym", "XYZ").incrby("count", 5).incrby("count", 2).hgetall("ev:2")
        assert pipe.execute() == [1, 5, 7, {"sym": "XYZ"}]
        assert r.dbsize() == 3


# --------------------------------------------------------------------------------------------------
# Spark


@pytest.mark.spark
def test_spark_streaming_file_source_to_foreach_batch(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    src = tmp_path / "in"
    src.mkdir()
    events = [{"sym": "ACME", "px": 10.0}, {"sym": "XYZ", "px": 99.5}, {"sym": "ACME", "px": 12.5}]
    (src / "part-0.json").write_text("\n".join(json.dumps(e) for e in events[:2]) + "\n")
    (src / "part-1.json").write_text(json.dumps(events[2]) + "\n")
    schema = StructType([StructField("sym", StringType()), StructField("px", DoubleType())])

    collected: list[tuple[int, list[tuple[str, float]]]] = []

    def sink(batch: Any, batch_id: int) -> None:
        collected.append((batch_id, [(r.sym, r.doubled) for r in batch.orderBy("doubled").collect()]))

    query = (
        spark.readStream.schema(schema)
        .json(str(src))
        .where(F.col("sym") == F.lit("ACME"))
        .select(F.col("sym"), (F.col("px") * 2).alias("doubled"))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert collected == [(0, [("ACME", 20.0), ("ACME", 25.0)])]
