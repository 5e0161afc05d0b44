"""`SqlStore`: ReadSQL, UpdateSQL and Materialize against one SQL data store (Postgres or SQLite).

Per-event semantics, batched execution (docs/architecture.md, decision 4 and 5):

- `read(query, params)` returns, for each parameter tuple, the rows its SELECT returns.
  Postgres: one round trip per batch (stores/sql/lateral.py), in a read-only transaction.
  SQLite: one execution per event; it runs in-process, so there is no round trip to save.
- `update(query, params)` executes the statement once per tuple, in order, in one transaction, and
  returns each execution's affected-row count.
- `materialize(table, columns, rows)` creates the table when missing, refuses one that differs from
  the declaration (stores/schema.py), then upserts by primary key or appends.

Exactly-once (stores/ledger.py): with event ids / a ledger key, the ledger entries are written in the
same transaction as the effect, and what the ledger already holds is not done again.

Per-event errors: when a statement fails for one event because of its data (SQLSTATE classes 22, 23,
27, 44, P0: a constraint, a bad cast, a trigger's RAISE), the batch is done again with that event
left out (`isolate`: savepoints on Postgres), and the result reports it; the other events apply.

Transient failures (the server restarting) are retried with backoff (stores/retry.py).

Event values only ever reach SQL as bound parameters. The backends live in postgres.py (with
postgres_*.py) and sqlite.py; what they share with this facade is in base.py, below all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from operators.graph import SqlQuery, Table
from stores import arrow, ledger
from stores.api import (
    LedgerKey,
    MaterializeResult,
    ReadColumns,
    UpdateResult,
    columns_of,
    rows_of,
    split_reads,
)
from stores.errors import StoreError, StoreQueryError
from stores.retry import RetryPolicy, call_with_retries
from stores.sql.base import DEFAULT_STATEMENT_TIMEOUT_MS, Row, SqlBackend
from stores.sql.postgres import PostgresBackend
from stores.sql.sqlite import SqliteBackend
from stores.urls import StoreURL


class SqlStore:
    """One SQL data store. Connections are opened lazily, on first use."""

    def __init__(
        self,
        url: StoreURL,
        name: str | None = None,
        statement_timeout_ms: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.url = url
        self.name = name or url.redacted()
        timeout = statement_timeout_ms or url.statement_timeout_ms or DEFAULT_STATEMENT_TIMEOUT_MS
        self.statement_timeout_ms = timeout
        self.retry = retry or RetryPolicy()
        self._backend: SqlBackend
        if url.kind == "postgresql":
            self._backend = PostgresBackend(url, self.name, timeout)
        elif url.kind == "sqlite":
            self._backend = SqliteBackend(url, self.name, timeout)
        else:
            raise StoreError(f"{url.kind} is not a SQL store", store=self.name, url=url.redacted())

    def __repr__(self) -> str:
        return f"SqlStore({self.name!r}, {self.url.redacted()!r})"

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        if not query.is_read:
            raise self.error(f"query {query.name} is a {query.kind.upper()}, not a SELECT: use update()")
        check_params(self, query, params)
        return call_with_retries(
            lambda: self._backend.read(query, params), idempotent=True, policy=self.retry
        )

    def read_columns(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, width: int, outer: bool = False
    ) -> ReadColumns:
        """`read` for a batch given column by column (`n` events), the result column by column; the
        events the store refuses for their own data are left out and reported (`split_reads`), as
        are those whose rows have another number of columns than `width`.

        Postgres has a path of its own that makes no Python object per row; other backends answer
        from `read`.
        """
        if not query.is_read:
            raise self.error(f"query {query.name} is a {query.kind.upper()}, not a SELECT: use update()")
        if len(columns) != query.param_count or any(len(c) != n for c in columns):
            raise self.error(
                f"query {query.name} takes {query.param_count} parameter(s) for each of {n} events"
            )
        fast = getattr(self._backend, "read_columns", None)

        def attempt(lo: int, hi: int) -> ReadColumns:
            part = [c[lo:hi] for c in columns] if (lo, hi) != (0, n) else columns
            if fast is None:
                return columns_of(self.read(query, rows_of(part, hi - lo)), query, width, outer)
            return call_with_retries(
                lambda: fast(query, part, hi - lo, width=width, outer=outer),
                idempotent=True,
                policy=self.retry,
            )

        return split_reads(n, width, attempt)

    def update(
        self,
        query: SqlQuery,
        params: Sequence[Row],
        *,
        event_ids: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> UpdateResult:
        if query.is_read:
            raise self.error(f"query {query.name} is a SELECT: use read()")
        check_params(self, query, params)
        check_ids(self, params, event_ids, scope)
        return call_with_retries(
            lambda: self._backend.update(query, params, event_ids, scope),
            idempotent=event_ids is not None,  # a ledgered batch skips what already took effect
            policy=self.retry,
        )

    def materialize(
        self,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Row],
        *,
        ledger_key: LedgerKey | None = None,
    ) -> MaterializeResult:
        check_ledger_key(self, ledger_key)
        return call_with_retries(
            lambda: self._backend.materialize(table, columns, rows, ledger_key),
            idempotent=ledger_key is not None or bool(table.primary_key),  # an upsert twice is one upsert
            policy=self.retry,
        )

    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, *, ledger_key: LedgerKey | None = None
    ) -> MaterializeResult:
        """`materialize` for an Arrow batch; Postgres encodes it for COPY without Python values."""
        check_ledger_key(self, ledger_key)
        backend = self._backend
        if not hasattr(backend, "materialize_arrow"):
            return self.materialize(table, columns, arrow.rows(data), ledger_key=ledger_key)
        return call_with_retries(
            lambda: backend.materialize_arrow(table, columns, data, ledger_key),
            idempotent=ledger_key is not None or bool(table.primary_key),
            policy=self.retry,
        )

    def close(self) -> None:
        self._backend.close()

    def error(self, message: str) -> StoreError:
        return StoreQueryError(message, store=self.name, url=self.url.redacted())


def check_params(store: SqlStore, query: SqlQuery, params: Sequence[Row]) -> None:
    for i, p in enumerate(params):
        if len(p) != query.param_count:
            raise store.error(
                f"query {query.name} takes {query.param_count} parameter(s), event {i} of the batch has {len(p)}"
            )


def check_ids(
    store: SqlStore, params: Sequence[Row], event_ids: Sequence[str] | None, scope: str | None
) -> None:
    if (event_ids is None) != (scope is None):
        raise store.error("event_ids and scope go together: give both or neither")
    if event_ids is not None and len(event_ids) != len(params):
        raise store.error(f"{len(event_ids)} event ids for {len(params)} events")
    try:
        if scope is not None:
            ledger.parse_scope(scope)
    except ValueError as e:
        raise store.error(str(e)) from None


def check_ledger_key(store: SqlStore, key: LedgerKey | None) -> None:
    try:
        if key is not None:
            ledger.batch_entry(key)
    except ValueError as e:
        raise store.error(str(e)) from None
