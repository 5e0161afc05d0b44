"""The catalog of deployments: deployments, deployment_history, service_heartbeat.

On PostgreSQL a trigger also sends NOTIFY cep_deployments (payload: the deployment's name) when a
deployment is created, removed, or its desired state or revision changes, so `cep serve` reacts at
once to every writer of the catalog, the CLI or anything else. The service's own progress updates
do not notify (they change neither column).

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

NOTIFY_FUNCTION = """
CREATE FUNCTION cep_notify_deployment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('cep_deployments', OLD.name);
    ELSE
        PERFORM pg_notify('cep_deployments', NEW.name);
    END IF;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("script", sa.Text, nullable=False),
        sa.Column("script_hash", sa.String(64), nullable=False),
        sa.Column("bindings", sa.JSON, nullable=False),
        sa.Column("desired_state", sa.String(16), nullable=False),
        sa.Column("actual_state", sa.String(16), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("checkpoint", sa.String(1024), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("restarts", sa.Integer, nullable=False),
        sa.Column("events_in", sa.BigInteger, nullable=False),
        sa.Column("events_out", sa.BigInteger, nullable=False),
        sa.Column("last_batch", sa.BigInteger, nullable=True),
        sa.Column("last_batch_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lag_ms", sa.BigInteger, nullable=True),
        sa.Column("progress", sa.JSON, nullable=True),
        sa.CheckConstraint("desired_state IN ('running', 'stopped')", name="deployments_desired_state"),
        sa.CheckConstraint(
            "actual_state IN ('pending', 'starting', 'running', 'failed', 'stopped')",
            name="deployments_actual_state",
        ),
    )
    op.create_table(
        "deployment_history",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
    )
    op.create_index("ix_deployment_history_name", "deployment_history", ["name"])
    op.create_table(
        "service_heartbeat",
        sa.Column("instance", sa.String(200), primary_key=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("master", sa.String(500), nullable=True),
    )
    if op.get_context().dialect.name == "postgresql":
        op.execute(NOTIFY_FUNCTION)
        op.execute(
            "CREATE TRIGGER deployments_notify_change AFTER INSERT OR DELETE ON deployments "
            "FOR EACH ROW EXECUTE FUNCTION cep_notify_deployment()"
        )
        op.execute(
            "CREATE TRIGGER deployments_notify_update AFTER UPDATE ON deployments FOR EACH ROW "
            "WHEN (OLD.revision IS DISTINCT FROM NEW.revision "
            "OR OLD.desired_state IS DISTINCT FROM NEW.desired_state) "
            "EXECUTE FUNCTION cep_notify_deployment()"
        )


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS deployments_notify_update ON deployments")
        op.execute("DROP TRIGGER IF EXISTS deployments_notify_change ON deployments")
        op.execute("DROP FUNCTION IF EXISTS cep_notify_deployment()")
    op.drop_table("service_heartbeat")
    op.drop_index("ix_deployment_history_name", table_name="deployment_history")
    op.drop_table("deployment_history")
    op.drop_table("deployments")
