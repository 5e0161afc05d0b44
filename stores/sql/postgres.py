"""The Postgres backend of `SqlStore`: psycopg 3 and a bounded psycopg_pool.ConnectionPool.

`PostgresBackend` puts together the parts of one store, each in a module of its own:

- postgres_connection.py: the pool and its connections' settings, driver errors mapped to
  StoreErrors (transient or not, one event's data or not), `run` (a body on a pooled connection),
  and the DDL engine that creates the ledger;
- postgres_read.py: ReadSQL, a batch of events in one round trip (stores/sql/lateral.py), with the
  parameter types the values or the server give;
- postgres_update.py: UpdateSQL, a batch of statements in one transaction (one call of a
  server-side loop, postgres_update_loop.py, or pipelined), with the ledger's event ids
  (exactly-once) and failing events isolated;
- postgres_materialize.py: Materialize, by binary COPY (postgres_copy.py), with the ledger's batch
  entry and refused rows isolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from operators.graph import SqlQuery, Table
from stores.api import LedgerKey, MaterializeResult, ReadColumns, UpdateResult
from stores.sql.base import Row
from stores.sql.postgres_connection import PgConnections
from stores.sql.postgres_materialize import PgMaterializer
from stores.sql.postgres_read import PgReader
from stores.sql.postgres_update import PgUpdater
from stores.urls import StoreURL


class PostgresBackend:
    def __init__(self, url: StoreURL, name: str, statement_timeout_ms: int) -> None:
        self.connections = PgConnections(url, name, statement_timeout_ms)
        self.reader = PgReader(self.connections)
        self.updater = PgUpdater(self.connections, self.reader)
        self.materializer = PgMaterializer(self.connections)

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        return self.reader.read(query, params)

    def read_columns(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, width: int, outer: bool = False
    ) -> ReadColumns:
        return self.reader.read_columns(query, columns, n, width=width, outer=outer)

    def update(
        self, query: SqlQuery, params: Sequence[Row], event_ids: Sequence[str] | None, scope: str | None
    ) -> UpdateResult:
        return self.updater.update(query, params, event_ids, scope)

    def materialize(
        self, table: Table, columns: Sequence[str], rows: Sequence[Row], ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        return self.materializer.materialize(table, columns, rows, ledger_key)

    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        return self.materializer.materialize_arrow(table, columns, data, ledger_key)

    def close(self) -> None:
        self.connections.close()
