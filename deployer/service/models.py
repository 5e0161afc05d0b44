"""The catalog's tables, as SQLAlchemy models (created by the Alembic migrations in migrations/,
never by `create_all`; deployer.service.catalog describes them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

DESIRED_STATES = ("running", "stopped")
ACTUAL_STATES = ("pending", "starting", "running", "failed", "stopped")
VERSION_TABLE = "cep_catalog_version"


class Base(DeclarativeBase):
    pass


_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER only


class Deployment(Base):
    __tablename__ = "deployments"

    name: Mapped[str] = mapped_column(sa.String(63), primary_key=True)
    script: Mapped[str] = mapped_column(sa.Text)
    script_hash: Mapped[str] = mapped_column(sa.String(64))
    # {"sources": {stream: uri}, "sinks": {stream: uri}, "stores": {name: url}, "dead_letter": uri}
    bindings: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    desired_state: Mapped[str] = mapped_column(sa.String(16))
    actual_state: Mapped[str] = mapped_column(sa.String(16))
    # Bumped by every change the service must act on; the service restarts a deployment whose
    # revision differs from the one it runs.
    revision: Mapped[int] = mapped_column(sa.Integer, default=1)
    # Relative to the service's $CEP_DATA_DIR: checkpoints/<name>/<incarnation>. A new incarnation
    # (first deploy, --reset-state) is a new directory, so no stale checkpoint is ever resumed.
    checkpoint: Mapped[str] = mapped_column(sa.String(1024))
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    restarts: Mapped[int] = mapped_column(sa.Integer, default=0)
    events_in: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    events_out: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    last_batch: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    last_batch_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    lag_ms: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    # Per streaming query: the last batch counted and its running totals (see deployer.service.daemon).
    progress: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON, nullable=True)

    __table_args__ = (
        sa.CheckConstraint(f"desired_state IN {DESIRED_STATES!r}", name="deployments_desired_state"),
        sa.CheckConstraint(f"actual_state IN {ACTUAL_STATES!r}", name="deployments_actual_state"),
    )


class HistoryEntry(Base):
    __tablename__ = "deployment_history"

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(63), index=True)
    at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    event: Mapped[str] = mapped_column(sa.String(32))
    detail: Mapped[str | None] = mapped_column(sa.Text, nullable=True)


class ServiceHeartbeat(Base):
    __tablename__ = "service_heartbeat"

    instance: Mapped[str] = mapped_column(sa.String(200), primary_key=True)  # host:pid
    started_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    seen_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    master: Mapped[str | None] = mapped_column(sa.String(500), nullable=True)


# ---------------------------------------------------------------------------------------------
