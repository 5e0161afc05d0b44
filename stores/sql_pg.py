"""The Postgres backend of `SqlStore`: psycopg 3 and a bounded psycopg_pool.ConnectionPool.

Connections are autocommit; every operation opens its own explicit transaction inside a pipeline,
so BEGIN, the statements and COMMIT travel in a single round trip. Each new connection gets the
store's statement timeout and TimeZone UTC (timestamptz values come back as aware UTC datetimes).

Batched reads bind one array per parameter (stores/lateral.py). The element type of each array:

- from the Python values when they are typed: bool → boolean, int → bigint, float → double
  precision, Decimal → numeric, datetime → timestamptz (`values.pg_array_type`), which is what
  psycopg would send for one event, so `idcaller = p.a1` with an integer column and a bigint
  parameter type-checks (and uses the index) exactly as a per-event execution does;
- from the server when the values are str or all None: psycopg sends a str or a None untyped and
  Postgres infers its type from the query, so we do the same once per (query, type signature):
  PREPARE the user's query with those parameters declared `unknown` and read the types Postgres
  chose. `WHERE idcaller = ?` with only NULLs in the batch thus binds an integer[] of NULLs, where a
  text[] would fail with "operator does not exist: integer = text"; and `idcaller = ?` with the str
  '42' works as it does for one event. A parameter the server cannot type (`? IS NULL`, where
  psycopg itself fails for one event) is declared text.

Updates: psycopg's `executemany(..., returning=True)` keeps one result per execution, and
`nextset()` walks them, so each event's `rowcount` is read back from a single pipelined batch.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from operators.graph import SqlQuery, Table
from operators.sqltext import to_driver_placeholders
from stores.errors import StoreConnectError, StoreError, StoreQueryError, scrub
from stores.lateral import SelectText, describe_statements, lateral_query, select_text
from stores.schema import declared_shape, existing_shape, schema_mismatch
from stores.sql import MaterializePlan, Row, materialize_plan
from stores.urls import StoreURL
from stores.values import from_db, normalize_row, pg_array_type, pg_value

POOL_MIN, POOL_MAX = 1, 4
CONNECT_TIMEOUT_S = 10
_CACHE_LIMIT = 1024
_PARAM_NUMBER = re.compile(r"\$(\d+)")


class PostgresBackend:
    def __init__(self, url: StoreURL, name: str, statement_timeout_ms: int) -> None:
        self.url = url
        self.name = name
        self.timeout_ms = statement_timeout_ms
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._engine: sa.Engine | None = None
        self._selects: dict[str, SelectText] = {}
        self._types: dict[tuple[str, tuple[str | None, ...]], tuple[str, ...]] = {}
        self._plans: dict[tuple[Table, tuple[str, ...]], MaterializePlan] = {}

    # -- connections --------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET statement_timeout = {int(self.timeout_ms)}")
        conn.execute("SET TimeZone = 'UTC'")

    def pool(self) -> ConnectionPool:
        with self._lock:
            if self._pool is None:
                conninfo = self.url.libpq_conninfo()
                # One direct connection first: a wrong host or password then fails at once with the
                # server's own message, instead of a pool timeout after retries.
                try:
                    psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
                except psycopg.Error as e:
                    raise StoreConnectError(self._scrub(str(e)), store=self.name, url=self.url.redacted()) from None
                pool = ConnectionPool(
                    conninfo,
                    min_size=POOL_MIN,
                    max_size=POOL_MAX,
                    kwargs={"autocommit": True},
                    configure=self._configure,
                    name=f"cep-{self.name}",
                    timeout=CONNECT_TIMEOUT_S + self.timeout_ms / 1000,
                    open=False,
                )
                try:
                    pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
                except PoolTimeout:
                    pool.close()
                    raise StoreConnectError(
                        f"no connection within {CONNECT_TIMEOUT_S} s", store=self.name, url=self.url.redacted()
                    ) from None
                self._pool = pool
            return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None

    def _scrub(self, text: str) -> str:
        return scrub(text, [self.url.password])

    def _error(self, e: Exception, what: str) -> StoreError:
        if isinstance(e, StoreError):
            return e
        if isinstance(e, sa.exc.DBAPIError) and e.orig is not None:
            e = e.orig
        if isinstance(e, PoolTimeout | psycopg.OperationalError) and not getattr(e, "sqlstate", None):
            return StoreConnectError(f"{what}: {self._scrub(str(e))}", store=self.name, url=self.url.redacted())
        sqlstate = getattr(e, "sqlstate", None)
        return StoreQueryError(
            f"{what}: {self._scrub(str(e))}", store=self.name, url=self.url.redacted(), sqlstate=sqlstate
        )

    # -- ReadSQL ------------------------------------------------------------------------------

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        if not params:
            return []
        try:
            st = self._select(query.text)
        except ValueError as e:
            raise StoreQueryError(f"query {query.name}: {e}", store=self.name, url=self.url.redacted()) from None
        types: list[str | None] = []
        arrays: list[list[Any]] = []
        for i, column in enumerate(zip(*params, strict=True)):
            try:
                t, values = pg_array_type(list(column))
            except TypeError as e:
                raise StoreQueryError(
                    f"query {query.name}, parameter {i + 1}: {e}", store=self.name, url=self.url.redacted()
                ) from None
            types.append(t)
            arrays.append(values)
        try:
            with self.pool().connection() as conn:
                final = self._param_types(conn, st, tuple(types)) if None in types else types
                sql = lateral_query(st, [t for t in final if t is not None])
                bind: list[Any] = list(arrays) if st.params else [len(params)]
                with conn.pipeline(), conn.transaction():
                    conn.execute("SET TRANSACTION READ ONLY")
                    cur = conn.execute(sql, bind)
                rows = cur.fetchall()
        except Exception as e:
            self._types = {k: v for k, v in self._types.items() if k[0] != st.text}  # may be stale
            raise self._error(e, f"query {query.name} (batch of {len(params)})") from e
        out: list[list[Row]] = [[] for _ in params]
        end = -1 if st.ordered else None
        returns = query.returns
        for r in rows:
            row = normalize_row(tuple(r[1:end]))
            if returns is not None and len(returns) == len(row):
                row = tuple(from_db(v, f.type) for v, f in zip(row, returns, strict=True))
            out[r[0] - 1].append(row)
        return out

    def _select(self, text: str) -> SelectText:
        st = self._selects.get(text)
        if st is None:
            st = select_text(text)
            if len(self._selects) >= _CACHE_LIMIT:
                self._selects.clear()
            self._selects[text] = st
        return st

    def _param_types(
        self,
        conn: psycopg.Connection[Any],
        st: SelectText,
        types: tuple[str | None, ...],
    ) -> tuple[str, ...]:
        """Fill in the types the Python values left open (None) with the server's inference."""
        key = (st.text, types)
        found = self._types.get(key)
        if found is not None:
            return found
        declared = [t or "unknown" for t in types]
        while True:
            try:
                got = self._describe(conn, st, declared)
                break
            except pg_errors.IndeterminateDatatype as e:
                # e.g. `? IS NULL`: nothing in the query says what that parameter is, and Postgres
                # names the first such one ($N). It becomes text; then look again.
                m = _PARAM_NUMBER.search(e.diag.message_primary or "")
                i = int(m.group(1)) - 1 if m else -1
                if 0 <= i < len(declared) and declared[i] == "unknown":
                    declared[i] = "text"
                elif "unknown" in declared:
                    declared = ["text" if d == "unknown" else d for d in declared]
                else:
                    raise
        arrays = [t for t in got if t.endswith("]")]
        if arrays:
            raise ValueError(f"array-typed parameters ({', '.join(arrays)}) are not supported")
        if len(self._types) >= _CACHE_LIMIT:
            self._types.clear()
        self._types[key] = got
        return got

    def _describe(self, conn: psycopg.Connection[Any], st: SelectText, declared: list[str]) -> tuple[str, ...]:
        prepare, read_types, deallocate = describe_statements(st, declared)
        with conn.pipeline():
            conn.execute(prepare)
            cur = conn.execute(read_types)
            conn.execute(deallocate)
        row = cur.fetchone()
        if row is None:  # pragma: no cover - the PREPARE above succeeded
            raise RuntimeError("prepared statement vanished")
        return tuple(row[0])

    # -- UpdateSQL ----------------------------------------------------------------------------

    def update(self, query: SqlQuery, params: Sequence[Row]) -> list[int]:
        if not params:
            return []
        text = to_driver_placeholders(query.text, "pyformat")
        rows = [tuple(pg_value(v) for v in p) for p in params]
        try:
            with self.pool().connection() as conn:
                cur = conn.cursor()
                with conn.pipeline(), conn.transaction():
                    # Exactly-once (DESIGN.md decision 6): the ledger row for this batch will be
                    # written here, in the same transaction as the effect.
                    cur.executemany(text, rows, returning=True)
                counts = [cur.rowcount]
                while cur.nextset():
                    counts.append(cur.rowcount)
        except Exception as e:
            raise self._error(e, f"query {query.name} (batch of {len(params)})") from e
        if len(counts) != len(params):  # pragma: no cover - would be a psycopg change
            raise StoreQueryError(f"query {query.name}: {len(counts)} results for {len(params)} events")
        return counts

    # -- Materialize --------------------------------------------------------------------------

    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[Row]) -> None:
        plan = self._plan(table, columns)
        if not rows:
            return
        order = plan.order
        values = [tuple(pg_value(r[i]) for i in order) for r in rows]
        try:
            with self.pool().connection() as conn:
                cur = conn.cursor()
                with conn.pipeline(), conn.transaction():
                    # Exactly-once: the ledger hook goes here (same transaction as the rows).
                    cur.executemany(plan.sql, values)
        except Exception as e:
            raise self._error(e, f"materializing {len(rows)} row(s) into {table.name}") from e

    def _plan(self, table: Table, columns: Sequence[str]) -> MaterializePlan:
        key = (table, tuple(columns))
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = materialize_plan(table, columns, "postgresql")
            except ValueError as e:
                raise StoreQueryError(str(e), store=self.name, url=self.url.redacted()) from None
            self._ensure_table(table, plan.table)
            self._plans[key] = plan
        return plan

    def _ensure_table(self, table: Table, t: sa.Table) -> None:
        """Create the table when missing; refuse an existing one that differs. Never ALTER."""
        with self._lock:
            if self._engine is None:
                # DDL and reflection only, once per table: no pool of its own.
                self._engine = sa.create_engine(self.url.sqlalchemy_url(), poolclass=sa.NullPool)
            engine = self._engine
        want = declared_shape(t, "postgresql")
        have = None
        for attempt in (1, 2):
            try:
                with engine.begin() as conn:
                    have = existing_shape(conn, t.name)
                    if have is None:
                        t.create(conn)
                        return
                break
            except (sa.exc.IntegrityError, sa.exc.ProgrammingError) as e:
                if attempt == 1:  # maybe another process created it at the same moment: look again
                    continue
                raise self._error(e, f"creating table {table.name}") from e
            except sa.exc.SQLAlchemyError as e:
                raise self._error(e, f"checking table {table.name}") from e
        if have is not None and not have.same_as(want):
            raise schema_mismatch(t, have, want, self.name, self.url)
