"""ReadSQL, UpdateSQL and Materialize in the reference executor.

The first tests use a small in-test fake of the `Stores` protocol to check the operators' wiring
(binding, outer semantics, counts, dead letters); the last ones run against real SQLite through
`stores.registry.StoreRegistry`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cpl.compiler import compile_script
from deployer.local.executor import LocalExecutor
from operators.graph import SqlQuery, Table
from stores.errors import StoreQueryError

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, duration integer;
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, fee FROM plans WHERE idcaller = ?'
  RETURNS (idplan integer, fee double);
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE idcaller = ?';
CREATE TABLE calls (idcaller integer PRIMARY KEY, duration integer) IN crm;
INSERT INTO withplan SELECT idcaller, duration, p.idplan, p.fee FROM cdr ON SQL plan_of, p, idcaller, idplan, fee;
INSERT INTO anyplan SELECT idcaller, p.idplan FROM cdr ON OUTER SQL plan_of, p, idcaller, idplan, fee;
INSERT INTO charged SELECT idcaller, c.n FROM withplan ON SQL charge, c, fee, idcaller, n;
INSERT INTO TABLE calls SELECT idcaller, duration FROM cdr;
"""


class FakeStores:
    """plans: idcaller → rows; charge counts one affected row per known caller; caller 666 fails."""

    def __init__(self) -> None:
        self.plans: dict[Any, list[tuple[Any, ...]]] = {1: [(10, 2.5)], 2: [(20, 1.0), (21, 3.0)]}
        self.updates: list[tuple[Any, ...]] = []
        self.rows: dict[str, list[tuple[Sequence[str], tuple[Any, ...]]]] = {}

    def read(self, query: SqlQuery, params: Sequence[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
        if any(p[0] == 666 for p in params):
            raise StoreQueryError("no such table: plans", store=query.store)
        return [list(self.plans.get(p[0], [])) for p in params]

    def update(self, query: SqlQuery, params: Sequence[tuple[Any, ...]]) -> list[int]:
        self.updates.extend(params)
        return [1 if p[1] in self.plans else 0 for p in params]

    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
        for r in rows:
            self.rows.setdefault(table.name, []).append((tuple(columns), r))

    def close(self) -> None:
        pass


def run_fake(events: list[tuple[int, int]]) -> tuple[LocalExecutor, FakeStores]:
    fake = FakeStores()
    ex = LocalExecutor(compile_script(SCRIPT).graph, fake)
    ex.run({"cdr": events})
    return ex, fake


def test_readsql_emits_one_event_per_row_and_outer_keeps_misses() -> None:
    ex, _ = run_fake([(1, 60), (3, 5), (2, 30)])
    assert ex.outputs["withplan"] == [(1, 60, 10, 2.5), (2, 30, 20, 1.0), (2, 30, 21, 3.0)]
    assert ex.outputs["anyplan"] == [(1, 10), (3, None), (2, 20), (2, 21)]


def test_updatesql_binds_in_event_order_and_emits_the_count() -> None:
    ex, fake = run_fake([(1, 60), (2, 30)])
    assert fake.updates == [(2.5, 1), (1.0, 2), (3.0, 2)]
    assert ex.outputs["charged"] == [(1, 1), (2, 1), (2, 1)]


def test_materialize_writes_each_event_with_its_columns() -> None:
    _, fake = run_fake([(1, 60), (3, 5)])
    assert fake.rows["calls"] == [(("idcaller", "duration"), (1, 60)), (("idcaller", "duration"), (3, 5))]


def test_store_error_dead_letters_the_event() -> None:
    ex, _ = run_fake([(666, 1), (1, 60)])
    assert ex.outputs["withplan"] == [(1, 60, 10, 2.5)]
    assert [(d.stage, d.event) for d in ex.dead_letters] == [("ReadSQL", (666, 1)), ("ReadSQL", (666, 1))]
    assert "no such table: plans" in ex.dead_letters[0].reason
    assert ex.stats.dead_lettered == {"ReadSQL": 2}


def test_a_graph_with_stores_needs_them() -> None:
    with pytest.raises(ValueError, match="pass `stores`"):
        LocalExecutor(compile_script(SCRIPT).graph)


# ---- real SQLite through the StoreRegistry --------------------------------------------------------------


@pytest.fixture
def sqlite_registry(tmp_path: Path) -> Any:
    from stores.bindings import StoreBindings
    from stores.registry import StoreRegistry
    from stores.urls import parse_store_url

    db = tmp_path / "crm.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE plans (idcaller integer, idplan integer, fee real)")
        conn.executemany("INSERT INTO plans VALUES (?, ?, ?)", [(1, 10, 2.5), (2, 20, 1.0), (2, 21, 3.0)])
        conn.execute("CREATE TABLE balances (idcaller integer PRIMARY KEY, amount real)")
        conn.executemany("INSERT INTO balances VALUES (?, ?)", [(1, 100.0), (2, 100.0)])
    graph = compile_script(SCRIPT).graph
    reg = StoreRegistry(StoreBindings({"crm": parse_store_url(f"sqlite:///{db}")}, graph.stores))
    yield graph, reg, db
    reg.close()


def test_against_sqlite(sqlite_registry: Any) -> None:
    graph, reg, db = sqlite_registry
    ex = LocalExecutor(graph, reg)
    ex.run({"cdr": [(1, 60), (3, 5), (2, 30), (1, 90)]})
    assert ex.outputs["withplan"] == [(1, 60, 10, 2.5), (2, 30, 20, 1.0), (2, 30, 21, 3.0), (1, 90, 10, 2.5)]
    assert ex.outputs["anyplan"] == [(1, 10), (3, None), (2, 20), (2, 21), (1, 10)]
    assert ex.outputs["charged"] == [(1, 1), (2, 1), (2, 1), (1, 1)]
    reg.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT idcaller, amount FROM balances ORDER BY 1").fetchall() == [
            (1, 95.0),
            (2, 96.0),
        ]
        # upsert by primary key: caller 1's second call replaces the first
        assert conn.execute("SELECT idcaller, duration FROM calls ORDER BY 1").fetchall() == [
            (1, 90),
            (2, 30),
            (3, 5),
        ]
    assert ex.dead_letters == []


