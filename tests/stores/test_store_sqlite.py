"""SQLite-only behaviour of SqlStore: the embedded default store."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from store_helpers import query

from operators.datatypes import T_INTEGER, T_TIMESTAMP, schema_of
from operators.graph import Table
from stores.errors import StoreQueryError
from stores.sql.store import SqlStore
from stores.urls import StoreURL, parse_store_url


def test_file_store_creates_its_directory_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "state" / "nested" / "crm.sqlite3"
    table = Table("seen", "crm", schema_of(("id", T_INTEGER), ("at", T_TIMESTAMP)), ("id",))
    at = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    store = SqlStore(StoreURL("sqlite", database=str(path)), "crm")
    store.materialize(table, ["id", "at"], [(1, at)])
    store.close()
    with sqlite3.connect(path) as conn:
        # UTC text in SQLAlchemy's layout, so SQL comparisons against bound timestamps agree.
        assert conn.execute("SELECT id, at FROM seen").fetchall() == [(1, "2024-05-06 07:08:09.123456")]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    again = SqlStore(StoreURL("sqlite", database=str(path)), "crm")
    try:
        got = again.read(query("SELECT id, at FROM seen WHERE at = ?", returns=table.columns), [(at,)])
        assert got == [[(1, at)]]
    finally:
        again.close()


def test_memory_store_is_one_database_per_store() -> None:
    store = SqlStore(parse_store_url("sqlite:///:memory:"), "mem")
    try:
        assert store.update(query("CREATE TABLE t (k integer)"), [()]).counts == [-1]
        assert store.update(query("INSERT INTO t VALUES (?)"), [(1,), (2,)]).counts == [1, 1]
        assert store.read(query("SELECT count(*) FROM t"), [()]) == [[(2,)]]
    finally:
        store.close()


def test_statement_timeout_interrupts_a_runaway_query(tmp_path: Path) -> None:
    store = SqlStore(parse_store_url(f"sqlite:///{tmp_path / 'x.db'}?statement_timeout_ms=200"), "x")
    runaway = query("WITH RECURSIVE c(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c")
    try:
        start = time.monotonic()
        with pytest.raises(StoreQueryError, match="interrupted"):
            store.read(runaway, [(1,)])
        assert time.monotonic() - start < 3
        assert store.read(query("SELECT ? + 1"), [(1,)]) == [[(2,)]]  # usable afterwards
    finally:
        store.close()
