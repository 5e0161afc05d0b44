"""Errors raised by the store layer.

Every message names the store and shows its URL in redacted form only: credentials never appear in
logs, plans or errors. Database messages are passed through `scrub` as well, in case a driver ever
echoes part of a connection string back.

Each error says whether it is about one event (`about_event`): caused by that event's own data (a
constraint, a bad cast, a value the database refuses; stores/sql/base.py lists the SQLSTATE
classes), so that the engines dead-letter the event and go on. Any other error (a missing table,
SQL the database refuses, the store unreachable after the retries, a table or result column that
no longer matches the script) is about the statement or the store: both engines stop the run with
it (docs/guarantees.md, "Data store errors").
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

# psycopg's own words for a text value it will not send (here, not in stores/sql: the Spark
# translation checks for it without importing the Postgres driver)
NUL_IN_TEXT = "PostgreSQL text fields cannot contain NUL (0x00) bytes"


class StoreError(Exception):
    """A data store could not do what was asked. `store` is the CPL name of the store, if known."""

    def __init__(
        self,
        message: str,
        *,
        store: str | None = None,
        url: str | None = None,
        sqlstate: str | None = None,
        transient: bool = False,
        maybe_applied: bool = False,
        about_event: bool = False,
    ) -> None:
        self.store = store
        self.url = url  # always the redacted form
        self.sqlstate = sqlstate
        # The server may answer if asked again (refused/reset connection, shutdown, deadlock...):
        # stores/retry.py retries these. `maybe_applied`: the connection was lost while a write was in
        # flight, so it may have committed; only an idempotent (or ledgered) write may then be retried.
        self.transient = transient
        self.maybe_applied = maybe_applied
        # Caused by one event's data: the event is dead-lettered, the others go on. Never transient.
        self.about_event = about_event and not transient
        self.detail = message
        where = ""
        if store is not None:
            where = f"store {store}" + (f" ({url})" if url else "") + ": "
        super().__init__(where + message)


class StoreConfigError(StoreError):
    """A URL or binding is malformed, missing, or of the wrong kind for the declared store."""


class StoreConnectError(StoreError):
    """The server could not be reached or refused the connection."""


class StoreQueryError(StoreError):
    """The database rejected a statement of a batch (bad SQL, constraint, timeout...)."""


class StoreSchemaError(StoreError):
    """A declared table does not match the table that already exists in the store."""


class StoreUnsupportedError(StoreError):
    """The operation does not exist for this kind of store (e.g. SQL against Redis)."""


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every occurrence of each secret (raw and percent-encoded) replaced by `***`."""
    for secret in secrets:
        if not secret:
            continue
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            text = text.replace(form, "***")
    return text
