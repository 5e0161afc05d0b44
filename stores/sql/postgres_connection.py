"""The connections of one Postgres store: the pool, their settings, driver errors as StoreErrors.

A bounded psycopg_pool.ConnectionPool per store and process; a driver error becomes a StoreError
that says whether it is transient (worth a retry) and whether it is one event's data.

Connections are autocommit; every operation opens its own explicit transaction inside a pipeline,
so BEGIN, the statements and COMMIT travel in a single round trip. Each new connection gets the
store's statement timeout and TimeZone UTC (timestamptz values come back as aware UTC datetimes).

`PgConnections.run(what, body)` is how the reads, updates and materialization (postgres_read.py,
postgres_update.py, postgres_materialize.py) reach the server: `body(conn)` on a pooled connection,
its errors mapped, the pool dropped after a transient one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import sqlalchemy as sa
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from stores import ledger
from stores.errors import StoreConnectError, StoreError, StoreQueryError, scrub
from stores.sql.base import is_event_error
from stores.sql.ledger_table import LEDGER
from stores.urls import StoreURL

T = TypeVar("T")

POOL_MIN, POOL_MAX = 1, 4
CONNECT_TIMEOUT_S = 10
# pg_stat_activity.application_name of the engine's pooled connections, and of the short-lived ones
# that check or create tables (unless the URL sets its own): an operator, or a test, can tell them
# from others, e.g. `WHERE application_name LIKE 'cep%'`.
APPLICATION_NAME, DDL_APPLICATION_NAME = "cep", "cep-ddl"

# Errors worth asking again: connection exceptions, admin/crash shutdown, cannot connect now, too
# many connections, serialization failure, deadlock (the last two rolled the transaction back).
TRANSIENT_STATES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})
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


def ledger_conflict(e: BaseException) -> bool:
    """Whether `e` is a write into the ledger that found its key taken (a replay, or a concurrent
    transaction with the same ids that committed first)."""
    return isinstance(e, pg_errors.UniqueViolation) and e.diag.constraint_name == "cep_ledger_pkey"


def sqlstate_of(e: BaseException) -> str | None:
    return getattr(e, "sqlstate", None)


def event_failure(e: BaseException) -> bool:
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
    state = sqlstate_of(e)
    return is_event_error(state) or state == "54000" or (state is None and isinstance(e, psycopg.DataError))


class PgConnections:
    """The pool of one store (opened on first use), the engine for DDL, and the ledger table."""

    def __init__(self, url: StoreURL, name: str, statement_timeout_ms: int) -> None:
        self.url = url
        self.name = name
        self.timeout_ms = statement_timeout_ms
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._engine: sa.Engine | None = None
        self._ledger_ready = False

    # -- the pool -----------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET statement_timeout = {int(self.timeout_ms)}")
        conn.execute("SET TimeZone = 'UTC'")

    def pool(self) -> ConnectionPool:
        with self._lock:
            if self._pool is None:
                conninfo = make_conninfo(self.url.libpq_conninfo(), **application_name(self.url))
                self._try_connect(conninfo)
                self._pool = self._open_pool(conninfo)
            return self._pool

    def _try_connect(self, conninfo: str) -> None:
        """One direct connection first: a wrong host or password then fails at once with the
        server's own message, instead of a pool timeout after retries."""
        try:
            psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
        except psycopg.Error as e:
            message = self.scrub(str(e))
            raise StoreConnectError(
                message,
                store=self.name,
                url=self.url.redacted(),
                transient=transient_connect(message),
            ) from None

    def _open_pool(self, conninfo: str) -> ConnectionPool:
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
        return pool

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

    # -- errors -------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        return scrub(text, [self.url.password])

    def query_error(self, message: str, *, about_event: bool = False) -> StoreQueryError:
        """A StoreQueryError of this store (name and redacted URL)."""
        return StoreQueryError(message, store=self.name, url=self.url.redacted(), about_event=about_event)

    def error(self, e: Exception, what: str, in_flight: bool = False) -> StoreError:
        """A driver error as a StoreError. `in_flight`: a write had been sent when it happened."""
        if isinstance(e, StoreError):
            return e
        if isinstance(e, sa.exc.DBAPIError) and e.orig is not None:
            e = e.orig
        message = f"{what}: {self.scrub(str(e))}"
        store, url = self.name, self.url.redacted()
        sqlstate = sqlstate_of(e)
        if isinstance(e, PoolTimeout | psycopg.OperationalError) and not sqlstate:
            # No SQLSTATE: the connection failed or was lost, not a statement. If it was lost with a
            # write in flight, the COMMIT may have reached the server.
            lost = in_flight and not isinstance(e, PoolTimeout)
            return StoreConnectError(message, store=store, url=url, transient=True, maybe_applied=lost)
        if sqlstate is not None and (sqlstate in TRANSIENT_STATES or sqlstate.startswith("08")):
            cls = StoreQueryError if sqlstate.startswith("40") else StoreConnectError
            return cls(message, store=store, url=url, sqlstate=sqlstate, transient=True)
        return StoreQueryError(message, store=store, url=url, sqlstate=sqlstate, about_event=event_failure(e))

    def event_error(self, what: str) -> Callable[[Exception], str | None]:
        """For `base.isolate`: the message of an error caused by one event's data, else None."""

        def message(e: Exception) -> str | None:
            if event_failure(e):
                return str(self.query_error(f"{what}: {self.scrub(str(e))}"))
            return None

        return message

    # -- running ------------------------------------------------------------------------------

    def run(
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
            err = self.error(e, what, in_flight=write and sent)
            if err.transient:
                self._discard_pool()
            raise err from e

    # -- DDL: the ledger and the tables -------------------------------------------------------

    def ensure_ledger(self) -> None:
        if self._ledger_ready:
            return
        engine = self.ddl_engine()
        for attempt in (1, 2):
            try:
                with engine.begin() as conn:
                    LEDGER.create(conn, checkfirst=True)
                break
            except (sa.exc.IntegrityError, sa.exc.ProgrammingError) as e:
                if attempt == 1:  # another process created it at the same moment: look again
                    continue
                raise self.error(e, f"creating table {ledger.TABLE}") from e
            except sa.exc.SQLAlchemyError as e:
                err = self.error(e, f"creating table {ledger.TABLE}")
                raise err from e
        self._ledger_ready = True

    def ddl_engine(self) -> sa.Engine:
        with self._lock:
            if self._engine is None:
                # DDL and reflection only, once per table: no pool of its own.
                self._engine = sa.create_engine(
                    self.url.sqlalchemy_url(),
                    poolclass=sa.NullPool,
                    connect_args={
                        "connect_timeout": CONNECT_TIMEOUT_S,
                        **application_name(self.url, DDL_APPLICATION_NAME),
                    },
                )
            return self._engine


def application_name(url: StoreURL, name: str = APPLICATION_NAME) -> dict[str, str]:
    return {} if any(k == "application_name" for k, _ in url.options) else {"application_name": name}


def transient_connect(message: str) -> bool:
    """Whether a failed connection attempt may succeed later (refused, reset, starting up...)."""
    if "FATAL:" not in message:
        return "password" not in message.lower() and "authentication" not in message.lower()
    lower = message.lower()
    return any(phrase in lower for phrase in _TRANSIENT_FATAL)
