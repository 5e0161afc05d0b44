"""The SQLite backend of `SqlStore`: the embedded default store (docs/architecture.md, decision 7).

Why SQLAlchemy over the stdlib driver rather than bare `sqlite3`: materialization needs SQLAlchemy
anyway (the table built from the CPL declaration, reflection of an existing table, and the dialect's
INSERT ... ON CONFLICT), and going through one engine lets Postgres and SQLite share that code.
The hot paths still hand SQL straight to the stdlib cursor (`exec_driver_sql`, qmark style), so
the user's `?` placeholders are used as written and nothing is parsed twice.

SQLite runs in-process, so there is no round trip to batch away: reads execute once per event.
One connection per store and process (StaticPool), used under a lock; other processes (Spark's
Python workers, `cep serve`'s deployments, a `cep run` beside them) coordinate through SQLite's file
locking, and a writer waits for the lock rather than fail its batch with `database is locked`:

- the busy timeout is the statement timeout;
- every transaction that writes begins with `BEGIN IMMEDIATE`, which takes the write lock (waiting
  for it) before anything is read: a deferred transaction that read first, as the checks before
  creating a table or the ledger do, could not wait for it later (SQLite fails it at once, or two
  of them both find the table missing and both create it); reads begin deferred, and never wait
  for a writer;
- the WAL journal (readers and the writer do not block each other) is switched on with `use_wal`,
  which waits: SQLite fails that switch at once when another connection holds the database.

The statement timeout itself is enforced with a progress handler that interrupts a statement past
its deadline.
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
from stores import ledger
from stores.api import LedgerKey, MaterializeResult, UpdateResult
from stores.errors import StoreError, StoreQueryError
from stores.schema import declared_shape, existing_shape, schema_mismatch, stored_name
from stores.sql.base import MaterializePlan, Row, materialize_plan
from stores.sql.ledger_table import LEDGER
from stores.urls import StoreURL
from stores.values import conform_decimals, from_db, normalize_row, sqlite_value


class SqliteBackend:
    def __init__(self, url: StoreURL, name: str, statement_timeout_ms: int) -> None:
        self.url = url
        self.name = name
        self.timeout_ms = statement_timeout_ms
        self._lock = threading.RLock()
        self._engine: sa.Engine | None = None
        self._plans: dict[tuple[Table, tuple[str, ...]], MaterializePlan] = {}
        self._ledger_ready = False

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
                wal = not self.url.is_memory
                timeout_s = self.timeout_ms / 1000
                sa.event.listen(engine, "connect", lambda conn, _: _connected(conn, wal, timeout_s))
                sa.event.listen(engine, "begin", _begin)
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
        return StoreQueryError(
            f"{what}: {e}",
            store=self.name,
            url=self.url.redacted(),
            sqlstate=code,
            about_event=_is_event_error(e),
        )

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sa.Connection]:
        """A connection whose transaction begins deferred (`_begin`): it only reads."""
        with self.engine().connect() as conn:
            yield conn.execution_options(**{_READ_ONLY: True})

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
        types = query.result_types
        try:
            with self._lock, self._reading() as conn, self._deadline(conn):
                for p in params:
                    result = conn.exec_driver_sql(query.text, tuple(sqlite_value(v) for v in p))
                    rows = [normalize_row(tuple(r)) for r in result.fetchall()]
                    if types is not None:
                        rows = [
                            tuple(from_db(v, t) for v, t in zip(r, types, strict=True))
                            if len(r) == len(types)
                            else r
                            for r in rows
                        ]
                    out.append(rows)
        except Exception as e:
            raise self._error(e, f"query {query.name}") from e
        return out

    def update(
        self, query: SqlQuery, params: Sequence[Row], event_ids: Sequence[str] | None, scope: str | None
    ) -> UpdateResult:
        n = len(params)
        if not n:
            return UpdateResult([], [])
        sc = ledger.parse_scope(scope) if event_ids is not None and scope is not None else None
        keys = [ledger.entry_key(i) for i in event_ids] if sc is not None and event_ids is not None else []
        if sc is not None:
            self._ensure_ledger()
        counts: list[int | None] = [None] * n
        errors: list[str | None] = [None] * n
        replayed = 0
        what = f"query {query.name}"  # no batch size: the same on both engines, whatever the batches
        try:
            with self._lock, self.engine().begin() as conn, self._deadline(conn):
                done: dict[str, tuple[int | None, str | None]] = {}
                for i, p in enumerate(params):
                    if sc is not None:
                        k = keys[i]
                        # Claiming first takes SQLite's write lock before anything is read.
                        if (
                            k in done
                            or conn.exec_driver_sql(_CLAIM, (sc.deployment, sc.operator, k)).rowcount != 1
                        ):
                            if k not in done:
                                found = conn.exec_driver_sql(
                                    _RECORDED, (sc.deployment, sc.operator, k)
                                ).fetchone()
                                done[k] = (found[0], found[1]) if found is not None else (None, None)
                            counts[i], errors[i] = done[k]
                            replayed += 1
                            continue
                    try:
                        counts[i] = conn.exec_driver_sql(
                            query.text, tuple(sqlite_value(v) for v in p)
                        ).rowcount
                    except sa.exc.DBAPIError as e:
                        # SQLite undoes just the failed statement (ABORT): the transaction goes on.
                        if not (_is_event_error(e) and _in_transaction(conn)):
                            raise
                        errors[i] = str(self._error(e, f"query {query.name}"))
                    if sc is not None:
                        conn.exec_driver_sql(
                            _RECORD, (counts[i], errors[i], sc.deployment, sc.operator, keys[i])
                        )
                        done[keys[i]] = (counts[i], errors[i])
        except Exception as e:
            raise self._error(e, what) from e
        return UpdateResult(counts, errors, replayed)

    # -- Materialize --------------------------------------------------------------------------

    def materialize(
        self, table: Table, columns: Sequence[str], rows: Sequence[Row], ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        plan = self._plan(table, columns)
        n = len(rows)
        if not n:
            return MaterializeResult([])
        # decimals to their column's scale; one that does not fit is refused, as Postgres does
        rows, errors = conform_decimals(table, columns, rows)
        for k, e in enumerate(errors):
            if e is not None:
                errors[k] = str(self._error(ValueError(e), f"table {table.name}"))
        values = [tuple(sqlite_value(r[i]) for i in plan.order) for r in rows]
        entry = ledger.batch_entry(ledger_key) if ledger_key is not None else None
        if entry is not None:
            self._ensure_ledger()
        # A single INTEGER PRIMARY KEY is SQLite's rowid, which turns a NULL into a fresh number
        # instead of refusing it: refuse such rows here, as Postgres does.
        pk = {c.name for c in plan.table.primary_key.columns}
        pk_at = [(i, stored_name(c)) for i, c in enumerate(columns) if stored_name(c) in pk]
        for k, r in enumerate(rows):
            nulls = [name for i, name in pk_at if r[i] is None]
            if nulls and errors[k] is None:
                errors[k] = str(
                    self._error(
                        ValueError(f"NULL in primary key column(s) {', '.join(nulls)}"), f"table {table.name}"
                    )
                )
        what = f"materializing into {table.name}"  # no row count: the same on both engines
        try:
            if not any(errors):
                # Fast path: all rows in one executemany. If a row fails, the rows before it stay
                # written, so the whole transaction is undone and done again row by row.
                try:
                    with self._lock, self.engine().begin() as conn, self._deadline(conn):
                        if entry is not None and not self._claim_batch(conn, entry, n):
                            return self._recorded_batch(conn, entry, n)
                        conn.exec_driver_sql(plan.sql, values)
                    return MaterializeResult([None] * n)
                except sa.exc.DBAPIError as e:
                    if not _is_event_error(e):
                        raise
            with self._lock, self.engine().begin() as conn, self._deadline(conn):
                if entry is not None and not self._claim_batch(conn, entry, n):
                    return self._recorded_batch(conn, entry, n)
                for i, v in enumerate(values):
                    if errors[i] is not None:
                        continue
                    try:
                        conn.exec_driver_sql(plan.sql, v)
                    except sa.exc.DBAPIError as e:
                        if not (_is_event_error(e) and _in_transaction(conn)):
                            raise
                        errors[i] = str(self._error(e, f"table {table.name}"))
                if entry is not None:
                    ok = sum(e is None for e in errors)
                    conn.exec_driver_sql(_RECORD_BATCH, (ok, ledger.errors_json(errors), *entry))
            return MaterializeResult(errors)
        except Exception as e:
            raise self._error(e, what) from e

    @staticmethod
    def _claim_batch(conn: sa.Connection, entry: tuple[str, str, str], n: int) -> bool:
        return conn.exec_driver_sql(_CLAIM_BATCH, (*entry, n)).rowcount == 1

    @staticmethod
    def _recorded_batch(conn: sa.Connection, entry: tuple[str, str, str], n: int) -> MaterializeResult:
        found = conn.exec_driver_sql(_RECORDED, entry).fetchone()
        return MaterializeResult(ledger.errors_from_json(found[1] if found else None, n), replayed=True)

    def _ensure_ledger(self) -> None:
        if self._ledger_ready:
            return
        try:
            with self._lock, self.engine().begin() as conn:
                LEDGER.create(conn, checkfirst=True)
        except sa.exc.SQLAlchemyError as e:
            raise self._error(e, f"creating table {ledger.TABLE}") from e
        self._ledger_ready = True

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


_CLAIM = f"INSERT INTO {ledger.TABLE} (deployment, operator, key) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
_RECORDED = f"SELECT affected, error FROM {ledger.TABLE} WHERE deployment = ? AND operator = ? AND key = ?"
_RECORD = (
    f"UPDATE {ledger.TABLE} SET affected = ?, error = ? WHERE deployment = ? AND operator = ? AND key = ?"
)
_CLAIM_BATCH = f"INSERT INTO {ledger.TABLE} (deployment, operator, key, affected) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
_RECORD_BATCH = (
    f"UPDATE {ledger.TABLE} SET affected = ?, error = ? WHERE deployment = ? AND operator = ? AND key = ?"
)


def _is_event_error(e: BaseException) -> bool:
    """A constraint or a value the column refuses: about this event's data, not the statement."""
    orig = e.orig if isinstance(e, sa.exc.DBAPIError) else e
    return isinstance(orig, sqlite3.IntegrityError | sqlite3.DataError)


