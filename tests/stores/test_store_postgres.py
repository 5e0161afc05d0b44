"""Postgres-only behaviour of SqlStore: parameter typing of batched reads, read-only transactions,
statement timeout, created column types, concurrency through the bounded pool."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import psycopg
import pytest
from store_helpers import query

from operators.datatypes import T_BIGINT, T_BOOLEAN, T_DOUBLE, T_INTEGER, T_TIMESTAMP, DataType, schema_of
from operators.graph import Table
from stores.errors import StoreQueryError
from stores.sql.store import SqlStore
from stores.urls import parse_store_url

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(pg_db: str) -> Iterator[tuple[SqlStore, psycopg.Connection[tuple[object, ...]]]]:
    store = SqlStore(parse_store_url(pg_db), "crm")
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE plans (idcaller integer, idplan text, since date)")
        conn.execute("INSERT INTO plans VALUES (1, 'gold', '2024-01-01'), (2, 'bronze', NULL)")
        yield store, conn
    store.close()


def test_str_and_null_parameters_get_the_type_the_server_infers(
    pg: tuple[SqlStore, psycopg.Connection],
) -> None:
    store, _ = pg
    q = query("SELECT idplan FROM plans WHERE idcaller = ?")
    # A str against an integer column works as it does for one event (psycopg sends str untyped)...
    assert store.read(q, [("2",), (None,), ("1",)]) == [[("bronze",)], [], [("gold",)]]
    # ...and so does a date column compared with a str, which a text[] array could not do.
    by_date = query("SELECT idplan FROM plans WHERE since = ?")
    assert store.read(by_date, [("2024-01-01",), (None,)]) == [[("gold",)], []]
    assert store.read(by_date, [(None,)]) == [[]]


def test_parameter_no_query_context_types_becomes_text(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, _ = pg
    q = query("SELECT count(*) FROM plans WHERE ? IS NULL AND idcaller > ?")
    assert store.read(q, [(None, 0), (None, 1)]) == [[(2,)], [(1,)]]
    assert store.read(q, [("x", 0), (None, 0)]) == [[(0,)], [(2,)]]


def test_mixed_python_numbers_widen(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, _ = pg
    q = query("SELECT ? + 0 AS v")
    assert store.read(q, [(1,), (2.5,), (None,)]) == [[(1.0,)], [(2.5,)], [(None,)]]
    assert store.read(q, [(1,), (Decimal("2.50"),)]) == [[(Decimal(1),)], [(Decimal("2.50"),)]]
    assert store.read(q, [(2**70,)]) == [[(Decimal(2**70),)]]
    with pytest.raises(StoreQueryError, match=r"parameter 1: values of incompatible types \(int, str\)"):
        store.read(q, [(1,), ("1",)])


def test_reads_run_in_a_read_only_transaction(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    conn.execute("CREATE SEQUENCE s")
    with pytest.raises(StoreQueryError) as info:
        store.read(query("SELECT nextval('s') WHERE ? > 0"), [(1,)])
    assert info.value.sqlstate == "25006"  # read_only_sql_transaction
    assert conn.execute("SELECT last_value, is_called FROM s").fetchone() == (1, False)
    # A query that writes through a CTE is refused too (nested in the batch's LATERAL, it cannot run).
    with pytest.raises(StoreQueryError):
        store.read(
            query("WITH d AS (DELETE FROM plans RETURNING 1) SELECT count(*) FROM d WHERE ? = 1"), [(1,)]
        )
    assert conn.execute("SELECT count(*) FROM plans").fetchone() == (2,)


def test_statement_timeout(pg_db: str) -> None:
    store = SqlStore(parse_store_url(pg_db + "?statement_timeout_ms=300"), "crm")
    try:
        start = time.monotonic()
        with pytest.raises(StoreQueryError) as info:
            store.read(query("SELECT pg_sleep(?)"), [(5,)])
        assert info.value.sqlstate == "57014"  # query_canceled
        with pytest.raises(StoreQueryError):
            store.update(query("UPDATE pg_class SET relname = relname WHERE pg_sleep(?) IS NULL"), [(5,)])
        assert time.monotonic() - start < 3
        assert store.read(query("SELECT ?"), [(1,)]) == [[(1,)]]  # the pool's connections still work
    finally:
        store.close()


def test_materialized_columns_have_the_declared_types(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    table = Table(
        "typed",
        "crm",
        schema_of(
            ("b", T_BOOLEAN),
            ("i", T_INTEGER),
            ("l", T_BIGINT),
            ("d", T_DOUBLE),
            ("n", DataType("decimal", precision=12, scale=3)),
            ("c", DataType("char", length=4)),
            ("v", DataType("varchar", length=20)),
            ("ts", T_TIMESTAMP),
        ),
        ("i",),
    )
    store.materialize(table, ["i"], [(1,)])
    cols = conn.execute(
        "SELECT column_name, data_type, character_maximum_length, numeric_precision, numeric_scale, is_nullable"
        " FROM information_schema.columns WHERE table_name = 'typed' ORDER BY ordinal_position"
    ).fetchall()
    assert cols == [
        ("b", "boolean", None, None, None, "YES"),
        ("i", "integer", None, 32, 0, "NO"),
        ("l", "bigint", None, 64, 0, "YES"),
        ("d", "double precision", None, 53, None, "YES"),
        ("n", "numeric", None, 12, 3, "YES"),
        ("c", "character varying", 4, None, None, "YES"),
        ("v", "character varying", 20, None, None, "YES"),
        ("ts", "timestamp with time zone", None, None, None, "YES"),
    ]
    # No SERIAL default sneaked onto the integer key.
    assert conn.execute(
        "SELECT column_default FROM information_schema.columns WHERE table_name = 'typed'"
        " AND column_name = 'i'"
    ).fetchone() == (None,)


def test_concurrent_batches_through_the_bounded_pool(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    q = query("SELECT idplan FROM plans WHERE idcaller = ?")

    def work(i: int) -> list[list[tuple[object, ...]]]:
        return store.read(q, [(1 + i % 2,), (3,)] * 20)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(32)))
    for i, got in enumerate(results):
        assert got == [[("gold",) if i % 2 == 0 else ("bronze",)], []] * 20
    backends = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchone()
    assert backends is not None and backends[0] <= 4
