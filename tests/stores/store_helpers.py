"""Helpers for the store tests (a module of its own, not conftest: `from conftest import` would pick
whichever conftest.py pytest imported last).

Setup SQL is executed with the plain drivers (sqlite3, psycopg), not with the code under test.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import psycopg

from operators.graph import SqlQuery
from operators.sqltext import analyze
from stores.sql import SqlStore
from stores.urls import StoreURL


@dataclass
class Backend:
    kind: str  # "sqlite" | "postgresql"
    url: StoreURL
    store: SqlStore

    def execute(self, *statements: str) -> None:
        """Run setup statements directly with the driver."""
        if self.kind == "sqlite":
            assert self.url.database is not None
            with sqlite3.connect(self.url.database) as conn:
                for s in statements:
                    conn.execute(s)
            conn.close()
        else:
            with psycopg.connect(self.url.libpq_conninfo(), autocommit=True) as pg:
                for s in statements:
                    pg.execute(s)

    def fetch(self, sql: str) -> list[tuple[object, ...]]:
        if self.kind == "sqlite":
            assert self.url.database is not None
            conn = sqlite3.connect(self.url.database)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        with psycopg.connect(self.url.libpq_conninfo(), autocommit=True) as pg:
            return pg.execute(sql).fetchall()


def query(text: str, name: str = "q", store: str = "crm", returns: object = None) -> SqlQuery:
    info = analyze(text)
    return SqlQuery(name, store, text, info.kind, len(info.params), returns)  # type: ignore[arg-type]