def _in_transaction(conn: sa.Connection) -> bool:
    # A trigger's RAISE(ROLLBACK) or OR ROLLBACK ends the whole transaction: then nothing is isolated.
    raw = conn.connection.driver_connection
    return isinstance(raw, sqlite3.Connection) and raw.in_transaction


_READ_ONLY = "cep_read_only"  # an execution option: this connection's transaction only reads


def _connected(dbapi_conn: Any, wal: bool, timeout_s: float) -> None:
    # The driver issues no BEGIN of its own (it would defer the lock): `_begin` does.
    dbapi_conn.isolation_level = None
    if wal:
        use_wal(dbapi_conn, timeout_s)


def _begin(conn: sa.Connection) -> None:
    immediate = not conn.get_execution_options().get(_READ_ONLY, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def use_wal(dbapi_conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the database to the WAL journal, waiting up to `timeout_s` for the lock it needs.

    The switch takes an exclusive lock, and SQLite does not wait for it (no busy handler): two
    processes opening a new database at once, or one opening it while another writes, would fail
    with `database is locked`. Once the database is in WAL mode (it stays so) the PRAGMA takes no lock.
    """
    deadline = time.monotonic() + timeout_s
    pause = 0.002
    while True:
        try:
            dbapi_conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as err:
            if getattr(err, "sqlite_errorname", "") not in _BUSY or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
