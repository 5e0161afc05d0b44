"""Alembic environment: migrate the connection handed over by `migrations.upgrade` (what
`cep db upgrade` does), or, run by the alembic command itself, the catalog that `cep` would use
($CEP_CATALOG_URL or the SQLite default; `-x catalog=URL` overrides)."""

from __future__ import annotations

from typing import Any

from alembic import context

from deployer.service.catalog import VERSION_TABLE, Base, Catalog

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
    if context.is_offline_mode():
        raise SystemExit("offline (--sql) migrations are not supported: run `cep db upgrade`")
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    catalog = Catalog.open(
        context.get_x_argument(as_dictionary=True).get("catalog"), migrated=False, create=True
    )
    try:
        with catalog.engine.begin() as conn:
            _migrate(conn)
    finally:
        catalog.close()


run()
