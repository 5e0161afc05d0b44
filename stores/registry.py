"""`StoreRegistry`: the `Stores` implementation both executors use (stores/api.py).

It dispatches each call by `query.store` / `table.store` (CPL names, case-insensitive) to a
`SqlStore` or `RedisStore` created on first use, so a script that never touches a store never
connects to it. Pools and threads do not survive a fork (Spark's Python workers are forked), so
instances inherited from a parent process are dropped, not reused, and the child opens its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from operators.graph import DataStore, SqlQuery, Table
from stores.errors import StoreConfigError
from stores.redis_store import RedisStore
from stores.sql import SqlStore
from stores.urls import StoreURL

Row = tuple[Any, ...]


class _Store(Protocol):
    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]: ...
    def update(self, query: SqlQuery, params: Sequence[Row]) -> list[int]: ...
    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[Row]) -> None: ...
    def close(self) -> None: ...


class StoreRegistry:
    def __init__(
        self,
        bindings: Mapping[str, StoreURL],
        stores: Mapping[str, DataStore],
        statement_timeout_ms: int | None = None,
    ) -> None:
        self._declared = {ds.name.lower(): ds for ds in stores.values()}
        self._bindings: dict[str, StoreURL] = {}
        for key, url in bindings.items():
            ds = stores.get(key)
            self._bindings[(ds.name if ds else key).lower()] = url
        self._timeout = statement_timeout_ms
        self._open: dict[str, _Store] = {}
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
            if url.kind == "redis":
                created = RedisStore(url, ds.name)
            else:
                created = SqlStore(url, ds.name, self._timeout)
            self._open[key] = created
            return created

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        return self.store(query.store).read(query, params)

    def update(self, query: SqlQuery, params: Sequence[Row]) -> list[int]:
        return self.store(query.store).update(query, params)

    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[Row]) -> None:
        self.store(table.store).materialize(table, columns, rows)

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
