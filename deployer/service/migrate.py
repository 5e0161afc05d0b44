"""Where the catalog's Alembic project is, and running it for `cep db upgrade`.

The migrations are the top-level folder `migrations/` of a checkout (with `alembic.ini` beside it);
a wheel ships that folder as the package `paascep_migrations` (setup.py). This module only finds the
folder: nothing of `deployer` imports the migrations, Alembic loads `env.py` and the revisions from
the folder by path. So the migrations may import the catalog and its models, and the catalog this
module, without a cycle (pyproject.toml's contracts: `migrations` is the top layer).

Configured in code, not by alembic.ini (a wheel has none), so `cep db upgrade` works from any
directory; the version table is `cep_catalog_version` (migrations/env.py).

    from deployer.service import migrate
    with engine.begin() as conn:
        migrate.upgrade(conn)
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

INSTALLED = "paascep_migrations"  # the folder's name in a wheel
CHECKOUT = Path(__file__).resolve().parents[2] / "migrations"  # beside deployer/ in a checkout


def script_location() -> Path:
    """The folder of env.py: the installed one, else the checkout's (an editable install made
    before the folder moved does not know the installed name)."""
    spec = find_spec(INSTALLED)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if (CHECKOUT / "env.py").is_file():
        return CHECKOUT
    raise RuntimeError(
        f"the catalog's migrations are missing (neither {INSTALLED} nor {CHECKOUT}): reinstall cep"
    )


def config(connection: Any = None) -> Any:
    """An Alembic Config for the migrations; `connection` is the one env.py migrates."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location()).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


def script_directory() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(config())


def upgrade(connection: Any, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(config(connection), revision)
