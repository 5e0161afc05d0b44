"""The Postgres backend of `SqlStore`: psycopg 3 and a bounded psycopg_pool.ConnectionPool.

Connections are autocommit; every operation opens its own explicit transaction inside a pipeline,
so BEGIN, the statements and COMMIT travel in a single round trip. Each new connection gets the
store's statement timeout and TimeZone UTC (timestamptz values come back as aware UTC datetimes).

Batched reads bind one array per parameter (stores/sql/lateral.py). The element type of each array:

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

Exactly-once (stores/ledger.py), round trips per batch:

- UpdateSQL with event ids: [BEGIN, look whether a sample of the ids is in cep_ledger] then [the statements]
  then [INSERT every id with its count, COMMIT]. If an id is already there (a replay), or the
  INSERT fails on the ledger's key (a second transaction with the same ids committed first: its
  statements are rolled back with it), the batch is redone claiming with ON CONFLICT DO NOTHING:
  only the claimed events execute, the others return what the ledger recorded.
- Materialize with a ledger key: BEGIN, INSERT the batch's ledger row, COPY the rows (appends) or
  COPY them into a staging table and upsert from it (stores/sql/postgres_copy.py), COMMIT; a replay fails on
  the ledger's key before any row is written, and returns what was recorded.

Per-event errors: the fast path runs the batch as one unit; if an event's data makes a statement
fail, the batch is redone inside the same transaction with savepoints (`base.isolate`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any, TypeVar

import psycopg
import pyarrow as pa
import sqlalchemy as sa
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from operators.graph import SqlQuery, Table
from operators.sqltext import to_driver_placeholders
from stores import arrow, ledger
from stores.api import LedgerKey, MaterializeResult, ReadColumns, UpdateResult
from stores.errors import StoreConnectError, StoreError, StoreQueryError, scrub
from stores.schema import declared_shape, existing_shape, schema_mismatch
from stores.sql import postgres_copy as pg_bulk
from stores.sql.base import MaterializePlan, Row, is_event_error, isolate, materialize_plan
from stores.sql.lateral import SelectText, describe_statements, lateral_query, select_text
from stores.urls import StoreURL
from stores.values import coerce_column, from_db, normalize_row, pg_array_type, pg_value

T = TypeVar("T")

POOL_MIN, POOL_MAX = 1, 4
CONNECT_TIMEOUT_S = 10
# pg_stat_activity.application_name of the engine's pooled connections, and of the short-lived ones
# that check or create tables (unless the URL sets its own): an operator, or a test, can tell them
# from others, e.g. `WHERE application_name LIKE 'cep%'`.
APPLICATION_NAME, DDL_APPLICATION_NAME = "cep", "cep-ddl"
_CACHE_LIMIT = 1024
_PARAM_NUMBER = re.compile(r"\$(\d+)")

# Errors worth asking again: connection exceptions, admin/crash shutdown, cannot connect now, too
# many connections, serialization failure, deadlock (the last two rolled the transaction back).
_TRANSIENT_STATES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})
# A connection attempt the server refused with one of these FATALs may succeed later; other FATALs
# (no such database or role, bad password, pg_hba.conf) will not.
_TRANSIENT_FATAL = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "too many clients",
    "connection slots are reserved",
)

_CLAIM_ALL = (
    f"INSERT INTO {ledger.TABLE} (deployment, operator, key) SELECT %s, %s, k FROM unnest(%s::text[]) AS u(k)"
)
_CLAIM_NEW = _CLAIM_ALL + " ON CONFLICT DO NOTHING RETURNING key"
_RECORD_EVENTS = (
    f"UPDATE {ledger.TABLE} AS l SET affected = u.n, error = u.e"
    " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS u(k, n, e)"
    " WHERE l.deployment = %s AND l.operator = %s AND l.key = u.k"
)
# One index probe per key, whatever the planner believes about the ledger's size: `key = ANY(...)
# LIMIT 1` made it pick a sequential scan that compared every ledger row with every key (a fresh
# ledger has no statistics, and LIMIT favours plans that start fast), 30 s for 10,000 keys once the
# ledger held a few hundred thousand rows. The LIMIT inside LATERAL keeps the loop nested.
_ANY_RECORDED = (
    "SELECT 1 FROM unnest(%s::text[]) AS u(k) CROSS JOIN LATERAL"
    f" (SELECT 1 FROM {ledger.TABLE} l WHERE l.deployment = %s AND l.operator = %s AND l.key = u.k LIMIT 1) x"
    " LIMIT 1"
)
_RECORD_NEW = (
    f"INSERT INTO {ledger.TABLE} (deployment, operator, key, affected)"
    " SELECT %s, %s, k, n FROM unnest(%s::text[], %s::bigint[]) AS u(k, n)"
)
_RECORDED = (
    "SELECT u.k, x.affected, x.error FROM unnest(%s::text[]) AS u(k) CROSS JOIN LATERAL"
    f" (SELECT affected, error FROM {ledger.TABLE} l"
    " WHERE l.deployment = %s AND l.operator = %s AND l.key = u.k LIMIT 1) x"
)
_CLAIM_BATCH = f"INSERT INTO {ledger.TABLE} (deployment, operator, key, affected) VALUES (%s, %s, %s, %s)"
_CLAIM_BATCH_NEW = _CLAIM_BATCH + " ON CONFLICT DO NOTHING RETURNING key"
_RECORD_BATCH = f"UPDATE {ledger.TABLE} SET affected = %s, error = %s WHERE deployment = %s AND operator = %s AND key = %s"


class _QuietAbortedPipelines(logging.Filter):
    """Drop psycopg's "error ignored terminating <Pipeline>: pipeline aborted" warnings.

    A statement failing inside a pipeline (executemany runs one of its own, nested in ours) makes
    psycopg log that the rest of the pipeline was skipped, while the statement's own error is
    raised anyway (so nothing is lost). Isolating a failing event fails such attempts on purpose;
    one warning per attempt would flood executor logs. Other psycopg warnings pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (
            record.msg == "error ignored terminating %r: %s"
            and len(args) == 2
            and isinstance(args[0], psycopg.Pipeline)
            and isinstance(args[1], psycopg.Error)
        )


