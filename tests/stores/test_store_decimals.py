"""Decimals through the stores, both ways, exactly: materialized into a decimal(p, s) column of
PostgreSQL (numeric), SQLite (its exact text, TEXT affinity) and Redis (plain text with the
column's scale), and read back by a query that RETURNS decimal(p, s) as the same value. A value
takes its column's scale (rounded half up); one that does not fit is refused with a reason."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import redis
from store_helpers import FAST_RETRY, Backend, query

from operators.datatypes import T_INTEGER, DataType, schema_of
from operators.graph import Table
from stores.redis.store import RedisStore
from stores.sql.store import SqlStore
from stores.urls import parse_store_url

MONEY = DataType("decimal", precision=12, scale=2)
TINY = DataType("decimal", precision=10, scale=8)
BILL = Table("bill", "crm", schema_of(("id", T_INTEGER), ("total", MONEY), ("rate", TINY)), ("id",))
COLUMNS = ["id", "total", "rate"]
ROWS = [
    (1, Decimal("48533.40"), Decimal("0.00000001")),
    (2, Decimal("1.005"), Decimal("-0.00000010")),  # 1.005 rounds half up to 1.01
    (3, 0.1 + 0.2, 3),  # a double by its shortest text (0.30), an integer as 3.00000000
    (4, Decimal("-0.001"), None),  # rounds to 0.00, never -0.00
    (5, Decimal("1e10"), Decimal("1")),  # 10 integer digits do not fit decimal(12, 2)
]
EXPECTED = {
    1: (Decimal("48533.40"), Decimal("0.00000001")),
    2: (Decimal("1.01"), Decimal("-0.00000010")),
    3: (Decimal("0.30"), Decimal("3.00000000")),
    4: (Decimal("0.00"), None),
}
READ = "SELECT total, rate FROM bill WHERE id = ?"
RETURNS = schema_of(("total", MONEY), ("rate", TINY))


def _materialized(store: SqlStore | RedisStore) -> list[str | None]:
    table = BILL if isinstance(store, SqlStore) else Table("bill", "cache", BILL.columns, ("id",))
    result = store.materialize(table, COLUMNS, ROWS)
    return result.errors


def test_sql_stores_round_trip_decimals(sql_backend: Backend) -> None:
    errors = _materialized(sql_backend.store)
    assert errors[:4] == [None] * 4
    assert errors[4] is not None and ("out of range" in errors[4] or "overflow" in errors[4]), errors[4]
    q = query(READ, returns=RETURNS)
    got = sql_backend.store.read(q, [(k,) for k in EXPECTED])
    assert [r[0] if r else None for r in got] == [EXPECTED[k] for k in EXPECTED]
    # the same, column by column (the Spark engine's read)
    columns = sql_backend.store.read_columns(q, [list(EXPECTED)], len(EXPECTED), width=2)
    assert list(zip(*columns.columns, strict=True)) == [EXPECTED[k] for k in EXPECTED]
    assert all(
        str(a) == str(b)
        for r, k in zip(got, EXPECTED, strict=True)
        for a, b in zip(r[0], EXPECTED[k], strict=True)
    )


def test_sqlite_keeps_the_exact_text(tmp_path: Path) -> None:
    store = SqlStore(parse_store_url(f"sqlite:///{tmp_path / 'crm.sqlite3'}"), "crm", retry=FAST_RETRY)
    try:
        _materialized(store)
        backend = Backend("sqlite", store.url, store)
        assert backend.fetch("SELECT total, typeof(total), rate FROM bill WHERE id = 1") == [
            ("48533.40", "text", "0.00000001")
        ]
        assert backend.fetch("SELECT total FROM bill WHERE id = 4") == [("0.00",)]
    finally:
        store.close()


def test_sqlite_refuses_a_numeric_column_that_would_round(tmp_path: Path) -> None:
    store = SqlStore(parse_store_url(f"sqlite:///{tmp_path / 'crm.sqlite3'}"), "crm", retry=FAST_RETRY)
    try:
        Backend("sqlite", store.url, store).execute(
            "CREATE TABLE bill (id INTEGER PRIMARY KEY, total NUMERIC(12, 2), rate DECIMAL_TEXT(10, 8))"
        )
        with pytest.raises(Exception, match="NUMERIC affinity"):
            store.materialize(BILL, COLUMNS, ROWS[:1])
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_reads_numeric_in_the_declared_scale(pg_backend: Backend) -> None:
    q = query("SELECT 1.005::numeric AS a, 12::numeric AS b, 0.00000001::numeric AS c", returns=None)
    typed = query(
        q.text, returns=schema_of(("a", DataType("decimal", precision=4, scale=2)), ("b", MONEY), ("c", TINY))
    )
    assert pg_backend.store.read(typed, [()]) == [
        [(Decimal("1.01"), Decimal("12.00"), Decimal("0.00000001"))]
    ]
    assert [str(v) for v in pg_backend.store.read(typed, [()])[0][0]] == ["1.01", "12.00", "1E-8"]


@pytest.mark.redis
def test_redis_hashes_hold_plain_decimals(redis_cache: RedisStore, redis_client: redis.Redis) -> None:
    errors = _materialized(redis_cache)
    assert errors[:4] == [None] * 4 and errors[4] is not None and "out of range" in errors[4]
    assert redis_client.hgetall("bill:1") == {"id": "1", "total": "48533.40", "rate": "0.00000001"}
    assert redis_client.hgetall("bill:2") == {"id": "2", "total": "1.01", "rate": "-0.00000010"}
    assert redis_client.hgetall("bill:3") == {"id": "3", "total": "0.30", "rate": "3.00000000"}
    assert redis_client.hgetall("bill:4") == {"id": "4", "total": "0.00"}
    assert not redis_client.exists("bill:5")
