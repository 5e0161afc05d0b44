"""Alembic environment: migrate the connection handed over by `migrations.upgrade` (what `cep db
upgrade` does). The catalog's URL, credentials and SQLite settings are `cep`'s business
(deployer.service.catalog), so the alembic command itself is not a way in: run `cep db upgrade`."""

from __future__ import annotations

from typing import Any

from alembic import context

from deployer.service.models import VERSION_TABLE, Base

config = context.config
target_metadata = Base.metadata


def _migrate(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run() -> None:
    connection = config.attributes.get("connection")
    if context.is_offline_mode() or connection is None:
        raise SystemExit("run `cep db upgrade [--catalog URL]` to migrate the catalog")
    _migrate(connection)


run()
