"""What a SELECT returns, asked of the SQL store it runs against without running it: `StoreDescriber`,
the `DescribeQuery` (operators.declarations) the compiler takes when a script's stores are bound
(cpl/describe.py; the runner, `cep check`, `cep explain` and the service build one).

- PostgreSQL: the user's query (each `?` as `$n`) is prepared as the unnamed statement of a short-lived
  connection and described: the type OID and modifier of each column (stores/sql/result_types.py
  maps them). The server types the parameters from the query, as a batched read lets it; one it
  cannot type (`? IS NULL`) is declared text, as a batched read does. Nothing is executed.
- SQLite: a TEMP VIEW over the query with each `?` as NULL (a view takes no parameters), on a
  read-only connection, and `PRAGMA table_info` of it: each column's declared type, "" for an
  expression. The embedded default file of an unbound store is described when it exists; it is
  never created here.

Whatever goes wrong (no binding, the server unreachable after the retries, a table that does not
exist, SQL the database refuses) is a DescribeError with the store's redacted URL and scrubbed
message; the compiler then reads the query's results as varchar and says why in a warning. A store
that could not be reached is not asked again for the script's other queries.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo

from operators.declarations import DataStore, DescribeError, ResultColumn, SqlQuery
from stores.bindings import StoreBindings
from stores.errors import StoreConnectError, StoreError, StoreQueryError, scrub
from stores.retry import RetryPolicy, call_with_retries
from stores.sql.base import DEFAULT_STATEMENT_TIMEOUT_MS
from stores.sql.lateral import SelectText, select_text
from stores.sql.postgres_connection import (
    CONNECT_TIMEOUT_S,
    DDL_APPLICATION_NAME,
    application_name,
    transient_connect,
)
from stores.sql.result_types import pg_column, sqlite_column
from stores.urls import StoreURL

Columns = tuple[ResultColumn, ...]
_TEXT_OID = 25
_INDETERMINATE = "42P18"  # could not determine data type of parameter $n
_PARAM_NUMBER = re.compile(r"\$(\d+)")


class StoreDescriber:
    """Describes queries against the stores `bind` gives the URL of (a StoreConfigError when a
    store cannot be bound), with the retry policy of the run; remembers what it found."""

    def __init__(self, bind: Callable[[DataStore], StoreURL], retry: RetryPolicy | None = None) -> None:
        self._bind = bind
        self._retry = retry or RetryPolicy()
        self._found: dict[tuple[str, str], Columns | DescribeError] = {}
        self._down: dict[str, DescribeError] = {}  # stores not reachable (or not bound), by name

    def __call__(self, query: SqlQuery, store: DataStore) -> Columns:
        key = store.name.lower()
        if key in self._down:
            raise self._down[key]
        found = self._found.get((key, query.text))
        if found is None:
            found = self._describe(query, store)
            self._found[(key, query.text)] = found
        if isinstance(found, DescribeError):
            raise found
        return found

    def _describe(self, query: SqlQuery, store: DataStore) -> Columns | DescribeError:
        try:
            url = self._bind(store)
        except StoreError as err:
            self._down[store.name.lower()] = DescribeError(err.detail)
            return self._down[store.name.lower()]
        try:
            return call_with_retries(
                lambda: describe_columns(url, query, store.name), idempotent=True, policy=self._retry
            )
        except StoreError as err:
            failure = DescribeError(f"{url.redacted()}: {err.detail}")
            if isinstance(err, StoreConnectError):
                self._down[store.name.lower()] = failure
            return failure


def bindings_describer(bindings: StoreBindings) -> StoreDescriber:
    """A describer of the stores `bindings` binds (a store it does not bind is not described)."""
    urls = {bindings.declared[k].name.lower(): u for k, u in bindings.urls.items() if k in bindings.declared}

    def bind(store: DataStore) -> StoreURL:
        url = urls.get(store.name.lower())
        if url is None:
            raise StoreError(f"data store {store.name} is not bound")
        return url

    return StoreDescriber(bind, bindings.retry)


def describe_columns(url: StoreURL, query: SqlQuery, store: str) -> Columns:
    """The result columns of the SELECT `query` in the store at `url` (StoreError when it cannot tell)."""
    try:
        st = select_text(query.text)
    except ValueError as e:
        raise StoreQueryError(f"query {query.name}: {e}", store=store, url=url.redacted()) from None
    if url.kind == "postgresql":
        return _postgres(url, query, st, store)
    if url.kind == "sqlite":
        return _sqlite(url, query, st, store)
    raise StoreQueryError(f"a {url.kind} store runs no SQL", store=store, url=url.redacted())


def _postgres(url: StoreURL, query: SqlQuery, st: SelectText, store: str) -> Columns:
    conninfo = make_conninfo(url.libpq_conninfo(), **application_name(url, DDL_APPLICATION_NAME))
    timeout = url.statement_timeout_ms or DEFAULT_STATEMENT_TIMEOUT_MS
    try:
        with psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
            conn.execute(f"SET statement_timeout = {int(timeout)}")
            return _prepared_columns(conn, st, query, url, store)
    except psycopg.Error as e:
        message = scrub(str(e), [url.password])
        transient = transient_connect(message) if isinstance(e, psycopg.OperationalError) else False
        raise StoreConnectError(message, store=store, url=url.redacted(), transient=transient) from None


def _prepared_columns(
    conn: psycopg.Connection[Any], st: SelectText, query: SqlQuery, url: StoreURL, store: str
) -> Columns:
    encoding = conn.info.encoding
    body = st.substitute([f"${i}" for i in range(1, len(st.params) + 1)], escape_percent=False)
    types = [0] * len(st.params)  # 0: the server's to infer
    while True:
        res = conn.pgconn.prepare(b"", body.encode(encoding), types)
        if res.status == pq.ExecStatus.COMMAND_OK:
            break
        state = (res.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
        message = (res.error_message or b"").decode(encoding, "replace").strip()
        m = _PARAM_NUMBER.search(message)
        i = int(m.group(1)) - 1 if m else -1
        if state == _INDETERMINATE and 0 <= i < len(types) and types[i] == 0:
            types[i] = _TEXT_OID  # `? IS NULL`: text, as a batched read declares it
            continue
        message = message.removeprefix("ERROR:").strip()
        raise StoreQueryError(
            f"query {query.name}: {scrub(message, [url.password])}", store=store, url=url.redacted()
        )
    d = conn.pgconn.describe_prepared(b"")
    return tuple(
        pg_column((d.fname(i) or b"").decode(encoding, "replace"), d.ftype(i), d.fmod(i))
        for i in range(d.nfields)
    )


def _sqlite(url: StoreURL, query: SqlQuery, st: SelectText, store: str) -> Columns:
    if url.is_memory or not url.database:
        raise StoreQueryError("an in-memory database starts empty: nothing to describe", store=store)
    path = Path(url.database)
    if not path.is_file():
        raise StoreQueryError("no such file (yet)", store=store)
    timeout = (url.statement_timeout_ms or DEFAULT_STATEMENT_TIMEOUT_MS) / 1000
    try:
        # read-only: describing never writes (nor creates) the user's database; a TEMP view lives
        # in the connection's own temporary database
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=timeout)
    except sqlite3.Error as e:
        raise StoreConnectError(f"{path}: {e}", store=store) from None
    try:
        conn.execute(
            f"CREATE TEMP VIEW _cep_describe AS\n{st.substitute(['NULL'] * len(st.params), False)}\n"
        )
        rows = conn.execute("PRAGMA temp.table_info(_cep_describe)").fetchall()
    except sqlite3.Error as e:
        raise StoreQueryError(f"query {query.name}: {e}", store=store) from None
    finally:
        conn.close()
    return tuple(sqlite_column(str(r[1]), str(r[2] or "")) for r in rows)
