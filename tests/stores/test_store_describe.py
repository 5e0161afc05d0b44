"""`StoreDescriber` (stores/sql/describe.py): what a SELECT returns, asked of a real store without
running the query, never writing to it, and giving up on a store that cannot be reached once."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import psycopg
import pytest
from store_helpers import query as select

from operators.declarations import DataStore, DescribeError
from stores.bindings import StoreBindings, resolve_bindings
from stores.retry import RetryPolicy
from stores.sql.describe import bindings_describer
from stores.urls import parse_store_url

CRM = DataStore("crm", "postgresql")


def test_describing_a_sqlite_file_neither_writes_it_nor_runs_the_query(tmp_path: Path) -> None:
    path = tmp_path / "crm.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE plans (idcaller integer, idplan integer, since DATETIME)")
        db.execute("INSERT INTO plans VALUES (1, 10, '2026-01-01')")
    # the database and its write-ahead log (the -shm file is an index readers update too)
    files = [tmp_path / "crm.sqlite3", tmp_path / "crm.sqlite3-wal"]
    before = [f.read_bytes() for f in files]
    describe = bindings_describer(resolve_bindings({"crm": CRM}, {}, {}, tmp_path))
    # `?` is NULL in the view: a parameter in an expression is an expression without a type
    columns = describe(
        select("SELECT idplan, since, ? AS x, count(*) AS n FROM plans WHERE idcaller = ?"), CRM
    )
    assert [(c.name, str(c.type), c.source, c.exact) for c in columns] == [
        ("idplan", "integer", "INTEGER", False),
        ("since", "timestamp", "DATETIME", False),
        ("x", "varchar", "", False),
        ("n", "varchar", "", False),
    ]
    assert [f.read_bytes() for f in files] == before


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_store_that_cannot_be_reached_is_asked_once(tmp_path: Path) -> None:
    url = parse_store_url(f"postgresql://cep:pw@127.0.0.1:{_closed_port()}/crm")
    bindings = StoreBindings({"crm": url}, {"crm": CRM}, RetryPolicy(tries=2, base_s=0.01))
    describe = bindings_describer(bindings)
    with pytest.raises(DescribeError) as first:
        describe(select("SELECT a FROM t WHERE k = ?"), CRM)
    assert str(first.value).startswith(f"postgresql://cep:***@127.0.0.1:{url.port}/crm: ")
    assert "pw" not in str(first.value).replace("postgresql", "")
    with pytest.raises(DescribeError) as second:  # another query of the same store: not tried again
        describe(select("SELECT b FROM t"), CRM)
    assert second.value is first.value


@pytest.mark.postgres
def test_postgres_describes_without_executing(pg_db: str, tmp_path: Path) -> None:
    """A query with a side effect in a function call is only prepared: nothing runs."""
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE seen (n int4)")
        conn.execute(
            "CREATE FUNCTION mark() RETURNS int4 LANGUAGE sql AS 'INSERT INTO seen VALUES (1) RETURNING n'"
        )
    describe = bindings_describer(resolve_bindings({"crm": CRM}, {"crm": pg_db}, {}, tmp_path))
    columns = describe(select("SELECT mark() AS m, ?::int8 AS k"), CRM)
    assert [(c.name, str(c.type)) for c in columns] == [("m", "integer"), ("k", "bigint")]
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT count(*) FROM seen").fetchone() == (0,)
    with pytest.raises(DescribeError, match=r"query q: relation \"nosuch\" does not exist"):
        describe(select("SELECT a FROM nosuch"), CRM)