logging.getLogger("psycopg").addFilter(_QuietAbortedPipelines())


def _ledger_conflict(e: BaseException) -> bool:
    return isinstance(e, pg_errors.UniqueViolation) and e.diag.constraint_name == "cep_ledger_pkey"


def _sqlstate(e: BaseException) -> str | None:
    return getattr(e, "sqlstate", None)


def _event_failure(e: BaseException) -> bool:
    """Whether `e` is caused by one event's own data (SQLSTATE classes in stores.sql.base), so that the
    event is dead-lettered and the rest of its batch applies.

    psycopg refuses some values before sending them, with a DataError that has no SQLSTATE: a NUL
    character in text ("PostgreSQL text fields cannot contain NUL (0x00) bytes"). That is the
    event's data too. Without this, the row path of a batch whose COPY the server refused for a NUL
    (SQLSTATE 22021) raised for the whole batch, and a Spark run stopped on one bad event.

    SQLSTATE 54000 (program limit exceeded, without a subclass) is what a value too large for an
    index says ("index row requires 10016 bytes, maximum size is 8191"): that event's data as well.
    Its subclasses (statement too complex, too many columns or arguments) are about the statement.
    """
    if not isinstance(e, psycopg.Error):
        return False
    state = _sqlstate(e)
    return is_event_error(state) or state == "54000" or (state is None and isinstance(e, psycopg.DataError))


