"""`StoreRegistry`: the `Stores` implementation both executors use (stores/api.py).

It dispatches each call by `query.store` / `table.store` (CPL names, case-insensitive) to a
`SqlStore` or `RedisStore` created on first use, so a script that never touches a store never
connects to it. Pools and threads do not survive a fork (Spark's Python workers are forked), so
instances inherited from a parent process are dropped, not reused, and the child opens its own.

A query declared with `CACHE n ROWS [TTL d]` is read through a per-process LRU (stores/cache.py);
`cache_stats()` reports its counters by query name.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa

from operators.graph import SqlQuery, Table
from stores.api import (
    LedgerKey,
    MaterializeResult,
    ReadColumns,
    UpdateResult,
    columns_of,
    rows_of,
    split_reads,
)
from stores.bindings import StoreBindings
from stores.cache import ReadCache
from stores.errors import StoreConfigError
from stores.urls import StoreURL

Row = tuple[Any, ...]


class _Store(Protocol):
    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]: ...
    def update(
        self,
        query: SqlQuery,
        params: Sequence[Row],
        *,
        event_ids: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> UpdateResult: ...
    def materialize(
        self,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Row],
        *,
        ledger_key: LedgerKey | None = None,
    ) -> MaterializeResult: ...
    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, *, ledger_key: LedgerKey | None = None
    ) -> MaterializeResult: ...
    def close(self) -> None: ...


class StoreRegistry:
    def __init__(self, bindings: StoreBindings, *, statement_timeout_ms: int | None = None) -> None:
        """The stores of `bindings`, each opened on first use with the bindings' retry policy (their
        `deployment` is for the engine, which passes it with each write: the registry ignores it)."""
        declared = bindings.declared
        self._declared = {ds.name.lower(): ds for ds in declared.values()}
        self._bindings: dict[str, StoreURL] = {}
        for key, url in bindings.urls.items():
            ds = declared.get(key)
            self._bindings[(ds.name if ds else key).lower()] = url
        self._retry = bindings.retry
        self._timeout = statement_timeout_ms
        self._open: dict[str, _Store] = {}
        self._caches: dict[SqlQuery, ReadCache] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={url.redacted()}" for name, url in sorted(self._bindings.items()))
        return f"StoreRegistry({shown})"

    def store(self, name: str) -> _Store:
        key = name.lower()
        with self._lock:
            if os.getpid() != self._pid:  # forked: the parent's pools are not ours to use or close
                self._open = {}
                self._caches = {}
                self._pid = os.getpid()
            found = self._open.get(key)
            if found is not None:
                return found
            ds = self._declared.get(key)
            if ds is None:
                known = ", ".join(sorted(d.name for d in self._declared.values())) or "none"
                raise StoreConfigError(f"no data store {name} is declared (declared: {known})")
            url = self._bindings.get(key)
            if url is None:
                raise StoreConfigError(f"data store {ds.name} is not bound to a URL", store=ds.name)
            created: _Store
            # Each kind's module is imported when a store of that kind is first opened: the Redis
            # client and the SQL drivers (psycopg, SQLAlchemy; pandas through pyarrow) took ~1 s of
            # every `cep run`'s start, a script with no data store included (docs/architecture.md).
            if url.kind == "redis":
                from stores.redis.store import RedisStore

                created = RedisStore(url, ds.name, retry=self._retry)
            else:
                from stores.sql.store import SqlStore

                created = SqlStore(url, ds.name, self._timeout, retry=self._retry)
            self._open[key] = created
            return created

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        store = self.store(query.store)
        if not query.cache_rows or not params:
            return store.read(query, params)
        return self._cache(query).read(params, lambda missing: store.read(query, missing))

    def read_columns(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, width: int, outer: bool = False
    ) -> ReadColumns:
        """`read` for `n` events given column by column; the result column by column (ReadColumns).

        An uncached query on a SQL store takes the store's columnar path; a cached one goes through
        the cache, which works per parameter tuple.
        """
        store = self.store(query.store)
        columnar = getattr(store, "read_columns", None)  # a SQL store's; Redis reads row by row
        if not query.cache_rows and columnar is not None:
            result: ReadColumns = columnar(query, columns, n, width=width, outer=outer)
            return result
        rows = rows_of(columns, n)
        # the events the store refuses are left out and reported, as the store's own path does
        return split_reads(
            n, width, lambda lo, hi: columns_of(self.read(query, rows[lo:hi]), query, width, outer)
        )

    def update(
        self,
        query: SqlQuery,
        params: Sequence[Row],
        *,
        event_ids: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> UpdateResult:
        return self.store(query.store).update(query, params, event_ids=event_ids, scope=scope)

    def materialize(
        self,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Row],
        *,
        ledger_key: LedgerKey | None = None,
    ) -> MaterializeResult:
        return self.store(table.store).materialize(table, columns, rows, ledger_key=ledger_key)

    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, *, ledger_key: LedgerKey | None = None
    ) -> MaterializeResult:
        """`materialize` for an Arrow batch: Postgres encodes it for binary COPY and Redis packs it
        with Arrow kernels; SQLite (and refused batches) get its rows."""
        return self.store(table.store).materialize_arrow(table, columns, data, ledger_key=ledger_key)

    def _cache(self, query: SqlQuery) -> ReadCache:
        with self._lock:
            cache = self._caches.get(query)
            if cache is None:
                cache = self._caches[query] = ReadCache(query.cache_rows or 0, query.cache_ttl_ms)
            return cache

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Per cached query (by name): hits, misses, loads (store calls), entries... in this process."""
        with self._lock:
            caches = list(self._caches.items())
        return {q.name: c.stats() for q, c in caches}

    def close(self) -> None:
        with self._lock:
            opened, self._open = self._open, {}
            inherited = os.getpid() != self._pid
        if inherited:
            return
        errors: list[Exception] = []
        for s in opened.values():
            try:
                s.close()
            except Exception as e:  # close the others anyway
                errors.append(e)
        if errors:
            raise errors[0]
