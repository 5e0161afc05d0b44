"""Alembic migrations for the project's own tables (the catalog of deployments).

Configured in code, not by an alembic.ini: `script_location` is this installed package, so
`cep db upgrade` works from any directory and from a wheel. The version is kept in the table
`cep_catalog_version` (not `alembic_version`), so a database shared with an application that uses
Alembic itself is not confused.

    from deployer.service.migrations import upgrade
    with engine.begin() as conn:
        upgrade(conn)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def config(connection: Any = None) -> Any:
    """An Alembic Config for this package; `connection` is the one env.py migrates."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["connection"] = connection
    return cfg


def script_directory() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(config())


def upgrade(connection: Any, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(config(connection), revision)
