"""Materialize on Spark against the reference executor, into Redis and PostgreSQL.

Spark hands each micro-batch to the store as Arrow and the stores encode it with Arrow kernels
(binary COPY for Postgres, RESP for Redis: stores/sql/postgres_copy.py, stores/redis/bulk.py), while the
reference executor hands over Python rows. Both must leave the same tables: the same hash for every
key in Redis (texts included: ISO timestamps, Python's float repr, decimals as written), the same
rows in Postgres, the same refused rows in the dead letters. One file per micro-batch, so that some
batches are encoded whole and the one with a refused row goes the row way.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from spark_helpers import at, compile_text, prepare, run_reference, run_spark

from deployer.runner import bind_stores

pytestmark = [pytest.mark.spark]

COLUMNS = "k bigint, total double, note varchar(12), at timestamp, vip boolean, fee decimal(8, 2), n integer"
NAMES = "k, total, note, at, vip, fee, n"


def script(kind: str) -> str:
    """`latest` upserts by k; `calls` appends in Postgres and, since Redis tables need a key, is
    keyed by n (unique per event) there."""
    calls = COLUMNS.replace("n integer", "n integer PRIMARY KEY") if kind == "redis" else COLUMNS
    return f"""
CREATE STREAMSCHEMA s WITH {COLUMNS.replace("varchar(12)", "varchar(40)")};
CREATE DATASTORE st TYPE {kind};
CREATE TABLE latest ({COLUMNS.replace("k bigint", "k bigint PRIMARY KEY", 1)}) IN st;
CREATE TABLE calls ({calls}) IN st;
INSERT INTO TABLE latest SELECT {NAMES} FROM s;
INSERT INTO TABLE calls SELECT {NAMES} FROM s WHERE n > 0;
""" + (PLAIN if kind == "postgresql" else "")


# No decimal column: Spark's batches of this table are encoded for COPY by Arrow kernels (a decimal
# column sends the batch the row way, as `latest` and `calls` go).
PLAIN = """
CREATE TABLE plain (k bigint, total double, note varchar(12), at timestamp, vip boolean, n integer) IN st;
INSERT INTO TABLE plain SELECT k, total, note, at, vip, n FROM s;
"""


def events() -> list[list[dict[str, Any]]]:
    rows = []
    for i in range(60):
        rows.append(
            {
                "k": i % 17,  # keys repeat, within and across files: the last row of a key wins
                "total": [1.0, 0.1, -0.0, 1e16, 2.5e-7, None][i % 6],
                "note": [":a%b:", "", None, "é€😀", "x;'--", "line\nfeed"][i % 6],
                "at": None if i % 7 == 3 else at(i * 1.000001, days=i % 3),
                "vip": [True, False, None][i % 3],
                "fee": [None, "1.50", "-0.01", "12"][i % 4],
                "n": i - 5,
            }
        )
    rows[41]["note"] = "thirteen char"  # too long for the tables' varchar(12) in Postgres: refused
    return [rows[:25], rows[25:45], rows[45:]]


def _redis_tables(url: str) -> tuple[dict[str, dict[str, str]], Counter[tuple[tuple[str, str], ...]]]:
    with redis.Redis.from_url(url, decode_responses=True) as r:
        keyed = {k: r.hgetall(k) for k in r.scan_iter("latest:*")}
        appended = Counter(tuple(sorted(r.hgetall(k).items())) for k in r.scan_iter("calls:*"))
    return keyed, appended


def test_redis_tables_equal_the_reference(spark: Any, tmp_path: Path, redis_url: str) -> None:
    graph = compile_text(script("redis"))
    sources = prepare(tmp_path, {"s": events()})
    ref_url, spark_url = redis_url.rsplit("/", 1)[0] + "/1", redis_url.rsplit("/", 1)[0] + "/2"
    for url in (ref_url, spark_url):
        with redis.Redis.from_url(url) as r:
            r.flushdb()
    run_reference(graph, tmp_path / "ref", sources, [], bind_stores(graph, {"st": ref_url}))
    run_spark(
        spark,
        graph,
        tmp_path / "spark",
        sources,
        [],
        max_files=1,
        stores=bind_stores(graph, {"st": spark_url}),
    )
    ref_keyed, ref_log = _redis_tables(ref_url)
    spark_keyed, spark_log = _redis_tables(spark_url)
    assert len(ref_keyed) == 17 and sum(ref_log.values()) == 54
    assert spark_keyed == ref_keyed
    assert spark_log == ref_log
    last16 = ref_keyed["latest:16"]  # i = 50, the last row of key 16: NULL note, total -0.0
    assert "note" not in last16 and last16["total"] == "-0.0" and last16["n"] == "45"


@pytest.mark.postgres
def test_postgres_tables_equal_the_reference(
    spark: Any, tmp_path: Path, pg_db: str, postgres_url: str
) -> None:
    graph = compile_text(script("postgresql"))
    sources = prepare(tmp_path, {"s": events()})
    ref_db = pg_db + "_ref"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{ref_db.rsplit("/", 1)[1]}"')
    try:
        ref = run_reference(graph, tmp_path / "ref", sources, [], bind_stores(graph, {"st": ref_db}))
        spk = run_spark(
            spark,
            graph,
            tmp_path / "spark",
            sources,
            [],
            max_files=1,
            stores=bind_stores(graph, {"st": pg_db}),
        )
        tables = []
        for url in (ref_db, pg_db):
            with psycopg.connect(url) as conn:
                conn.execute("SET TimeZone = 'UTC'")
                tables.append(
                    (
                        conn.execute(f"SELECT {NAMES} FROM latest ORDER BY k").fetchall(),
                        sorted(conn.execute(f"SELECT {NAMES} FROM calls").fetchall(), key=repr),
                        sorted(
                            conn.execute("SELECT k, total, note, at, vip, n FROM plain").fetchall(), key=repr
                        ),
                    )
                )
        assert len(tables[0][0]) == 17 and len(tables[0][1]) == 53 and len(tables[0][2]) == 59
        assert tables[1] == tables[0]
        refused = [d for d in ref.dead if "too long" in str(d)]
        assert len(refused) == 3  # the long note, refused by the three tables
        assert len([d for d in spk.dead if "too long" in str(d)]) == 3
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{ref_db.rsplit("/", 1)[1]}" WITH (FORCE)')
