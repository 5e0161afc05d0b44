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
TTL is set on every row written (PEXPIRE), and on the append counter. A call's writes are one
MULTI/EXEC. A row with a NULL in its primary key is not written and is reported in the result.

Exactly-once (stores/ledger.py): with a ledger key, the batch marker `cep:ledger:<deployment>:
<operator>:<batch id>` is WATCHed, and SET in the same MULTI/EXEC as the rows (with the reasons of
the rows that failed): a replayed batch finds it and writes nothing. Markers expire after 7 days, or
the table's TTL if longer.

Redis is not a SQL store: `read` and `update` raise `StoreUnsupportedError`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import redis

from operators.graph import SqlQuery, Table
from stores import ledger
from stores.api import LedgerKey, MaterializeResult, UpdateResult
from stores.errors import StoreConnectError, StoreError, StoreQueryError, StoreUnsupportedError, scrub
from stores.retry import RetryPolicy, call_with_retries
from stores.schema import stored_name
from stores.urls import StoreURL
from stores.values import redis_text

Row = tuple[Any, ...]
MAX_CONNECTIONS = 4
CONNECT_TIMEOUT_S = 10
MARKER_TTL_MS = 7 * 86_400_000  # how long a batch marker guards against a replay (or the table's TTL)


def encode_part(text: str) -> str:
    return text.replace("%", "%25").replace(":", "%3A")


def row_key(table: Table, pk_values: Sequence[Any]) -> str:
    """The Redis key of the row with these primary-key values (in `table.primary_key` order)."""
    parts = [encode_part(stored_name(table.name))]
    parts.extend(encode_part(redis_text(v)) for v in pk_values)
    return ":".join(parts)


