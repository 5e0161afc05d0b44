"""The catalog of deployments: what the service should run, and what it reports back.

Tables (created by the Alembic migrations in `migrations/`, run by `migrate.py`, never by `create_all`):

- `deployments`: one row per deployed script. The CLI writes the script, its bindings and the
  desired state, and bumps `revision` whenever the service must act (deploy, redeploy, start, stop);
  the service writes the actual state, the last error, the restart count and the progress counters.
  Bindings are stored without secrets: a URL carrying a password is refused (`check_no_secret`);
  the service gets passwords from its own environment (`?password_file=`, `CEP_STORE_<NAME>_URL`,
  PGPASSWORD or ~/.pgpass).
- `deployment_history`: what happened to each deployment, when (kept after an undeploy).
- `service_heartbeat`: one row per running `cep serve`, refreshed every poll.

The catalog is SQLite (`$CEP_DATA_DIR/catalog.sqlite3` by default) or PostgreSQL. On SQLite every
transaction is `BEGIN IMMEDIATE`, so two writers are serialised by the database lock; on PostgreSQL
writers lock the row they change (`SELECT ... FOR UPDATE`, `INSERT ... ON CONFLICT DO NOTHING`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session

from deployer import settings
from deployer.service import migrate
from deployer.service.models import VERSION_TABLE, Deployment, HistoryEntry, ServiceHeartbeat
from stores.sql.sqlite import use_wal
from stores.urls import StoreURL, parse_store_url, redact_text

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
NOTIFY_CHANNEL = "cep_deployments"


class CatalogError(Exception):
    """A catalog that cannot be used as it is; the message says what to do."""


def now() -> datetime:
    return datetime.now(UTC)


def utc(ts: datetime | None) -> datetime | None:
    """SQLite hands timestamps back without their zone; they were written in UTC."""
    if ts is None or ts.tzinfo is not None:
        return ts
    return ts.replace(tzinfo=UTC)


# Connecting


def data_dir() -> Path:
    return settings.current().data_dir


def catalog_url_text(cli: str | None) -> str:
    """--catalog, else $CEP_CATALOG_URL, else the SQLite file $CEP_DATA_DIR/catalog.sqlite3."""
    return cli or settings.current().catalog_url or f"sqlite:///{(data_dir() / 'catalog.sqlite3').resolve()}"


def check_no_secret(what: str, text: str) -> None:
    """Refuse a URL that carries a password: the catalog is readable by whoever can run `cep ls`."""
    if redact_text(text) == text:
        return
    raise CatalogError(
        f"{what}={redact_text(text)} contains a password, and passwords are never stored in the catalog. "
        "Give the URL without it and let the service find it at run time: add "
        "?password_file=/path/readable/by/the/service (mode 600), or set CEP_STORE_<NAME>_URL in the "
        "service's environment and leave --store out, or (PostgreSQL) PGPASSWORD / ~/.pgpass there."
    )


def without_password_file(text: str) -> str:
    """The URL minus ?password_file=, to validate its syntax where the file is not readable."""
    base, sep, query = text.partition("?")
    if not sep:
        return text
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "password_file"]
    return base + ("?" + urlencode(kept) if kept else "")


class Catalog:
    """An engine on the catalog database plus the checks every command makes before using it."""

    def __init__(self, url: StoreURL):
        if url.kind not in ("sqlite", "postgresql"):
            raise CatalogError(f"the catalog must be PostgreSQL or SQLite, not {url.redacted()}")
        if url.is_memory:
            raise CatalogError("the catalog cannot be an in-memory SQLite database: give a file")
        self.url = url
        self.shown = url.redacted()
        self.kind = url.kind
        if url.kind == "sqlite":
            self.engine = sa.create_engine(
                url.sqlalchemy_url(), connect_args={"timeout": 30, "check_same_thread": False}
            )
            _serialise_sqlite(self.engine)
        else:
            self.engine = sa.create_engine(url.sqlalchemy_url(), pool_pre_ping=True, pool_size=2)

    @classmethod
    def open(cls, cli: str | None = None, *, migrated: bool = True, create: bool = False) -> Catalog:
        text = catalog_url_text(cli)
        try:
            url = parse_store_url(text, origin="catalog")
        except Exception as err:
            raise CatalogError(f"invalid catalog URL: {err}") from None
        if url.kind == "sqlite" and not url.is_memory:
            path = Path(url.database or "")
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            elif not path.exists():
                # Connecting would create an empty file: say what is wrong instead.
                raise CatalogError(cls._not_migrated_message(url.redacted()))
        catalog = cls(url)
        if migrated:
            catalog.require_migrated()
        return catalog

    def close(self) -> None:
        self.engine.dispose()

    # -- migrations -------------------------------------------------------------------------------

    @staticmethod
    def _not_migrated_message(shown: str) -> str:
        return f"the catalog at {shown} is not migrated: run `cep db upgrade --catalog {shown}`"

    def revisions(self) -> tuple[str | None, str]:
        """(the catalog's revision, the newest revision this version of cep knows)."""
        from alembic.runtime.migration import MigrationContext

        head = migrate.script_directory().get_current_head()
        assert head is not None
        try:
            with self.engine.connect() as conn:
                current = MigrationContext.configure(
                    conn, opts={"version_table": VERSION_TABLE}
                ).get_current_revision()
        except sa.exc.OperationalError as err:
            raise CatalogError(f"cannot reach the catalog at {self.shown}: {_short(err)}") from None
        return current, head

    def require_migrated(self) -> None:
        current, head = self.revisions()
        if current is None:
            raise CatalogError(self._not_migrated_message(self.shown))
        if current != head:
            known = {s.revision for s in migrate.script_directory().walk_revisions()}
            if current not in known:
                raise CatalogError(
                    f"the catalog at {self.shown} is at revision {current}, which this version of cep "
                    f"does not know (newest: {head}): upgrade cep"
                )
            raise CatalogError(
                f"the catalog at {self.shown} is at revision {current}, not {head}: it is not migrated: "
                f"run `cep db upgrade --catalog {self.shown}`"
            )

    def upgrade(self) -> tuple[str | None, str]:
        """Migrate to the newest revision; (revision before, revision after)."""
        before, _ = self.revisions()
        with self.engine.begin() as conn:
            migrate.upgrade(conn)
        after, _ = self.revisions()
        assert after is not None
        return before, after

    # -- sessions ---------------------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction (BEGIN IMMEDIATE on SQLite), committed on success."""
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            yield s

    def get(self, name: str) -> Deployment | None:
        with self.session() as s:
            return s.get(Deployment, name)

    def require(self, name: str) -> Deployment:
        row = self.get(name)
        if row is None:
            raise CatalogError(f"no deployment named '{name}' in the catalog at {self.shown}")
        return row

    def deployments(self) -> list[Deployment]:
        with self.session() as s:
            return list(s.scalars(sa.select(Deployment).order_by(Deployment.name)))

    def history(
        self, name: str | None = None, limit: int | None = None, since: datetime | None = None
    ) -> list[HistoryEntry]:
        q = sa.select(HistoryEntry).order_by(HistoryEntry.id.desc())
        if name is not None:
            q = q.where(HistoryEntry.name == name)
        if since is not None:
            q = q.where(HistoryEntry.at >= since)
        if limit is not None:
            q = q.limit(limit)
        with self.session() as s:
            return list(reversed(list(s.scalars(q))))

    def locked(self, s: Session, name: str) -> Deployment | None:
        """The row, locked until the transaction ends (SQLite: the whole database already is)."""
        return s.scalars(sa.select(Deployment).where(Deployment.name == name).with_for_update()).one_or_none()

    def insert_new(self, s: Session, values: dict[str, Any]) -> bool:
        """INSERT unless the name exists; False when another transaction inserted it first (it has
        committed by then: the INSERT waits for it, so `locked` sees its row)."""
        if self.kind == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        table = cast(sa.Table, Deployment.__table__)
        stmt = insert(table).values(**values).on_conflict_do_nothing(index_elements=["name"])
        # RETURNING, not rowcount: what rowcount says for ON CONFLICT DO NOTHING varies by driver.
        return s.connection().execute(stmt.returning(table.c.name)).first() is not None

    @staticmethod
    def record(s: Session, name: str, event_: str, detail: str | None = None) -> None:
        s.add(HistoryEntry(name=name, at=now(), event=event_, detail=detail))

    def update(self, name: str, event_: str | None = None, detail: str | None = None, **values: Any) -> None:
        """Set columns of one row (and add a history entry) without touching the others: the CLI and
        the service write different columns of the same row concurrently."""
        with self.session() as s:
            if values:
                s.execute(sa.update(Deployment).where(Deployment.name == name).values(**values))
            if event_ is not None:
                self.record(s, name, event_, detail)

    # -- the service's heartbeat -------------------------------------------------------------------

    def heartbeat(self, instance: str, started_at: datetime, master: str | None) -> None:
        with self.session() as s:
            row = s.get(ServiceHeartbeat, instance)
            if row is None:
                s.add(
                    ServiceHeartbeat(instance=instance, started_at=started_at, seen_at=now(), master=master)
                )
            else:
                row.seen_at = now()

    def forget_service(self, instance: str) -> None:
        with self.session() as s:
            s.execute(sa.delete(ServiceHeartbeat).where(ServiceHeartbeat.instance == instance))

    def last_service(self) -> ServiceHeartbeat | None:
        with self.session() as s:
            return s.scalars(
                sa.select(ServiceHeartbeat).order_by(ServiceHeartbeat.seen_at.desc()).limit(1)
            ).one_or_none()


def _serialise_sqlite(engine: sa.Engine) -> None:
    """Make every transaction BEGIN IMMEDIATE (the pysqlite driver would defer the lock to the first
    write, so two read-check-write transactions could both read the old row)."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver issues no BEGIN of its own
        dbapi_conn.execute("PRAGMA busy_timeout = 30000")
        use_wal(dbapi_conn, 30.0)  # readers do not wait for the writer; waits for the switch's lock

    @event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _short(err: BaseException) -> str:
    text = str(getattr(err, "orig", None) or err).strip().splitlines()
    return redact_text(text[0]) if text else type(err).__name__
