"""`RedisStore`: Materialize into Redis hashes (`CREATE TABLE ... IN cache [TTL ...]`).

Each row is a hash under `<table>:<key>`:

- with a primary key, `<key>` is the primary-key values, each percent-encoded (`%` → `%25`,
  `:` → `%3A`) and joined with `:`. Encoded parts contain no `:`, so two different keys can never
  produce the same Redis key and no value can reach outside its table's prefix; the table name is
  encoded the same way. Writing a row again updates its hash: upsert.
- without one, rows append: `<key>` is a sequence number taken from the counter at key `<table>`
  (INCRBY once per chunk of rows, inside the batch's MULTI/EXEC).

Fields hold strings (`values.redis_text`: ISO 8601 UTC timestamps, decimals in plain notation with
their column's scale, "true"/"false"; a decimal that does not fit its column refuses the row);
a None value removes the field (HDEL), so an upsert never leaves a stale value behind. The table's
TTL is set on every row written (PEXPIRE), and on the append counter. A call's writes are one
MULTI/EXEC of server-side scripts fed with pre-packed commands (stores/redis/bulk.py). A row with a
NULL in its primary key is not written and is reported in the result, as is a row the server
refuses (its key holds another type).

Exactly-once (stores/ledger.py): with a ledger key, the batch marker `cep:ledger:<deployment>:
<operator>:<batch id>` (a hash: `~done` and the reasons of the rows that failed) is written in the
same MULTI/EXEC as the rows, and every script of the batch checks it first: a replayed batch finds
it and writes nothing. Markers expire after 7 days, or the table's TTL if longer.

Redis is not a SQL store: `read` and `update` raise `StoreUnsupportedError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import redis

from operators.datatypes import DECIMAL
from operators.graph import SqlQuery, Table
from stores import arrow, ledger
from stores.api import LedgerKey, MaterializeResult, UpdateResult
from stores.errors import StoreConnectError, StoreError, StoreQueryError, StoreUnsupportedError, scrub
from stores.redis import bulk as redis_bulk
from stores.retry import RetryPolicy, call_with_retries
from stores.schema import stored_name
from stores.urls import StoreURL
from stores.values import conform_decimals, redis_text

Row = tuple[Any, ...]
MAX_CONNECTIONS = 4
CONNECT_TIMEOUT_S = 10
DEFAULT_TIMEOUT_MS = 30_000  # a reply's timeout unless the URL sets statement_timeout_ms (as SQL stores)
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
        self.retry = retry or RetryPolicy()
        self._lock = threading.Lock()
        self._client: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"RedisStore({self.name!r}, {self.url.redacted()!r})"

    def client(self) -> redis.Redis:
        with self._lock:
            if self._client is None:
                # A read timeout, not only a connect timeout: a server that stops answering (frozen,
                # or a network that drops packets) blocked the run forever. Now the call fails after
                # the store's timeout, as a SQL statement does, and is retried like a lost
                # connection (a write that may have applied is retried only with its batch marker).
                timeout_s = (self.url.statement_timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
                kwargs = {
                    "socket_connect_timeout": CONNECT_TIMEOUT_S,
                    "socket_timeout": timeout_s,
                    **self.url.redis_kwargs(),
                }
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

    def _fields(self, table: Table, columns: Sequence[str]) -> tuple[list[str], list[str]]:
        """The stored field names of `columns`, and of the primary key; refused when they do not fit."""
        fields = [stored_name(c) for c in columns]
        declared = {stored_name(f.name) for f in table.columns}
        unknown = [c for c, f in zip(columns, fields, strict=True) if f not in declared]
        if unknown:
            raise self._refuse(f"table {table.name} has no column(s) {', '.join(unknown)}")
        pk = [stored_name(k) for k in table.primary_key]
        missing = [k for k in pk if k not in fields]
        if missing:
            raise self._refuse(
                f"rows for table {table.name} lack its primary key column(s) {', '.join(missing)}"
            )
        return fields, pk

    def _marker(self, ledger_key: LedgerKey | None) -> str | None:
        try:
            return marker_key(ledger_key) if ledger_key is not None else None
        except ValueError as e:
            raise self._refuse(str(e)) from None

    def materialize(
        self,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Row],
        *,
        ledger_key: LedgerKey | None = None,
    ) -> MaterializeResult:
        fields, pk = self._fields(table, columns)
        if not rows:
            return MaterializeResult([])
        # decimals to their column's scale; one that does not fit is refused, as Postgres does
        rows, errors = conform_decimals(table, columns, rows)
        errors = [None if e is None else str(self._refuse(f"table {table.name}: {e}")) for e in errors]
        keys: list[str | None] = [None] * len(rows)
        if pk:
            pk_at = [fields.index(k) for k in pk]
            prefix = encode_part(stored_name(table.name)) + ":"
            for i, r in enumerate(rows):
                values = [r[j] for j in pk_at]
                if errors[i] is not None:
                    continue
                if any(v is None for v in values):
                    errors[i] = str(self._refuse(f"table {table.name}: NULL in primary key {pk}"))
                elif len(values) == 1 and type(values[0]) is int:
                    keys[i] = prefix + str(values[0])  # the common case, and digits need no encoding
                else:
                    keys[i] = row_key(table, values)
        marker = self._marker(ledger_key)
        good = [i for i, e in enumerate(errors) if e is None]
        return call_with_retries(
            lambda: self._write(
                table, errors, marker, lambda **kw: redis_bulk.pack_batch(fields, rows, keys, good, **kw)
            ),
            idempotent=marker is not None or bool(pk),
            policy=self.retry,
        )

    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, *, ledger_key: LedgerKey | None = None
    ) -> MaterializeResult:
        """`materialize` for an Arrow batch, packed by Arrow kernels (stores/redis/bulk.py) when
        every row has a key that needs no encoding (an integer primary key without NULLs) or the
        table appends; otherwise through its Python rows."""
        fields, pk = self._fields(table, columns)
        n = data.num_rows
        if not n:
            return MaterializeResult([])
        if any((f := table.columns.get(c)) is not None and f.type.kind == DECIMAL for c in columns):
            # decimals are checked against their column's type value by value (conform_decimals)
            return self.materialize(table, columns, arrow.rows(data), ledger_key=ledger_key)
        keys: pa.Array | None = None
        if pk:
            key = data.column(fields.index(pk[0])).combine_chunks() if len(pk) == 1 else None
            if key is None or not pa.types.is_integer(key.type) or key.null_count:
                return self.materialize(table, columns, arrow.rows(data), ledger_key=ledger_key)
            prefix = pa.scalar(encode_part(stored_name(table.name)) + ":", pa.string())
            keys = pc.binary_join_element_wise(prefix, key.cast(pa.string()), "").cast(pa.large_binary())
        marker = self._marker(ledger_key)
        errors: list[str | None] = [None] * n
        return call_with_retries(
            lambda: self._write(
                table, errors, marker, lambda **kw: redis_bulk.pack_arrow(fields, data, keys, **kw)
            ),
            idempotent=marker is not None or bool(pk),
            policy=self.retry,
        )

    def _write(
        self,
        table: Table,
        errors: list[str | None],
        marker: str | None,
        pack: Callable[..., tuple[bytes, int]],
    ) -> MaterializeResult:
        """Pack (`pack(**options)`, see redis_bulk) and send one batch; `errors`: rows refused before."""
        n = len(errors)
        what = f"materializing into {table.name}"  # no row count: the same on both engines
        sent = False
        try:
            client = self.client()
            if marker is not None:
                # A replay is usually found here, before the batch is packed and sent; the scripts
                # check again inside MULTI/EXEC, which is what makes it safe against a race.
                recorded = redis_bulk.recorded_errors(client, marker, n)
                if recorded is not None:
                    return MaterializeResult(recorded, replayed=True)
            payload, queued = pack(
                counter=None if table.primary_key else encode_part(stored_name(table.name)),
                ttl_ms=table.ttl_ms,
                prefix=str(self._refuse(f"table {table.name}: ")),
                marker=marker,
                marker_ttl_ms=max(MARKER_TTL_MS, table.ttl_ms or 0),
                refused={i: e for i, e in enumerate(errors) if e is not None},
            )
            sent = True
            results = redis_bulk.execute(client, payload, queued)
        except StoreError:
            raise
        except redis.RedisError as e:
            raise self._error(e, what, in_flight=sent) from e
        chunks = results[: len(results) - (marker is not None)]
        if (chunks and int(chunks[0][0]) == 0) or (marker is not None and int(results[-1]) == 0):
            # another writer (a concurrent replay) took effect first: return what it recorded
            assert marker is not None
            recorded = redis_bulk.recorded_errors(self.client(), marker, n)
            return MaterializeResult(recorded or [None] * n, replayed=True)
        out = list(errors)
        for reply in chunks:
            for j in range(1, len(reply), 2):
                out[int(reply[j])] = (
                    reply[j + 1].decode() if isinstance(reply[j + 1], bytes) else str(reply[j + 1])
                )
        return MaterializeResult(out)

    def _refuse(self, message: str) -> StoreQueryError:
        return StoreQueryError(message, store=self.name, url=self.url.redacted())


def marker_key(key: LedgerKey) -> str:
    """The Redis key whose presence says that batch `key` of a Materialize took effect."""
    deployment, operator, _ = ledger.batch_entry(key)
    return ":".join(("cep", "ledger", encode_part(deployment), encode_part(operator), str(int(key[2]))))