class RedisStore:
    def __init__(self, url: StoreURL, name: str | None = None, retry: RetryPolicy | None = None) -> None:
        if url.kind != "redis":
            raise StoreError(f"{url.redacted()} is not a redis URL", store=name)
        self.url = url
        self.name = name or url.redacted()
        self.retry = retry or RetryPolicy.from_env()
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"RedisStore({self.name!r}, {self.url.redacted()!r})"

    def client(self) -> redis.Redis:
        with self._lock:
            if self._client is None:
                kwargs = {"socket_connect_timeout": CONNECT_TIMEOUT_S, **self.url.redis_kwargs()}
                pool = redis.BlockingConnectionPool(max_connections=MAX_CONNECTIONS, **kwargs)
                self._client = redis.Redis(connection_pool=pool)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client.connection_pool.disconnect()
                self._client = None

    def _error(self, e: Exception, what: str, in_flight: bool = False) -> StoreError:
        message = f"{what}: {scrub(str(e), [self.url.password])}"
        if isinstance(e, redis.AuthenticationError):
            return StoreConnectError(message, store=self.name, url=self.url.redacted())
        if isinstance(e, redis.ConnectionError | redis.TimeoutError):
            # Refused, reset, closed, loading: worth asking again. Lost during EXEC: may have applied.
            return StoreConnectError(
                message, store=self.name, url=self.url.redacted(), transient=True, maybe_applied=in_flight
            )
        return StoreQueryError(message, store=self.name, url=self.url.redacted())

    # -- not SQL ------------------------------------------------------------------------------

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        raise StoreUnsupportedError(
            f"query {query.name}: Redis is not a SQL store; ON SQL needs a postgresql or sqlite store",
            store=self.name,
            url=self.url.redacted(),
        )

    def update(
        self,
        query: SqlQuery,
        params: Sequence[Row],
        *,
        event_ids: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> UpdateResult:
        raise StoreUnsupportedError(
            f"query {query.name}: Redis is not a SQL store; ON SQL needs a postgresql or sqlite store",
            store=self.name,
            url=self.url.redacted(),
        )

    # -- Materialize --------------------------------------------------------------------------

    def materialize(
        self, table: Table, columns: Sequence[str], rows: Sequence[Row], *, ledger_key: LedgerKey | None = None
    ) -> MaterializeResult:
        fields = [stored_name(c) for c in columns]
        declared = {stored_name(f.name) for f in table.columns}
        unknown = [c for c, f in zip(columns, fields, strict=True) if f not in declared]
        if unknown:
            raise self._refuse(f"table {table.name} has no column(s) {', '.join(unknown)}")
        pk = [stored_name(k) for k in table.primary_key]
        missing = [k for k in pk if k not in fields]
        if missing:
            raise self._refuse(f"rows for table {table.name} lack its primary key column(s) {', '.join(missing)}")
        if not rows:
            return MaterializeResult([])
        errors: list[str | None] = [None] * len(rows)
        keys: list[str | None] = [None] * len(rows)
        if pk:
            pk_at = [fields.index(k) for k in pk]
            for i, r in enumerate(rows):
                values = [r[j] for j in pk_at]
                if any(v is None for v in values):
                    errors[i] = str(self._refuse(f"table {table.name}: NULL in primary key {pk}"))
                else:
                    keys[i] = row_key(table, values)
        try:
            marker = marker_key(ledger_key) if ledger_key is not None else None
        except ValueError as e:
            raise self._refuse(str(e)) from None
        return call_with_retries(
            lambda: self._write(table, fields, rows, keys, errors, marker),
            idempotent=marker is not None or bool(pk),
            policy=self.retry,
        )

    def _write(
        self,
        table: Table,
        fields: list[str],
        rows: Sequence[Row],
        keys: list[str | None],
        errors: list[str | None],
        marker: str | None,
    ) -> MaterializeResult:
        good = [i for i, e in enumerate(errors) if e is None]
        counter = encode_part(stored_name(table.name))
        append = not table.primary_key
        sent = False
        what = f"materializing {len(rows)} row(s) into {table.name}"
        try:
            with self.client().pipeline(transaction=True) as pipe:
                while True:
                    try:
                        if marker is not None:
                            # The batch marker is written in the same MULTI/EXEC as the rows: if it is
                            # there, the batch took effect; if another writer sets it meanwhile, EXEC
                            # fails (WatchError) and we look again.
                            pipe.watch(marker)
                            recorded = pipe.get(marker)
                            if recorded is not None:
                                pipe.unwatch()
                                text = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
                                return MaterializeResult(ledger.errors_from_json(text, len(rows)), replayed=True)
                        if append and good:
                            # Sequence numbers for the new rows. INCRBY is atomic, so concurrent writers
                            # never share a number; a transaction that then fails leaves a gap, no more.
                            last = int(self.client().incrby(counter, len(good)))  # type: ignore[arg-type]
                            for n, i in enumerate(good):
                                keys[i] = f"{counter}:{last - len(good) + 1 + n}"
                        pipe.multi()
                        if append and good and table.ttl_ms is not None:
                            pipe.pexpire(counter, table.ttl_ms)
                        for i in good:
                            key = keys[i]
                            assert key is not None
                            row = rows[i]
                            present = {f: redis_text(v) for f, v in zip(fields, row, strict=True) if v is not None}
                            absent = [f for f, v in zip(fields, row, strict=True) if v is None]
                            if present:
                                pipe.hset(key, mapping=present)
                            if absent:
                                pipe.hdel(key, *absent)
                            if table.ttl_ms is not None:
                                pipe.pexpire(key, table.ttl_ms)
                        if marker is not None:
                            ttl = max(MARKER_TTL_MS, table.ttl_ms or 0)
                            pipe.set(marker, ledger.errors_json(errors) or "", px=ttl)
                        sent = True
                        pipe.execute()
                        return MaterializeResult(errors)
                    except redis.WatchError:
                        sent = False
                        continue
        except StoreError:
            raise
        except redis.RedisError as e:
            raise self._error(e, what, in_flight=sent) from e

    def _refuse(self, message: str) -> StoreQueryError:
        return StoreQueryError(message, store=self.name, url=self.url.redacted())


def marker_key(key: LedgerKey) -> str:
    """The Redis key whose presence says that batch `key` of a Materialize took effect."""
    deployment, operator, _ = ledger.batch_entry(key)
    return ":".join(("cep", "ledger", encode_part(deployment), encode_part(operator), str(int(key[2]))))
