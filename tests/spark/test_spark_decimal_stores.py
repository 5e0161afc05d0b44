"""Decimals between the engines and real stores: an ON SQL query that RETURNS decimal(p, s) gives its
values in that type on both engines (rounded half up; a value that does not fit dead-letters the
event, with the same reason), and what both engines materialize into decimal columns of SQLite,
PostgreSQL and Redis reads back the same, exactly. One file per micro-batch on Spark."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from spark_helpers import (
    Outputs,
    assert_same,
    assert_same_dead_letters,
    compile_text,
    prepare,
    run_reference,
    run_spark,
)

from deployer.runner import bind_stores

pytestmark = pytest.mark.spark

READ_SCRIPT = """
CREATE STREAMSCHEMA c WITH k integer, id integer, amount decimal(10, 2);
CREATE DATASTORE crm TYPE {kind};
CREATE SQLQUERY fee_of ON crm AS 'SELECT fee FROM rates WHERE id = ? ORDER BY pos' RETURNS (fee decimal(6, 2));
CREATE TABLE charges (k integer, pos integer, total decimal(12, 2), fee decimal(6, 2), PRIMARY KEY (k, pos)) IN crm;
INSERT INTO priced SELECT k, id, amount * f.fee AS total, f.fee AS fee FROM c ON SQL fee_of, f, id, fee;
INSERT INTO TABLE charges SELECT k, id AS pos, total, fee FROM priced;
"""
# id 3: a fee too large for decimal(6, 2) after a good one (the event is dead-lettered, whole);
# id 2: three places, rounded half up; id 4: no fee at all
RATES = [
    (1, 1, "0.10"),
    (2, 1, "1.005"),
    (2, 2, "2"),
    (3, 1, "0.5"),
    (3, 2, "123456789.12"),
    (5, 1, "-0.004"),
]


def events() -> list[list[dict[str, Any]]]:
    rows = [
        {"k": k, "id": 1 + k % 5, "amount": ["48533.40", 12.5, "0.01", "-3", 99999999.99][k % 5]}
        for k in range(40)
    ]
    return [rows[:15], rows[15:30], rows[30:]]


def _rates(fee: str) -> list[str]:
    """The `rates` table, its fees of SQL type `fee`."""
    return [f"CREATE TABLE rates (id integer, pos integer, fee {fee})"] + [
        "INSERT INTO rates VALUES ({}, {}, '{}')".format(*row) for row in RATES
    ]


@contextmanager
def sqlite_pair(tmp_path: Path) -> Iterator[tuple[str, str]]:
    urls = []
    for name in ("ref", "spark"):
        path = tmp_path / f"{name}.sqlite3"
        db = sqlite3.connect(path)
        for sql in _rates("text"):
            db.execute(sql)
        db.commit()
        db.close()
        urls.append(f"sqlite:///{path}")
    yield urls[0], urls[1]


@contextmanager
def postgres_pair(pg_db: str, postgres_url: str) -> Iterator[tuple[str, str]]:
    ref_db = pg_db + "_ref"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{ref_db.rsplit("/", 1)[1]}"')
    try:
        for url in (ref_db, pg_db):
            with psycopg.connect(url, autocommit=True) as conn:
                for sql in _rates("numeric"):
                    conn.execute(sql)
        yield ref_db, pg_db
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{ref_db.rsplit("/", 1)[1]}" WITH (FORCE)')


def _charges(url: str) -> list[tuple[Any, ...]]:
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return db.execute("SELECT k, pos, total, fee FROM charges ORDER BY k, pos").fetchall()
        finally:
            db.close()
    with psycopg.connect(url) as conn:
        return [
            tuple(str(v) for v in r)
            for r in conn.execute("SELECT k, pos, total, fee FROM charges ORDER BY k, pos")
        ]


def _both(
    spark: Any, tmp_path: Path, kind: str, urls: tuple[str, str]
) -> tuple[Outputs, Outputs, list[Any], list[Any]]:
    graph = compile_text(READ_SCRIPT.format(kind=kind))
    sources = prepare(tmp_path, {"c": events()})
    ref = run_reference(graph, tmp_path / "ref", sources, ["priced"], bind_stores(graph, {"crm": urls[0]}))
    spk = run_spark(
        spark,
        graph,
        tmp_path / "spark",
        sources,
        ["priced"],
        max_files=1,
        stores=bind_stores(graph, {"crm": urls[1]}),
    )
    return ref, spk, _charges(urls[0]), _charges(urls[1])


def _check(ref: Outputs, spk: Outputs, ref_table: list[Any], spark_table: list[Any]) -> None:
    assert_same(ref, spk, "priced", min_rows=20)
    assert_same_dead_letters(ref, spk)
    reasons = {d["reason"] for d in ref.dead}
    assert "query fee_of, column 'fee': 123456789.12 is out of range for decimal(6, 2)" in reasons, reasons
    fees = {r["fee"] for r in ref["priced"]}
    assert fees == {"0.10", "1.01", "2.00", "0.00"}, fees  # in the declared scale, -0.004 as 0.00
    assert ref_table == spark_table and len(ref_table) >= 20
    assert ("0", "1", "4853.34", "0.10") in [tuple(map(str, r)) for r in ref_table]


def test_sqlite_reads_and_materializes_decimals_alike(spark: Any, tmp_path: Path) -> None:
    with sqlite_pair(tmp_path) as urls:
        _check(*_both(spark, tmp_path, "postgresql", urls))


@pytest.mark.postgres
def test_postgres_reads_and_materializes_decimals_alike(
    spark: Any, tmp_path: Path, pg_db: str, postgres_url: str
) -> None:
    with postgres_pair(pg_db, postgres_url) as urls:
        _check(*_both(spark, tmp_path, "postgresql", urls))


REDIS_SCRIPT = """
CREATE STREAMSCHEMA c WITH k integer, amount decimal(10, 2), x double;
CREATE DATASTORE cache TYPE redis;
CREATE TABLE bills (k integer PRIMARY KEY, amount decimal(10, 2), tax decimal(8, 4), x decimal(6, 1)) IN cache;
INSERT INTO TABLE bills SELECT k, amount, amount * CAST('0.196' AS decimal(4, 3)) AS tax, x FROM c;
"""


@pytest.mark.redis
def test_redis_hashes_alike(spark: Any, tmp_path: Path, redis_url: str) -> None:
    graph = compile_text(REDIS_SCRIPT)
    rows = [
        {"k": k, "amount": ["48533.40", "0.01", "-7"][k % 3], "x": [0.1 + 0.2, 12345.05, 1e9][k % 3]}
        for k in range(30)
    ]
    sources = prepare(tmp_path, {"c": [rows[:10], rows[10:20], rows[20:]]})
    base = redis_url.rsplit("/", 1)[0]
    urls = (base + "/3", base + "/4")
    for url in urls:
        with redis.Redis.from_url(url) as r:
            r.flushdb()
    ref = run_reference(graph, tmp_path / "ref", sources, [], bind_stores(graph, {"cache": urls[0]}))
    spk = run_spark(
        spark,
        graph,
        tmp_path / "spark",
        sources,
        [],
        max_files=1,
        stores=bind_stores(graph, {"cache": urls[1]}),
    )
    tables = []
    for url in urls:
        with redis.Redis.from_url(url, decode_responses=True) as r:
            tables.append({k: r.hgetall(k) for k in r.scan_iter("bills:*")})
    assert tables[0] == tables[1] and len(tables[0]) == 20
    assert tables[0]["bills:0"] == {"k": "0", "amount": "48533.40", "tax": "9512.5464", "x": "0.3"}
    assert tables[0]["bills:1"] == {"k": "1", "amount": "0.01", "tax": "0.0020", "x": "12345.1"}
    # 1e9 does not fit decimal(6, 1): those rows are refused (the reasons name each engine's store)
    spk.dead = [{**d, "reason": d["reason"].replace(urls[1], urls[0])} for d in spk.dead]
    assert_same_dead_letters(ref, spk)
    assert len(ref.dead) == 10 and all("out of range for decimal(6, 1)" in d["reason"] for d in ref.dead)
    assert Decimal(tables[0]["bills:0"]["tax"]) == Decimal("48533.40") * Decimal("0.196")
