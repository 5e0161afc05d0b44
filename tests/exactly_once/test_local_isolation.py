"""The reference executor with real SQLite stores: an UpdateSQL event or a Materialize row that the
database refuses is dead-lettered with the database's message, and the other events go on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cpl.compiler import compile_script
from deployer.local.executor import LocalExecutor
from stores.bindings import StoreBindings
from stores.registry import StoreRegistry
from stores.urls import parse_store_url

SCRIPT = """
CREATE STREAMSCHEMA pay WITH id integer, amount integer;
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE id = ?';
CREATE TABLE paid (id integer PRIMARY KEY, amount integer) IN crm;
INSERT INTO charged SELECT id, amount, c.n FROM pay ON SQL charge, c, amount, id, n;
INSERT INTO TABLE paid SELECT id, amount FROM pay;
"""


def test_refused_events_are_dead_lettered_and_the_rest_applies(tmp_path: Path) -> None:
    db = tmp_path / "crm.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE balances (id integer PRIMARY KEY, amount integer CHECK (amount >= 0))")
        conn.execute("INSERT INTO balances VALUES (1, 100), (2, 100)")
    conn.close()
    graph = compile_script(SCRIPT).graph
    reg = StoreRegistry(StoreBindings({"crm": parse_store_url(f"sqlite:///{db}")}, graph.stores))
    try:
        ex = LocalExecutor(graph, reg)
        ex.run({"pay": [(1, 30), (2, 500), (None, 5), (1, 20)]})
    finally:
        reg.close()
    assert ex.outputs["charged"] == [(1, 30, 1), (None, 5, 0), (1, 20, 1)]
    dead = [(d.stage, d.event) for d in ex.dead_letters]
    assert dead == [("UpdateSQL", (2, 500)), ("Materialize", (None, 5))]
    assert "CHECK constraint failed" in ex.dead_letters[0].reason
    assert "NULL in primary key" in ex.dead_letters[1].reason
    assert all(d.reason.startswith("store crm (sqlite:///") for d in ex.dead_letters)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, amount FROM balances ORDER BY id").fetchall() == [(1, 50), (2, 100)]
        assert conn.execute("SELECT id, amount FROM paid ORDER BY id").fetchall() == [(1, 20), (2, 500)]
    conn.close()