class PostgresBackend:
    def __init__(self, url: StoreURL, name: str, statement_timeout_ms: int) -> None:
        self.url = url
        self.name = name
        self.timeout_ms = statement_timeout_ms
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._engine: sa.Engine | None = None
        self._ledger_ready = False
        self._selects: dict[str, SelectText] = {}
        self._types: dict[tuple[str, tuple[str | None, ...]], tuple[str, ...]] = {}
        self._plans: dict[tuple[Table, tuple[str, ...]], MaterializePlan] = {}
        self._bulk_plans: dict[MaterializePlan, pg_bulk.BulkPlan] = {}

    # -- connections --------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET statement_timeout = {int(self.timeout_ms)}")
        conn.execute("SET TimeZone = 'UTC'")

    def pool(self) -> ConnectionPool:
        with self._lock:
            if self._pool is None:
                conninfo = make_conninfo(self.url.libpq_conninfo(), **_application_name(self.url))
                # One direct connection first: a wrong host or password then fails at once with the
                # server's own message, instead of a pool timeout after retries.
                try:
                    psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
                except psycopg.Error as e:
                    message = self._scrub(str(e))
                    raise StoreConnectError(
                        message,
                        store=self.name,
                        url=self.url.redacted(),
                        transient=_transient_connect(message),
                    ) from None
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
                        f"no connection within {CONNECT_TIMEOUT_S} s",
                        store=self.name,
                        url=self.url.redacted(),
                        transient=True,
                    ) from None
                self._pool = pool
            return self._pool

    def _discard_pool(self) -> None:
        """After a transient error: the pooled connections may all be dead (server restarted)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):  # closing a pool of dead connections
                pool.close(timeout=0)

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

    def _error(self, e: Exception, what: str, in_flight: bool = False) -> StoreError:
        """A driver error as a StoreError. `in_flight`: a write had been sent when it happened."""
        if isinstance(e, StoreError):
            return e
        if isinstance(e, sa.exc.DBAPIError) and e.orig is not None:
            e = e.orig
        message = f"{what}: {self._scrub(str(e))}"
        store, url = self.name, self.url.redacted()
        sqlstate = _sqlstate(e)
        if isinstance(e, PoolTimeout | psycopg.OperationalError) and not sqlstate:
            # No SQLSTATE: the connection failed or was lost, not a statement. If it was lost with a
            # write in flight, the COMMIT may have reached the server.
            lost = in_flight and not isinstance(e, PoolTimeout)
            return StoreConnectError(message, store=store, url=url, transient=True, maybe_applied=lost)
        if sqlstate is not None and (sqlstate in _TRANSIENT_STATES or sqlstate.startswith("08")):
            cls = StoreQueryError if sqlstate.startswith("40") else StoreConnectError
            return cls(message, store=store, url=url, sqlstate=sqlstate, transient=True)
        return StoreQueryError(message, store=store, url=url, sqlstate=sqlstate)

    def _run(
        self, what: str, body: Callable[[psycopg.Connection[Any]], T], *, write: bool, verify: bool = False
    ) -> T:
        """`body(conn)` on a pooled connection, errors mapped to StoreErrors.

        `verify`: check the connection first (one round trip), for a write that must not be retried
        once sent; a dead pooled connection then fails before anything is sent, and is retried.
        """
        sent = False
        try:
            with self.pool().connection() as conn:
                if verify:
                    ConnectionPool.check_connection(conn)
                sent = True
                return body(conn)
        except Exception as e:
            err = self._error(e, what, in_flight=write and sent)
            if err.transient:
                self._discard_pool()
            raise err from e

    def _event_error(self, what: str) -> Callable[[Exception], str | None]:
        def message(e: Exception) -> str | None:
            if _event_failure(e):
                return str(
                    StoreQueryError(
                        f"{what}: {self._scrub(str(e))}", store=self.name, url=self.url.redacted()
                    )
                )
            return None

        return message

    # -- ReadSQL ------------------------------------------------------------------------------

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        if not params:
            return []
        st, rows = self._read_rows(query, list(zip(*params, strict=True)), len(params), outer=False)
        out: list[list[Row]] = [[] for _ in params]
        end = -1 if st.ordered else None
        returns = query.returns
        for r in rows:
            row = normalize_row(tuple(r[1:end]))
            if returns is not None and len(returns) == len(row):
                row = tuple(from_db(v, f.type) for v, f in zip(row, returns, strict=True))
            out[r[0] - 1].append(row)
        return out

    def read_columns(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, width: int, outer: bool = False
    ) -> ReadColumns:
        """`read` for a batch given column by column, its result column by column (see ReadColumns).

        The same query as `read`; with `outer` the server adds the NULL row of an event without
        result rows (LEFT JOIN LATERAL). No Python object is made per result row: the rows are
        transposed at C speed and a column is coerced one value at a time only when it needs it.
        """
        if n == 0:
            return ReadColumns([], [[] for _ in range(width)])
        st, rows = self._read_rows(query, columns, n, outer=outer)
        if not rows:
            return ReadColumns([], [[] for _ in range(width)])
        # One column at a time with itemgetter, not zip(*rows): zip makes an iterator per row, and
        # 10,000 short-lived container objects per batch set off the garbage collector's full
        # collections (a visible share of the read when profiled in a Spark worker).
        transposed = [list(map(itemgetter(j), rows)) for j in range(len(rows[0]))]
        got = len(transposed) - 1 - (1 if st.ordered else 0)
        returns = query.returns if query.returns is not None and len(query.returns) == got else None
        out: list[list[Any]] = []
        for j in range(width):
            if j >= got:  # the query returned fewer columns than the operator reads: NULLs
                out.append([None] * len(rows))
                continue
            values = transposed[1 + j]
            out.append(coerce_column(values, returns.fields[j].type if returns is not None else None))
        return ReadColumns(list(map((-1).__add__, transposed[0])), out)

    def _read_rows(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, outer: bool
    ) -> tuple[SelectText, list[Any]]:
        """The batched query's rows: (event ordinal from 1, the query's columns..., [row number])."""
        try:
            st = self._select(query.text)
        except ValueError as e:
            raise StoreQueryError(
                f"query {query.name}: {e}", store=self.name, url=self.url.redacted()
            ) from None
        types: list[str | None] = []
        arrays: list[Any] = []
        for i, column in enumerate(columns):
            try:
                t, values = pg_array_type(list(column))
            except TypeError as e:
                raise StoreQueryError(
                    f"query {query.name}, parameter {i + 1}: {e}", store=self.name, url=self.url.redacted()
                ) from None
            if t is None and any("\x00" in v for v in values if v is not None):
                # psycopg refuses the whole batch for it; Spark finds these events beforehand
                # (deployer.spark.sql._unsendable), so this is the reference executor's one event
                raise StoreQueryError(
                    f"query {query.name}, parameter {i + 1}: {NUL_IN_TEXT}",
                    store=self.name,
                    url=self.url.redacted(),
                )
            types.append(t)
            arrays.append(_array_literal(values) if t == "bigint" else values)

        def body(conn: psycopg.Connection[Any]) -> list[Any]:
            final = self._param_types(conn, st, tuple(types)) if None in types else types
            sql = lateral_query(st, [t for t in final if t is not None], outer=outer)
            bind: list[Any] = list(arrays) if st.params else [n]
            with conn.pipeline(), conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                cur = conn.execute(sql, bind)
            return cur.fetchall()

        try:
            rows = self._run(f"query {query.name} (batch of {n})", body, write=False)
        except StoreError:
            self._types = {k: v for k, v in self._types.items() if k[0] != st.text}  # may be stale
            raise
        return st, rows

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

    def _describe(
        self, conn: psycopg.Connection[Any], st: SelectText, declared: list[str]
    ) -> tuple[str, ...]:
        prepare, read_types, deallocate = describe_statements(st, declared)
        with conn.pipeline():
            conn.execute(prepare)
            cur = conn.execute(read_types)
            conn.execute(deallocate)
        row = cur.fetchone()
        if row is None:  # pragma: no cover - the PREPARE above succeeded
            raise RuntimeError("prepared statement vanished")
        return tuple(row[0])

    # -- the ledger ---------------------------------------------------------------------------

    def _ensure_ledger(self) -> None:
        if self._ledger_ready:
            return
        engine = self._sa_engine()
        for attempt in (1, 2):
            try:
                with engine.begin() as conn:
                    ledger.LEDGER.create(conn, checkfirst=True)
                break
            except (sa.exc.IntegrityError, sa.exc.ProgrammingError) as e:
                if attempt == 1:  # another process created it at the same moment: look again
                    continue
                raise self._error(e, f"creating table {ledger.TABLE}") from e
            except sa.exc.SQLAlchemyError as e:
                err = self._error(e, f"creating table {ledger.TABLE}")
                raise err from e
        self._ledger_ready = True

    # -- UpdateSQL ----------------------------------------------------------------------------

    def update(
        self, query: SqlQuery, params: Sequence[Row], event_ids: Sequence[str] | None, scope: str | None
    ) -> UpdateResult:
        if not params:
            return UpdateResult([], [])
        text = to_driver_placeholders(query.text, "pyformat")
        rows = [tuple(pg_value(v) for v in p) for p in params]
        what = f"query {query.name} (batch of {len(params)})"
        if event_ids is None or scope is None:
            return self._run(
                what, lambda conn: self._update_plain(conn, query, text, rows), write=True, verify=True
            )
        sc = ledger.parse_scope(scope)
        keys = [ledger.entry_key(i) for i in event_ids]
        self._ensure_ledger()
        return self._run(
            what, lambda conn: self._update_ledgered(conn, query, text, rows, sc, keys), write=True
        )

    def _update_plain(
        self, conn: psycopg.Connection[Any], query: SqlQuery, text: str, rows: list[Row]
    ) -> UpdateResult:
        cur = conn.cursor()
        try:
            with conn.pipeline(), conn.transaction():
                cur.executemany(text, rows, returning=True)
            return UpdateResult([*self._counts(cur, len(rows), query)], [None] * len(rows))
        except psycopg.Error as e:
            if not _event_failure(e):
                raise
        with conn.pipeline(), conn.transaction():
            counts, errors = self._isolate(
                conn, query, text, rows, list(range(len(rows))), known_failing=True
            )
        return UpdateResult(counts, errors)

    def _update_ledgered(
        self,
        conn: psycopg.Connection[Any],
        query: SqlQuery,
        text: str,
        rows: list[Row],
        sc: ledger.Scope,
        keys: list[str],
    ) -> UpdateResult:
        n = len(rows)
        cur = conn.cursor()
        # Fast path: no event of the batch is in the ledger yet, and none fails. The ledger rows are
        # written once, with their counts, after the statements: half the ledger writes of claiming
        # first and recording after. A concurrent transaction with the same ids (another query
        # recomputing the same batch) still cannot apply them twice: its INSERT into the ledger
        # waits for ours, then fails on the key, and everything it did rolls back. The look-up
        # first keeps replays and recomputations from executing the statements only to roll back;
        # it asks about a sample of the keys (SAMPLED_KEYS), not all of them: a replayed or
        # recomputed batch is found by any one of its keys, and a batch that shares only some keys
        # with the ledger the sample misses still fails on the INSERT (looking up every key was a
        # large part of the ledger's server time).
        retry_failing = False
        try:
            with conn.pipeline() as p, conn.transaction():
                key_array = _text_array_literal(keys)
                sample = _text_array_literal(_sample(keys, SAMPLED_KEYS))
                seen = conn.execute(_ANY_RECORDED, (sample, sc.deployment, sc.operator))
                p.sync()
                if seen.fetchone() is None:
                    cur.executemany(text, rows, returning=True)
                    p.sync()
                    counts = self._counts(cur, n, query)
                    conn.execute(_RECORD_NEW, (sc.deployment, sc.operator, key_array, _array_literal(counts)))
                    return UpdateResult([*counts], [None] * n)
        except psycopg.Error as e:
            if not (_ledger_conflict(e) or _event_failure(e)):
                raise
            retry_failing = not _ledger_conflict(e)
        # A replay, an id twice in the batch, or an event that fails: claim what is not claimed yet,
        # execute those (isolating failures), return the ledger's record for the others.
        first = ledger.first_occurrences(keys)
        with conn.pipeline() as p, conn.transaction():
            claimed = {r[0] for r in conn.execute(_CLAIM_NEW, (sc.deployment, sc.operator, list(first)))}
            todo = [i for k, i in first.items() if k in claimed]
            got_counts, got_errors = self._isolate(conn, query, text, rows, todo, known_failing=retry_failing)
            done = {keys[i]: (got_counts[j], got_errors[j]) for j, i in enumerate(todo)}
            if done:
                conn.execute(
                    _RECORD_EVENTS,
                    (
                        list(done),
                        [c for c, _ in done.values()],
                        [e for _, e in done.values()],
                        sc.deployment,
                        sc.operator,
                    ),
                )
            others = [k for k in first if k not in claimed]
            if others:
                for k, count, error in conn.execute(
                    _RECORDED, (others, sc.deployment, sc.operator)
                ).fetchall():
                    done[k] = (count, error)
            p.sync()
        counts_out: list[int | None] = []
        errors_out: list[str | None] = []
        for k in keys:
            count, error = done.get(k, (None, None))
            counts_out.append(count)
            errors_out.append(error)
        return UpdateResult(counts_out, errors_out, replayed=n - len(todo))

    def _isolate(
        self,
        conn: psycopg.Connection[Any],
        query: SqlQuery,
        text: str,
        rows: list[Row],
        todo: list[int],
        *,
        known_failing: bool,
    ) -> tuple[list[int | None], list[str | None]]:
        """Execute rows[todo], in order, inside the current transaction, isolating failing events."""
        if not todo:
            return [], []
        cur = conn.cursor()
        chosen = [rows[i] for i in todo]

        def attempt(lo: int, hi: int) -> list[int]:
            with conn.transaction():  # a savepoint: rolled back if the chunk fails
                cur.executemany(text, chosen[lo:hi], returning=True)
            return self._counts(cur, hi - lo, query)

        return isolate(
            len(chosen), attempt, self._event_error(f"query {query.name}"), known_failing=known_failing
        )

    @staticmethod
    def _counts(cur: psycopg.Cursor[Any], n: int, query: SqlQuery) -> list[int]:
        counts = [cur.rowcount]
        while cur.nextset():
            counts.append(cur.rowcount)
        if len(counts) != n:  # pragma: no cover - would be a psycopg change
            raise StoreQueryError(f"query {query.name}: {len(counts)} results for {n} events")
        return counts

    # -- Materialize --------------------------------------------------------------------------

    def materialize(
        self, table: Table, columns: Sequence[str], rows: Sequence[Row], ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        plan = self._plan(table, columns)
        if not rows:
            return MaterializeResult([])
        values = _driver_rows(plan, rows)
        bp = self._bulk_plan(plan)
        return self._write(
            plan, len(values), ledger_key, lambda conn: pg_bulk.write(conn, bp, values), lambda: values
        )

    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        """`materialize` for an Arrow batch (Spark's): encoded to binary COPY by Arrow kernels.
        Batches the encoder cannot take (a numeric column, a key twice) go the row way."""
        plan = self._plan(table, columns)
        if not data.num_rows:
            return MaterializeResult([])
        bp = self._bulk_plan(plan)
        payload = pg_bulk.encode_arrow(data, plan, bp) if pg_bulk.unique_keys(data, plan, bp) else None
        if payload is None:
            return self.materialize(table, columns, arrow.rows(data), ledger_key)
        return self._write(
            plan,
            data.num_rows,
            ledger_key,
            lambda conn: pg_bulk.write_encoded(conn, bp, payload),
            lambda: _driver_rows(plan, arrow.rows(data)),
        )

    def _write(
        self,
        plan: MaterializePlan,
        n: int,
        ledger_key: LedgerKey | None,
        fast: Callable[[psycopg.Connection[Any]], None],
        rows: Callable[[], list[Row]],
    ) -> MaterializeResult:
        what = f"materializing {n} row(s) into {plan.table.name}"
        if ledger_key is None:
            return self._run(
                what,
                lambda conn: self._materialize(conn, plan, n, None, fast, rows),
                write=True,
                verify=not plan.table.primary_key.columns,  # appends must not be retried once sent
            )
        self._ensure_ledger()
        return self._run(
            what, lambda conn: self._materialize(conn, plan, n, ledger_key, fast, rows), write=True
        )

    def _materialize(
        self,
        conn: psycopg.Connection[Any],
        plan: MaterializePlan,
        n: int,
        key: LedgerKey | None,
        fast: Callable[[psycopg.Connection[Any]], None],
        rows: Callable[[], list[Row]],
    ) -> MaterializeResult:
        """`fast(conn)` writes the whole batch (pg_bulk); `rows()` gives it row by row for the
        path that isolates the rows the server refuses."""
        entry = ledger.batch_entry(key) if key is not None else None
        cur = conn.cursor()
        failing = False
        # Fast path (stores/sql/postgres_copy.py): the ledger claim and a COPY of the whole batch in one
        # transaction. COPY cannot run in pipeline mode, so this is a few round trips, not one.
        try:
            with conn.transaction():
                if entry is not None:
                    conn.execute(_CLAIM_BATCH, (*entry, n))
                fast(conn)
            return MaterializeResult([None] * n)
        except pg_bulk.TooManyGenerations:
            pass  # one key many times in the batch: row by row is cheaper, and ordered
        except psycopg.Error as e:
            if entry is not None and _ledger_conflict(e):
                return self._recorded_batch(conn, entry, n)
            if not _event_failure(e):
                raise
            failing = True
        values = rows()

        def attempt(lo: int, hi: int) -> list[int]:
            with conn.transaction():
                cur.executemany(plan.sql, values[lo:hi])
            return [1] * (hi - lo)

        errors: list[str | None] = []
        claimed = True
        with conn.pipeline(), conn.transaction():
            if entry is not None:
                claimed = bool(conn.execute(_CLAIM_BATCH_NEW, (*entry, n)).fetchall())
            if claimed:
                what = f"table {plan.table.name}"
                _, errors = isolate(n, attempt, self._event_error(what), known_failing=failing)
                if entry is not None:
                    ok = sum(e is None for e in errors)
                    conn.execute(_RECORD_BATCH, (ok, ledger.errors_json(errors), *entry))
        if not claimed:
            assert entry is not None
            return self._recorded_batch(conn, entry, n)
        return MaterializeResult(errors)

    def _recorded_batch(
        self, conn: psycopg.Connection[Any], entry: tuple[str, str, str], n: int
    ) -> MaterializeResult:
        row = conn.execute(
            f"SELECT error FROM {ledger.TABLE} WHERE deployment = %s AND operator = %s AND key = %s", entry
        ).fetchone()
        return MaterializeResult(ledger.errors_from_json(row[0] if row else None, n), replayed=True)

    def _bulk_plan(self, plan: MaterializePlan) -> pg_bulk.BulkPlan:
        bp = self._bulk_plans.get(plan)
        if bp is None:
            bp = self._bulk_plans[plan] = pg_bulk.bulk_plan(plan)
        return bp

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
        engine = self._sa_engine()
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

    def _sa_engine(self) -> sa.Engine:
        with self._lock:
            if self._engine is None:
                # DDL and reflection only, once per table: no pool of its own.
                self._engine = sa.create_engine(
                    self.url.sqlalchemy_url(),
                    poolclass=sa.NullPool,
                    connect_args={
                        "connect_timeout": CONNECT_TIMEOUT_S,
                        **_application_name(self.url, DDL_APPLICATION_NAME),
                    },
                )
            return self._engine


# psycopg's own words for a text value it will not send
NUL_IN_TEXT = "PostgreSQL text fields cannot contain NUL (0x00) bytes"


def _array_literal(values: Sequence[int | None]) -> str:
    """A bigint parameter array as Postgres array text, `{1,2,NULL}`: bound as one string and cast
    by the query (`%s::bigint[]`), it costs one `str` per value here instead of psycopg's per-element
    array dumper, the largest cost of a batched read on the client. Only ints go this way: their text
    form is unambiguous."""
    if None in values:
        return "{" + ",".join(["NULL" if v is None else str(v) for v in values]) + "}"
    return "{" + ",".join(map(str, values)) + "}"


SAMPLED_KEYS = 16  # ledger keys a ledgered update looks up before its fast path (see _update_ledgered)


def _sample(values: list[str], k: int) -> list[str]:
    """At most k of the values, evenly spread, the first and the last among them."""
    n = len(values)
    if n <= k:
        return values
    return [values[round(i * (n - 1) / max(k - 1, 1))] for i in range(k)]


def _text_array_literal(values: list[str]) -> str:
    """Text values as Postgres array text, `{"a","b"}`, for `%s::text[]`: every element quoted,
    with `\\` and `"` escaped, which is the whole of the array input syntax inside quotes (the
    values carry no NUL: Postgres text cannot). Like `_array_literal`, one string per batch instead
    of psycopg's per-element dumper, a visible cost of a ledgered UpdateSQL batch on the client."""
    return "{" + ",".join(['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values]) + "}"


def _driver_rows(plan: MaterializePlan, rows: Sequence[Row]) -> list[Row]:
    """The rows in placeholder order with naive datetimes taken as UTC, built column by column:
    transposing with zip runs in C, where a tuple per row built in Python cost more than the COPY."""
    columns = list(zip(*rows, strict=True))
    out = []
    for k, i in enumerate(plan.order):
        column = columns[i]
        if isinstance(plan.table.c[plan.columns[k]].type, sa.DateTime) and any(
            isinstance(v, datetime) and v.tzinfo is None for v in column
        ):
            column = tuple(pg_value(v) for v in column)
        out.append(column)
    return list(zip(*out, strict=True))


def _application_name(url: StoreURL, name: str = APPLICATION_NAME) -> dict[str, str]:
    return {} if any(k == "application_name" for k, _ in url.options) else {"application_name": name}


def _transient_connect(message: str) -> bool:
    """Whether a failed connection attempt may succeed later (refused, reset, starting up...)."""
    if "FATAL:" not in message:
        return "password" not in message.lower() and "authentication" not in message.lower()
    lower = message.lower()
    return any(phrase in lower for phrase in _TRANSIENT_FATAL)