def test_sqlite_error_is_a_dead_letter(tmp_path: Path) -> None:
    from stores.bindings import StoreBindings
    from stores.registry import StoreRegistry
    from stores.urls import parse_store_url

    graph = compile_script(SCRIPT).graph  # the database has no plans table
    url = parse_store_url(f"sqlite:///{tmp_path / 'empty.db'}")
    reg = StoreRegistry(StoreBindings({"crm": url}, graph.stores))
    try:
        ex = LocalExecutor(graph, reg)
        ex.run({"cdr": [(1, 60)]})
    finally:
        reg.close()
    assert {d.stage for d in ex.dead_letters} == {"ReadSQL"}
    assert ex.stats.dead_lettered == {"ReadSQL": 2}


# ---- the same against a real PostgreSQL ------------------------------------------------------------------


@pytest.mark.postgres
def test_against_postgres(pg_db: str) -> None:
    """The reference executor's ReadSQL, UpdateSQL and Materialize on PostgreSQL give what they give
    on SQLite (the paper's Figure 3 lookup, ordered updates, upsert by primary key)."""
    import psycopg

    from stores.bindings import StoreBindings
    from stores.registry import StoreRegistry
    from stores.urls import parse_store_url

    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE plans (idcaller integer, idplan integer, fee double precision)")
        conn.execute("INSERT INTO plans VALUES (1, 10, 2.5), (2, 20, 1.0), (2, 21, 3.0)")
        conn.execute("CREATE TABLE balances (idcaller integer PRIMARY KEY, amount double precision)")
        conn.execute("INSERT INTO balances VALUES (1, 100.0), (2, 100.0)")
    graph = compile_script(SCRIPT).graph
    reg = StoreRegistry(StoreBindings({"crm": parse_store_url(pg_db)}, graph.stores))
    try:
        ex = LocalExecutor(graph, reg)
        ex.run({"cdr": [(1, 60), (3, 5), (2, 30), (1, 90)]})
    finally:
        reg.close()
    assert ex.outputs["withplan"] == [(1, 60, 10, 2.5), (2, 30, 20, 1.0), (2, 30, 21, 3.0), (1, 90, 10, 2.5)]
    assert ex.outputs["anyplan"] == [(1, 10), (3, None), (2, 20), (2, 21), (1, 10)]
    assert ex.outputs["charged"] == [(1, 1), (2, 1), (2, 1), (1, 1)]
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT idcaller, amount FROM balances ORDER BY 1").fetchall() == [
            (1, 95.0),
            (2, 96.0),
        ]
        assert conn.execute("SELECT idcaller, duration FROM calls ORDER BY 1").fetchall() == [
            (1, 90),
            (2, 30),
            (3, 5),
        ]
    assert ex.dead_letters == []
