"""`RedisStore`: Materialize into Redis hashes (`CREATE TABLE ... IN cache [TTL ...]`).

Each row is a hash under `<table>:<key>`:

- with a primary key, `<key>` is the primary-key values, each percent-encoded (`%` → `%25`,
  `:` → `%3A`) and joined with `:`. Encoded parts contain no `:`, so two different keys can never
  produce the same Redis key and no value can reach outside its table's prefix; the table name is
  encoded the same way. Writing a row again updates its hash: upsert.
- without one, rows append: `<key>` is a sequence number taken from the counter at key `<table>`
  (INCRBY once per batch).

Fields hold strings (`values.redis_text`: ISO 8601 UTC timestamps, Decimal as text, "true"/"false");
a None value removes the field (HDEL), so an upsert never leaves a stale value behind. The table's
TTL is set on every row written (PEXPIRE), and on the append counter. Writes go through one
pipeline per call (not MULTI/EXEC yet: the exactly-once ledger will need it, see the hook below).

Redis is not a SQL store: `read` and `update` raise `StoreUnsupportedError`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import redis

from operators.graph import SqlQuery, Table
from stores.errors import StoreConnectError, StoreError, StoreQueryError, StoreUnsupportedError, scrub
from stores.schema import stored_name
from stores.urls import StoreURL
from stores.values import redis_text

Row = tuple[Any, ...]
MAX_CONNECTIONS = 4


def encode_part(text: str) -> str:
    return text.replace("%", "%25").replace(":", "%3A")


def row_key(table: Table, pk_values: Sequence[Any]) -> str:
    """The Redis key of the row with these primary-key values (in `table.primary_key` order)."""
    parts = [encode_part(stored_name(table.name))]
    parts.extend(encode_part(redis_text(v)) for v in pk_values)
    return ":".join(parts)


class RedisStore:
    def __init__(self, url: StoreURL, name: str | None = None) -> None:
        if url.kind != "redis":
            raise StoreError(f"{url.redacted()} is not a redis URL", store=name)
        self.url = url
        self.name = name or url.redacted()
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"RedisStore({self.name!r}, {self.url.redacted()!r})"

    def client(self) -> redis.Redis:
        with self._lock:
            if self._client is None:
                pool = redis.BlockingConnectionPool(max_connections=MAX_CONNECTIONS, **self.url.redis_kwargs())
                self._client = redis.Redis(connection_pool=pool)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client.connection_pool.disconnect()
                self._client = None

    def _error(self, e: Exception, what: str) -> StoreError:
        message = f"{what}: {scrub(str(e), [self.url.password])}"
        if isinstance(e, redis.ConnectionError | redis.TimeoutError | redis.AuthenticationError):
            return StoreConnectError(message, store=self.name, url=self.url.redacted())
        return StoreQueryError(message, store=self.name, url=self.url.redacted())

    # -- not SQL ------------------------------------------------------------------------------

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        raise StoreUnsupportedError(
            f"query {query.name}: Redis is not a SQL store; ON SQL needs a postgresql or sqlite store",
            store=self.name,
            url=self.url.redacted(),
        )

    def update(self, query: SqlQuery, params: Sequence[Row]) -> list[int]:
        raise StoreUnsupportedError(
            f"query {query.name}: Redis is not a SQL store; ON SQL needs a postgresql or sqlite store",
            store=self.name,
            url=self.url.redacted(),
        )

    # -- Materialize --------------------------------------------------------------------------

    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[Row]) -> None:
        fields = [stored_name(c) for c in columns]
        declared = {stored_name(f.name) for f in table.columns}
        unknown = [c for c, f in zip(columns, fields, strict=True) if f not in declared]
        if unknown:
            raise StoreQueryError(f"table {table.name} has no column(s) {', '.join(unknown)}", store=self.name)
        pk = [stored_name(k) for k in table.primary_key]
        missing = [k for k in pk if k not in fields]
        if missing:
            raise StoreQueryError(
                f"rows for table {table.name} lack its primary key column(s) {', '.join(missing)}", store=self.name
            )
        if not rows:
            return
        pk_at = [fields.index(k) for k in pk]
        try:
            client = self.client()
            if pk:
                keys = []
                for r in rows:
                    values = [r[i] for i in pk_at]
                    if any(v is None for v in values):
                        raise StoreQueryError(f"table {table.name}: NULL in primary key {pk}", store=self.name)
                    keys.append(row_key(table, values))
            else:
                counter = encode_part(stored_name(table.name))
                last = int(client.incrby(counter, len(rows)))  # type: ignore[arg-type]
                if table.ttl_ms is not None:
                    client.pexpire(counter, table.ttl_ms)
                keys = [f"{counter}:{n}" for n in range(last - len(rows) + 1, last + 1)]
            pipe = client.pipeline(transaction=False)
            # Exactly-once: the ledger write for this batch joins this pipeline (then MULTI/EXEC).
            for key, r in zip(keys, rows, strict=True):
                present = {f: redis_text(v) for f, v in zip(fields, r, strict=True) if v is not None}
                absent = [f for f, v in zip(fields, r, strict=True) if v is None]
                if present:
                    pipe.hset(key, mapping=present)
                if absent:
                    pipe.hdel(key, *absent)
                if table.ttl_ms is not None:
                    pipe.pexpire(key, table.ttl_ms)
            pipe.execute()
        except StoreError:
            raise
        except redis.RedisError as e:
            raise self._error(e, f"materializing {len(rows)} row(s) into {table.name}") from e
