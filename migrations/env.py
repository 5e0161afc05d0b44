"""Alembic environment of the catalog: two ways in, one catalog, one version table.

- `cep db upgrade [--catalog URL]` opens the catalog itself and hands its connection over
  (deployer/service/migrate.py): migrated as it is.
- `alembic ...` from the checkout (alembic.ini) resolves the catalog as `cep db upgrade` does:
  `-x catalog=URL` (cep's --catalog), else `sqlalchemy.url` of alembic.ini (empty as shipped), else
  $CEP_CATALOG_URL, else the SQLite file $CEP_DATA_DIR/catalog.sqlite3; and opens it as cep does
  (deployer.service.catalog.Catalog: `?password_file=`, SQLite's BEGIN IMMEDIATE and WAL). Only
  the redacted URL is logged. `--sql` (offline) writes the SQL for that catalog's dialect.

The version is kept in `cep_catalog_version`, not `alembic_version`, so that a database shared with
an application that uses Alembic itself is not confused.
"""

from __future__ import annotations

import logging
from logging.config import fileConfig
from typing import Any

from alembic import context
from alembic.util import CommandError

from deployer.service.catalog import Catalog, CatalogError, catalog_url_text, without_password_file
from deployer.service.models import VERSION_TABLE, Base
from stores.urls import parse_store_url

config = context.config
log = logging.getLogger("alembic.env")


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        **kwargs,
    )
    with context.begin_transaction():
        context.run_migrations()


def _migrate(connection: Any) -> None:
    # SQLite cannot ALTER most things: Alembic's batch mode copies the table instead.
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")


def _catalog_text() -> str:
    """The catalog's URL as `cep db upgrade` finds it, -x catalog= standing for --catalog."""
    given = context.get_x_argument(as_dictionary=True).get("catalog")
    return catalog_url_text(given or config.get_main_option("sqlalchemy.url") or None)


def _offline(text: str) -> None:
    """The SQL only: the dialect is all it needs, so no password (file) is read."""
    try:
        url = parse_store_url(without_password_file(text), origin="catalog")
    except Exception as err:
        raise CommandError(f"invalid catalog URL: {err}") from None
    if url.kind not in ("sqlite", "postgresql"):
        raise CommandError(f"the catalog must be PostgreSQL or SQLite, not {url.redacted()}")
    log.info("SQL for the catalog at %s", url.redacted())
    _configure(dialect_name=url.kind, literal_binds=True, render_as_batch=url.kind == "sqlite")


def _online(text: str) -> None:
    catalog = Catalog.open(text, migrated=False, create=True)
    log.info("catalog: %s", catalog.shown)
    try:
        with catalog.engine.begin() as conn:
            _migrate(conn)
    finally:
        catalog.close()


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # `cep db upgrade`, or a test handing its own connection
        _migrate(connection)
        return
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    try:
        text = _catalog_text()
        if context.is_offline_mode():
            _offline(text)
        else:
            _online(text)
    except CatalogError as err:  # its message is redacted already
        raise CommandError(str(err)) from None


run()
