"""The SQLite backend of `SqlStore`: the embedded default store (DESIGN.md decision 7).

Why SQLAlchemy over the stdlib driver rather than bare `sqlite3`: materialization needs SQLAlchemy
anyway (the table built from the CPL declaration, reflection of an existing table, and the dialect's
INSERT ... ON CONFLICT), and going through one engine lets Postgres and SQLite share that code.
The hot paths still hand SQL straight to the stdlib cursor (`exec_driver_sql`, qmark style), so
the user's `?` placeholders are used as written and nothing is parsed twice.

SQLite runs in-process, so there is no round trip to batch away: reads execute once per event.
One connection per store and process (StaticPool), used under a lock; other processes coordinate
through SQLite's file locking (WAL journal, busy timeout = the statement timeout). The statement
timeout itself is enforced with a progress handler that interrupts a statement past its deadline.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from operators.graph import SqlQuery, Table
from stores.errors import StoreError, StoreQueryError
from stores.schema import declared_shape, existing_shape, schema_mismatch
from stores.sql import MaterializePlan, Row, materialize_plan
from stores.urls import StoreURL
from stores.values import from_db, normalize_row, sqlite_value


class SqliteBackend:
    def __init__(self, url: StoreURL, name: str, statement_timeout_ms: int) -> None:
        self.url = url
        self.name = name
        self.timeout_ms = statement_timeout_ms
        self._lock = threading.RLock()
        self._engine: sa.Engine | None = None
        self._plans: dict[tuple[Table, tuple[str, ...]], MaterializePlan] = {}

    def engine(self) -> sa.Engine:
        with self._lock:
            if self._engine is None:
                if not self.url.is_memory and self.url.database:
                    Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
                engine = sa.create_engine(
                    self.url.sqlalchemy_url(),
                    poolclass=sa.StaticPool,
                    connect_args={"check_same_thread": False, "timeout": self.timeout_ms / 1000},
                )
                if not self.url.is_memory:
                    sa.event.listen(engine, "connect", _use_wal)
                self._engine = engine
            return self._engine

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def _error(self, e: Exception, what: str) -> StoreError:
        if isinstance(e, StoreError):
            return e
        if isinstance(e, sa.exc.DBAPIError) and e.orig is not None:
            e = e.orig
        code = getattr(e, "sqlite_errorname", None)
        return StoreQueryError(f"{what}: {e}", store=self.name, url=self.url.redacted(), sqlstate=code)

    @contextlib.contextmanager
    def _deadline(self, conn: sa.Connection) -> Iterator[None]:
        """Interrupt any statement that runs past the statement timeout."""
        raw = conn.connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        deadline = time.monotonic() + self.timeout_ms / 1000
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield
        finally:
            raw.set_progress_handler(None, 0)

    # -- ReadSQL / UpdateSQL ------------------------------------------------------------------

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        out: list[list[Row]] = []
        returns = query.returns
        try:
            with self._lock, self.engine().connect() as conn, self._deadline(conn):
                for p in params:
                    result = conn.exec_driver_sql(query.text, tuple(sqlite_value(v) for v in p))
                    rows = [normalize_row(tuple(r)) for r in result.fetchall()]
                    if returns is not None:
                        rows = [
                            tuple(from_db(v, f.type) for v, f in zip(r, returns, strict=True))
                            if len(r) == len(returns)
                            else r
                            for r in rows
                        ]
                    out.append(rows)
        except Exception as e:
            raise self._error(e, f"query {query.name} (batch of {len(params)})") from e
        return out

    def update(self, query: SqlQuery, params: Sequence[Row]) -> list[int]:
        counts: list[int] = []
        if not params:
            return counts
        try:
            with self._lock, self.engine().begin() as conn, self._deadline(conn):
                # Exactly-once: the ledger hook goes here (same transaction as the effect).
                for p in params:
                    result = conn.exec_driver_sql(query.text, tuple(sqlite_value(v) for v in p))
                    counts.append(result.rowcount)
        except Exception as e:
            raise self._error(e, f"query {query.name} (batch of {len(params)})") from e
        return counts

    # -- Materialize --------------------------------------------------------------------------

    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[Row]) -> None:
        plan = self._plan(table, columns)
        if not rows:
            return
        values = [tuple(sqlite_value(r[i]) for i in plan.order) for r in rows]
        try:
            with self._lock, self.engine().begin() as conn, self._deadline(conn):
                # Exactly-once: the ledger hook goes here (same transaction as the rows).
                conn.exec_driver_sql(plan.sql, values)
        except Exception as e:
            raise self._error(e, f"materializing {len(rows)} row(s) into {table.name}") from e

    def _plan(self, table: Table, columns: Sequence[str]) -> MaterializePlan:
        key = (table, tuple(columns))
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = materialize_plan(table, columns, "sqlite")
            except ValueError as e:
                raise StoreQueryError(str(e), store=self.name, url=self.url.redacted()) from None
            self._ensure_table(plan.table)
            self._plans[key] = plan
        return plan

    def _ensure_table(self, t: sa.Table) -> None:
        want = declared_shape(t, "sqlite")
        try:
            with self._lock, self.engine().begin() as conn:
                have = existing_shape(conn, t.name)
                if have is None:
                    t.create(conn)
                    return
        except sa.exc.SQLAlchemyError as e:
            raise self._error(e, f"checking table {t.name}") from e
        if not have.same_as(want):
            raise schema_mismatch(t, have, want, self.name, self.url)


def _use_wal(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.execute("PRAGMA journal_mode=WAL")
